"""The activity stream in OpenTelemetry's terms, pure: a record (the dict as written to activity.jsonl, so already
redacted) becomes a span or a log record, and a batch of them becomes the protobuf body of an OTLP/HTTP export
request. No I/O here: `export.py` queues, batches and sends.

What maps to what (docs/otlp.md lists every attribute):

- `tool_call` and `hook_decision` records are spans, after the GenAI `execute_tool` span: name
  `execute_tool {gen_ai.tool.name}`, kind INTERNAL. Not an MCP server span (`tools/call {tool}`, SERVER): on the wire
  every agent request is `tools/call call_tool_read|write|destructive`, so that name would tell no call from
  another, and the span covers more than the request (the two-key check, the person's decision, the upstream call).
  The MCP attributes that apply (`mcp.method.name`, `mcp.session.id`) are added to it, as the MCP conventions ask of
  an instrumentation that finds a tool execution span already there.
- every other record type is a log record (`event_name` = `mcphost.<type>`).
- ids come from the record, never from chance, so exporting a record twice gives the same span: trace and span
  id are hashes of its id; a `tool_call` whose `started_id` names its `tool_call_started` record takes both from
  that id instead, so the start (a log record) carries the trace and span id of the call it began.
- status: ERROR only when the call failed (`status` = error: the upstream failed or the tool said isError), with
  `error.type` = mcphost's error code, or `tool_error` as the MCP conventions name a tool's own error. A call
  mcphost refused, a person denied or nobody answered is a decision, not a fault of the service, as a 4xx is no
  error on an HTTP server span: status UNSET, and the outcome in `mcphost.status` and `mcphost.error.code`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

SPAN_TYPES = frozenset({"tool_call", "hook_decision"})
SCOPE_NAME = "mcphost.activity"

# Span.SpanKind and Status.StatusCode of opentelemetry/proto/trace/v1/trace.proto
SPAN_KIND_INTERNAL = 1
STATUS_UNSET = 0
STATUS_ERROR = 2

# SeverityNumber of opentelemetry/proto/logs/v1/logs.proto
SEVERITY_INFO = 9
SEVERITY_WARN = 13
SEVERITY_ERROR = 17
_SEVERITY_TEXT = {SEVERITY_INFO: "INFO", SEVERITY_WARN: "WARN", SEVERITY_ERROR: "ERROR"}
_SEVERITY = {"config_error": SEVERITY_ERROR, "upstream_lost": SEVERITY_WARN, "annotations_changed": SEVERITY_WARN}

# The MCP conventions' error.type for a CallToolResult with isError true.
TOOL_ERROR = "tool_error"


@dataclass(frozen=True, slots=True)
class Span:
    trace_id: bytes
    span_id: bytes
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    kind: int = SPAN_KIND_INTERNAL
    status_code: int = STATUS_UNSET
    status_message: str = ""


@dataclass(frozen=True, slots=True)
class LogRecord:
    time_ns: int
    severity_number: int
    body: str
    event_name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    trace_id: bytes = b""
    span_id: bytes = b""

    @property
    def severity_text(self) -> str:
        return _SEVERITY_TEXT.get(self.severity_number, "")


# ---- ids and times


def trace_id_for(record_id: str) -> bytes:
    return _nonzero(hashlib.sha256(b"mcphost.trace:" + record_id.encode("utf-8", "replace")).digest()[:16])


def span_id_for(record_id: str) -> bytes:
    return _nonzero(hashlib.sha256(b"mcphost.span:" + record_id.encode("utf-8", "replace")).digest()[:8])


def _nonzero(value: bytes) -> bytes:
    # An all-zero id means "no id" to OTLP; a hash that lands there (one in 2^64) takes the next value instead.
    return value if any(value) else value[:-1] + b"\x01"


def call_ids(record: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """The trace and span id of a call: from its `tool_call_started` record when it had one, so the start and the
    outcome share them; else from its own id."""
    key = record.get("started_id") if record.get("type") == "tool_call" else None
    if not isinstance(key, str) or not key:
        key = str(record.get("id", ""))
    return trace_id_for(key), span_id_for(key)


_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")


def time_ns(stamp: Any) -> int | None:
    """An RFC 3339 time as nanoseconds since the epoch; None when it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


# ---- records -> spans and log records


def is_span(record: Mapping[str, Any]) -> bool:
    return record.get("type", "tool_call") in SPAN_TYPES


def tool_name(record: Mapping[str, Any]) -> str | None:
    """The tool as the agent names it: `server:tool` for a call through mcphost, the agent's own name (Bash,
    mcp__github__create_issue) for a hook decision."""
    hook = _mapping(_mapping(record.get("metadata")).get("hook"))
    if record.get("type") == "hook_decision" and isinstance(hook.get("tool_name"), str):
        return str(hook["tool_name"])
    server, tool = record.get("server"), record.get("tool")
    if isinstance(server, str) and isinstance(tool, str):
        return f"{server}:{tool}"
    named = tool if isinstance(tool, str) else server
    return named if isinstance(named, str) else None


def to_span(record: Mapping[str, Any], *, now_ns: int, capture_content: bool = False) -> Span:
    """A `tool_call` or `hook_decision` record as an `execute_tool` span. The record is stamped when the call
    ended, so that is the span's end, and its start is `duration_ms` before."""
    end = time_ns(record.get("timestamp"))
    end = now_ns if end is None else end
    duration = record.get("duration_ms")
    elapsed = int(duration * 1_000_000) if isinstance(duration, int | float) and duration > 0 else 0
    name = tool_name(record)
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool"}
    if name:
        attributes["gen_ai.tool.name"] = name
    hook = _mapping(_mapping(record.get("metadata")).get("hook"))
    if isinstance(hook.get("tool_use_id"), str):
        attributes["gen_ai.tool.call.id"] = hook["tool_use_id"]
    if record.get("type", "tool_call") == "tool_call":
        # The agent's request reached mcphost as an MCP tools/call; a hook decision is about a tool the agent runs.
        attributes["mcp.method.name"] = "tools/call"
        if isinstance(record.get("session_id"), str):
            attributes["mcp.session.id"] = record["session_id"]
    status_code, status_message = STATUS_UNSET, ""
    if record.get("status") == "error":
        error = _mapping(record.get("error"))
        attributes["error.type"] = str(error.get("code") or TOOL_ERROR)
        status_code = STATUS_ERROR
        status_message = str(error.get("message") or "")
    attributes.update(call_attributes(record))
    if capture_content:
        attributes.update(content_attributes(record))
    trace_id, span_id = call_ids(record)
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        name=f"execute_tool {name}" if name else "execute_tool",
        start_ns=max(0, end - elapsed),
        end_ns=end,
        attributes=attributes,
        status_code=status_code,
        status_message=status_message,
    )


def call_attributes(record: Mapping[str, Any]) -> dict[str, Any]:
    """mcphost's own view of a call, under `mcphost.`: what the agent declared, what decided, how it ended."""
    out: dict[str, Any] = {}
    _put(out, "mcphost.record.id", record.get("id"))
    _put(out, "mcphost.record.type", record.get("type", "tool_call"))
    _put(out, "mcphost.started_id", record.get("started_id"))
    _put(out, "mcphost.status", record.get("status"))
    _put(out, "mcphost.server", record.get("server"))
    _put(out, "mcphost.tool", record.get("tool"))
    _put(out, "mcphost.client", record.get("client"))
    _put(out, "mcphost.session", record.get("session_id"))
    metadata = _mapping(record.get("metadata"))
    _put(out, "mcphost.variant", metadata.get("tool_variant"))
    _put(out, "mcphost.call_with", metadata.get("call_with"))
    for key, value in _mapping(metadata.get("intent")).items():
        _put(out, f"mcphost.intent.{key}", value)
    for key, value in _mapping(metadata.get("annotations")).items():
        _put(out, f"mcphost.annotations.{key}", value)
    for key, value in _mapping(record.get("decision")).items():
        _put(out, f"mcphost.decision.{key}", value)
    error = _mapping(record.get("error"))
    _put(out, "mcphost.error.code", error.get("code"))
    _put(out, "mcphost.error.message", error.get("message"))
    warnings = record.get("warnings")
    if isinstance(warnings, list) and warnings:
        out["mcphost.warnings"] = [str(w) for w in warnings]
    _put(out, "mcphost.forwarded", record.get("forwarded"))
    _put(out, "mcphost.request_bytes", record.get("request_bytes"))
    _put(out, "mcphost.response_bytes", record.get("response_bytes"))
    hook = _mapping(metadata.get("hook"))
    for key in ("agent", "event", "tool_name", "because"):
        _put(out, f"mcphost.hook.{key}", hook.get(key))
    return out


def content_attributes(record: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments and the start of its answer, as redacted in the record (opt-in, as in the GenAI
    conventions: they may hold what a team would rather not ship to a backend)."""
    out: dict[str, Any] = {}
    if isinstance(record.get("arguments"), Mapping):
        out["gen_ai.tool.call.arguments"] = record["arguments"]
    elif isinstance(record.get("arguments_preview"), str):
        out["gen_ai.tool.call.arguments"] = record["arguments_preview"]
    _put(out, "mcphost.response_preview", record.get("response_preview"))
    return out


def to_log(record: Mapping[str, Any], *, now_ns: int) -> LogRecord:
    """A host event (or a call's start) as a log record: a sentence for people, and the record's fields as
    attributes for queries."""
    kind = str(record.get("type", ""))
    when = time_ns(record.get("timestamp"))
    attributes: dict[str, Any] = {}
    trace_id = span_id = b""
    if kind == "tool_call_started":
        attributes.update(call_attributes(record))
        name = tool_name(record)
        if name:
            attributes["gen_ai.tool.name"] = name
        trace_id, span_id = call_ids(record)
    else:
        _put(attributes, "mcphost.record.id", record.get("id"))
        _put(attributes, "mcphost.record.type", kind)
        _put(attributes, "mcphost.server", record.get("server"))
        _put(attributes, "mcphost.tool", record.get("tool"))
    details = record.get("details")
    if isinstance(details, Mapping) and details:
        attributes["mcphost.details"] = dict(details)
    return LogRecord(
        time_ns=now_ns if when is None else when,
        severity_number=_SEVERITY.get(kind, SEVERITY_INFO),
        body=log_body(record),
        event_name=f"mcphost.{kind}" if kind else "mcphost.record",
        attributes=attributes,
        trace_id=trace_id,
        span_id=span_id,
    )


def log_body(record: Mapping[str, Any]) -> str:
    kind = record.get("type")
    details = _mapping(record.get("details"))
    server, tool = record.get("server"), record.get("tool")
    if kind == "config_reload":
        return f"config reloaded: {details.get('summary') or 'no change in effect'}"
    if kind == "config_error":
        issues = details.get("errors")
        first = _mapping(issues[0]).get("message") if isinstance(issues, list) and issues else None
        return "config rejected, the last good config stays in force" + (f": {first}" if first else "")
    if kind == "upstream_connected":
        tools = details.get("tools")
        return f"upstream {server} connected" + (f" ({tools} tools)" if isinstance(tools, int) else "")
    if kind == "upstream_lost":
        reason = details.get("reason")
        return f"upstream {server} lost" + (f": {reason}" if reason else "")
    if kind == "annotations_changed":
        return f"annotations of {server}:{tool} changed"
    if kind == "tool_call_started":
        variant = _mapping(record.get("metadata")).get("tool_variant") or "call"
        return f"{variant} {server}:{tool} forwarded to its server"
    return str(kind or "record")


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Scalars only: a nested value in a span attribute is seen as an opaque blob by most backends."""
    if isinstance(value, str | bool | int | float):
        out[key] = value


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# ---- resource


def resource_attributes(
    *, version: str, instance_id: str, host_name: str, owner: str | None, pid: int, extra: Mapping[str, str]
) -> dict[str, Any]:
    """Who sent it: mcphost on which machine, run by which login. `process.owner` is the OS login, which is what
    mcphost knows; `[export.otlp] resource` adds what it cannot (`user.email`, a team name), and may override."""
    attributes: dict[str, Any] = {
        "service.name": "mcphost",
        "service.version": version,
        "service.instance.id": instance_id,
        "host.name": host_name,
        "process.pid": pid,
    }
    if owner:
        attributes["process.owner"] = owner
    attributes.update(extra)
    return attributes


# ---- protobuf wire format (opentelemetry-proto's messages, hand-encoded: no runtime dependency)


def _varint(value: int) -> bytes:
    value &= 0xFFFF_FFFF_FFFF_FFFF  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


def _len(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _str(number: int, text: str) -> bytes:
    return _len(number, _utf8(text)) if text else b""


def _utf8(text: str) -> bytes:
    # Records are valid Unicode (the writer makes them so); "replace" keeps a bad one from breaking a batch.
    return text.encode("utf-8", "replace")


def _uint(number: int, value: int) -> bytes:
    return _tag(number, 0) + _varint(value) if value else b""


def _fixed64(number: int, value: int) -> bytes:
    return _tag(number, 1) + struct.pack("<Q", value & 0xFFFF_FFFF_FFFF_FFFF)


_INT64 = range(-(2**63), 2**63)


def any_value(value: Any) -> bytes:
    """An AnyValue. The oneof is written even when its value is the default (false, 0, ""), or it would read as
    unset."""
    if isinstance(value, str):
        return _len(1, _utf8(value))
    if isinstance(value, bool):
        return _tag(2, 0) + _varint(int(value))
    if isinstance(value, int):
        if value in _INT64:
            return _tag(3, 0) + _varint(value)
        return _len(1, _utf8(str(value)))
    if isinstance(value, float):
        return _tag(4, 1) + struct.pack("<d", value)
    if isinstance(value, list | tuple):
        return _len(5, b"".join(_len(1, any_value(item)) for item in value))
    if isinstance(value, Mapping):
        return _len(6, _key_values(value))
    if value is None:
        return b""
    return _len(1, _utf8(str(value)))


def _key_values(attributes: Mapping[str, Any], number: int = 1) -> bytes:
    return b"".join(_len(number, _str(1, str(key)) + _len(2, any_value(value))) for key, value in attributes.items())


def _scope(version: str) -> bytes:
    return _str(1, SCOPE_NAME) + _str(2, version)


def _span(span: Span) -> bytes:
    status = _str(2, span.status_message) + _uint(3, span.status_code)
    return b"".join(
        (
            _len(1, span.trace_id),
            _len(2, span.span_id),
            _str(5, span.name),
            _uint(6, span.kind),
            _fixed64(7, span.start_ns),
            _fixed64(8, span.end_ns),
            _key_values(span.attributes, 9),
            _len(15, status) if status else b"",
        )
    )


def _log(log: LogRecord) -> bytes:
    return b"".join(
        (
            _fixed64(1, log.time_ns),
            _uint(2, log.severity_number),
            _str(3, log.severity_text),
            _len(5, any_value(log.body)),
            _key_values(log.attributes, 6),
            _len(9, log.trace_id) if log.trace_id else b"",
            _len(10, log.span_id) if log.span_id else b"",
            _fixed64(11, log.time_ns),
            _str(12, log.event_name),
        )
    )


def encode_traces(resource: Mapping[str, Any], spans: Sequence[Span], version: str) -> bytes:
    """An ExportTraceServiceRequest: one resource, one scope, the spans."""
    scope_spans = _len(1, _scope(version)) + b"".join(_len(2, _span(span)) for span in spans)
    resource_spans = _len(1, _key_values(resource)) + _len(2, scope_spans)
    return _len(1, resource_spans)


def encode_logs(resource: Mapping[str, Any], logs: Sequence[LogRecord], version: str) -> bytes:
    """An ExportLogsServiceRequest: one resource, one scope, the log records."""
    scope_logs = _len(1, _scope(version)) + b"".join(_len(2, _log(log)) for log in logs)
    resource_logs = _len(1, _key_values(resource)) + _len(2, scope_logs)
    return _len(1, resource_logs)


# ---- reading the collector's answers


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of one message; raises ValueError on what is not protobuf."""
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        number, wire_type = key >> 3, key & 7
        if number == 0:  # reserved: no message has it, and a run of zero bytes would read as nothing but field 0
            raise ValueError("field number 0")
        value: int | bytes
        if wire_type == 0:
            value, at = _read_varint(data, at)
        elif wire_type == 1:
            value, at = int.from_bytes(data[at : at + 8], "little"), at + 8
        elif wire_type == 2:
            size, at = _read_varint(data, at)
            value, at = data[at : at + size], at + size
        elif wire_type == 5:
            value, at = int.from_bytes(data[at : at + 4], "little"), at + 4
        else:
            raise ValueError(f"wire type {wire_type}")
        if at > len(data):
            raise ValueError("truncated field")
        yield number, value


def partial_success(body: bytes) -> tuple[int, str]:
    """(rejected count, the collector's message) from an Export{Trace,Logs}ServiceResponse; (0, "") when it has no
    partial_success or cannot be read (a 2xx with a body mcphost cannot read still means accepted)."""
    rejected, message = 0, ""
    try:
        for number, value in _fields(body):
            if number == 1 and isinstance(value, bytes):
                for inner, item in _fields(value):
                    if inner == 1 and isinstance(item, int):
                        rejected = item - 2**64 if item >= 2**63 else item
                    elif inner == 2 and isinstance(item, bytes):
                        message = item.decode("utf-8", "replace")
    except ValueError:
        return 0, ""
    return max(0, rejected), message


def status_message(body: bytes) -> str:
    """The message of a google.rpc.Status, the body OTLP/HTTP gives with a 4xx or 5xx; "" when there is none."""
    try:
        for number, value in _fields(body):
            if number == 2 and isinstance(value, bytes):
                return value.decode("utf-8", "replace")
    except ValueError:
        pass
    return ""
