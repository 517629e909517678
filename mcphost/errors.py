"""The error codes an agent can get back from mcphost, and the one exception type that carries them.

Codes and messages are a contract (design.md): tests outside this repository match on them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

logger = logging.getLogger(__name__)


class ErrorCode(StrEnum):
    MISSING_INTENT = "MISSING_INTENT"
    MISSING_OPERATION_TYPE = "MISSING_OPERATION_TYPE"
    INVALID_OPERATION_TYPE = "INVALID_OPERATION_TYPE"
    INTENT_MISMATCH = "INTENT_MISMATCH"
    SERVER_MISMATCH = "SERVER_MISMATCH"
    INVALID_SENSITIVITY = "INVALID_SENSITIVITY"
    REASON_TOO_LONG = "REASON_TOO_LONG"
    INVALID_ARGS = "INVALID_ARGS"
    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    APPROVAL_TIMEOUT = "APPROVAL_TIMEOUT"
    NO_APPROVER = "NO_APPROVER"
    UPSTREAM_ERROR = "UPSTREAM_ERROR"
    AUDIT_UNAVAILABLE = "AUDIT_UNAVAILABLE"


@dataclass(slots=True)
class GatewayError(Exception):
    """A call that mcphost refuses or cannot complete; becomes an isError tool result, never a crash."""

    code: ErrorCode
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message

    def to_payload(self) -> dict[str, Any]:
        return {"error": {"code": self.code.value, "message": self.message, "details": self.details}}


def tell_each(listeners: Iterable[Callable[..., object]], *args: Any, who: str) -> None:
    """Call every listener with `args`. One that fails is logged (as `who` listener) and the rest are still told: a
    broken editor view or exporter must never stop a record, a prompt or a reload, nor keep the news from the others."""
    for listener in listeners:
        try:
            listener(*args)
        except Exception:
            logger.exception("%s listener failed", who)
