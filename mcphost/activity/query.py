"""Which records a reader wants: filters, their validation, pages with a cursor, summaries. Pure over dicts.

The CLI (`log tail`, `activity list|summary`) and the REST endpoint parse their parameters with the same
`parse_filter`, so a bad value gets the same message, listing the valid ones, wherever it was typed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeGuard

from mcphost.activity.ids import id_time_ms
from mcphost.activity.reader import Outcomes, Record, entries_newest_first

INTENT_TYPES = ("read", "write", "destructive")
STATUSES = ("success", "error", "rejected", "denied", "expired", "cancelled", "started", "allowed", "asked")
RECORD_TYPES = (
    "tool_call",
    "tool_call_started",
    "config_reload",
    "config_error",
    "upstream_connected",
    "upstream_lost",
    "annotations_changed",
    "hook_decision",
)
VARIANT_INTENTS = {
    "call_tool_read": "read",
    "call_tool_write": "write",
    "call_tool_destructive": "destructive",
}
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
# Records are appended in time order, except that writers in several processes can interleave by a few
# milliseconds; a newest-first scan for `since` stops only once it is this far past the bound.
ORDER_SLACK = timedelta(seconds=60)


class FilterError(ValueError):
    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter
        self.message = message


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """isinstance(value, Mapping), quick for what records are made of (dicts): checking an ABC is slow."""
    return type(value) is dict or isinstance(value, Mapping)


def intent_type(record: Mapping[str, Any]) -> str | None:
    """The record's intent: what the agent declared, else what its tool variant implies (a call rejected
    before its intent parsed still counts as the kind of call it was made through)."""
    metadata = record.get("metadata")
    if not is_mapping(metadata):
        return None
    intent = metadata.get("intent")
    if is_mapping(intent):
        declared = intent.get("operation_type")
        if declared in INTENT_TYPES:
            return str(declared)
    variant = metadata.get("tool_variant")
    return VARIANT_INTENTS.get(variant) if isinstance(variant, str) else None


def parse_time(value: str, now: datetime | None = None) -> datetime:
    """RFC 3339 (`2026-11-21T10:00:00Z`, a date alone) or an age: `90s`, `15m`, `2h`, `7d`."""
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", text)
    if match:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[match.group(2)]
        try:
            return (now or datetime.now(UTC)) - timedelta(**{unit: float(match.group(1))})
        except OverflowError:
            raise _out_of_range(value) from None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise FilterError(
            "since",
            f"{value!r} is neither a time (2026-11-21T10:00:00Z, 2026-11-21) nor an age (30s, 15m, 2h, 7d)",
        ) from None
    try:
        if parsed.tzinfo is None:
            parsed = parsed.astimezone()  # a time without zone is the person's local time
        return parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        raise _out_of_range(value) from None


def _out_of_range(value: str) -> FilterError:
    # An age reaching back before year 1, or a time that leaves the calendar when moved to UTC.
    return FilterError(
        "since",
        f"{value!r} is out of range; use a time between the years 1 and 9999 (2026-11-21T10:00:00Z) "
        "or a shorter age (30s, 15m, 2h, 7d)",
    )


def record_time(record: Mapping[str, Any]) -> datetime | None:
    global _last_time
    stamp = record.get("timestamp")
    if not isinstance(stamp, str):
        return None
    last = _last_time  # one tuple, read once: whole whatever another thread sets meanwhile
    if last[0] == stamp:
        return last[1]
    try:
        parsed: datetime | None = datetime.fromisoformat(stamp)
    except ValueError:
        parsed = None
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    _last_time = (stamp, parsed)
    return parsed


# The last time `record_time` read: a reading bounded by `since` asks it of each record twice in a row (whether the
# reading is past the bound, whether the record is within it).
_last_time: tuple[str | None, datetime | None] = (None, None)


@dataclass(frozen=True, slots=True)
class RecordFilter:
    intent_type: str | None = None
    status: str | None = None
    server: str | None = None
    tool: str | None = None
    type: str | None = None
    since: datetime | None = None

    def matches(self, record: Mapping[str, Any]) -> bool:
        if self.intent_type is not None and intent_type(record) != self.intent_type:
            return False
        if self.status is not None and record.get("status") != self.status:
            return False
        if self.server is not None and record.get("server") != self.server:
            return False
        if self.tool is not None and record.get("tool") != self.tool:
            return False
        if self.type is not None and record.get("type", "tool_call") != self.type:
            return False
        if self.since is not None:
            when = record_time(record)
            if when is None or when < self.since:
                return False
        return True

    def needle(self) -> bytes | None:
        """Bytes that the line of every matching record contains, to skip the others without parsing them.

        Rare values first (a tool or server name), quoted as JSON writes them so that "read" does not also
        pick "readOnlyHint" or "thread". The intent is matched by its end: `destructive"` is in both
        `"operation_type":"destructive"` and `"tool_variant":"call_tool_destructive"`.
        """
        if self.status == "started" or self.type == "tool_call_started":
            # A start is shown only while no outcome names it, and outcomes lack these bytes: read every line.
            return None
        for value in (self.tool, self.server):
            if value is not None and _plain(value):
                return b'"' + value.encode("ascii") + b'"'
        if self.intent_type is not None:
            return self.intent_type.encode("ascii") + b'"'
        for value in (self.status, self.type):
            if value is not None:
                return b'"' + value.encode("ascii") + b'"'
        return None

    def is_past(self, record: Mapping[str, Any]) -> bool:
        """Newest-first scans stop here: every record from now on is older than `since`."""
        if self.since is None:
            return False
        when = record_time(record)
        # A difference, not `self.since - ORDER_SLACK`: that overflows for a `since` in the first minute of year 1.
        return when is not None and self.since - when > ORDER_SLACK


def _plain(value: str) -> bool:
    """True when JSON writes the string as is (so its bytes can be searched for)."""
    return value.isascii() and value.isprintable() and '"' not in value and "\\" not in value


def _choice(parameter: str, value: str | None, valid: Iterable[str]) -> str | None:
    if value is None or value == "":
        return None
    options = tuple(valid)
    if value not in options:
        raise FilterError(parameter, f"{value!r} is not valid; use one of: {', '.join(options)}")
    return value


FILTER_PARAMETERS = ("intent_type", "status", "server", "tool", "type", "since")


def parse_filter(params: Mapping[str, str | None], now: datetime | None = None) -> RecordFilter:
    since = params.get("since")
    return RecordFilter(
        intent_type=_choice("intent_type", params.get("intent_type"), INTENT_TYPES),
        status=_choice("status", params.get("status"), STATUSES),
        server=params.get("server") or None,
        tool=params.get("tool") or None,
        type=_choice("type", params.get("type"), RECORD_TYPES),
        since=parse_time(since, now) if since else None,
    )


def parse_limit(value: str | int | None, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, str) and not re.fullmatch(r"[0-9]+", value):
        raise FilterError("limit", f"{value!r} is not a whole number; use 1 to {maximum}")
    limit = int(value)
    if not 1 <= limit <= maximum:
        raise FilterError("limit", f"{limit} is out of range; use 1 to {maximum}")
    return limit


def matching_newest_first(path: Path, flt: RecordFilter) -> Iterator[Record]:
    for record, _line in matching_entries_newest_first(path, flt):
        yield record


def matching_entries_newest_first(path: Path, flt: RecordFilter) -> Iterator[tuple[Record, bytes | None]]:
    """`matching_newest_first`, each record with its line when the line is the record exactly, as JSON (a start
    marked `"outcome": "unknown"` here is not)."""
    for record, line, _open in Matcher(flt).matching(entries_newest_first(path, flt.needle())):
        yield record, line


class Matcher:
    """What a newest-first reading keeps of what it reads: the records `flt` matches, each start settled by the
    outcomes read before it, up to the first record past `since` (then `past` is set and the reading stops).

    `full`, for entries that hold only some of a record's fields (reader.listed_parser): the whole record of a
    line, for a start shown with its outcome unknown (which is shown as a record, not as its line)."""

    def __init__(self, flt: RecordFilter, full: Callable[[bytes], Record | None] | None = None) -> None:
        self.flt = flt
        self.outcomes = Outcomes()
        self.past = False
        self.full = full

    def matching(self, entries: Iterable[tuple[Record, bytes | None]]) -> Iterator[tuple[Record, bytes | None, bool]]:
        """(record, its line when it is the record exactly, whether it is a start no outcome read so far names)."""
        settle, matches, is_past = self.outcomes.settle, self.flt.matches, self.flt.is_past
        bounded = self.flt.since is not None
        for found, line in entries:
            if bounded and is_past(found):
                self.past = True
                return
            record = settle(found)
            if record is not None and matches(record):
                if record is found:
                    yield record, line, False
                    continue
                whole = self.full(line) if self.full is not None and line is not None else None
                yield (record if whole is None else {**whole, "outcome": record["outcome"]}), None, True


@dataclass(frozen=True, slots=True)
class Page:
    records: list[Record]  # newest first
    next_cursor: str | None  # pass back as `cursor` for the next, older page


def select(path: Path, flt: RecordFilter, limit: int | None, cursor: str | None = None) -> Page:
    """The newest `limit` matching records (all of them when None), older than the record named by `cursor`.

    The cursor is the id of the last record of the previous page, found again by identity: ids sort by time,
    but two processes writing in the same millisecond can put them a hair out of file order.
    """
    records: list[Record] = []
    seen_cursor = cursor is None
    cursor_time = id_time_ms(cursor) if cursor else None
    for record in matching_newest_first(path, flt):
        if not seen_cursor:
            if record.get("id") == cursor:
                seen_cursor = True
                continue
            # The cursor's record is gone (rotated away): go on from where it would have been.
            record_id = record.get("id")
            if not (
                isinstance(record_id, str)
                and cursor_time is not None
                and (id_time_ms(record_id) or 0) < cursor_time - ORDER_SLACK.total_seconds() * 1000
            ):
                continue
            seen_cursor = True
        records.append(record)
        if limit is not None and len(records) > limit:
            break
    more = limit is not None and len(records) > limit
    records = records[:limit] if limit is not None else records
    last_id = records[-1].get("id") if records else None
    return Page(records, str(last_id) if more and last_id is not None else None)


def parse_cursor(cursor: str | None) -> str | None:
    if cursor is None or cursor == "":
        return None
    if id_time_ms(cursor) is None:
        raise FilterError("cursor", "not a cursor this endpoint returned (expected a record id)")
    return cursor.upper()  # ULIDs are case-insensitive; ours are written upper case


@dataclass(frozen=True, slots=True)
class Summary:
    total: int
    by_intent: dict[str, int]
    by_status: dict[str, int]
    by_server: dict[str, int]
    by_type: dict[str, int]
    first: str | None
    last: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# What a summary counts of a record: its type, intent and status (of a call), server, and time.
Facts = tuple[str, str | None, str | None, str | None, str | None]


def facts(record: Mapping[str, Any]) -> Facts:
    """What `summarize` counts of a record, in a few strings (cheap to hand from one process to another)."""
    kind = str(record.get("type", "tool_call"))
    intent = status = None
    if kind in ("tool_call", "hook_decision"):
        intent = intent_type(record) or "unknown"
        status = str(record.get("status") or "unknown")
    server = record.get("server")
    stamp = record.get("timestamp")
    return kind, intent, status, str(server) if server else None, stamp if isinstance(stamp, str) else None


# What a summary keeps of some records, to be joined with what it keeps of others (each part of a big log is counted
# where it is read: mcphost.cli.scan): how many, how many of each (type, intent, status, server), first and last time.
Tally = tuple[int, dict[tuple[str, str | None, str | None, str | None], int], str | None, str | None]


def tally(found: Iterable[Facts]) -> Tally:
    counts: Counter[tuple[str, str | None, str | None, str | None]] = Counter()
    total = 0
    first: str | None = None
    last: str | None = None
    for kind, intent, status, server, stamp in found:
        total += 1
        counts[kind, intent, status, server] += 1
        if stamp is not None:
            first = stamp if first is None or stamp < first else first
            last = stamp if last is None or stamp > last else last
    return total, dict(counts), first, last


def summarize(records: Iterable[Mapping[str, Any]]) -> Summary:
    return summary_of([tally(map(facts, records))])


def summary_of(tallies: Iterable[Tally]) -> Summary:
    """The summary of records counted in parts (`tally`). Equal counts are listed by name."""
    intents: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    servers: Counter[str] = Counter()
    types: Counter[str] = Counter()
    total = 0
    firsts: list[str] = []
    lasts: list[str] = []
    for part_total, counts, first, last in tallies:
        total += part_total
        for (kind, intent, status, server), n in counts.items():
            types[kind] += n
            if intent is not None:
                intents[intent] += n
            if status is not None:
                statuses[status] += n
            if server is not None:
                servers[server] += n
        firsts += [first] if first is not None else []
        lasts += [last] if last is not None else []

    def ranked(counter: Counter[str]) -> dict[str, int]:
        return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))

    return Summary(
        total,
        {k: intents[k] for k in (*INTENT_TYPES, "unknown") if intents[k]},
        ranked(statuses),
        ranked(servers),
        ranked(types),
        min(firsts, default=None),
        max(lasts, default=None),
    )
