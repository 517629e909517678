from __future__ import annotations

from typing import Any

import pytest

from mcphost.activity.record import new_record_id
from mcphost.errors import ErrorCode, GatewayError
from mcphost.gateway.arguments import parse_args, split_name
from mcphost.intent import ToolVariant

R = ToolVariant.READ


def code(fn: Any, *args: Any) -> ErrorCode:
    with pytest.raises(GatewayError) as info:
        fn(*args)
    return info.value.code


def test_args_come_from_either_field_or_default_to_empty() -> None:
    assert parse_args({"name": "a:b", "args": {"x": 1}}, R) == {"x": 1}
    assert parse_args({"name": "a:b", "args_json": '{"x": 1}'}, R) == {"x": 1}
    assert parse_args({"name": "a:b"}, R) == {}
    assert parse_args({"name": "a:b", "args_json": ""}, R) == {}


@pytest.mark.parametrize(
    "arguments",
    [
        {"args_json": "{"},
        {"args_json": "[]"},
        {"args_json": "3"},
        {"args_json": 3},
        {"args": "x"},
        {"args": {}, "args_json": "{}"},
        {"arguments": {}},
    ],
)
def test_bad_arguments_are_invalid_args(arguments: dict[str, Any]) -> None:
    assert code(parse_args, {"name": "a:b", **arguments}, R) is ErrorCode.INVALID_ARGS


def test_names_split_on_the_first_colon() -> None:
    assert split_name("srv:tool:with:colons", R) == ("srv", "tool:with:colons")
    assert code(split_name, None, R) is ErrorCode.INVALID_ARGS
    assert code(split_name, "plain", R) is ErrorCode.TOOL_NOT_FOUND
    assert code(split_name, ":tool", R) is ErrorCode.TOOL_NOT_FOUND


def test_record_ids_sort_by_time() -> None:
    ids = [new_record_id(ms) for ms in (1, 2, 1_000_000, 2**47)]
    assert ids == sorted(ids)
    assert len(set(new_record_id(5) for _ in range(100))) == 100
