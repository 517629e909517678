from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mcphost.activity.record import ActivityRecord
from mcphost.activity.writer import ActivityLog, LogSettings
from tests.helpers import give_to_another_user


def test_records_are_whole_lines_under_concurrent_appends(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path / "activity.jsonl")

    def writer(n: int) -> None:
        for i in range(200):
            log.append(ActivityRecord(server=f"s{n}", tool="t", status="success", metadata={"i": i, "pad": "x" * 500}))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (tmp_path / "activity.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 800
    records = [json.loads(line) for line in lines]
    assert len({r["id"] for r in records}) == 800
    assert (tmp_path / "activity.jsonl").stat().st_mode & 0o777 == 0o600


def test_threads_waiting_on_one_fsync_are_all_woken_and_share_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Group commit across threads: while one thread's fdatasync runs, the others wait for it and are woken by it; a
    # waiter left asleep would hang, and one fsync per record would mean nothing was shared.
    log = ActivityLog(tmp_path / "activity.jsonl", LogSettings(fsync=True))
    asleep = threading.Semaphore(0)

    class Noted(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            asleep.release()
            return super().wait(timeout)

    log._sync = Noted(log._sync_lock)
    real, syncs = os.fdatasync, []
    first_running = threading.Event()

    def slow_fdatasync(fd: int) -> None:
        syncs.append(fd)
        if len(syncs) == 1:
            first_running.set()
            for _ in range(8):  # until the other eight have appended and wait on this fsync
                assert asleep.acquire(timeout=10)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    results: list[bool] = []

    def writer(n: int) -> None:
        if n:
            first_running.wait(timeout=10)
        seq = log.append(ActivityRecord(server=f"s{n}", tool="t", status="success"))
        assert seq is not None
        results.append(log.sync_through(seq))

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(9)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads)
    assert results == [True] * 9
    assert len(syncs) == 2  # the first thread's own, and one for the eight written while it ran


def test_unwritable_log_is_reported_and_never_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("", encoding="utf-8")
    log = ActivityLog(blocker / "activity.jsonl")
    assert log.append(ActivityRecord(server="s", tool="t")) is None
    assert log.append(ActivityRecord(server="s", tool="t")) is None
    err = capsys.readouterr().err
    assert err.count("cannot write the activity log") == 1  # said once, loudly, not once per call
    assert log.last_error is not None
    # Not a full disk: freeing space would not help, and the message says what would.
    assert "a file this user can write" in log.last_error and "free space" not in log.last_error


@pytest.mark.parametrize("whose", ["anyone's to write", "another user's"])
def test_a_log_in_a_directory_others_may_write_is_never_written_and_says_how_to_fix_it(
    tmp_path: Path, whose: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    if whose == "another user's":
        give_to_another_user(shared)
        shared.chmod(0o755)
    else:
        shared.chmod(0o1777)  # as /tmp: the sticky bit keeps our file ours, not the name it would have from others
    planted = tmp_path / "theirs"
    (shared / "activity.jsonl").symlink_to(planted)  # what another user would put there
    log = ActivityLog(shared / "activity.jsonl")
    assert log.append(ActivityRecord(server="s", tool="t")) is None
    assert not planted.exists(), "the record went where the other user pointed it"
    assert log.last_error is not None and f"its directory {shared} is no place for it" in log.last_error
    assert "set MCPHOST_DATA_DIR to a directory only you can write" in log.last_error
    assert (f"chmod o-w {shared}" in log.last_error) == (whose == "anyone's to write")


def test_a_log_in_a_directory_its_group_may_write_is_written(tmp_path: Path) -> None:
    # A user's private group, as umask 002 makes directories: no other user is in it.
    shared = tmp_path / "group"
    shared.mkdir(mode=0o775)
    shared.chmod(0o775)
    log = ActivityLog(shared / "activity.jsonl")
    assert log.append(ActivityRecord(server="s", tool="t")) is not None and log.last_error is None


def test_a_full_disk_is_reported_with_space_to_free(tmp_path: Path) -> None:
    log = tmp_path / "activity.jsonl"
    log.symlink_to("/dev/full")
    writer = ActivityLog(log)
    assert writer.append(ActivityRecord(server="s", tool="t")) is None
    assert writer.last_error is not None and "free space on the disk that holds" in writer.last_error


@pytest.mark.parametrize(("max_bytes", "advice"), [(0, "so that the log rotates"), (1 << 20, "(now 1048576) below it")])
def test_a_log_at_the_largest_file_the_process_may_write_is_reported_with_that_limit_and_rotation(
    tmp_path: Path, max_bytes: int, advice: str
) -> None:
    # RLIMIT_FSIZE, in a child process: a write past it fails with EFBIG (SIGXFSZ ignored). The file is writable and the
    # disk has room: neither is what the message asks for.
    log = tmp_path / "activity.jsonl"
    log.write_bytes(b"{}\n" * 2048)  # 6 KiB of lines already there, the limit at its end
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from mcphost.activity.record import ActivityRecord\n"
        "from mcphost.activity.writer import ActivityLog, LogSettings\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (6144, 6144))\n"
        f"writer = ActivityLog(Path(sys.argv[1]), LogSettings(max_bytes={max_bytes}))\n"
        "assert writer.append(ActivityRecord(server='s', tool='t')) is None\n"
        "print(writer.last_error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(log)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert "File too large" in done.stdout, done.stdout + done.stderr
    assert "the largest file this process may write" in done.stdout and "ulimit -f" in done.stdout
    assert f"[log] max_bytes {advice}" in done.stdout
    assert "a file this user can write" not in done.stdout and "free space" not in done.stdout


def test_listeners_see_each_record_and_a_failing_one_is_contained(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path / "a.jsonl")
    seen: list[str] = []
    log.subscribe(lambda r: seen.append(r()["id"]))
    log.subscribe(lambda r: 1 / 0)  # type: ignore[arg-type,return-value]
    log.subscribe(lambda r: seen.append(r()["server"]))
    record = ActivityRecord(server="s")
    assert log.append(record) is not None
    assert seen == [record.id, "s"]


async def test_a_written_record_is_told_once_on_disk_and_after_the_writer_has_moved_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Told inline, an editor's notification cost every call its encoding and the editor's wake-up before the answer.
    log = ActivityLog(tmp_path / "a.jsonl", LogSettings(fsync=True))
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (real(fd), synced.append(fd))[0])
    told: list[tuple[int, bytes, dict[str, Any]]] = []
    log.subscribe(lambda payload: told.append((len(synced), payload.line, payload())))
    for alone in (True, False):  # made here, or by the group commit's worker thread
        record = ActivityRecord(server="s", details={"text": "naïve ✓ \x1b[31m"})
        assert await log.write(record, alone=alone)
        assert len(told) == int(not alone)  # the caller goes on first (to answer the call) ...
        await asyncio.sleep(0)
        assert len(told) == 1 + int(not alone)  # ... and the listeners hear of it on the loop's next turn
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines()
    assert [(n, line) for n, line, _ in told] == [(1, lines[0]), (2, lines[1])]  # on disk when told, as written
    assert [as_dict for _, _, as_dict in told] == [json.loads(line) for line in lines]


async def test_a_record_the_disk_refuses_is_still_told_to_listeners_after_the_writer_moved_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = ActivityLog(tmp_path / "a.jsonl", LogSettings(fsync=True))
    told: list[bytes] = []
    log.subscribe(lambda payload: told.append(payload.line))

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    assert not await log.write(ActivityRecord(server="s"), alone=True)
    assert told == []
    await asyncio.sleep(0)
    assert len(told) == 1 and json.loads(told[0])["server"] == "s"
    log.close()


def test_a_record_is_made_for_listeners_once_and_only_when_one_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = ActivityLog(tmp_path / "a.jsonl")
    made: list[int] = []
    real = ActivityRecord.model_dump
    record = ActivityRecord(server="s")

    def counted(self: ActivityRecord, **kwargs: Any) -> dict[str, Any]:
        if self is record:  # not another test's record, made by a thread it left running in this worker
            made.append(1)
        return real(self, **kwargs)

    monkeypatch.setattr(ActivityRecord, "model_dump", counted)
    payloads: list[Any] = []
    log.subscribe(payloads.append)  # a listener with nobody to tell: never asks
    log.append(record)
    assert made == []
    seen = [payloads[0]()["server"], payloads[0]()["server"]]
    assert seen == ["s", "s"] and made == [1]


def test_the_last_writer_appends_without_looking_back_until_another_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every record used to cost a read of the byte before it (was a writer killed mid-line?); the process that wrote
    # the file last knows it ends on a line of its own. Anyone else's write, a torn line included, brings the look back.
    path = tmp_path / "activity.jsonl"
    looked: list[int] = []
    real_pread = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        looked.append(offset)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", pread)
    log = ActivityLog(path, LogSettings(fsync=False))
    for i in range(3):
        log.append(ActivityRecord(server="here", details={"seq": i}))
    assert looked == []

    with path.open("ab") as other:
        other.write(b'{"id": "torn", "server": "half')  # a writer killed mid-line
    log.append(ActivityRecord(server="here", details={"seq": 3}))
    assert len(looked) == 1
    log.append(ActivityRecord(server="here", details={"seq": 4}))
    assert len(looked) == 1
    log.close()

    lines = path.read_bytes().split(b"\n")
    assert lines[3] == b'{"id": "torn", "server": "half', "the torn line stands alone"
    assert [json.loads(line)["details"]["seq"] for i, line in enumerate(lines) if line and i != 3] == [0, 1, 2, 3, 4]


def test_a_rotation_outrun_by_another_writer_appends_to_the_live_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer that rotates creates the new live file, then locks it. Between the two, a second writer (the first
    # one descheduled on a busy machine) can fill that file and rotate it too: the first writer's record must then
    # go to the newest live file, not to the one just rotated, where a follower that moved on never reads it.
    path = tmp_path / "activity.jsonl"
    settings = LogSettings(fsync=False, max_bytes=2000, keep=20)
    first, second = ActivityLog(path, settings), ActivityLog(path, settings)
    pad = "x" * 300
    while not (tmp_path / "activity.jsonl.1").exists() or path.stat().st_size < 1500:
        first.append(ActivityRecord(server="first", details={"pad": pad}))
    real_open = os.open
    outrun: list[bool] = []

    def open_then_outrun(file: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = real_open(file, flags, mode, dir_fd=dir_fd)
        if os.fspath(file) == os.fspath(path) and flags & os.O_CREAT and not outrun:
            outrun.append(True)  # once: the second writer's own opens pass straight through
            rotated = len(list(tmp_path.glob("activity.jsonl.*")))
            while len(list(tmp_path.glob("activity.jsonl.*"))) == rotated:
                second.append(ActivityRecord(server="second", details={"pad": pad}))
        return fd

    before = len(list(tmp_path.glob("activity.jsonl.*")))
    monkeypatch.setattr(os, "open", open_then_outrun)
    first.append(ActivityRecord(server="first", tool="last", details={"pad": pad}))
    monkeypatch.setattr(os, "open", real_open)
    assert outrun, "the first writer rotated while the second wrote"
    assert len(list(tmp_path.glob("activity.jsonl.*"))) == before + 2, "both rotated"
    first.close()
    second.close()

    live = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r.get("tool") for r in live if r["server"] == "first"] == ["last"], "the record is in the live file"
    for rotated in tmp_path.glob("activity.jsonl.*"):
        assert rotated.stat().st_size <= 2000, f"{rotated.name} grew after it was rotated"


def test_a_rotation_that_cannot_rename_names_the_file_to_fix_not_the_live_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A directory where the rotated file goes: the error named the live log ("activity.jsonl: Is a directory"),
    # and its remedy sent the person to fix a file that was fine.
    live = tmp_path / "activity.jsonl"
    (tmp_path / "activity.jsonl.1").mkdir()
    log = ActivityLog(live, LogSettings(fsync=False, max_bytes=300, on_failure="continue"))
    for n in range(10):
        log.append(ActivityRecord(server="s", details={"n": n, "pad": "x" * 100}))
    assert log.last_error is not None, "the rotation failed"
    # The directory is shifted along with the rotated files until a file is to be renamed onto it.
    named = re.search(r"\((\S+activity\.jsonl\.\d)\)", log.last_error)
    assert named is not None and Path(named[1]).is_dir(), log.last_error
    assert f"make {named[1]} a file" in log.remedy
    assert named[1] in capsys.readouterr().err
    log.close()
