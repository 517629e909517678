"""The activity record: one JSON object per line of activity.jsonl, for every call and every host event."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_record_id(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, so ids sort by time as strings."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RecordType(StrEnum):
    TOOL_CALL = "tool_call"
    CONFIG_RELOAD = "config_reload"
    CONFIG_ERROR = "config_error"
    UPSTREAM_CONNECTED = "upstream_connected"
    UPSTREAM_LOST = "upstream_lost"
    ANNOTATIONS_CHANGED = "annotations_changed"


class Status(StrEnum):
    SUCCESS = "success"
    ERROR = "error"  # the upstream failed or the tool reported an error
    REJECTED = "rejected"  # mcphost refused the call as malformed or mismatched
    DENIED = "denied"  # the policy or a person said no
    EXPIRED = "expired"  # nobody answered the prompt in time


class Decision(BaseModel):
    model_config = ConfigDict(extra="allow")

    by: str  # policy | editor | remembered_grant | timeout | no_approver
    action: str  # the policy's action: allow | ask | confirm | deny
    outcome: str  # allow | deny | expired
    rule: str | None = None
    at: str = Field(default_factory=utc_now)
    wait_ms: float | None = None  # how long the person took, when a person decided


class ErrorInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ActivityRecord(BaseModel):
    # Records from older or newer versions keep the fields this version does not know.
    model_config = ConfigDict(extra="allow")

    id: str = Field(default_factory=new_record_id)
    timestamp: str = Field(default_factory=utc_now)
    type: str = RecordType.TOOL_CALL.value
    server: str | None = None
    tool: str | None = None
    status: str | None = None
    duration_ms: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    decision: Decision | None = None
    warnings: list[str] = Field(default_factory=list)
    error: ErrorInfo | None = None
    request_bytes: int | None = None
    response_bytes: int | None = None
    session_id: str | None = None
    client: str | None = None
    details: dict[str, Any] | None = None  # host events: what connected, what changed

    def to_json_line(self) -> str:
        return self.model_dump_json(exclude_none=True) + "\n"
