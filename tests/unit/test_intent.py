"""The two-key matrix and every intent error code, on the pure core."""

from __future__ import annotations

from typing import Any

import pytest

from mcphost.errors import ErrorCode, GatewayError
from mcphost.intent import (
    Annotations,
    DataSensitivity,
    OperationType,
    ToolVariant,
    parse_intent,
    raw_intent,
    recommended_variant,
    validate_call,
)

READ_ONLY = Annotations(read_only=True)
DESTRUCTIVE = Annotations(destructive=True)
NONE = Annotations()
BOTH = Annotations(read_only=True, destructive=True)
R, W, D = ToolVariant.READ, ToolVariant.WRITE, ToolVariant.DESTRUCTIVE


def check(variant: ToolVariant, op: str, annotations: Annotations, strict: bool = True) -> tuple[str, ...]:
    _, verdict = validate_call(variant, {"operation_type": op}, "srv:tool", annotations, strict=strict)
    return verdict.warnings


def code_of(variant: ToolVariant, raw: Any, annotations: Annotations = NONE, strict: bool = True) -> ErrorCode:
    with pytest.raises(GatewayError) as info:
        validate_call(variant, raw, "srv:tool", annotations, strict=strict)
    return info.value.code


@pytest.mark.parametrize(
    ("variant", "op", "annotations", "expected"),
    [
        (R, "read", READ_ONLY, "allow"),
        (R, "read", DESTRUCTIVE, ErrorCode.SERVER_MISMATCH),
        (R, "read", NONE, "allow"),
        (R, "write", READ_ONLY, ErrorCode.INTENT_MISMATCH),
        (R, "write", DESTRUCTIVE, ErrorCode.INTENT_MISMATCH),
        (R, "write", NONE, ErrorCode.INTENT_MISMATCH),
        (W, "write", READ_ONLY, "warn"),
        (W, "write", DESTRUCTIVE, ErrorCode.SERVER_MISMATCH),
        (W, "write", NONE, "allow"),
        (W, "destructive", READ_ONLY, ErrorCode.INTENT_MISMATCH),
        (W, "destructive", NONE, ErrorCode.INTENT_MISMATCH),
        (D, "destructive", READ_ONLY, "allow"),
        (D, "destructive", DESTRUCTIVE, "allow"),
        (D, "destructive", NONE, "allow"),
        (D, "destructive", BOTH, "allow"),
        (D, "read", READ_ONLY, ErrorCode.INTENT_MISMATCH),
        (D, "read", NONE, ErrorCode.INTENT_MISMATCH),
        (R, "read", BOTH, ErrorCode.SERVER_MISMATCH),
        (W, "write", BOTH, ErrorCode.SERVER_MISMATCH),
    ],
)
def test_validation_matrix(variant: ToolVariant, op: str, annotations: Annotations, expected: Any) -> None:
    if isinstance(expected, ErrorCode):
        assert code_of(variant, {"operation_type": op}, annotations) is expected
    elif expected == "warn":
        assert check(variant, op, annotations)
    else:
        assert check(variant, op, annotations) == ()


@pytest.mark.parametrize("variant", list(ToolVariant))
@pytest.mark.parametrize("raw", [None, ""])
def test_missing_intent_is_rejected_naming_the_variant(variant: ToolVariant, raw: Any) -> None:
    with pytest.raises(GatewayError) as info:
        parse_intent(raw, variant)
    assert info.value.code is ErrorCode.MISSING_INTENT
    assert info.value.message == f"intent parameter is required for {variant.value}"


@pytest.mark.parametrize("raw", [{}, {"reason": "x"}, {"operation_type": ""}, {"operation_type": None}])
def test_intent_without_operation_type_is_rejected(raw: Any) -> None:
    with pytest.raises(GatewayError) as info:
        parse_intent(raw, R)
    assert info.value.code is ErrorCode.MISSING_OPERATION_TYPE
    assert info.value.message == "intent.operation_type is required"


@pytest.mark.parametrize("raw", ['{"operation_type": ', "[" * 5000 + "]" * 5000], ids=["cut short", "too deep"])
def test_an_intent_string_that_is_no_json_object_is_rejected_as_such(raw: str) -> None:
    # Nested past the parser's recursion, it was a RecursionError: a fault of mcphost's own (UPSTREAM_ERROR).
    with pytest.raises(GatewayError) as info:
        parse_intent(raw, R)
    assert info.value.code is ErrorCode.MISSING_OPERATION_TYPE
    assert "intent was a string that is not a JSON object" in info.value.message


def test_unknown_operation_type_uses_contract_message() -> None:
    with pytest.raises(GatewayError) as info:
        parse_intent({"operation_type": "unknown"}, R)
    assert info.value.code is ErrorCode.INVALID_OPERATION_TYPE
    assert info.value.message == "Invalid intent.operation_type 'unknown': must be read, write, or destructive"


def test_operation_type_is_case_sensitive_and_typed() -> None:
    assert code_of(R, {"operation_type": "READ"}) is ErrorCode.INVALID_OPERATION_TYPE
    assert code_of(R, {"operation_type": 1}) is ErrorCode.INVALID_OPERATION_TYPE


def test_intent_mismatch_uses_contract_message() -> None:
    with pytest.raises(GatewayError) as info:
        validate_call(R, {"operation_type": "write"}, "srv:tool", NONE, strict=True)
    assert info.value.message == "Intent mismatch: tool is call_tool_read but intent declares write"
    assert info.value.details["recommended_variant"] == "call_tool_write"


def test_server_mismatch_names_the_tool_and_the_fix() -> None:
    with pytest.raises(GatewayError) as info:
        validate_call(R, {"operation_type": "read"}, "github:delete_repo", DESTRUCTIVE, strict=True)
    assert info.value.message == "Tool 'github:delete_repo' is marked destructive by server, use call_tool_destructive"
    assert info.value.details == {
        "variant": "call_tool_read",
        "tool": "github:delete_repo",
        "recommended_variant": "call_tool_destructive",
    }


@pytest.mark.parametrize("variant", [R, W])
def test_lenient_mode_turns_server_mismatch_into_a_warning(variant: ToolVariant) -> None:
    warnings = check(variant, variant.operation.value, DESTRUCTIVE, strict=False)
    assert len(warnings) == 1
    assert "marked destructive by server" in warnings[0]


def test_lenient_mode_does_not_excuse_an_intent_mismatch() -> None:
    assert code_of(R, {"operation_type": "write"}, NONE, strict=False) is ErrorCode.INTENT_MISMATCH


def test_invalid_sensitivity_uses_contract_message() -> None:
    with pytest.raises(GatewayError) as info:
        parse_intent({"operation_type": "read", "data_sensitivity": "secret"}, R)
    assert info.value.code is ErrorCode.INVALID_SENSITIVITY
    assert info.value.message == (
        "Invalid intent.data_sensitivity 'secret': must be public, internal, private, or unknown"
    )


def test_reason_is_limited_to_1000_characters() -> None:
    assert parse_intent({"operation_type": "read", "reason": "x" * 1000}, R).reason == "x" * 1000
    with pytest.raises(GatewayError) as info:
        parse_intent({"operation_type": "read", "reason": "x" * 1001}, R)
    assert info.value.code is ErrorCode.REASON_TOO_LONG
    assert info.value.message == "intent.reason exceeds maximum length of 1000 characters"


def test_full_intent_round_trips() -> None:
    intent = parse_intent({"operation_type": "write", "data_sensitivity": "private", "reason": "user asked"}, W)
    assert intent.operation_type is OperationType.WRITE
    assert intent.data_sensitivity is DataSensitivity.PRIVATE
    assert intent.to_dict() == {"operation_type": "write", "data_sensitivity": "private", "reason": "user asked"}


def test_optional_fields_are_left_out_when_absent() -> None:
    assert parse_intent({"operation_type": "read"}, R).to_dict() == {"operation_type": "read"}


def test_intent_as_json_string_goes_through_the_same_checks() -> None:
    assert parse_intent('{"operation_type": "read"}', R).operation_type is OperationType.READ
    assert code_of(R, '{"operation_type": "write"}') is ErrorCode.INTENT_MISMATCH
    assert code_of(R, '{"operation_type": "read", "data_sensitivity": "secret"}') is ErrorCode.INVALID_SENSITIVITY


def test_intent_string_that_is_not_json_says_how_to_send_it() -> None:
    with pytest.raises(GatewayError) as info:
        parse_intent("read", R)
    assert info.value.code is ErrorCode.MISSING_OPERATION_TYPE
    assert '{"operation_type": "read"}' in info.value.message


def test_flat_intent_keys_are_gathered_into_one_intent() -> None:
    raw = raw_intent({"name": "a:b", "intent_operation_type": "write", "intent_reason": "why"})
    assert parse_intent(raw, W).to_dict() == {"operation_type": "write", "reason": "why"}
    assert code_of(R, raw_intent({"intent_operation_type": "write"})) is ErrorCode.INTENT_MISMATCH
    assert code_of(R, raw_intent({"name": "a:b"})) is ErrorCode.MISSING_INTENT


def test_nested_intent_wins_over_flat_keys() -> None:
    raw = raw_intent({"intent": {"operation_type": "read"}, "intent_operation_type": "write"})
    assert parse_intent(raw, R).operation_type is OperationType.READ


@pytest.mark.parametrize("raw", [["read"], 3, True])
def test_intent_of_the_wrong_type_is_rejected(raw: Any) -> None:
    assert code_of(R, raw) is ErrorCode.MISSING_OPERATION_TYPE


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (DESTRUCTIVE, D),
        (READ_ONLY, R),
        (NONE, W),
        (BOTH, D),
        (Annotations(read_only=False, destructive=False), W),
    ],
)
def test_recommended_variant(annotations: Annotations, expected: ToolVariant) -> None:
    assert recommended_variant(annotations) is expected


def test_annotations_ignore_non_boolean_hints() -> None:
    assert Annotations.from_mapping({"readOnlyHint": "yes", "destructiveHint": True}) == Annotations(None, True)
    assert Annotations.from_mapping(None) == NONE
