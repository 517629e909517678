"""Appending activity records to the JSONL log."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from mcphost.activity.record import ActivityRecord

logger = logging.getLogger(__name__)

_Listener = Callable[[ActivityRecord], None]


class ActivityLog:
    """Appends whole lines: one write(2) per record on an O_APPEND descriptor, under an advisory lock.

    The lock keeps lines whole when several processes (a daemon, `mcphost call`) append at once. A failure to
    write is reported loudly and never raised into the call path: the host keeps serving.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self._listeners: list[_Listener] = []

    def subscribe(self, listener: _Listener) -> None:
        self._listeners.append(listener)

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    def append(self, record: ActivityRecord) -> bool:
        data = record.to_json_line().encode("utf-8")
        with self._lock:
            try:
                fd = self._open()
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    _write_all(fd, data)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                if self.last_error is not None:
                    print(f"mcphost: activity log {self.path} is writable again", file=sys.stderr)
                self.last_error = None
            except OSError as exc:
                self._report(exc)
                return False
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:
                logger.exception("activity listener failed")
        return True

    def _report(self, exc: OSError) -> None:
        message = f"cannot write the activity log {self.path}: {exc.strerror or exc}"
        if message != self.last_error:
            print(f"mcphost: ERROR: {message}; calls go on, but are not on record", file=sys.stderr)
        self.last_error = message
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
