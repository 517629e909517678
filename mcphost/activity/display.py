"""How records look to a person: one line per record, a table, a detailed view. Pure over dicts.

Everything shown can hold an agent's text (a tool name it made up, its reason), so it passes through
`console.safe()`: control characters, which could move the cursor or recolour the terminal, are shown escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mcphost.activity.query import intent_type, record_time
from mcphost.console import ASCII_EVENT_ICON, ASCII_ICONS, EVENT_ICON, INTENT_ICONS, columns, safe

CALL_TYPES = ("tool_call", "tool_call_started")


def is_call(record: Mapping[str, Any]) -> bool:
    return record.get("type", "tool_call") in CALL_TYPES


def icon(record: Mapping[str, Any], ascii_only: bool = False) -> str:
    kind = intent_type(record) if is_call(record) else None
    if kind is None:
        return ASCII_EVENT_ICON if ascii_only else EVENT_ICON
    return (ASCII_ICONS if ascii_only else INTENT_ICONS)[kind]


def local_time(record: Mapping[str, Any]) -> str:
    when = record_time(record)
    if when is None:
        return safe(record.get("timestamp", "?"), 23)
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def duration(record: Mapping[str, Any]) -> str:
    value = record.get("duration_ms")
    if not isinstance(value, int | float):
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
    if not isinstance(value, Mapping):
        return ""
    by = _DECIDERS.get(str(value.get("by")), safe(value.get("by")))
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
    if isinstance(error, Mapping) and error.get("code"):
        text = f"{text} {safe(error['code'])}".strip()
    return text


def event_summary(record: Mapping[str, Any]) -> str:
    details = record.get("details")
    if not isinstance(details, Mapping):
        return ""
    for key in ("summary", "reason", "error"):
        if details.get(key):
            return safe(details[key], 120)
    return ""


def line(record: Mapping[str, Any], ascii_only: bool = False) -> str:
    """`2026-11-21 10:03:04 📝 todo:add_task  success  12ms  allow by policy`"""
    kind = str(record.get("type", "tool_call"))
    parts = [local_time(record), icon(record, ascii_only)]
    if is_call(record):
        parts += [target(record) or "?", status(record) or "?", duration(record), decision(record)]
    else:
        parts += [safe(kind), target(record), event_summary(record)]
    return "  ".join(p for p in parts if p)


def table(records: Sequence[Mapping[str, Any]], ascii_only: bool = False) -> str:
    headers = ("TIME", "INTENT", "TOOL", "STATUS", "DURATION", "DECISION", "ID")
    rows = []
    for record in records:
        kind = intent_type(record) if is_call(record) else None
        intent = (
            f"{icon(record, ascii_only)} {kind}" if kind else f"{icon(record, ascii_only)} {safe(record.get('type'))}"
        )
        rows.append(
            (
                local_time(record),
                intent,
                safe(target(record), 48),
                status(record),
                duration(record),
                decision(record),
                safe(record.get("id", "")),
            )
        )
    return columns(headers, rows)


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
    for warning in record.get("warnings") or []:
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

    return str(yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False))
