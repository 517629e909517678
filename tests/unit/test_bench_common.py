"""What every benchmark reports about the machine it ran on: the host's steal, read from /proc/stat."""

from __future__ import annotations

import pytest

from bench.common import cpu_ticks, steal_share

START = "cpu  7066083 160 845217 6584488 50251 0 23181 249430 0 0"
# 1 000 ticks later: 500 user, 100 system, 300 idle, 100 steal.
END = "cpu  7066583 160 845317 6584788 50251 0 23181 249530 0 0"


def test_steal_is_its_share_of_every_tick_spent_between_two_readings() -> None:
    assert steal_share(cpu_ticks(START), cpu_ticks(END)) == pytest.approx(0.1)


def test_the_guest_columns_are_not_counted_twice() -> None:
    # /proc/stat's guest and guest_nice are already inside user and nice: adding them would dilute the share.
    assert cpu_ticks(START) == [7066083, 160, 845217, 6584488, 50251, 0, 23181, 249430]


@pytest.mark.parametrize("line", ["", "intr 1 2 3", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3"])
def test_a_line_that_is_not_the_machines_total_gives_no_figure(line: str) -> None:
    assert cpu_ticks(line) is None
    assert steal_share(cpu_ticks(line), cpu_ticks(END)) is None


def test_no_time_spent_gives_no_figure() -> None:
    assert steal_share(cpu_ticks(START), cpu_ticks(START)) is None


def test_this_machine_has_a_reading() -> None:
    ticks = cpu_ticks()
    assert ticks is None or (len(ticks) == 8 and all(value >= 0 for value in ticks))
