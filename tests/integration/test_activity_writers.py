"""The activity log's promises with real processes: whole lines, crash recovery, rotation, a full disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcphost.activity import writer as writer_module
from mcphost.activity.reader import Follower, log_files, parse_line, tail
from mcphost.activity.record import ActivityRecord
from mcphost.activity.writer import ActivityLog, LogSettings
from tests.helpers import TESTS

WRITER = TESTS / "servers" / "log_writer.py"


def start_writer(path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen([sys.executable, str(WRITER), str(path), *args], env=env, stdout=subprocess.PIPE, text=True)


def all_lines(path: Path) -> list[bytes]:
    return [line for f in reversed(log_files(path)) for line in f.read_bytes().split(b"\n") if line]


def ids_by_writer(records: list[dict[str, Any]]) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = {}
    for record in records:
        seen.setdefault(record["server"], []).append(record["details"]["seq"])
    return seen


def test_several_processes_append_whole_lines_in_each_ones_order(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    writers = [start_writer(path, f"w{n}", "500") for n in range(4)]
    here = ActivityLog(path, LogSettings(fsync=False))
    for i in range(200):
        here.append(ActivityRecord(server="here", details={"seq": i}))
    for w in writers:
        assert w.wait(timeout=60) == 0
    here.close()

    lines = all_lines(path)
    records = [parse_line(line) for line in lines]
    assert None not in records, "a torn or interleaved line"
    assert len(records) == 4 * 500 + 200
    per_writer = ids_by_writer([r for r in records if r is not None])
    assert per_writer["here"] == list(range(200))
    for n in range(4):
        assert per_writer[f"w{n}"] == list(range(500)), "each process's records in the order it wrote them"


def test_a_writer_killed_mid_line_costs_only_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    log = ActivityLog(path, LogSettings(fsync=False))
    log.append(ActivityRecord(server="before", details={"seq": 0}))
    _, position = tail(path, 0, lambda r: True)
    follower = Follower(path, position)

    torn = start_writer(path, "--torn")
    assert torn.stdout is not None and torn.stdout.readline().strip() == "torn"
    torn.send_signal(signal.SIGKILL)
    torn.wait(timeout=10)
    assert not path.read_bytes().endswith(b"\n")
    assert follower.poll() == [], "half a line is not a record"

    for i in range(3):
        log.append(ActivityRecord(server="after", details={"seq": i}))
    log.close()

    lines = path.read_bytes().split(b"\n")
    assert lines[1].startswith(b'{"id": "torn"') and parse_line(lines[1]) is None, "the torn line stands alone"
    assert [parse_line(line) is not None for line in lines if line] == [True, False, True, True, True]
    records, _ = tail(path, 10, lambda r: True)
    assert [r["server"] for r in records] == ["before", "after", "after", "after"]
    assert [r["details"]["seq"] for r in follower.poll()] == [0, 1, 2]
    follower.close()


def test_rotation_under_load_with_a_follower_attached_loses_and_repeats_nothing(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    max_bytes, count, writers_n = 16_384, 400, 3
    seed = ActivityLog(path, LogSettings(fsync=False, max_bytes=max_bytes, keep=1000))
    seed.append(ActivityRecord(server="seed", details={"seq": 0}))
    seed.close()
    _, position = tail(path, 0, lambda r: True)
    follower = Follower(path, position)
    followed: list[dict[str, Any]] = []
    done = threading.Event()

    def follow() -> None:
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            followed.extend(follower.poll())
            if len(followed) >= writers_n * count:
                return
            time.sleep(0.005)

    reader = threading.Thread(target=follow)
    reader.start()
    writers = [start_writer(path, f"w{n}", str(count), str(max_bytes), "1000") for n in range(writers_n)]
    try:
        for w in writers:
            assert w.wait(timeout=60) == 0
    finally:
        reader.join(timeout=60)
        done.set()
        follower.close()

    files = log_files(path)
    assert len(files) > 10, "the load rotated the log many times"
    assert all(f.stat().st_size <= max_bytes for f in files)
    on_disk = [parse_line(line) for line in all_lines(path)]
    assert None not in on_disk
    ids = Counter(r["id"] for r in on_disk if r is not None)
    assert len(ids) == writers_n * count + 1 and max(ids.values()) == 1, "every record once, across all files"
    per_writer = ids_by_writer(followed)
    assert sorted(per_writer) == [f"w{n}" for n in range(writers_n)]
    for n in range(writers_n):
        assert per_writer[f"w{n}"] == list(range(count)), "the follower saw each record once, in order"


def test_retention_keeps_the_newest_files(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    log = ActivityLog(path, LogSettings(fsync=False, max_bytes=2_000, keep=2))
    for i in range(100):
        log.append(ActivityRecord(server="s", details={"seq": i}))
    log.close()
    assert [f.name for f in log_files(path)] == ["activity.jsonl", "activity.jsonl.1", "activity.jsonl.2"]
    records, _ = tail(path, 1000, lambda r: True)
    seqs = [r["details"]["seq"] for r in records]
    assert seqs == list(range(seqs[0], 100)), "what is kept is the newest records, contiguous"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to simulate a full disk")
def test_a_full_disk_is_reported_loudly_and_its_records_are_written_once_space_returns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "activity.jsonl"
    path.symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    log = ActivityLog(path, LogSettings(fsync=False))
    for i in range(3):
        assert log.append(ActivityRecord(server="s", details={"seq": i})) is None
    assert log.backlog == 3 and log.last_error is not None
    err = capsys.readouterr().err
    assert err.count("No space left on device") == 1, "said once, loudly, not once per call"

    path.unlink()  # space is back
    assert log.append(ActivityRecord(server="s", details={"seq": 3})) is not None
    assert "writable again" in capsys.readouterr().err
    log.close()
    assert [json.loads(line)["details"]["seq"] for line in path.read_text(encoding="utf-8").splitlines()] == [
        0,
        1,
        2,
        3,
    ]


async def test_fsync_is_grouped_and_each_write_returns_after_its_record_is_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "activity.jsonl"
    log = ActivityLog(path, LogSettings(fsync=True))
    synced_sizes: list[int] = []
    real_fdatasync = os.fdatasync

    def slow_disk(fd: int) -> None:
        time.sleep(0.02)  # a disk that takes 20 ms per flush: what makes grouping matter
        real_fdatasync(fd)
        synced_sizes.append(os.fstat(fd).st_size)

    monkeypatch.setattr(writer_module.os, "fdatasync", slow_disk)
    results: list[tuple[bool, int]] = []

    async def one(i: int) -> None:
        ok = await log.write(ActivityRecord(server="s", details={"seq": i}))
        # Everything up to this record's line was covered by a completed flush.
        results.append((ok, max(synced_sizes, default=0)))

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(one, i)
    log.close()
    assert all(ok for ok, _ in results)
    assert len(synced_sizes) < 10, f"50 concurrent writes took {len(synced_sizes)} flushes; grouping should need few"
    lines = path.read_bytes().split(b"\n")
    assert len([line for line in lines if line]) == 50
    assert synced_sizes[-1] == path.stat().st_size


async def test_a_record_written_alone_is_synced_on_the_loop_thread_before_write_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "activity.jsonl"
    log = ActivityLog(path, LogSettings(fsync=True))
    flushes: list[tuple[str, int]] = []
    real_fdatasync = os.fdatasync

    def noting(fd: int) -> None:
        real_fdatasync(fd)
        flushes.append((threading.current_thread().name, os.fstat(fd).st_size))

    monkeypatch.setattr(writer_module.os, "fdatasync", noting)
    assert await log.write(ActivityRecord(server="s"), alone=True)
    # On disk before write returned, and without a round trip to a worker thread.
    assert flushes == [(threading.current_thread().name, path.stat().st_size)]
    assert await log.write(ActivityRecord(server="t"))
    assert len(flushes) == 2 and flushes[1][0] != threading.current_thread().name
    log.close()
