"""The two-key intent model, as plain functions over plain data (no I/O).

An agent declares its intent twice: by the tool variant it calls and by `intent.operation_type`. This module
parses the declaration in each of the forms agents send, checks the two keys against each other, and checks
the result against what the upstream server says about the tool.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mcphost.errors import ErrorCode, GatewayError

MAX_REASON_LENGTH = 1000


class OperationType(StrEnum):
    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


class DataSensitivity(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    PRIVATE = "private"
    UNKNOWN = "unknown"


class ToolVariant(StrEnum):
    READ = "call_tool_read"
    WRITE = "call_tool_write"
    DESTRUCTIVE = "call_tool_destructive"

    @property
    def operation(self) -> OperationType:
        return _VARIANT_OPERATION[self]

    @classmethod
    def for_operation(cls, operation: OperationType) -> ToolVariant:
        return _OPERATION_VARIANT[operation]


_VARIANT_OPERATION = {
    ToolVariant.READ: OperationType.READ,
    ToolVariant.WRITE: OperationType.WRITE,
    ToolVariant.DESTRUCTIVE: OperationType.DESTRUCTIVE,
}
_OPERATION_VARIANT = {op: variant for variant, op in _VARIANT_OPERATION.items()}

FLAT_INTENT_KEYS = ("intent_operation_type", "intent_data_sensitivity", "intent_reason")


@dataclass(frozen=True, slots=True)
class IntentDeclaration:
    operation_type: OperationType
    data_sensitivity: DataSensitivity | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"operation_type": self.operation_type.value}
        if self.data_sensitivity is not None:
            out["data_sensitivity"] = self.data_sensitivity.value
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True, slots=True)
class Annotations:
    """The behaviour hints an upstream server gave for a tool (None: the server said nothing)."""

    read_only: bool | None = None
    destructive: bool | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> Annotations:
        if not raw:
            return cls()
        ro, de = raw.get("readOnlyHint"), raw.get("destructiveHint")
        return cls(read_only=ro if isinstance(ro, bool) else None, destructive=de if isinstance(de, bool) else None)


def recommended_variant(annotations: Annotations) -> ToolVariant:
    """The variant mcphost tells agents to use: destructive wins over read-only; unannotated means write."""
    if annotations.destructive:
        return ToolVariant.DESTRUCTIVE
    if annotations.read_only:
        return ToolVariant.READ
    return ToolVariant.WRITE


_RANK = {ToolVariant.READ: 0, ToolVariant.WRITE: 1, ToolVariant.DESTRUCTIVE: 2}


def stricter_variant(declared: ToolVariant, recommended: ToolVariant) -> ToolVariant:
    """The variant whose permission governs a call: the agent's, or the server's reading of the tool if stricter."""
    return recommended if _RANK[recommended] > _RANK[declared] else declared


def _error(code: ErrorCode, message: str, variant: ToolVariant, **details: Any) -> GatewayError:
    return GatewayError(code, message, {"variant": variant.value, **details})


def raw_intent(arguments: Mapping[str, Any]) -> Any:
    """The intent as the agent sent it: the `intent` value, or the flat `intent_*` keys gathered up."""
    if "intent" in arguments and arguments["intent"] is not None:
        return arguments["intent"]
    flat = {key.removeprefix("intent_"): arguments[key] for key in FLAT_INTENT_KEYS if key in arguments}
    return flat or None


def parse_intent(raw: Any, variant: ToolVariant) -> IntentDeclaration:
    """Accept the canonical object, a JSON string of it, or the gathered flat form; reject anything else."""
    if raw is None or raw == "":
        raise _error(ErrorCode.MISSING_INTENT, f"intent parameter is required for {variant.value}", variant)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _error(
                ErrorCode.MISSING_OPERATION_TYPE,
                "intent.operation_type is required (intent was a string that is not a JSON object: "
                f'{exc.msg}); send intent as {{"operation_type": "{variant.operation.value}"}}',
                variant,
            ) from None
    if not isinstance(raw, Mapping):
        raise _error(
            ErrorCode.MISSING_OPERATION_TYPE,
            f"intent.operation_type is required (intent must be an object such as "
            f'{{"operation_type": "{variant.operation.value}"}}, not {type(raw).__name__})',
            variant,
        )

    op = raw.get("operation_type")
    if op is None or op == "":
        raise _error(ErrorCode.MISSING_OPERATION_TYPE, "intent.operation_type is required", variant)
    try:
        operation = OperationType(op) if isinstance(op, str) else None
    except ValueError:
        operation = None
    if operation is None:
        raise _error(
            ErrorCode.INVALID_OPERATION_TYPE,
            f"Invalid intent.operation_type '{op}': must be read, write, or destructive",
            variant,
            operation_type=op,
        )

    sens_raw = raw.get("data_sensitivity")
    sensitivity: DataSensitivity | None = None
    if sens_raw is not None and sens_raw != "":
        try:
            sensitivity = DataSensitivity(sens_raw) if isinstance(sens_raw, str) else None
        except ValueError:
            sensitivity = None
        if sensitivity is None:
            raise _error(
                ErrorCode.INVALID_SENSITIVITY,
                f"Invalid intent.data_sensitivity '{sens_raw}': must be public, internal, private, or unknown",
                variant,
            )

    reason = raw.get("reason")
    if reason is not None and not isinstance(reason, str):
        reason = json.dumps(reason)
    if reason is not None and len(reason) > MAX_REASON_LENGTH:
        raise _error(
            ErrorCode.REASON_TOO_LONG,
            f"intent.reason exceeds maximum length of {MAX_REASON_LENGTH} characters",
            variant,
            length=len(reason),
        )
    return IntentDeclaration(operation, sensitivity, reason or None)


def check_two_keys(variant: ToolVariant, intent: IntentDeclaration) -> None:
    """Key one is the variant, key two is `intent.operation_type`: they must agree."""
    if intent.operation_type is not variant.operation:
        raise _error(
            ErrorCode.INTENT_MISMATCH,
            f"Intent mismatch: tool is {variant.value} but intent declares {intent.operation_type.value}",
            variant,
            operation_type=intent.operation_type.value,
            recommended_variant=ToolVariant.for_operation(intent.operation_type).value,
        )


@dataclass(frozen=True, slots=True)
class AnnotationVerdict:
    warnings: tuple[str, ...] = ()


def check_annotations(
    variant: ToolVariant, tool_name: str, annotations: Annotations, *, strict: bool
) -> AnnotationVerdict:
    """The server-annotation half of the matrix; `strict=False` turns a mismatch into a warning."""
    recommended = recommended_variant(annotations)
    if variant is ToolVariant.DESTRUCTIVE:
        return AnnotationVerdict()
    if annotations.destructive:
        message = f"Tool '{tool_name}' is marked destructive by server, use call_tool_destructive"
        if strict:
            raise _error(
                ErrorCode.SERVER_MISMATCH, message, variant, tool=tool_name, recommended_variant=recommended.value
            )
        return AnnotationVerdict((f"{message} (allowed: strict_server_validation is off)",))
    if variant is ToolVariant.WRITE and annotations.read_only:
        return AnnotationVerdict(
            (f"Tool '{tool_name}' is marked read-only by server; call_tool_read is enough for it",)
        )
    return AnnotationVerdict()


def validate_call(
    variant: ToolVariant,
    raw: Any,
    tool_name: str,
    annotations: Annotations,
    *,
    strict: bool,
) -> tuple[IntentDeclaration, AnnotationVerdict]:
    """The whole intent check for one call, in the order the contract gives: parse, two keys, annotations."""
    intent = parse_intent(raw, variant)
    check_two_keys(variant, intent)
    return intent, check_annotations(variant, tool_name, annotations, strict=strict)
