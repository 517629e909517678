"""Every matching record of a big log, rendered, newest first, with the machine's cores: `activity list --limit 0`.

Reading a log of a million records is mostly searching its bytes and parsing the lines that may match, and a
terminal's table or a JSON array needs all of them before (or while) it is written. So the log is cut, at line
starts, into contiguous parts, newest first: this process reads the newest part and writes what it renders as it
goes, while a forked helper per other part reads, filters and renders its own (with exactly the code this process
runs) and hands the results over through a pipe once done. They are written in order, newest first, exactly as one
process reading the whole log would write them:

- a start (`tool_call_started`) is shown only while no outcome names it, and an outcome is read before its start.
  A helper settles the starts of its part with the outcomes of its part, and hands the ones still open over with
  their ids; this process drops those that an outcome in a newer part names.
- `--since` stops the reading at the first record older than the bound: a part that reaches it says so, and the
  parts after it are not written.
- The consumer may stop early (a closed pipe, Ctrl-C): helpers still running are killed.

A helper that fails in any way hands over nothing, and its part is then read here. Small logs, a single core, or a
platform without fork are read in this process alone, by the same loop.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mcphost.activity.query import Matcher, RecordFilter
from mcphost.activity.reader import Record, lines_newest_first, log_files, parse_entry

T = TypeVar("T")
Render = Callable[[Record, bytes | None], T]

# Below this many bytes a fork costs more than it saves.
PARALLEL_MIN_BYTES = 64 << 20
MAX_WORKERS = 4


@dataclass(frozen=True, slots=True)
class Segment:
    """Lines [lo, hi) of an open log file; `hi` is a line's start (or the file's end)."""

    fd: int
    lo: int
    hi: int


@dataclass(slots=True)
class Part:
    """What one reader of a part found: items (start id when the record is an open start, what was rendered), the
    starts its outcomes named, and whether it reached `--since`."""

    items: list[tuple[Any, Any]] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    past: bool = False


def rendered_newest_first(path: Path, flt: RecordFilter, render: Render[T]) -> Iterator[T]:
    """`render(record, line)` for every record `flt` matches, newest first, as `matching_entries_newest_first`
    yields them (`line` is the record's line when it can be passed on as it is)."""
    fds: list[int] = []
    try:
        segments = _open(log_files(path), fds)
        parts = _split(segments, _workers())
        if len(parts) == 1:
            for _start, rendered in _read(parts[0], flt, render, Part()):
                yield rendered
            return
        yield from _in_parallel(parts, flt, render)
    finally:
        for fd in fds:
            os.close(fd)


def _workers() -> int:
    if not hasattr(os, "fork"):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


def _open(files: list[Path], fds: list[int]) -> list[Segment]:
    """Each file opened now (what is read is what was listed, whatever rotates meanwhile), up to its size now."""
    segments = []
    for file in files:
        try:
            fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # rotated away between listing and opening
        fds.append(fd)
        segments.append(Segment(fd, 0, os.fstat(fd).st_size))
    return segments


def _split(segments: list[Segment], workers: int) -> list[list[Segment]]:
    """The segments cut into `workers` parts of about the same size, newest first, at line starts."""
    total = sum(s.hi - s.lo for s in segments)
    if workers < 2 or total < PARALLEL_MIN_BYTES:
        return [segments]
    share = total // workers
    parts: list[list[Segment]] = [[]]
    room = share
    for segment in segments:
        hi = segment.hi
        while hi > segment.lo:
            if room >= hi - segment.lo or len(parts) == workers:
                parts[-1].append(Segment(segment.fd, segment.lo, hi))
                room -= hi - segment.lo
                break
            cut = _line_start_after(segment.fd, hi - room, hi)
            if cut > segment.lo and cut < hi:
                parts[-1].append(Segment(segment.fd, cut, hi))
                hi = cut
            parts.append([])
            room = share
    return [part for part in parts if part]


def _line_start_after(fd: int, offset: int, limit: int) -> int:
    """The first line start at or after `offset` (`limit` when there is none before it)."""
    if offset <= 0:
        return 0
    position = offset - 1
    while position < limit:
        chunk = os.pread(fd, min(1 << 16, limit - position), position)
        if not chunk:
            break
        cut = chunk.find(b"\n")
        if cut >= 0:
            return position + cut + 1
        position += len(chunk)
    return limit


def _read(segments: list[Segment], flt: RecordFilter, render: Render[T], part: Part) -> Iterator[tuple[Any, T]]:
    """What `matching_entries_newest_first` yields over some segments, rendered: beside an open start, its id (None
    beside anything else)."""
    matcher = Matcher(flt)
    part.answered = matcher.outcomes.answered
    for record, line, open_start in matcher.matching(_entries(segments, flt.needle())):
        yield (record.get("id") if open_start else None), render(record, line)
    part.past = matcher.past


def _entries(segments: list[Segment], needle: bytes | None) -> Iterator[tuple[Record, bytes | None]]:
    for segment in segments:
        for line in lines_newest_first(segment.fd, segment.hi, needle, segment.lo):
            record, raw = parse_entry(line)
            if record is not None:
                yield record, raw


def _in_parallel(parts: list[list[Segment]], flt: RecordFilter, render: Render[T]) -> Iterator[T]:
    helpers = [Helper.start(segments, flt, render) for segments in parts[1:]]
    try:
        own = Part()
        for _start, rendered in _read(parts[0], flt, render, own):
            yield rendered
        if own.past:
            return
        answered = set(own.answered)
        for segments, helper in zip(parts[1:], helpers, strict=True):
            part = helper.collect()
            if part is None:  # the helper failed: read its part here
                part = Part()
                part.items = list(_read(segments, flt, render, part))
            for start, rendered in part.items:
                if start is None or not (isinstance(start, str) and start in answered):
                    yield rendered
            if part.past:
                return
            answered |= part.answered
    finally:
        for helper in helpers:
            helper.stop()


class Helper:
    """A forked process reading some segments, and the pipe it hands its part over through."""

    def __init__(self, pid: int, fd: int | None) -> None:
        self.pid = pid  # 0 once reaped (or never started)
        self.fd = fd

    @classmethod
    def start(cls, segments: list[Segment], flt: RecordFilter, render: Render[T]) -> Helper:
        """Fork the helper; one that cannot be started is a helper that failed (its part is then read here)."""
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return cls(0, None)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return cls(0, None)
        if pid == 0:  # the helper: never returns, never runs this process's exit handlers or flushes its buffers
            code = 1
            try:
                os.close(read_end)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                part = Part()
                part.items = list(_read(segments, flt, render, part))
                data = memoryview(marshal.dumps((part.items, sorted(part.answered), part.past)))
                while data:
                    data = data[os.write(write_end, data) :]
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        return cls(pid, read_end)

    def collect(self) -> Part | None:
        """The helper's part, once it is done; None when it failed."""
        if self.fd is None:
            return None
        chunks = []
        try:
            while chunk := os.read(self.fd, 1 << 20):
                chunks.append(chunk)
            _, status = os.waitpid(self.pid, 0)
        except OSError:
            return None
        self.pid = 0
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            return None
        try:
            items, answered, past = marshal.loads(b"".join(chunks))
        except (EOFError, ValueError, TypeError):
            return None
        return Part(items=list(items), answered=set(answered), past=bool(past))

    def stop(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0
