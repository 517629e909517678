from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from mcphost.activity.record import ActivityRecord
from mcphost.activity.writer import ActivityLog, LogSettings


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


def test_unwritable_log_is_reported_and_never_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("", encoding="utf-8")
    log = ActivityLog(blocker / "activity.jsonl")
    assert log.append(ActivityRecord(server="s", tool="t")) is None
    assert log.append(ActivityRecord(server="s", tool="t")) is None
    err = capsys.readouterr().err
    assert err.count("cannot write the activity log") == 1  # said once, loudly, not once per call
    assert log.last_error is not None


def test_listeners_see_each_record_and_a_failing_one_is_contained(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path / "a.jsonl")
    seen: list[str] = []
    log.subscribe(lambda r: seen.append(r()["id"]))
    log.subscribe(lambda r: 1 / 0)  # type: ignore[arg-type,return-value]
    log.subscribe(lambda r: seen.append(r()["server"]))
    record = ActivityRecord(server="s")
    assert log.append(record) is not None
    assert seen == [record.id, "s"]


def test_a_record_is_made_for_listeners_once_and_only_when_one_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = ActivityLog(tmp_path / "a.jsonl")
    made: list[int] = []
    real = ActivityRecord.model_dump

    def counted(self: ActivityRecord, **kwargs: Any) -> dict[str, Any]:
        made.append(1)
        return real(self, **kwargs)

    monkeypatch.setattr(ActivityRecord, "model_dump", counted)
    payloads: list[Any] = []
    log.subscribe(payloads.append)  # a listener with nobody to tell: never asks
    log.append(ActivityRecord(server="s"))
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
