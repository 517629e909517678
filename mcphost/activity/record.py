"""The activity record: one JSON object per line of activity.jsonl, for every call and every host event."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError

from mcphost.activity.ids import new_record_id as new_record_id  # re-exported: records are made here
from mcphost.activity.redact import left_alone, scrub

_second: tuple[int, str] = (0, "")  # the last whole second formatted, and its text


def utc_now() -> str:
    """Now as RFC 3339 in UTC with milliseconds ("2026-11-21T10:00:00.123Z"). Every record and decision takes one,
    so a second's text is made once and only the milliseconds each time."""
    global _second
    now = time.time()
    whole = int(now)
    second = _second  # one read: another thread may replace it meanwhile
    if second[0] != whole:
        second = _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{second[1]}.{int((now - whole) * 1000):03d}Z"


class RecordType(StrEnum):
    TOOL_CALL = "tool_call"
    # A write or destructive call about to be forwarded. Its outcome is a later `tool_call` record naming it in
    # `started_id`; a start that no outcome names is a call whose outcome is unknown (the host died mid-call).
    TOOL_CALL_STARTED = "tool_call_started"
    CONFIG_RELOAD = "config_reload"
    CONFIG_ERROR = "config_error"
    UPSTREAM_CONNECTED = "upstream_connected"
    UPSTREAM_LOST = "upstream_lost"
    ANNOTATIONS_CHANGED = "annotations_changed"
    # A tool of the agent's own (Bash, Edit, an MCP server mcphost does not front) that an agent's hook asked
    # `mcphost hook` about: decided here, run (or not) by the agent. `metadata.hook` says which agent and hook.
    HOOK_DECISION = "hook_decision"


class Status(StrEnum):
    SUCCESS = "success"
    ERROR = "error"  # the upstream failed or the tool reported an error
    REJECTED = "rejected"  # mcphost refused the call as malformed or mismatched
    DENIED = "denied"  # the policy or a person said no
    EXPIRED = "expired"  # nobody answered the prompt in time
    CANCELLED = "cancelled"  # the agent cancelled or left, or the host shut down, before the call ended
    STARTED = "started"  # on tool_call_started records only
    ALLOWED = "allowed"  # hook_decision: the agent was told to go ahead
    # The agent's own client asks its user: a hook_decision answered "ask", or a 2026-era call that ended with the
    # question (input required), to be repeated with the answer as a call of its own.
    ASKED = "asked"


class _Open(BaseModel):
    # Records from older or newer versions keep the fields this version does not know.
    model_config = ConfigDict(extra="allow")


class Decision(_Open):
    """Who let the call through or stopped it, and when."""

    by: str = Field(description="policy | editor | remembered_grant | timeout | no_approver")
    action: str = Field(description="What the policy asked for: allow | ask | confirm | deny.")
    outcome: str = Field(description="allow | deny | expired")
    rule: str | None = Field(default=None, description="The config key, rule (rules[N]) or grant that decided.")
    reason: str | None = Field(default=None, description="The deciding rule's reason, when it gave one.")
    at: str = Field(default_factory=utc_now, description="When the decision was made (RFC 3339, UTC).")
    wait_ms: float | None = Field(default=None, description="How long the person took, when a person decided.")
    remember: str | None = Field(default=None, description="once | session | always, when a person decided.")
    approver: str | None = Field(default=None, description="Which editor or terminal answered.")
    match: str | None = Field(
        default=None, description="What a remembered allow covers besides its tool: arguments | pattern (else absent)."
    )
    batch: str | None = Field(default=None, description="The batch prompt the person answered, when it was one.")


class ErrorInfo(_Open):
    code: str = Field(description="One of the error codes of design.md, e.g. SERVER_MISMATCH.")
    message: str


class RecordIntent(_Open):
    """What the agent declared. For a call rejected before its intent parsed, what it sent, as text."""

    operation_type: str | None = None
    data_sensitivity: str | None = None
    reason: str | None = None
    raw: str | None = Field(default=None, description="The intent as sent, when it was not an object.")


class RecordMetadata(_Open):
    intent: RecordIntent | None = None
    tool_variant: str | None = Field(
        default=None, description="call_tool_read | call_tool_write | call_tool_destructive"
    )
    annotations: dict[str, Any] | None = Field(
        default=None, description="The hints mcphost acted on (the server's, after config overrides)."
    )
    call_with: str | None = Field(default=None, description="The variant mcphost recommends for this tool.")
    hook: dict[str, Any] | None = Field(
        default=None,
        description="On hook_decision records: the agent, the hook event, the tool as the agent named it, its "
        "tool_use_id, and why it was judged read, write or destructive.",
    )


class ActivityRecord(_Open):
    """One line of activity.jsonl: a tool call, or an event of the host itself."""

    id: str = Field(default_factory=new_record_id, description="ULID: sorts by time as a string.")
    timestamp: str = Field(default_factory=utc_now, description="When the record was written (RFC 3339, UTC).")
    type: str = Field(
        default=RecordType.TOOL_CALL.value, description=" | ".join(t.value for t in RecordType) + " (and later types)"
    )
    server: str | None = None
    tool: str | None = None
    status: str | None = Field(default=None, description=" | ".join(s.value for s in Status))
    duration_ms: float | None = None
    metadata: RecordMetadata = Field(default_factory=RecordMetadata)
    decision: Decision | None = None
    warnings: list[str] = Field(default_factory=list)
    error: ErrorInfo | None = None
    arguments: dict[str, Any] | None = Field(
        default=None, description="The tool's arguments after redaction, when within [log] arguments_max_bytes."
    )
    arguments_preview: str | None = Field(
        default=None, description="The start of the redacted arguments' JSON, when they were over the limit."
    )
    request_bytes: int | None = Field(default=None, description="Size of the tool's arguments as JSON.")
    response_bytes: int | None = Field(default=None, description="Size of the tool's answer as JSON.")
    response_preview: str | None = Field(
        default=None, description="The start of the answer's text, redacted, at most [log] response_preview_bytes."
    )
    session_id: str | None = Field(default=None, description="The agent session the call came from.")
    client: str | None = Field(default=None, description="The agent's client name, as its MCP client reported it.")
    details: dict[str, Any] | None = Field(default=None, description="Host events: what connected, what changed.")
    started_id: str | None = Field(
        default=None,
        description="On the outcome of a write or destructive call: the id of its `tool_call_started` record, "
        "written before it was forwarded.",
    )
    forwarded: bool | None = Field(
        default=None, description="Whether the call had reached the upstream server (on cancelled and failed calls)."
    )

    def safe_dict(self) -> dict[str, Any]:
        """The record with every string redacted, keys included, and valid Unicode: every field that can hold what
        an agent, an upstream or the config said (fields mcphost makes itself, ids, times and counts, are taken as
        they are: every record of every call pays for the walk)."""
        return _scrubbed(self.model_dump(mode="json", exclude_none=True))

    def encode(self) -> tuple[dict[str, Any], str]:
        """What is written and what editors are sent, made once: the safe dict and its line of JSON. Never fails on
        content: a record whose content cannot be written keeps what can."""
        try:
            payload = self.safe_dict()
            return payload, _line(payload)
        except (RecursionError, ValueError, TypeError) as exc:
            kept = self.model_copy(update={"arguments": None, "details": None, "metadata": RecordMetadata()})
            payload = kept.safe_dict()
            return _not_recordable(payload, exc)

    def encode_line(self) -> tuple[bytes, Callable[[], dict[str, Any]]]:
        """`encode` for the writer: the line as UTF-8, and what makes the safe dict for whoever asks (editors, the
        exporter). Made the short way when it can be: the model's own JSON, taken as it is when one scan of it
        shows that redaction would change nothing (`left_alone`). Every call's record pays for this, and most hold
        no secret."""
        try:
            line = self.__pydantic_serializer__.to_json(self, exclude_none=True)
        except (PydanticSerializationError, RecursionError, ValueError):
            line = b""  # a lone surrogate, too deep: the long way says what it kept
        if line and left_alone(line):
            return line + b"\n", functools.partial(self.model_dump, mode="json", exclude_none=True)
        payload, text = self.encode()
        return text.encode("utf-8"), lambda: payload

    def to_json_line(self) -> str:
        return self.encode()[1]


_TOOL_CALL = str(RecordType.TOOL_CALL)  # every call's record: without `.value`'s Python-level property

# Made by mcphost alone (ULIDs, RFC 3339 times, enum values, numbers): nothing from outside reaches them.
_OWN_FIELDS = frozenset(
    {"id", "timestamp", "type", "status", "duration_ms", "request_bytes", "response_bytes", "started_id", "forwarded"}
)


class CallRecord:
    """A tool call's record while the call runs: plain attributes, written as the very line an `ActivityRecord` with
    the same fields makes (a test holds the two in step). Every call makes one, on the way to its upstream and back;
    as a pydantic model it cost the call a validation per nested part, a handler per field set and a serializer run.

    `intent` and `error` are what RecordIntent and ErrorInfo dump to; `decision` stays the approvals' model."""

    __slots__ = (
        "_decided",
        "_scrubbed_early",
        "annotations",
        "arguments",
        "arguments_preview",
        "call_with",
        "client",
        "decision",
        "duration_ms",
        "error",
        "forwarded",
        "id",
        "intent",
        "request_bytes",
        "response_bytes",
        "response_preview",
        "server",
        "session_id",
        "started_id",
        "status",
        "timestamp",
        "tool",
        "tool_variant",
        "type",
        "warnings",
    )

    def __init__(self, tool_variant: str, session_id: str | None = None, client: str | None = None) -> None:
        self.id = ""  # stamped when written: the file stays in time order however long calls take
        self.timestamp = ""
        self.type: str = _TOOL_CALL
        self.server: str | None = None
        self.tool: str | None = None
        self.status: str | None = None
        self.duration_ms: float | None = None
        self.intent: dict[str, str] | None = None
        self.tool_variant = tool_variant
        self.annotations: dict[str, Any] | None = None
        self.call_with: str | None = None
        self.decision: Decision | None = None
        self.warnings: list[str] = []
        self.error: dict[str, str] | None = None
        self.arguments: dict[str, Any] | None = None
        self.arguments_preview: str | None = None
        self.request_bytes: int | None = None
        self.response_bytes: int | None = None
        self.response_preview: str | None = None
        self.session_id = session_id
        self.client = client
        self.started_id: str | None = None
        self.forwarded: bool | None = None
        self._decided: tuple[Decision, dict[str, Any]] | None = None  # `decision` and its dump, made by `settle`
        # The arguments' fields as they are and as the line's scrub makes them, made by `settle`.
        self._scrubbed_early: dict[str, tuple[Any, Any]] | None = None

    def settle(self) -> None:
        """Make now the part of the line that is settled before the call is forwarded (the decision's dump, the
        arguments as the line's scrub makes them), so that the call need not make it once its answer is in: a call
        that carries a file would otherwise scrub its arguments' preview between its answer and its result."""
        if self.decision is not None:
            self._decided = (self.decision, self.decision.model_dump(mode="json", exclude_none=True))
        try:
            self._scrubbed_early = {
                name: (value, scrub(value))
                for name in ("arguments", "arguments_preview")
                if (value := getattr(self, name)) is not None
            }
        except (RecursionError, ValueError, TypeError):
            self._scrubbed_early = None  # the line's own scrub meets it again, and says so in the record

    def settle_response(self) -> None:
        """`settle` for the answer's preview, once the answer is in: made as the line's scrub makes it, the line then
        need not take the long way for it (JSON in a preview is escaped quotes throughout, which the look before the
        short way does not read past)."""
        value = self.response_preview
        if value is None:
            return
        early = self._scrubbed_early
        if early is None:
            early = self._scrubbed_early = {}
        early["response_preview"] = (value, scrub(value))

    def copy(self) -> CallRecord:
        """Another record of the same call (its start); what the two share is never changed in place."""
        twin = CallRecord.__new__(CallRecord)
        for name in CallRecord.__slots__:
            setattr(twin, name, getattr(self, name))
        twin.warnings = list(self.warnings)
        twin._decided = twin._scrubbed_early = None  # each record's line its own dicts
        return twin

    def as_dict(self) -> dict[str, Any]:
        """What `ActivityRecord.model_dump(mode="json", exclude_none=True)` makes of these fields, in its order."""
        out: dict[str, Any] = {"id": self.id, "timestamp": self.timestamp, "type": self.type}
        self._put(out, _CALL_HEAD)
        out["metadata"] = self._put({}, _CALL_METADATA)
        decision = self.decision
        if decision is not None:
            decided = self._decided
            out["decision"] = (
                decided[1]
                if decided is not None and decided[0] is decision
                else decision.model_dump(mode="json", exclude_none=True)
            )
        out["warnings"] = self.warnings
        self._put(out, _CALL_TAIL)
        return out

    def _put(self, into: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        for name in names:
            value = getattr(self, name)
            if value is not None:
                into[name] = value
        return into

    def encode_line(self) -> tuple[bytes, Callable[[], dict[str, Any]]]:
        """`ActivityRecord.encode_line` for a call: one orjson pass over the plain dict, kept as it is when
        redaction would change nothing (`left_alone`), else the long way."""
        payload = self.as_dict()
        # The fields `settle` scrubbed while the upstream worked go in as that made them (what the long way takes
        # too), and need no look: a call carrying a file has its 4 KiB preview there, most of what the look reads.
        clean, settled = _settled(payload, self._scrubbed_early)
        try:
            line = orjson.dumps(clean)
            # Only what outsiders may have written is looked at: redaction leaves mcphost's own fields as they are,
            # and the record's own keys (two fifths of the line) can hold no secret. Sound in parts because no
            # string spans two of them, and every test of `left_alone` is one within a string.
            outsiders = orjson.dumps([clean.get(key) for key in _OUTSIDERS if key not in settled])
        except (orjson.JSONEncodeError, TypeError):
            line = b""  # a lone surrogate, an integer past 64 bits, too deep: the long way
        if line and left_alone(outsiders):
            return line + b"\n", lambda: clean
        try:
            safe = _scrubbed(clean, settled)
            text = _line(safe)
        except (RecursionError, ValueError, TypeError) as exc:
            kept = {key: value for key, value in payload.items() if key not in ("arguments", "details")}
            kept["metadata"] = {}
            safe, text = _not_recordable(_scrubbed(kept), exc)
        return text.encode("utf-8"), lambda: safe


# ActivityRecord's fields before `metadata`, `metadata`'s own, and those after `warnings` (`details` and `hook` are
# never a call's), each in its order.
_CALL_HEAD = ("server", "tool", "status", "duration_ms")
_CALL_METADATA = ("intent", "tool_variant", "annotations", "call_with")
_CALL_TAIL = (
    "error",
    "arguments",
    "arguments_preview",
    "request_bytes",
    "response_bytes",
    "response_preview",
    "session_id",
    "client",
    "started_id",
    "forwarded",
)
# What of a call's line the agent, an upstream, an editor or the config may have written: every field `as_dict`
# writes but mcphost's own.
_OUTSIDERS = tuple(
    name
    for name in ("id", "timestamp", "type", *_CALL_HEAD, "metadata", "decision", "warnings", *_CALL_TAIL)
    if name not in _OWN_FIELDS
)


def _scrubbed(dump: dict[str, Any], settled: tuple[str, ...] = ()) -> dict[str, Any]:
    """`dump` scrubbed but mcphost's own fields and those already scrubbed (`settled`, by `_settled`)."""
    return {key: value if key in _OWN_FIELDS or key in settled else scrub(value) for key, value in dump.items()}


def _settled(dump: dict[str, Any], early: dict[str, tuple[Any, Any]] | None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`dump` with each field scrubbed `early` in its scrubbed form, where the same object is still there (scrubbing is
    a pure function of the value), and those fields' names; `dump` itself when there are none."""
    if not early:
        return dump, ()
    clean = dump
    settled: list[str] = []
    for key, (value, scrubbed) in early.items():
        if dump.get(key) is value:
            if clean is dump:
                clean = dict(dump)  # the same keys in the same order: only values are replaced
            clean[key] = scrubbed
            settled.append(key)
    return clean, tuple(settled)


def _not_recordable(payload: dict[str, Any], exc: BaseException) -> tuple[dict[str, Any], str]:
    payload["arguments_preview"] = f"[not recordable: {type(exc).__name__}]"
    return payload, _line(payload)


def _line(payload: dict[str, Any]) -> str:
    try:
        return orjson.dumps(payload).decode("utf-8") + "\n"
    except orjson.JSONEncodeError:  # an integer past 64 bits (an agent's argument, say): Python's encoder has none
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "\n"
