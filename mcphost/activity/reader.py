"""Reading the activity log as plain dicts: from the end, across rotated files, and following it live.

Plain dicts, not the pydantic model: a record written by an older or newer mcphost (unknown fields, missing
optional ones) is shown as it is, and `mcphost log tail` starts without importing pydantic.

A line is a record when it ends in a newline and holds a JSON object. Anything else (the partial last line of
a writer killed mid-write, a line a person mangled) is skipped, never fatal.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat as stat_kind
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mcphost.paths import data_dir_fix, writable_by_others

Record = dict[str, Any]
BLOCK = 1 << 20
# What a follower keeps of the lines it read, to tell at each poll that the file was only appended to since.
ANCHOR = 64
HELD_SAMPLE = 4096
# orjson reads a record in half the time the standard parser takes. What it refuses (NaN, lone surrogates) is read
# again by the standard parser, and so is any line that may hold an integer past 64 bits (orjson would make it a
# float): what is read does not depend on which parser read it.
_loads = orjson.loads
# orjson reads an integer that does not fit in 64 bits as a float, silently rounded (1180591620717411303424 becomes
# 1.1805916207174113e+21), and a run of 19 digits is the only way to write one. Digits made "0" and the rest "." by
# one translate, then one substring search: a tenth of what a regular expression takes over a record's line.
_DIGITS = bytes(48 if 48 <= b <= 57 else 46 for b in range(256))
_LONG_DIGITS = b"0" * 19


def may_hold_wide_int(data: bytes) -> bool:
    """Whether JSON `data` may write an integer past 64 bits, which orjson would read rounded: then a parser that
    keeps every digit reads it (the log's reader here; an agent's line and an upstream's answer alike). A run of 19
    digits in a string counts too, which costs only time."""
    return _LONG_DIGITS in data.translate(_DIGITS)


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[{")


def opening_brackets(data: bytes) -> int:
    """How many `[` and `{` are in `data`, a bound on how deep its JSON nests: one pass that keeps only them, half what
    two `count`s take."""
    return len(data.translate(None, _NOT_BRACKETS))


# An integer orjson reads rounded becomes a float of at least this magnitude with no fraction: only a float like that
# in what it read says a digit may be lost (a float written as such reads the same in either parser).
_ROUNDED_FROM = float(2**63)
# From this size on, a text is read first and its values looked over after (`looked_over`), when they are few: a
# message that carries a file is a few values and a long string, which a scan of every byte (`may_hold_wide_int`,
# `opening_brackets`) reads through at some 30 µs for 30 KB.
LOOK_OVER_FROM = 4096
LOOK_OVER_AT_MOST = 256


def looked_over(value: Any, at_most: int = LOOK_OVER_AT_MOST) -> tuple[bool, int] | None:
    """(whether orjson may have rounded an integer past 64 bits in reading `value`, how deep its containers nest,
    `value` itself one level), or None when it holds more than `at_most` values to look at. Iterative: no value can
    exhaust the stack."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        if type(item) is float:
            if item.is_integer() and abs(item) >= _ROUNDED_FROM:
                return True, deepest
            continue
        deepest = max(deepest, depth)
        children = item.values() if type(item) is dict else item
        seen += len(children)
        if seen > at_most:
            return None
        for child in children:
            kind = type(child)
            if kind is dict or kind is list or kind is float:
                stack.append((child, depth + 1))
    return False, deepest


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether JSON `value` holds containers nested `limit` deep or deeper (the value itself is one level). Iterative:
    no message can exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth >= limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class NonFinite(ValueError):
    """A number JSON has no place for: `NaN`, `Infinity`, `-Infinity`, or one too large for a double (`1e400`)."""


def _no_constant(name: str) -> Any:
    raise NonFinite(name)


def _finite(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # an infinity (float() reads no NaN from a JSON number)
        raise NonFinite(text)
    return value


def _python_loads(data: bytes, finite: bool) -> Any:
    if finite:
        return json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    return json.loads(data)


def loads_exact(data: bytes, *, finite: bool = False) -> Any:
    """`data`'s JSON with every digit kept: orjson reads it, unless it may hold an integer orjson would round or holds
    what orjson refuses (NaN, a lone surrogate's escape); then Python's parser. Raises ValueError (or RecursionError)
    for what neither reads. `finite`: NaN and the infinities, which only Python's parser takes (orjson refuses them),
    raise NonFinite instead of being read: written again, each would be a null or no JSON."""
    if len(data) >= LOOK_OVER_FROM:
        try:
            value = _loads(data)
        except ValueError:
            return _python_loads(data, finite)
        if type(value) is dict or type(value) is list:
            seen = looked_over(value)
            if seen is not None:
                return _python_loads(data, finite) if seen[0] else value
        return _python_loads(data, finite) if may_hold_wide_int(data) else value
    if not may_hold_wide_int(data):
        try:
            return _loads(data)
        except ValueError:  # orjson's JSONDecodeError
            pass
    return _python_loads(data, finite)


def rotated_path(path: Path, n: int) -> Path:
    return path.with_name(f"{path.name}.{n}")


def log_files(path: Path) -> list[Path]:
    """The live file and its rotations that exist, newest first."""
    pattern = re.compile(re.escape(path.name) + r"\.(\d+)")
    rotated: list[tuple[int, Path]] = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.scandir(path.parent):
            match = pattern.fullmatch(entry.name)
            if match:
                rotated.append((int(match.group(1)), Path(entry.path)))
    files = [path] if path.exists() else []
    return files + [p for _, p in sorted(rotated)]


class UnreadableLog(Exception):
    """A file of the activity log that is there but cannot be read as one (a directory, a FIFO, no permission)."""


def open_log(path: Path) -> int:
    """A descriptor of one of the log's files, for reading. FileNotFoundError when it is not there (rotated away, or
    no activity yet); UnreadableLog when it is not a regular file this user may read. Opened without blocking: a
    FIFO in the log's place would otherwise hold the reader until something writes to it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadableLog(f"cannot read the activity log {path}: {exc.strerror or exc}") from exc
    mode = os.fstat(fd).st_mode
    if not stat_kind.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat_kind.S_ISDIR(mode) else "not a regular file"
        raise UnreadableLog(f"cannot read the activity log {path}: it is {kind}, not a file of records")
    return fd


def forgery_risk(path: Path) -> str | None:
    """Why the records at `path` may not be mcphost's, or None. mcphost writes no record in a directory another
    user owns or may write (`ActivityLog`), nor into another user's file: whatever such a place holds, someone else
    may have written, records that say a call was denied or never made among them."""
    for place, what in ((path.parent, f"its directory {path.parent}"), (path, "the file")):
        try:
            info = place.stat()
        except OSError:
            continue
        problem = writable_by_others(info, group=False)
        if problem is not None:
            return (
                f"the activity log {path} may hold records another user wrote: {what}: {problem} "
                f"(mcphost writes none there; {data_dir_fix(place, problem)})"
            )
    return None


def read_failure(exc: UnreadableLog | OSError) -> str:
    """What a reader says when the log cannot be read, whichever way it failed: at the open, or mid-read."""
    if isinstance(exc, UnreadableLog):
        return str(exc)
    where = f" ({exc.filename})" if exc.filename else ""
    return f"reading the activity log failed: {exc.strerror or exc}{where}"


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


# Lines read that hold no record (damage, a hand edit, a line of another program's): skipped by every reader, never
# fatal, and counted, so that whoever read the log can say how many it left out (`not_records`). Per thread: the
# daemon reads for several REST API requests at once, each in a worker thread of its own.
_counts = threading.local()


def not_records() -> int:
    """How many lines this thread has read so far that held no record."""
    return getattr(_counts, "n", 0)


def count_not_records(n: int) -> None:
    """Lines that another process (a scan's helper) read for this thread and found holding no record."""
    _counts.n = getattr(_counts, "n", 0) + n


def _skipped(line: bytes) -> None:
    if line.strip(b"\x00 \t\r\n"):
        count_not_records(1)


def parse_line(line: bytes) -> Record | None:
    """The record on one line, or None when the line holds no JSON object."""
    return parse_entry(line)[0]


def parse_entry(line: bytes) -> tuple[Record | None, bytes | None]:
    """The record on one line, and the line itself when it is strict JSON that can be passed on as is (`-o json`
    streams those lines instead of encoding each record again)."""
    if not may_hold_wide_int(line):
        try:
            value = _loads(line)
        except ValueError:  # orjson's JSONDecodeError: strict JSON only; the standard parser takes a second look
            pass
        else:
            if isinstance(value, dict):
                return value, line
            _skipped(line)
            return None, None
    value, exact = _lenient(line)
    if not isinstance(value, dict):
        _skipped(line)
        return None, None
    # An integer kept as its digits would be written again as text: the line, strict JSON as it is, says it right.
    return value, line if exact else None


# What a listing reads of a record: the filters (query.RecordFilter), the pairing of starts and outcomes (Outcomes),
# and a table's row (display.row); a field with its own fields is read only in those. A scan of a whole log decodes
# only these (`listed_parser`): an agent's arguments and an upstream's answer, most of a line, are checked as JSON but
# never built.
LISTED: dict[str, Any] = {
    "id": None,
    "timestamp": None,
    "type": None,
    "server": None,
    "tool": None,
    "status": None,
    "duration_ms": None,
    "metadata": {"intent": {"operation_type": None}, "tool_variant": None},
    "decision": {"by": None, "outcome": None, "wait_ms": None},
    "error": {"code": None, "message": None},
    "started_id": None,
    "outcome": None,
    "details": None,
}


def listed_parser() -> Callable[[bytes], tuple[Record | None, bytes | None]]:
    """`parse_entry` for a listing: the record with only the `LISTED` fields it has. msgspec reads what it takes as
    the standard parser does (integers of any size, the last of a repeated key); anything it refuses (a line that is
    not strict JSON, nor an object, one whose `metadata`, `decision` or `error` is not an object, one nested too
    deep) is read by `parse_entry`, in full."""
    from typing import TypedDict

    import msgspec  # only a scan of a whole log pays for the import

    def typed(name: str, fields: dict[str, Any]) -> Any:
        kinds = {key: Any if inner is None else typed(f"{name}_{key}", inner) | None for key, inner in fields.items()}
        return TypedDict(name, kinds, total=False)  # type: ignore[operator]

    decode: Callable[[bytes], Record] = msgspec.json.Decoder(typed("listed", LISTED)).decode

    def parse(line: bytes) -> tuple[Record | None, bytes | None]:
        try:
            record = decode(line)
        except (ValueError, RecursionError):  # msgspec's DecodeError and ValidationError are ValueErrors
            return parse_entry(line)
        if not line.isascii():
            # msgspec does not look inside the strings it skips: a line that is not UTF-8 would be listed here,
            # and passed on as it is, yet read otherwise by every other reader (`_lenient`).
            try:
                line.decode()
            except UnicodeDecodeError:
                return parse_entry(line)
        return record, line

    return parse


def _lenient(line: bytes) -> tuple[Any, bool]:
    """The value on `line`, and whether the line is to be passed on as it is (strict JSON holding an integer kept as
    its digits, which the value would write as text). NaN and Infinity are not JSON; a
    hand-edited line with them is read with nulls instead. The standard parser also takes what orjson refuses:
    integers past 64 bits, lone surrogates in escapes; an integer past Python's 4300 digits is kept as its digits
    (msgspec, which a listing reads with, takes it: a record that one reader lists, every reader lists)."""
    replaced: list[str] = []
    kept: list[str] = []

    def constant(name: str) -> None:
        replaced.append(name)

    def any_size(digits: str) -> int | str:
        number = _int_any_size(digits)
        if isinstance(number, str):
            kept.append(number)
        return number

    try:
        value = json.loads(line, parse_constant=constant, parse_int=any_size)
        return value, bool(kept) and not replaced
    except UnicodeDecodeError:
        pass
    except RecursionError:  # absurd nesting
        return None, False
    except ValueError:  # JSONDecodeError: read again below, as damage may have left it
        pass
    # What damage leaves of a whole record is still shown rather than left out of every listing of what happened:
    # bytes that are not UTF-8 (U+FFFD in their place), a raw control character inside a string (a hand edit), NULs
    # around it (a file system's unwritten blocks after a crash).
    text = line.decode("utf-8", "replace").strip("\x00 \t\r\n")
    try:
        value = json.loads(text, parse_constant=_null, parse_int=_int_any_size, strict=False)
    except (ValueError, RecursionError):
        return None, False
    return value, False


def _int_any_size(digits: str) -> int | str:
    try:
        return int(digits)
    except ValueError:  # past sys.get_int_max_str_digits(): reading it takes time that grows with its square
        return digits


def _null(_name: str) -> None:
    return None


def lines_newest_first(fd: int, end: int, needle: bytes | None, floor: int = 0) -> Iterator[bytes]:
    """Complete lines of the file before offset `end` (and from offset `floor`, a line's start), last first; with a
    needle, only the lines that contain it.

    Blocks are read from the end; the partial line at a block's start is read again with the block before it
    (never copied onto it). With a needle the block is searched for it and only the lines around its hits are cut
    out: most lines of a big log are never even looked at one by one.
    """
    # Bytes after the last newline are a line still being written, or one torn by a crash.
    position = _last_newline(fd, end)
    size = BLOCK
    while position > floor:
        start = max(floor, position - size)
        block = os.pread(fd, position - start, start)
        first = 0
        if start > floor:
            # The block ends with a line's newline; the last line starts after a newline before that one.
            cut = block.find(b"\n", 0, len(block) - 1)
            if cut < 0:
                size *= 2  # one line longer than the block: read more of it at once
                continue
            first = cut + 1
        size = BLOCK
        position = start + first
        if needle is None:
            lines = block[first:].split(b"\n") if first else block.split(b"\n")
            for line in reversed(lines):
                if line:
                    yield line
            continue
        found = _lines_with(block, first, needle)
        if found:
            yield from reversed(found)


def _lines_with(block: bytes, first: int, needle: bytes) -> list[bytes]:
    """The lines of `block` from offset `first` (a line start) that contain `needle`, in file order."""
    found: list[bytes] = []
    find, rfind = block.find, block.rfind
    start = first
    while True:
        hit = find(needle, start)
        if hit < 0:
            return found
        line_start = rfind(b"\n", start, hit) + 1 or start
        line_end = find(b"\n", hit + len(needle))
        if line_end < 0:
            line_end = len(block)
        found.append(block[line_start:line_end])
        start = line_end + 1


def records_newest_first(path: Path, needle: bytes | None = None) -> Iterator[Record]:
    """Every record, newest first: the live file from its end, then activity.jsonl.1, .2, ...

    `needle`: bytes every wanted record's line contains; lines without it are not even parsed.
    """
    for record, _line in entries_newest_first(path, needle):
        yield record


def entries_newest_first(path: Path, needle: bytes | None = None) -> Iterator[tuple[Record, bytes | None]]:
    """`records_newest_first`, each with its line when that line can be passed on as it is (see `parse_entry`)."""
    return _files_newest_first(log_files(path), needle)


def _files_newest_first(
    files: list[Path], needle: bytes | None, skip: tuple[int, int] | None = None
) -> Iterator[tuple[Record, bytes | None]]:
    for file in files:
        try:
            fd = open_log(file)
        except FileNotFoundError:
            continue  # rotated away between listing and opening
        try:
            stat = os.fstat(fd)
            if (stat.st_dev, stat.st_ino) == skip:
                continue
            for line in lines_newest_first(fd, stat.st_size, needle):
                record, raw = parse_entry(line)
                if record is not None:
                    yield record, raw
        finally:
            os.close(fd)


class Outcomes:
    """Newest first, a call's outcome is read before its start (`tool_call_started`): a start already answered is
    left out, and one that no outcome names is marked `"outcome": "unknown"` (in flight, or its host died)."""

    def __init__(self) -> None:
        self._answered: set[str] = set()

    @property
    def answered(self) -> set[str]:
        """The ids of the starts that the outcomes read so far name."""
        return self._answered

    def settle(self, record: Record) -> Record | None:
        started = record.get("started_id")
        if isinstance(started, str):
            self._answered.add(started)
        elif record.get("type") == "tool_call_started":
            started_id = record.get("id")
            if isinstance(started_id, str) and started_id in self._answered:  # a hand-made line's id may be a list
                return None
            return {**record, "outcome": "unknown"}
        return record


@dataclass(slots=True)
class Position:
    """Where a reader stopped in the live file: the next byte of the file with this identity."""

    dev: int
    ino: int
    offset: int
    # The bytes just before `offset`, as the reader saw them: a follower checks they are still there.
    anchor: bytes = b""


def tail(
    path: Path,
    n: int,
    keep: Callable[[Record], bool],
    needle: bytes | None = None,
    past: Callable[[Record], bool] | None = None,
) -> tuple[list[Record], Position | None]:
    """The last `n` records that `keep` accepts, oldest first, and the position a follower resumes from.

    `past`: true for a record beyond which (going back in time) nothing can match, e.g. older than `--since`.
    """
    position: Position | None = None
    try:
        fd: int | None = open_log(path)
    except FileNotFoundError:
        fd = None
    found: list[Record] = []
    outcomes = Outcomes()
    if fd is not None:
        try:
            stat = os.fstat(fd)
            end = stat.st_size
            # A follower starts after the last complete line: a partial one is finished by its writer later.
            last_newline = _last_newline(fd, end)
            anchor_at = max(0, last_newline - ANCHOR)
            anchor = os.pread(fd, last_newline - anchor_at, anchor_at)
            position = Position(stat.st_dev, stat.st_ino, last_newline, anchor)
            if n > 0:
                for line in lines_newest_first(fd, last_newline, needle):
                    record = parse_line(line)
                    if record is None:
                        continue
                    if past is not None and past(record):
                        return _done(found, position)
                    record = outcomes.settle(record)
                    if record is not None and keep(record):
                        found.append(record)
                        if len(found) >= n:
                            break
        finally:
            os.close(fd)
    if len(found) < n:
        # The file read as the live one above may have been rotated meanwhile: skip it under its new name.
        skip = (position.dev, position.ino) if position is not None else None
        for record, _line in _files_newest_first([f for f in log_files(path) if f != path], needle, skip):
            if past is not None and past(record):
                break
            settled = outcomes.settle(record)
            if settled is not None and keep(settled):
                found.append(settled)
                if len(found) >= n:
                    break
    return _done(found, position)


def _done(found: list[Record], position: Position | None) -> tuple[list[Record], Position | None]:
    found.reverse()
    return found, position


def _last_newline(fd: int, end: int) -> int:
    """Offset just past the file's last newline before `end` (0 when there is none)."""
    position = end
    while position > 0:
        start = max(0, position - 65536)
        cut = os.pread(fd, position - start, start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        position = start
    return 0


class Follower:
    """Yields each record appended after a position exactly once, across rotations of the live file.

    Rotation renames the live file to `.1` and starts a new one; when the path names another file, the follower
    finishes the one it has open, then reads the files rotated after it (a fast writer may have rotated more
    than once between two polls), then the new live file from its start.

    A file is only appended to, but for two cuts: its writer takes back the part of a record a full disk left
    (the follower may hold that part as a line being written), and a person may empty it (`: > activity.jsonl`).
    The last bytes read are checked at each poll; `on_cut(path)` hears of the second, and the file is followed
    from its start again.
    """

    def __init__(self, path: Path, position: Position | None, on_cut: Callable[[Path], None] | None = None) -> None:
        self.path = path
        self._on_cut = on_cut
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""
        # The last bytes of the complete lines read, which end at `_offset - len(_partial)`.
        self._anchor = b""
        # Files that hold no record still to read: every file there before we started, the ones older than the
        # file a position names, and each one finished.
        self._old: set[tuple[int, int]] = set()
        if position is not None:
            self._attach(position)
        else:
            self._old = {ident for ident in map(_identity, log_files(path)) if ident is not None}

    def _attach(self, position: Position) -> None:
        # Usually the live file; when it rotated between the tail and now, one of the rotated ones.
        files = log_files(self.path)
        for at, file in enumerate(files):
            try:
                fd = open_log(file)
            except FileNotFoundError:
                continue
            stat = os.fstat(fd)
            if (stat.st_dev, stat.st_ino) == (position.dev, position.ino):
                self._fd, self._ident, self._offset = fd, (stat.st_dev, stat.st_ino), position.offset
                self._anchor = position.anchor
                self._old = {ident for ident in map(_identity, files[at + 1 :]) if ident is not None}
                return
            os.close(fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def poll(self) -> list[Record]:
        """What was appended since the last poll, oldest first; never blocks."""
        out: list[Record] = []
        for _ in range(1000):  # bounded: each pass either finishes a rotated file or stops
            if self._fd is None and not self._open_live():
                return out
            out.extend(self._read_new())
            successor = self._successor()
            if successor is None:
                return out
            # The path names a newer file: ours is finished (writers never write to a rotated file).
            out.extend(self._read_new())
            assert self._fd is not None and self._ident is not None
            os.close(self._fd)
            self._old.add(self._ident)
            self._switch(successor[0], successor[1])
        return out

    def _switch(self, fd: int, ident: tuple[int, int]) -> None:
        # A line torn by a crash in the file left will never be finished.
        self._fd, self._ident, self._offset, self._partial, self._anchor = fd, ident, 0, b"", b""

    def _open_live(self) -> bool:
        """No file yet: take the oldest one that appeared since we started (a fast writer may have rotated)."""
        for file in reversed(log_files(self.path)):
            try:
                fd = open_log(file)
            except FileNotFoundError:
                continue
            stat = os.fstat(fd)
            if (stat.st_dev, stat.st_ino) in self._old:
                os.close(fd)
                continue
            self._switch(fd, (stat.st_dev, stat.st_ino))
            return True
        return False

    def _read_new(self) -> list[Record]:
        assert self._fd is not None
        self._check_appended_only()
        held = self._anchor + self._partial
        held_at = self._offset - len(held)
        out = self._read_on()
        if held and not self._still_there(held, held_at):
            # Cut between the check and the read (emptied and written again meanwhile): what was read from the old
            # offset is the tail of other records. Read the file from its start instead.
            self._offset, self._partial, self._anchor = 0, b"", b""
            if self._on_cut is not None:
                self._on_cut(self.path)
            out = self._read_on()
        return out

    def _read_on(self) -> list[Record]:
        """The records from the offset to the end of the file, the line held completed."""
        assert self._fd is not None
        out: list[Record] = []
        while True:
            chunk = os.pread(self._fd, BLOCK, self._offset)
            if not chunk:
                return out
            self._offset += len(chunk)
            data = self._partial + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                self._partial = data
                continue
            self._partial = data[cut + 1 :]
            done = data[max(0, cut + 1 - ANCHOR) : cut + 1]
            self._anchor = done if len(done) == ANCHOR else (self._anchor + done)[-ANCHOR:]
            for line in data[:cut].split(b"\n"):
                record = parse_line(line) if line else None
                if record is not None:
                    out.append(record)

    def _check_appended_only(self) -> None:
        """Whether the bytes read last are still there; if not, where to read from."""
        assert self._fd is not None
        line_start = self._offset - len(self._partial)
        anchor_at = line_start - len(self._anchor)
        size = os.fstat(self._fd).st_size
        if size >= self._offset and self._still_there(self._anchor + self._partial, anchor_at):
            return
        if size >= line_start and os.pread(self._fd, len(self._anchor), anchor_at) == self._anchor:
            # The writer took back a record the disk had no room for, whose start we read: the line held will never
            # be finished, and what is there now from its start (a record written since) is read in full.
            self._offset, self._partial = line_start, b""
            return
        self._offset, self._partial, self._anchor = 0, b"", b""
        if self._on_cut is not None:
            self._on_cut(self.path)

    def _still_there(self, held: bytes, at: int) -> bool:
        assert self._fd is not None
        if len(held) <= 2 * HELD_SAMPLE:
            return os.pread(self._fd, len(held), at) == held
        # A long line held (being written, or torn for good by a crash): its two ends, the start with the record's
        # id, tell it from another, without reading it all again at every poll.
        end = at + len(held)
        return (
            os.pread(self._fd, HELD_SAMPLE, at) == held[:HELD_SAMPLE]
            and os.pread(self._fd, HELD_SAMPLE, end - HELD_SAMPLE) == held[-HELD_SAMPLE:]
        )

    def _successor(self) -> tuple[int, tuple[int, int]] | None:
        """The file written after ours, opened, when ours is no longer the live one; else None."""
        try:
            live = self.path.stat()
        except FileNotFoundError:
            return None  # between a rotation's rename and the new file: look again next poll
        if (live.st_dev, live.st_ino) == self._ident:
            return None
        # Ours is now activity.jsonl.N; the one written after it is .N-1, or the live file when N is 1.
        for _ in range(10):
            n = self._rotated_index()
            if n is None:
                assert self._fd is not None
                if os.fstat(self._fd).st_nlink:
                    # Not listed, yet it has a name: a listing taken mid-rename can miss an entry. Look again.
                    continue
                # Ours was deleted (by retention, or by hand): go on with the oldest file that holds records still
                # to read. Not simply the oldest file: one deleted by hand may leave older files behind.
                for file in reversed(log_files(self.path)):
                    if (opened := self._open_checked(file)) is not None:
                        if opened[1] not in self._old:
                            return opened
                        os.close(opened[0])
                return None
            following = self._open_checked(rotated_path(self.path, n - 1) if n > 1 else self.path)
            if self._rotated_index() == n:  # no rotation in between: `following` really comes after ours
                return following
            if following is not None:
                os.close(following[0])
        return None

    def _rotated_index(self) -> int | None:
        # Not a walk from .1 that stops at the first gap: mid-rotation, .1 is briefly missing.
        for file in log_files(self.path):
            if file == self.path:
                continue
            try:
                stat = file.stat()
            except FileNotFoundError:
                continue
            if (stat.st_dev, stat.st_ino) == self._ident:
                return int(file.name.rsplit(".", 1)[1])
        return None

    @staticmethod
    def _open_checked(path: Path) -> tuple[int, tuple[int, int]] | None:
        try:
            fd = open_log(path)
        except FileNotFoundError:
            return None
        stat = os.fstat(fd)
        return fd, (stat.st_dev, stat.st_ino)
