"""Appending activity records to the JSONL log: whole lines, durable, rotated, and never a crash on a bad disk.

Several processes append to the same file (a daemon, `mcphost call`, a second daemon), so everything that
touches the live file happens under an exclusive flock on it:

- one write(2) per record on an O_APPEND descriptor: lines are never torn or interleaved;
- a writer killed mid-line leaves a partial last line; the next writer sees that the file does not end in a
  newline and starts its record on a fresh line, so readers lose only the torn one;
- rotation renames `activity.jsonl` to `activity.jsonl.1` (shifting older ones up to `keep`) and starts a new
  file. A writer that waited on the old file's lock sees that the path now names another file and moves on,
  so nothing is written to a rotated file and no record is lost or written twice.

Durability: `write()` returns once the record is on disk. fsyncs are grouped: while one fsync runs, records
written meanwhile wait for the next one, which covers all of them, so the cost per record falls under load.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from mcphost.activity.reader import rotated_path
from mcphost.activity.record import ActivityRecord, CallRecord
from mcphost.errors import tell_each
from mcphost.paths import data_dir_fix, open_regular, writable_by_others

_Listener = Callable[["Payload"], None]
# The live file as one look at it found it: (device, inode, size).
_Live = tuple[int, int, int]
# Records kept in memory while the disk refuses them (full, read-only); written first once it accepts again.
BACKLOG_LIMIT = 10_000
# How long a writer waits for another process to let go of the live file's lock. A holder keeps it for one write,
# or a rotation's fsync and renames: milliseconds. One that keeps it longer is stopped (Ctrl-Z, a debugger) or
# wedged, and waiting on would freeze this process (the daemon writes on its event loop) with nothing on record.
LOCK_WAIT_S = 3.0
# Once the lock was found held that long, later records only look (the log counts as failing meanwhile): every
# call would otherwise wait the whole LOCK_WAIT_S again.
LOCK_RETRY_S = 0.05


@dataclass(frozen=True, slots=True)
class LogSettings:
    fsync: bool = True
    max_bytes: int = 0  # 0: never rotate
    keep: int = 5
    on_failure: str = "refuse"  # [log] on_failure: what calls do while records cannot be written (the gateway acts)

    @classmethod
    def of(cls, log: Any) -> LogSettings:
        """From the config's `[log]` table (any object with its fields)."""
        return cls(fsync=log.fsync, max_bytes=log.max_bytes, keep=log.keep, on_failure=log.on_failure)


class ActivityLog:
    def __init__(self, path: Path, settings: LogSettings | None = None) -> None:
        self.path = path
        self.settings = settings or LogSettings()
        self.last_error: str | None = None
        self._remedy: str | None = None  # what the person can do about last_error
        self._fd: int | None = None
        self._lock_stuck = False  # the last wait for the live file's lock ran out (LOCK_RETRY_S until it is had)
        # (device, inode, size) of the live file as this process left it, ending on a line of its own: while the
        # file is still so, the next record needs no look at the byte before it (a syscall every record).
        self._end: _Live | None = None
        self._path = os.fspath(path)
        self._lock = threading.Lock()  # one writer thread at a time in this process; flock covers the others
        self._listeners: list[_Listener] = []
        self._backlog: deque[bytes] = deque()
        self._dropped = 0
        # Group commit: _written counts records handed to the OS, _synced those known to be on disk.
        # The condition's own lock is taken directly, and it is notified only when a thread waits on it: its
        # __enter__, __exit__ and notify_all are Python-level frames, paid twice by every record.
        self._sync_lock = threading.RLock()
        self._sync = threading.Condition(self._sync_lock)
        self._sync_waiting = 0
        self._written = 0
        self._synced = 0
        self._syncing = False
        self._flushing: anyio.Event | None = None  # the fsync the event loop's writers are waiting on

    def subscribe(self, listener: _Listener) -> None:
        self._listeners.append(listener)

    def configure(self, settings: LogSettings) -> None:
        self.settings = settings

    @property
    def problem(self) -> str:
        """What is wrong with the log, without what `last_error` goes on to say calls do meanwhile."""
        return (self.last_error or f"cannot write the activity log {self.path}").split("; ")[0]

    @property
    def remedy(self) -> str:
        """What the person can do about the log failing, in words that follow a colon ("free space on ...")."""
        return self._remedy or f"free space on the disk that holds {self.path.parent}, or make {self.path} writable"

    @property
    def backlog(self) -> int:
        return len(self._backlog)

    # ---- writing

    def append(self, record: ActivityRecord | CallRecord) -> int | None:
        """Hand one record to the OS, and tell the listeners. Returns its sequence number for `sync_through`, or None
        when the disk refused it (it is then kept in memory and written first once the disk accepts writes again)."""
        seq, payload = self._hand_over(record)
        if payload is not None:
            self._tell(payload)
        return seq

    def _hand_over(self, record: ActivityRecord | CallRecord) -> tuple[int | None, Payload | None]:
        """`append`, leaving the listeners to the caller: the record's payload when any listens."""
        data, safe_dict = record.encode_line()
        seq: int | None = None
        with self._lock:
            try:
                self._write_locked(data)
            except OSError as exc:
                self._hold(data)
                self._report(exc)
            else:
                with self._sync_lock:
                    self._written += 1
                    seq = self._written
                if self.last_error is not None:
                    print(f"mcphost: activity log {self.path} is writable again", file=sys.stderr, flush=True)
                    self.last_error = self._remedy = None
        return seq, Payload(safe_dict, data.rstrip(b"\n")) if self._listeners else None

    def _tell(self, payload: Payload) -> None:
        tell_each(self._listeners, payload, who="activity")

    async def write(self, record: ActivityRecord | CallRecord, *, alone: bool = False) -> bool:
        """Append, and return once the record is on disk (when `fsync` is on). Never raises.

        The listeners (editors watching, the export) hear of the record once it is on disk, or known not to be, on
        the event loop's next turn: after the answer it belongs to has gone out. Told inline, an editor's
        notification cost every call its encoding and the editor's wake-up, on the way to the agent.

        `alone`: no other call is under way, so nothing can share this record's fsync and nobody waits on the event
        loop meanwhile: it is made here, without the round trip to a worker thread (which, on a busy machine, costs
        as much as the fsync). Records written together take the group path below."""
        seq, payload = self._hand_over(record)
        try:
            if seq is None:
                return False
            if not self.settings.fsync:
                return True
            if alone and self._flushing is None:
                return self.sync_through(seq)
            # One task at a time takes an fsync to a worker thread; the others wait for it and find themselves
            # covered, so a burst of calls costs one thread round trip and one fsync, not one of each per call.
            while self._synced < seq:
                running = self._flushing
                if running is not None:
                    await running.wait()
                    continue
                self._flushing = done = anyio.Event()
                try:
                    ok = await anyio.to_thread.run_sync(self.sync_through, self._written)
                finally:
                    self._flushing = None
                    done.set()
                if not ok:
                    return False
            return True
        finally:
            if payload is not None:
                asyncio.get_running_loop().call_soon(self._tell, payload)

    def sync_through(self, seq: int) -> bool:
        """Block until record `seq` is on disk; one fsync serves every record written before it started."""
        with self._sync_lock:
            while self._synced < seq:
                if self._syncing:
                    self._sync_waiting += 1
                    try:
                        self._sync.wait()
                    finally:
                        self._sync_waiting -= 1
                    continue
                self._syncing = True
                target = self._written
                fd = self._dup_fd()
                self._sync.release()
                ok = True
                try:
                    if fd is not None:
                        os.fdatasync(fd)
                except OSError as exc:
                    ok = False
                    self._report(exc, close=False)
                finally:
                    if fd is not None:
                        os.close(fd)
                    self._sync.acquire()
                    self._syncing = False
                    if self._sync_waiting:
                        self._sync.notify_all()
                if not ok:
                    return False
                self._synced = max(self._synced, target)
            return True

    def _dup_fd(self) -> int | None:
        # A duplicate stays valid while rotation closes the original; both share one open file description.
        fd = self._fd
        if fd is None:
            return None
        try:
            return os.dup(fd)
        except OSError:
            return None

    def recover(self) -> bool:
        """With the log failing (`last_error`): write the records held in memory, and make them durable. True when
        that worked, and the log takes records again. Blocks on the disk: run it in a worker thread."""
        with self._lock:
            try:
                self._write_locked(None)
            except OSError as exc:
                self._report(exc)
                return False
        if self.settings.fsync and not self.sync_through(self._written):
            return False
        if self.last_error is not None:
            print(f"mcphost: activity log {self.path} is writable again", file=sys.stderr, flush=True)
            self.last_error = self._remedy = None
        return True

    def amend(self, record: ActivityRecord | CallRecord) -> bool:
        """Put `record` as it is now in place of its line held in memory (one the disk refused), so that the line
        written later says what became of the call. False when its line is not held (it reached the file)."""
        head = b'{"id":"%s"' % str(record.id).encode("ascii", "replace")
        data, _ = record.encode_line()
        with self._lock:
            held = self._backlog
            for index in range(len(held) - 1, -1, -1):
                if held[index].startswith(head):
                    held[index] = data
                    return True
        return False

    def _write_locked(self, data: bytes | None) -> None:
        """Append `data` after whatever is held; None: write only what is held."""
        fd, live = self._lock_live_file()
        try:
            if self._backlog:
                live = self._flush_backlog(fd, live)
            if data is not None:
                fd, live = self._rotate_if_needed(fd, live, len(data))
                self._append(fd, live, data)
        finally:
            # The fd locked now: a rotation that failed half-way has closed the one this began with.
            if self._fd is not None:
                try:  # noqa: SIM105 (contextlib.suppress costs every record three Python frames)
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                except OSError:
                    pass

    def _append(self, fd: int, live: _Live, data: bytes) -> _Live:
        """`_append_line`, noting where this process left the file; returns the file as it is after."""
        known_whole, self._end = live == self._end, None
        size = _append_line(fd, data, live[2], known_whole=known_whole)
        self._end = after = (live[0], live[1], size)
        return after

    def _flush_backlog(self, fd: int, live: _Live) -> _Live:
        if self._dropped:
            print(
                f"mcphost: ERROR: {self._dropped} activity records were lost while the log could not be written",
                file=sys.stderr,
                flush=True,
            )
            self._dropped = 0
        while self._backlog:
            live = self._append(fd, live, self._backlog[0])
            self._backlog.popleft()
            with self._sync_lock:
                self._written += 1
        return live

    def _hold(self, data: bytes) -> None:
        if len(self._backlog) >= BACKLOG_LIMIT:
            self._backlog.popleft()
            self._dropped += 1
        self._backlog.append(data)

    def _lock_live_file(self) -> tuple[int, _Live]:
        """Open and lock the file the path names now (after a rotation by another process, that is a new one); the
        fd, and the file as it is under the lock."""
        for _ in range(100):
            fd = self._open()
            self._flock(fd)
            try:
                current = os.stat(self._path)  # noqa: PTH116 (a Path's own stat costs more, every record)
            except FileNotFoundError:
                current = None
            mine = os.fstat(fd)
            if current is not None and (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev):
                return fd, (mine.st_dev, mine.st_ino, mine.st_size)
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._close_fd()
        raise OSError(errno.EAGAIN, "the activity log keeps changing under us (rotated by another process)")

    def _flock(self, fd: int) -> None:
        """Take the exclusive lock on `fd`, waiting at most LOCK_WAIT_S for another process to let go of it."""
        waited = LOCK_RETRY_S if self._lock_stuck else LOCK_WAIT_S
        if not flock_within(fd, waited):
            self._lock_stuck = True
            raise LockHeld(fd, waited)
        self._lock_stuck = False

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # In a directory another user may write (a shared MCPHOST_DATA_DIR, /tmp), they could put a link where the
            # log is to be made, or a log of their own records: the record would go where they chose, or be theirs.
            problem = writable_by_others(self.path.parent.stat(), group=False)
            if problem is not None:
                raise UnsafeLogDir(self.path.parent, problem)
            # Not a FIFO (the readers refuse one too): in the log's place it took the daemon's loop with the first write
            # its pipe could not hold, past SIGTERM.
            self._fd = open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, devices=True)
        return self._fd

    def _close_fd(self) -> None:
        self._end = None  # only while the file stays open here can its inode not name another file
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _rotate_if_needed(self, fd: int, live: _Live, incoming: int) -> tuple[int, _Live]:
        limit = self.settings.max_bytes
        # Again if the new live file is already full: other writers may have filled it before we had its lock.
        while limit > 0 and live[2] > 0 and live[2] + incoming > limit:
            fd, live = self._rotate(fd)
        return fd, live

    def _rotate(self, fd: int) -> tuple[int, _Live]:
        """Rename the live file (locked on `fd`) to `.1`, the older ones one up; the new live file, locked."""
        # Records in the old file must be durable before it stops being the live one.
        if self.settings.fsync:
            os.fdatasync(fd)
        keep = self.settings.keep
        with contextlib.suppress(FileNotFoundError):
            rotated_path(self.path, keep).unlink()
        for n in range(keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                rotated_path(self.path, n).rename(rotated_path(self.path, n + 1))
        self.path.rename(rotated_path(self.path, 1))
        # The new live file is locked the way any writer locks it, checked under its lock: between its creation and
        # our lock another writer may have filled and rotated it, and a record must never go to a rotated file (a
        # follower that moved on would not see it). The old file stays locked until then, so its waiters, once
        # they wake, find the path naming another file and follow it.
        self._fd, self._end = None, None
        try:
            new_fd, live = self._lock_live_file()
            _fsync_dir(self.path.parent)  # the rename and the new file, durable before any record goes to it
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return new_fd, live

    # ---- failures

    def _report(self, exc: OSError, *, close: bool = True) -> None:
        # The file the error is about: a rotation's rename names the rotated file second (activity.jsonl.1 made a
        # directory), which the person is to fix, not the live log.
        named = exc.filename2 if exc.filename2 is not None else exc.filename
        where = Path(os.fsdecode(named)) if isinstance(named, str | bytes) else self.path
        if isinstance(exc, LockHeld | UnsafeLogDir):
            self._remedy = exc.remedy
        elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
            self._remedy = f"free space on the disk that holds {self.path.parent}"
        elif exc.errno == errno.EFBIG:
            # The largest file this process may write (`ulimit -f`, RLIMIT_FSIZE) or its filesystem holds: the file is
            # writable, and the disk may have room.
            rotation = (
                f"[log] max_bytes (now {self.settings.max_bytes}) below it"
                if self.settings.max_bytes
                else "[log] max_bytes so that the log rotates before it"
            )
            self._remedy = (
                f"{self.path} has reached the largest file this process may write: raise that limit (ulimit -f), "
                f"or set {rotation}"
            )
        else:
            self._remedy = (
                f"make {where} a file this user can write (not a directory or a named pipe, not read-only or immutable)"
            )
        if self.settings.on_failure == "refuse":
            consequence = f"calls are refused (AUDIT_UNAVAILABLE) until it can be written again: {self._remedy}"
        else:
            consequence = (
                f'calls go on ([log] on_failure = "continue"), their records held in memory (up to {BACKLOG_LIMIT})'
            )
        about = f" ({where})" if where != self.path else ""
        message = f"cannot write the activity log {self.path}: {exc.strerror or exc}{about}; {consequence}"
        if message != self.last_error:
            print(f"mcphost: ERROR: {message}", file=sys.stderr, flush=True)
        self.last_error = message
        if close:  # reopen next time: the file may have been replaced or its disk remounted
            self._close_fd()

    def close(self) -> None:
        with self._lock:
            if self._backlog:
                try:
                    fd, live = self._lock_live_file()
                    try:
                        self._flush_backlog(fd, live)
                    finally:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                except OSError as exc:
                    print(
                        f"mcphost: ERROR: {len(self._backlog)} activity records could not be written to "
                        f"{self.path}: {exc.strerror or exc}",
                        file=sys.stderr,
                        flush=True,
                    )
            if self._fd is not None and self.settings.fsync:
                with contextlib.suppress(OSError):
                    os.fdatasync(self._fd)
            self._close_fd()


def flock_within(fd: int, seconds: float) -> bool:
    """Take the exclusive flock on `fd`; False if another process still holds it after `seconds`. flock(2) has no
    timeout: it is tried again with a growing pause (a holder's write takes microseconds; a rotation by another
    process, a few milliseconds)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pass
    else:
        return True
    deadline = time.monotonic() + seconds
    pause = 0.00005
    while True:
        time.sleep(pause)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            pause = min(pause * 2, 0.005)
        else:
            return True


class UnsafeLogDir(OSError):
    """The log's directory is another user's, or anyone's to write."""

    def __init__(self, directory: Path, problem: str) -> None:
        super().__init__(errno.EPERM, f"its directory {directory} is no place for it: {problem}")
        self.remedy = data_dir_fix(directory, problem)


class LockHeld(OSError):
    """Another process holds a file's flock (the live log's, the grants' state file's) and has not let go of it within
    the wait."""

    def __init__(self, fd: int, waited: float) -> None:
        holder = lock_holder(fd)
        who = f"process {holder[0]} ({holder[1]})" if holder else "another process"
        super().__init__(errno.ETIMEDOUT, f"its lock is held by {who}, which has not let go of it for {waited:g} s")
        self.remedy = (
            f"resume or end {who} (a process stopped with Ctrl-Z or held in a debugger keeps the lock; "
            "records are written once it lets go)"
        )


def lock_holder(fd: int) -> tuple[int, str] | None:
    """The pid and command line of the process holding the flock on `fd`'s file, from /proc/locks (Linux); None
    when it cannot be told (another system, a holder in another pid namespace)."""
    try:
        mine = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:  # noqa: PTH123 (one read)
            lines = locks.read().splitlines()
    except OSError:
        return None
    wanted = f"{os.major(mine.st_dev):02x}:{os.minor(mine.st_dev):02x}:{mine.st_ino}"
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:56789 0 EOF"; a waiter's line has "->" after the number.
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted and fields[4].isdigit():
            pid = int(fields[4])
            if pid > 0 and pid != os.getpid():
                return pid, _command_line(pid)
    return None


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:  # noqa: PTH123 (one read)
            raw = cmdline.read(4096)
    except OSError:
        return "gone by now"
    words = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    # Another process's words, shown to a person: no control characters, and a line's worth.
    text = "".join(ch if ch.isprintable() else "?" for ch in words)
    return text if len(text) <= 120 else text[:119] + "…"


class Payload:
    """A record as written (redacted), for listeners, so that they never see what the disk does not: `line`, its
    JSON as the log has it (no line end), and, called, its dict, made at the first call and kept: a daemon with no
    export pays nothing for the dict on a call's way back. `functools.cache` would do, at the price of building an
    lru_cache wrapper on every record (10 µs a call in the daemon's profile, more than the listeners' own work)."""

    __slots__ = ("_made", "_make", "line")

    def __init__(self, make: Callable[[], dict[str, Any]], line: bytes) -> None:
        self._make: Callable[[], dict[str, Any]] | None = make
        self._made: dict[str, Any] = {}
        self.line = line

    def __call__(self) -> dict[str, Any]:
        make = self._make
        if make is not None:
            self._made, self._make = make(), None
        return self._made


def _append_line(fd: int, data: bytes, size: int, *, known_whole: bool = False) -> int:
    """Write one record (ending in a newline) to a file of `size` bytes; call with the file locked. Returns the size
    after. `known_whole`: the file ends on a line this process wrote, so its last byte needs no look. A failure
    leaves the file as it was found."""
    if size > 0 and not known_whole and os.pread(fd, 1, size - 1) != b"\n":
        # A writer died mid-line: end the torn line so this record starts on a line of its own.
        data = b"\n" + data
    try:
        _write_all(fd, data)
    except OSError:
        # A short write (disk full) would leave half a record; cut it off, so the file ends on a whole line.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise
    return size + len(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
