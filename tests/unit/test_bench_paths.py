"""bench_paths' placement of a path's processes (`--pin-proxy`) and its report of the disk by CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import bench_paths
from bench.bench_paths import CpuWatch, by_cpu, fsync_cost, parse_cli, pin_processes
from mcphost.activity.redact import redact_text

CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="placement needs two CPUs or more")


@needs_two
def test_pinning_puts_every_thread_of_the_proxy_on_its_cpu_and_the_upstream_on_the_others() -> None:
    # A proxy with a second thread already running: each of its threads is placed, not only the first.
    script = "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); time.sleep(60)"
    proxy = subprocess.Popen([sys.executable, "-c", script])
    upstream = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        while len(list(Path(f"/proc/{proxy.pid}/task").iterdir())) < 2:
            pass
        pin_processes(CpuWatch([proxy.pid], [upstream.pid]), CPUS[-1])
        threads = [int(task.name) for task in Path(f"/proc/{proxy.pid}/task").iterdir()]
        assert [os.sched_getaffinity(tid) for tid in threads] == [{CPUS[-1]}] * 2
        assert os.sched_getaffinity(upstream.pid) == set(CPUS) - {CPUS[-1]}
    finally:
        for child in (proxy, upstream):
            child.kill()
            child.wait()


@needs_two
def test_the_disk_is_timed_from_each_cpu_and_the_bench_keeps_its_own_placement(tmp_path: Path) -> None:
    before = os.sched_getaffinity(0)
    costs = fsync_cost(tmp_path)
    assert os.sched_getaffinity(0) == before
    assert sorted(costs["after_idle_by_cpu_ms"]) == sorted(str(cpu) for cpu in CPUS[:8])
    assert all(ms > 0 for ms in costs["after_idle_by_cpu_ms"].values())
    assert not list(tmp_path.iterdir())  # its probe file is gone
    assert by_cpu(costs).startswith("; after idle from each CPU: cpu")


def test_a_report_without_figures_by_cpu_says_nothing_of_them() -> None:
    assert by_cpu({"back_to_back_ms": 0.1, "after_idle_ms": 0.2}) == ""


def test_a_payload_is_that_many_bytes_of_the_same_text_in_every_call_and_its_echo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("DIRECT_ARGS", "THROUGH_ARGS", "EXPECTED_TEXT"):
        monkeypatch.setattr(bench_paths, name, getattr(bench_paths, name))  # restored after the test
    text = bench_paths.use_payload(30_000)
    assert len(text.encode()) == 30_000 and text.count("\n") > 300
    assert text == bench_paths.use_payload(30_000)  # the same every run, so runs compare
    assert redact_text(text) == text  # no credential in it: the bench times the work, not a redaction
    direct, through, expected = bench_paths.DIRECT_ARGS, bench_paths.THROUGH_ARGS, bench_paths.EXPECTED_TEXT
    assert direct == {"text": text} and through["args"] == {"text": text}
    assert through["intent"] == {"operation_type": "read"} and expected == f"read_notes: {text}"


def test_a_json_payload_is_one_line_of_records_of_that_many_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DIRECT_ARGS", "THROUGH_ARGS", "EXPECTED_TEXT"):
        monkeypatch.setattr(bench_paths, name, getattr(bench_paths, name))
    for size in (500, 4_000, 30_000, 120_000):
        text = bench_paths.use_payload(size, "json")
        assert len(text.encode()) == size and "\n" not in text
        records = json.loads(text)
        assert len(records) >= size // 400 and all(record["author_association"] for record in records)
        assert text == bench_paths.use_payload(size, "json") and redact_text(text) == text
        assert {"text": text} == bench_paths.DIRECT_ARGS and f"read_notes: {text}" == bench_paths.EXPECTED_TEXT
    assert parse_cli(["--payload", "100", "--payload-shape", "json"]).payload_shape == "json"
    assert parse_cli([]).payload_shape == "code"


@pytest.mark.parametrize("payload", ["-1", str((1 << 20) + 1)])
def test_a_payload_out_of_range_is_refused(payload: str) -> None:
    with pytest.raises(SystemExit):
        parse_cli(["--payload", payload])


def _timed(key: str, warm_us: list[int], rounds_us: list[list[int]]) -> bench_paths.Target:
    target = bench_paths.Target(key, key, lambda: ("", False), key != "direct")
    target.warm_ns = [us * 1000 for us in warm_us]
    target.rounds_ns = [[us * 1000 for us in r] for r in rounds_us]
    return target


def test_the_paced_direct_path_waits_what_in_process_adds_by_their_latest_rounds() -> None:
    # Before either has a round, their warm-up calls; then each one's latest round, not the first or all of them.
    in_process, direct = _timed("in-process", [3000, 3400, 3200], []), _timed("direct", [1000, 1200, 1100], [])
    assert bench_paths.pause_ns(in_process, direct) == 2_100_000
    in_process.rounds_ns = [[9_000_000], [2_500_000, 2_600_000, 2_700_000]]
    direct.rounds_ns = [[1_000_000], [1_300_000]]
    assert bench_paths.pause_ns(in_process, direct) == 1_300_000
    # Never a negative wait: a round where in process came out ahead of direct waits nothing.
    assert bench_paths.pause_ns(_timed("in-process", [900], []), _timed("direct", [1000], [])) == 0


def test_a_paced_call_waits_off_the_clock() -> None:
    target = bench_paths.Target("direct-paced", "paced", lambda: (bench_paths.EXPECTED_TEXT, False), False)
    target.pause_ns = 50_000_000
    started = time.perf_counter_ns()
    timed = target.checked_call()
    assert time.perf_counter_ns() - started >= 50_000_000
    assert timed < 50_000_000
    assert not target.bad


def test_an_editor_watches_only_where_a_daemon_runs() -> None:
    with pytest.raises(SystemExit):
        parse_cli(["--paths", "direct,in-process", "--editor"])
    assert parse_cli(["--paths", "direct,relay", "--editor"]).editor


def test_the_paced_direct_path_needs_what_paces_it() -> None:
    with pytest.raises(SystemExit):
        parse_cli(["--paths", "direct,direct-paced"])
    assert parse_cli(["--paths", "direct-paced,in-process,direct"]).paths == ["direct", "direct-paced", "in-process"]
