"""How records look to a person: one line per record, a table, a detailed view. Pure over dicts.

Everything shown can hold an agent's text (a tool name it made up, its reason), so it passes through
`console.safe()`: control characters, which could move the cursor or recolour the terminal, are shown escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from mcphost.activity.query import intent_type, is_mapping, record_time
from mcphost.console import (
    ASCII_EVENT_ICON,
    ASCII_ICONS,
    EVENT_ICON,
    INTENT_ICONS,
    Column,
    Table,
    json_escaped,
    unseen_marks,
)
from mcphost.console import safe as _escape

CALL_TYPES = ("tool_call", "tool_call_started", "hook_decision")


def safe(value: Any, limit: int | None = None) -> str:
    """`console.safe`, with a shortcut for what most cells are: a string with nothing to escape. (A printable
    string holds none of the characters `safe` escapes: they are all of Unicode's control and format categories.)"""
    if type(value) is str and value.isprintable() and (limit is None or len(value) <= limit):
        return value
    return _escape(value, limit)


def is_call(record: Mapping[str, Any]) -> bool:
    return record.get("type", "tool_call") in CALL_TYPES


def icon(record: Mapping[str, Any], ascii_only: bool = False) -> str:
    return _icon(intent_type(record) if is_call(record) else None, ascii_only)


def _icon(kind: str | None, ascii_only: bool) -> str:
    if kind is None:
        return ASCII_EVENT_ICON if ascii_only else EVENT_ICON
    return (ASCII_ICONS if ascii_only else INTENT_ICONS)[kind]


def local_time(record: Mapping[str, Any]) -> str:
    stamp = record.get("timestamp")
    if type(stamp) is str and _UTC_STAMP.fullmatch(stamp):
        key = stamp[:13]
        hour = _local_hours[key] if key in _local_hours else _local_hours.setdefault(key, _local_hour(key))
        if hour is not None:
            return hour + stamp[13:19]
    when = record_time(record)
    if when is not None:
        try:
            return when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        except (OverflowError, ValueError):
            pass  # the first or last hours of the calendar, moved past its end by the local offset
    return safe(record.get("timestamp", "?"), 23)


# What the log's writers put in `timestamp` (UTC, milli- or microseconds). Such a time is shown in local time by
# its UTC hour, worked out once per hour: a long listing of records spread over a month does the same conversion
# a few hundred times instead of once per record.
_UTC_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:[0-5]\d:[0-5]\d(?:\.\d{3}|\.\d{6})?(?:Z|\+00:00)", re.ASCII)
_local_hours: dict[str, str | None] = {}


def _local_hour(hour: str) -> str | None:
    """`YYYY-MM-DD HH` in local time for the UTC hour `YYYY-MM-DDTHH`, when the local offset is whole hours and the
    same all through it (no change of daylight saving time inside it); else None, and each time is converted."""
    try:
        start = datetime.fromisoformat(hour + ":00:00+00:00").astimezone()
        end = (datetime.fromisoformat(hour + ":00:00+00:00") + timedelta(seconds=3599)).astimezone()
    except (ValueError, OverflowError):
        return None
    offset = start.utcoffset()
    if offset is None or offset != end.utcoffset() or offset.total_seconds() % 3600:
        return None
    return start.strftime("%Y-%m-%d %H")


def duration(record: Mapping[str, Any]) -> str:
    value = record.get("duration_ms")
    if type(value) is not float and not isinstance(value, int | float):
        return ""
    if value >= 1000:
        return f"{value / 1000:.1f}s"
    return f"{value:.0f}ms" if value >= 10 else f"{value:.1f}ms"


_DECIDERS = {
    "policy": "policy",
    "editor": "person",
    "remembered_grant": "remembered grant",
    "timeout": "timeout",
    "no_approver": "no approver",
}


def decision(record: Mapping[str, Any]) -> str:
    value = record.get("decision")
    if not is_mapping(value):
        return ""
    by = _DECIDERS.get(str(value.get("by"))) or safe(value.get("by"))
    outcome = safe(value.get("outcome", ""))
    text = f"{outcome} by {by}" if outcome else by
    wait = value.get("wait_ms")
    if isinstance(wait, int | float) and value.get("by") == "editor":
        text += f" after {wait / 1000:.1f}s"
    return text


def target(record: Mapping[str, Any]) -> str:
    server, tool = record.get("server"), record.get("tool")
    if server and tool:
        return f"{safe(server)}:{safe(tool)}"
    return safe(server or tool or "")


def status(record: Mapping[str, Any]) -> str:
    text = safe(record.get("status") or "")
    if record.get("outcome") == "unknown":
        # Marked by the readers: a write or destructive call was forwarded and no outcome was ever recorded.
        text = f"{text}, outcome unknown"
    error = record.get("error")
    if is_mapping(error) and error.get("code"):
        text = f"{text} {safe(error['code'])}".strip()
    return text


def event_summary(record: Mapping[str, Any], limit: int | None = 120) -> str:
    """What a host event says: a config reload's changes, a rejected config's first error, why an upstream was
    lost, how many tools one offered."""
    details = record.get("details")
    if not isinstance(details, Mapping):
        return ""
    for key in ("summary", "reason", "error"):
        if details.get(key):
            return safe(details[key], limit)
    errors = details.get("errors")
    if isinstance(errors, list) and errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return safe(_config_issue(errors[0]), limit and max(limit - len(more), 1)) + more
    if isinstance(details.get("tools"), int):
        return f"{details['tools']} tools"
    if record.get("type") == "annotations_changed":
        return "annotations changed: remembered approvals for it no longer apply"
    return ""


def _config_issue(issue: Any) -> str:
    """One error of a `config_error` record: the key and what is wrong first (what a narrow column keeps), then
    where."""
    if not isinstance(issue, Mapping):
        return str(issue)
    key = f"{issue['path']}: " if issue.get("path") else ""
    where = f" (line {issue['line']}, column {issue.get('column', 1)})" if isinstance(issue.get("line"), int) else ""
    return f"{key}{issue.get('message', '')}{where}"


def detail_cell(record: Mapping[str, Any]) -> str:
    """The DETAIL column: who decided a call (else why it failed), or what a host event says."""
    if not is_call(record):
        return event_summary(record, None)
    decided = decision(record)
    if decided:
        return decided
    error = record.get("error")
    return safe(error.get("message") or "") if is_mapping(error) else ""


def line(record: Mapping[str, Any], ascii_only: bool = False) -> str:
    """`2026-11-21 10:03:04 📝 todo:add_task  success  12ms  allow by policy`"""
    kind = str(record.get("type", "tool_call"))
    parts = [local_time(record), icon(record, ascii_only)]
    if is_call(record):
        parts += [target(record) or "?", status(record) or "?", duration(record), decision(record)]
    else:
        parts += [safe(kind), target(record), event_summary(record)]
    return "  ".join(p for p in parts if p)


# The listing of `log tail` and `activity list`. The time, the duration and the id are never cut (an id is
# for `activity show`); the rest give up room on a narrow terminal, and on one too narrow for them all the id,
# then the duration, are left out (`--wide` shows them).
TABLE_COLUMNS = (
    Column("TIME"),
    Column("INTENT", flex=True, floor=9),
    Column("TOOL", flex=True, limit=48, floor=16),
    Column("STATUS", flex=True, floor=10),
    Column("DURATION", optional=True),
    Column("DETAIL", flex=True, floor=16),
    Column("ID", optional=True),
)
TABLE_HEADERS = tuple(c.header for c in TABLE_COLUMNS)
# Room kept for the records `log tail -f` prints after the first ones: most fit without widening a column.
FOLLOW_WIDTHS = (19, 14, 24, 9, 8, 24, 26)


def listing(ascii_only: bool = False, width: int | None = None) -> Table:
    return Table(TABLE_COLUMNS, width=width, ascii_only=ascii_only)


def table(records: Sequence[Mapping[str, Any]], ascii_only: bool = False, width: int | None = None) -> str:
    return "\n".join(listing(ascii_only, width).lines([row(record, ascii_only) for record in records]))


def row(record: Mapping[str, Any], ascii_only: bool = False) -> tuple[str, ...]:
    """One record's cells in the table; a long listing keeps these instead of the records."""
    if type(record) is dict and record.get("type", "tool_call") == "tool_call":
        cells = _call_row(record, ascii_only)
        if cells is not None:
            return cells
    kind = intent_type(record) if is_call(record) else None
    if kind is not None:
        intent = f"{(ASCII_ICONS if ascii_only else INTENT_ICONS)[kind]} {kind}"
    else:
        intent = f"{ASCII_EVENT_ICON if ascii_only else EVENT_ICON} {safe(record.get('type'))}"
    return (
        local_time(record),
        intent,
        target(record),
        status(record),
        duration(record),
        detail_cell(record),
        safe(record.get("id", "")),
    )


def _call_row(record: dict[str, Any], ascii_only: bool) -> tuple[str, ...] | None:
    """`row` of a call record the way mcphost writes them, in one pass instead of a dozen helpers (a listing of a
    million records renders hundreds of thousands of rows); None for anything else, which the helpers render.
    Every value taken as it is is a printable string, which `safe` would give back unchanged."""
    get = record.get
    metadata, server, tool, state, decided, failed, record_id = (
        get("metadata"),
        get("server"),
        get("tool"),
        get("status"),
        get("decision"),
        get("error"),
        get("id", ""),
    )
    if not (
        type(metadata) is dict
        and type(server) is str
        and type(tool) is str
        and server
        and tool
        and type(state) is str
        and type(record_id) is str
        and "outcome" not in record
    ):
        return None
    intent = metadata.get("intent")
    kind = intent.get("operation_type") if type(intent) is dict else None
    if type(kind) is not str or kind not in INTENT_ICONS:
        return None  # not declared: the intent comes from the tool variant
    shown = server + tool + state + record_id
    if failed is not None:
        if type(failed) is not dict:
            return None
        code = failed.get("code")
        if code:
            if type(code) is not str:
                return None
            shown += code
            state = f"{state} {code}".strip()
    if type(decided) is dict:
        by, outcome, wait = decided.get("by"), decided.get("outcome", ""), decided.get("wait_ms")
        by_whom = _DECIDERS.get(by) if type(by) is str else None
        if by_whom is None or type(outcome) is not str:
            return None
        shown += outcome
        detail = f"{outcome} by {by_whom}" if outcome else by_whom
        if by == "editor" and wait is not None:
            if type(wait) is not float and type(wait) is not int:
                return None
            detail += f" after {wait / 1000:.1f}s"
    elif decided is None:
        detail = (failed.get("message") if failed is not None else None) or ""
        if type(detail) is not str:
            return None
        shown += detail
    else:
        return None
    if not shown.isprintable():
        return None
    return (
        local_time(record),
        f"{(ASCII_ICONS if ascii_only else INTENT_ICONS)[kind]} {kind}",
        f"{server}:{tool}",
        state,
        duration(record),
        detail,
        record_id,
    )


def detail(record: Mapping[str, Any], ascii_only: bool = False) -> str:
    """`activity show`: every field, with the intent section complete even when the agent left parts out."""
    out = [f"{icon(record, ascii_only)} {safe(record.get('type', 'tool_call'))} {safe(record.get('id', ''))}"]

    def field(label: str, value: Any) -> None:
        if value is not None and value != "" and value != [] and value != {}:
            out.append(f"  {label:<16}{value}")

    field("time", local_time(record))
    field("tool", target(record))
    field("status", status(record))
    field("duration", duration(record))
    metadata = record.get("metadata") if isinstance(record.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    if is_call(record):
        intent = metadata.get("intent") if isinstance(metadata.get("intent"), Mapping) else {}
        assert isinstance(intent, Mapping)
        out.append("  intent")
        out.append(f"    {'operation_type':<18}{safe(intent.get('operation_type') or '(not declared)')}")
        out.append(f"    {'data_sensitivity':<18}{safe(intent.get('data_sensitivity') or '(not declared)')}")
        out.append(f"    {'reason':<18}{safe(intent.get('reason') or '(none given)')}")
        out.append(f"    {'tool_variant':<18}{safe(metadata.get('tool_variant') or '?')}")
        if metadata.get("call_with"):
            out.append(f"    {'recommended':<18}{safe(metadata['call_with'])}")
        annotations = metadata.get("annotations")
        out.append(f"    {'annotations':<18}{safe(_compact(annotations)) if annotations else '(none: unannotated)'}")
    decided = record.get("decision")
    if isinstance(decided, Mapping):
        out.append("  decision")
        for key, value in decided.items():
            out.append(f"    {safe(key):<18}{safe(value)}")
    error = record.get("error")
    if isinstance(error, Mapping):
        out.append("  error")
        out.append(f"    {'code':<18}{safe(error.get('code'))}")
        out.append(f"    {'message':<18}{safe(error.get('message'))}")
    warnings = record.get("warnings")
    for warning in warnings if isinstance(warnings, list) else [warnings] if warnings is not None else []:
        field("warning", safe(warning))
    if record.get("arguments") is not None:
        field("arguments", safe(_compact(record["arguments"])))
    field("arguments (cut)", safe(record.get("arguments_preview")) if record.get("arguments_preview") else None)
    field("request", f"{record['request_bytes']} bytes" if isinstance(record.get("request_bytes"), int) else None)
    field("response", f"{record['response_bytes']} bytes" if isinstance(record.get("response_bytes"), int) else None)
    field("preview", safe(record.get("response_preview")) if record.get("response_preview") else None)
    field("session", safe(record.get("session_id")) if record.get("session_id") else None)
    field("client", safe(record.get("client")) if record.get("client") else None)
    if record.get("outcome") == "unknown":
        field("outcome", "unknown: no outcome was recorded (the call is still running, or its host stopped mid-call)")
    elif record.get("outcome"):
        field("outcome", f"recorded as {safe(record['outcome'])}")
    field("started as", safe(record.get("started_id")) if record.get("started_id") else None)
    if isinstance(record.get("forwarded"), bool):
        field("forwarded", "yes: it reached the upstream server" if record["forwarded"] else "no")
    if isinstance(record.get("details"), Mapping):
        field("details", safe(_compact(record["details"])))
    known = {
        "id", "timestamp", "type", "server", "tool", "status", "duration_ms", "metadata", "decision", "error",
        "warnings", "arguments", "arguments_preview", "request_bytes", "response_bytes", "response_preview",
        "session_id", "client", "details", "outcome", "started_id", "forwarded",
    }  # fmt: skip
    for key, value in record.items():
        if key not in known:  # written by another version: shown, not hidden
            field(safe(key), safe(_compact(value)))
    return "\n".join(out)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def to_yaml(value: Any) -> str:
    import yaml  # only `-o yaml` pays for the import

    try:
        text = str(yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False))
        if not unseen_marks(text):
            return text
        # PyYAML writes line separators and bidirectional controls as they are (printable, to it): each is escaped
        # when every non-ASCII character is.
        return str(yaml.safe_dump(value, sort_keys=False, allow_unicode=False, default_flow_style=False))
    except RecursionError:
        # Nesting too deep for PyYAML's emitter, which takes several frames a level (a hand-made line: the gateway
        # takes 64 levels at most). JSON is YAML too, and the C encoder takes one frame a level, as the parser that
        # read the record did.
        return json_escaped(json.dumps(value, ensure_ascii=False, default=str)) + "\n"
