"""bench_cli's timing of an agent starting its MCP server: from the spawn to each answer, every answer checked."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench.bench_cli import Spawned, daemon_start, first_answers, servers
from bench.bench_paths import PROBE, Sandbox
from bench.common import BenchFailure


def test_an_agents_first_answers_are_timed_from_the_spawn_and_checked(tmp_path: Path) -> None:
    direct = servers([sys.executable, "-m", "mcphost"])[0]
    initialize, first_call = first_answers(direct, dict(os.environ), tmp_path)
    assert 0 < initialize <= first_call < 60


def test_a_first_call_answered_with_anything_but_its_result_fails_the_bench(tmp_path: Path) -> None:
    asks_for_nothing = Spawned(
        "probe.py, asked for a tool it does not have",
        [sys.executable, str(PROBE)],
        {"name": "no_such_tool", "arguments": {}},
        lambda err: None,
    )
    with pytest.raises(BenchFailure, match="the first call got"):
        first_answers(asks_for_nothing, dict(os.environ), tmp_path)


def test_a_relay_that_does_not_say_it_relays_fails_the_bench(tmp_path: Path) -> None:
    relay = servers([sys.executable, "-m", "mcphost"])[1]
    stand_in = Spawned(relay.label, [sys.executable, str(PROBE)], servers([])[0].call, relay.check)
    with pytest.raises(BenchFailure, match="did not relay"):
        first_answers(stand_in, dict(os.environ), tmp_path)


def test_a_daemon_start_is_timed_to_its_discovery_file_and_to_its_upstream_connected(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    box.prepare()
    for _ in range(2):  # the second start finds the first one's log gone and its discovery file removed
        listening, connected = daemon_start(box)
        assert 0 < listening < 60 and 0 < connected < 60
        records = box.activity_log.read_text(encoding="utf-8")
        assert records.count('"upstream_connected"') == 1
    assert not list(box.runtime.glob("daemon-*.json"))
