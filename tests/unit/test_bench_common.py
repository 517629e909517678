"""What every benchmark reports about the machine it ran on: the host's steal, read from /proc/stat."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc/stat here")
def test_this_machines_readings_only_grow_and_give_a_share() -> None:
    before = cpu_ticks()
    sum(range(200_000))  # some CPU time between the two readings
    after = cpu_ticks()
    assert before is not None and after is not None
    assert all(b >= a for a, b in zip(before, after, strict=True))
    share = steal_share(before, after)
    assert share is None or 0 <= share <= 1
