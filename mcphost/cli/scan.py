"""Every matching record of a big log, rendered, newest first, with the machine's cores: `activity list --limit 0`
and `activity summary`.

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

A table (`laid_out_newest_first`) is laid out in every process too: a helper measures its rows (each column's widest
cell) and hands over the measures; this process settles the columns' widths from all of them and hands the widths
back; each process then lays out its own rows. What is left to this process alone is writing.

A count (`folded_newest_first`, `activity summary`) is folded in every process: a helper hands over the fold of its
part, and only its open starts one by one.

A helper that fails in any way hands over nothing, and its part is then read here. Small logs, a single core, or a
platform without fork are read in this process alone, by the same loop.
"""

from __future__ import annotations

import contextlib
import fcntl
import marshal
import os
import signal
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from mcphost.activity.query import Matcher, RecordFilter
from mcphost.activity.reader import (
    Record,
    count_not_records,
    lines_newest_first,
    listed_parser,
    log_files,
    not_records,
    open_log,
    parse_line,
)

T = TypeVar("T")
F = TypeVar("F")
Render = Callable[[Record, bytes | None], T]
Row = tuple[str, ...]


class Layout(Protocol):
    """A table laid out in parts (console.Table): each part measured where it was read, the widths settled here
    from every part's measures, then each part laid out where it was read, to those widths."""

    def measure(self, rows: Sequence[Row]) -> Any: ...
    def fit(self, parts: Sequence[Any]) -> None: ...
    def plan(self) -> Any: ...
    def follow(self, plan: Any) -> None: ...
    def header(self) -> str: ...
    def render(self, rows: Sequence[Row]) -> list[str]: ...


# Below this many bytes a fork costs more than it saves.
PARALLEL_MIN_BYTES = 64 << 20
MAX_WORKERS = 4
PIPE_SIZE = 1 << 20


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
            fd = open_log(file)
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
    matcher = Matcher(flt, parse_line)
    part.answered = matcher.outcomes.answered
    for record, line, open_start in matcher.matching(_entries(segments, flt.needle())):
        yield (record.get("id") if open_start else None), render(record, line)
    part.past = matcher.past


def _entries(segments: list[Segment], needle: bytes | None) -> Iterator[tuple[Record, bytes | None]]:
    """The records of the segments, newest first, each with only the fields a listing reads (its line beside it)."""
    parse = listed_parser()
    for segment in segments:
        for line in lines_newest_first(segment.fd, segment.hi, needle, segment.lo):
            record, raw = parse(line)
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


def folded_newest_first(path: Path, flt: RecordFilter, render: Render[T], fold: Callable[[list[T]], F]) -> list[F]:
    """`fold` of what `rendered_newest_first` yields, in parts, newest first: a helper hands over the fold of its
    part (not every render), and the renders of the open starts it found, folded here once it is known which of them
    no newer outcome names."""
    with _helped(path, flt, render, fold=fold) as (parts, helpers):
        own = Part()
        folds = [fold([rendered for _start, rendered in _read(parts[0], flt, render, own)])]
        answered, past = set(own.answered), own.past
        for segments_, helper in zip(parts[1:], helpers, strict=True):
            if past:
                break
            found = helper.folded()
            if found is None:  # the helper failed: its part is read here
                rendered_here, part = _read_here(segments_, flt, render, answered)
                folds.append(fold(rendered_here))
                answered, past = answered | part.answered, part.past
                continue
            part_fold, open_starts, part_answered, part_past = found
            folds.append(part_fold)
            folds.append(fold([rendered for start, rendered in open_starts if not _answered(start, answered)]))
            answered, past = answered | part_answered, part_past
        return folds


def laid_out_newest_first(path: Path, flt: RecordFilter, render: Render[Row], layout: Layout) -> Iterator[str]:
    """The table of every record `flt` matches, newest first: its header and lines, a part's lines joined at a time, as
    `layout.lines` lays out the rows `render` makes of what `rendered_newest_first` yields. Nothing when nothing
    matches."""
    with _helped(path, flt, render, layout=layout) as (parts, helpers):
        own = Part()
        rows: list[Row] = [rendered for _start, rendered in _read(parts[0], flt, render, own)]
        answered, past = set(own.answered), own.past
        count = len(rows)
        measures: list[Any] = [layout.measure(rows)]  # while the helpers may still be reading
        # The helpers' parts that are shown, each with its rows when it was read here (its helper failed), else the
        # indexes of its open starts that no newer outcome names.
        shown: list[tuple[Helper, list[Row] | None, list[int]]] = []
        kept: list[Row] = []  # the rows of those open starts: measured here
        for segments_, helper in zip(parts[1:], helpers, strict=True):
            if past:
                break
            found = helper.measured()
            if found is None:  # the helper failed: its part is read here
                part_rows, part = _read_here(segments_, flt, render, answered)
                measures.append(layout.measure(part_rows))
                count += len(part_rows)
                shown.append((helper, part_rows, []))
                answered, past = answered | part.answered, part.past
                continue
            open_starts, others, part_answered, part_past, part_measures = found
            keep = [(n, row) for n, start, row in open_starts if not _answered(start, answered)]
            kept += [row for _n, row in keep]
            measures.append(part_measures)
            count += others + len(keep)
            shown.append((helper, None, [n for n, _row in keep]))
            answered, past = answered | part_answered, part_past
        for helper in helpers[len(shown) :]:
            helper.stop()  # past `--since`: not shown
        if not count:
            return
        measures.append(layout.measure(kept))
        layout.fit(measures)
        plan = layout.plan()
        for helper, read_here, keep_ in shown:
            if read_here is None:
                helper.lay_out(plan, keep_)
        yield "\n".join([layout.header(), *layout.render(rows)])
        for (helper, read_here, keep_), segments_ in zip(shown, parts[1:], strict=False):
            if read_here is not None:
                yield "\n".join(layout.render(read_here))
                continue
            lines = helper.laid_out()
            if lines is None:  # the helper failed after measuring: its part is read here again, to the same widths
                items = list(_read(segments_, flt, render, Part()))
                wanted = set(keep_)
                lines = "\n".join(layout.render([r for n, (s, r) in enumerate(items) if s is None or n in wanted]))
            yield lines


@contextlib.contextmanager
def _helped(
    path: Path,
    flt: RecordFilter,
    render: Render[T],
    layout: Layout | None = None,
    fold: Callable[[list[T]], Any] | None = None,
) -> Iterator[tuple[list[list[Segment]], list[Helper]]]:
    """The log's files opened and cut into parts, newest first, a helper started for each part but the first; the
    helpers stopped and the files closed however the reading ends."""
    fds: list[int] = []
    helpers: list[Helper] = []
    try:
        parts = _split(_open(log_files(path), fds), _workers())
        helpers = [Helper.start(part, flt, render, layout, fold) for part in parts[1:]]
        yield parts, helpers
    finally:
        for helper in helpers:
            helper.stop()
        for fd in fds:
            os.close(fd)


def _read_here(
    segments: list[Segment], flt: RecordFilter, render: Render[T], answered: set[str]
) -> tuple[list[T], Part]:
    """A part a helper failed to read, read here: what it shows (not the starts a newer outcome named), and what
    it found (the starts its outcomes named, whether it reached `--since`)."""
    part = Part()
    items = list(_read(segments, flt, render, part))
    return [rendered for start, rendered in items if not _answered(start, answered)], part


def _answered(start: Any, answered: set[str]) -> bool:
    """True when an item is an open start (its id beside it) that an outcome in a newer part names."""
    return isinstance(start, str) and start in answered


def _send(fd: int, value: Any) -> None:
    data = marshal.dumps(value)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _receive(fd: int) -> Any:
    """One value `_send` wrote; EOFError when the other end is gone before all of it came."""
    size = struct.unpack("<Q", _read_exactly(fd, 8))[0]
    return marshal.loads(_read_exactly(fd, size))


def _read_exactly(fd: int, size: int) -> bytearray:
    """`size` bytes, read into one buffer (a part handed over can be tens of megabytes: no chunks joined)."""
    data = bytearray(size)
    view = memoryview(data)
    done = 0
    while done < size:
        got = os.readv(fd, [view[done:]])
        if not got:
            raise EOFError
        done += got
    return data


def _pipe() -> tuple[int, int]:
    """A pipe that takes a megabyte at a time where Linux lets it (the default 64 KiB makes a part of tens of
    megabytes cross in hundreds of turns of the two processes)."""
    read_end, write_end = os.pipe()
    with contextlib.suppress(AttributeError, OSError):
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    return read_end, write_end


class Helper:
    """A forked process reading some segments, and the pipes it hands its part over through (and, for a table,
    is told the columns' widths through)."""

    def __init__(self, pid: int, fd: int | None, plan_fd: int | None = None) -> None:
        self.pid = pid  # 0 once reaped (or never started)
        self.fd = fd
        self.plan_fd = plan_fd

    @classmethod
    def start(
        cls,
        segments: list[Segment],
        flt: RecordFilter,
        render: Render[T],
        layout: Layout | None = None,
        fold: Callable[[list[T]], Any] | None = None,
    ) -> Helper:
        """Fork the helper; one that cannot be started is a helper that failed (its part is then read here)."""
        fds: list[int] = []
        try:
            read_end, write_end = _pipe()
            fds += (read_end, write_end)
            if layout is not None:
                plan_read, plan_write = os.pipe()
                fds += (plan_read, plan_write)
            pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            return cls(0, None)
        if pid == 0:  # the helper: never returns, never runs this process's exit handlers or flushes its buffers
            code = 1
            try:
                os.close(read_end)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                before = not_records()  # this process's count as forked: its own lines are counted on from there
                part = Part()
                part.items = list(_read(segments, flt, render, part))
                skipped = not_records() - before
                if fold is not None:
                    rows = [rendered for start, rendered in part.items if start is None]
                    open_starts = [item for item in part.items if item[0] is not None]
                    _send(write_end, (fold(rows), open_starts, sorted(part.answered), part.past, skipped))
                elif layout is None:
                    _send(write_end, (part.items, sorted(part.answered), part.past, skipped))
                else:
                    os.close(plan_write)
                    _lay_out(part, layout, write_end, plan_read, skipped)
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        if layout is None:
            return cls(pid, read_end)
        os.close(plan_read)
        return cls(pid, read_end, plan_write)

    def collect(self) -> Part | None:
        """The helper's part, once it is done; None when it failed."""
        if self.fd is None:
            return None
        try:
            items, answered, past, skipped = _receive(self.fd)
            count_not_records(int(skipped))
            return Part(items=list(items), answered=set(answered), past=bool(past))
        except (OSError, EOFError, ValueError, TypeError):
            return None
        finally:
            self.stop()

    def folded(self) -> tuple[Any, list[tuple[Any, Any]], set[str], bool] | None:
        """A folding helper's part: the fold of its renders but those of its open starts, the open starts (id,
        render), the starts its outcomes named, whether it reached `--since`. None when it failed."""
        if self.fd is None:
            return None
        try:
            part_fold, open_starts, answered, past, skipped = _receive(self.fd)
            count_not_records(int(skipped))
            return part_fold, [(start, rendered) for start, rendered in open_starts], set(answered), bool(past)
        except (OSError, EOFError, ValueError, TypeError):
            return None
        finally:
            self.stop()

    def measured(self) -> tuple[list[tuple[int, Any, Row]], int, set[str], bool, Any] | None:
        """A table's helper's measures, once its part is read: its open starts (index, id, row), how many other
        rows it has, the starts its outcomes named, whether it reached `--since`, and the other rows' measures.
        None when it failed."""
        if self.fd is None:
            return None
        try:
            open_starts, others, answered, past, measures, skipped = _receive(self.fd)
            count_not_records(int(skipped))
            starts = [(int(n), i, tuple(r)) for n, i, r in open_starts]
            return starts, int(others), set(answered), bool(past), measures
        except (OSError, EOFError, ValueError, TypeError):
            self.stop()
            return None

    def lay_out(self, plan: Any, keep: list[int]) -> None:
        """Tell a table's helper the columns' widths and which of its open starts to show."""
        if self.plan_fd is None:
            return
        try:
            _send(self.plan_fd, (plan, keep))
        except OSError:
            self.stop()

    def laid_out(self) -> str | None:
        """A table's helper's lines, laid out to the plan it was told, joined; None when it failed."""
        if self.fd is None:
            return None
        try:
            lines = _receive(self.fd)
            if not isinstance(lines, str):
                raise TypeError
            return lines
        except (OSError, EOFError, ValueError, TypeError):
            return None
        finally:
            self.stop()

    def stop(self) -> None:
        for name in ("fd", "plan_fd"):
            fd = getattr(self, name)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, None)
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0


def _lay_out(part: Part, layout: Layout, to_parent: int, from_parent: int, skipped: int) -> None:
    """A table's helper, its part read: measure its rows, hand the measures over, wait for the widths, lay out."""
    open_starts = [(n, start, rendered) for n, (start, rendered) in enumerate(part.items) if start is not None]
    rows = [rendered for start, rendered in part.items if start is None]
    _send(to_parent, (open_starts, len(rows), sorted(part.answered), part.past, layout.measure(rows), skipped))
    plan, keep = _receive(from_parent)
    layout.follow(plan)
    if open_starts:
        wanted = set(keep)
        rows = [rendered for n, (start, rendered) in enumerate(part.items) if start is None or n in wanted]
    _send(to_parent, "\n".join(layout.render(rows)))
