from __future__ import annotations

import os
from typing import Any

import orjson
import pytest

from mcphost.activity.record import new_record_id
from mcphost.errors import ErrorCode, GatewayError
from mcphost.gateway.arguments import MAX_DEPTH, check_input, encoded_call, parse_args, split_name
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
        # The intent twice: one of the two would go unheeded (a read beside a flat write ran as the read).
        {"intent": {"operation_type": "read"}, "intent_operation_type": "write"},
        {"intent": '{"operation_type": "read"}', "intent_reason": "r"},
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
    # Drawn from a pool of random bytes, refilled as it runs out: ids stay distinct across many refills.
    assert len({new_record_id(5) for _ in range(5000)}) == 5000


def test_a_forked_process_draws_record_ids_of_its_own() -> None:
    # The random part comes from a pool in memory; a child sharing its parent's would write the same ids.
    new_record_id(5)  # the pool is filled
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.write(write_end, new_record_id(5).encode())
        os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    child = os.read(read_end, 64).decode()
    os.close(read_end)
    assert status == 0 and len(child) == 26
    assert child != new_record_id(5)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"args": {"items": [1, {"note": "bad \udfff"}]}}, "arguments.args.items[1].note"),
        ({"args": {"ok": "fine", "key\ud800": 1}}, "arguments.args"),
        ({"args": ("a", ["b", "\udc00"])}, "arguments.args[1][1]"),
    ],
)
def test_invalid_unicode_is_named_by_where_it_sits(value: dict[str, Any], field: str) -> None:
    with pytest.raises(GatewayError) as info:
        check_input(value, R)
    assert info.value.code is ErrorCode.INVALID_ARGS and info.value.details["field"] == field


def test_nesting_past_the_limit_is_named_by_its_path_and_what_is_within_it_passes() -> None:
    deep: Any = "bottom"
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    check_input({"x": deep}, R, "args")  # the text MAX_DEPTH levels under the top: within
    with pytest.raises(GatewayError) as info:
        check_input({"x": [deep]}, R, "args")
    assert f"args nest deeper than {MAX_DEPTH} levels (at args.x[0]" in info.value.message


@pytest.mark.parametrize("leaf", [1, 2.5, True, None, "text", {}, []])
def test_any_value_past_the_limit_is_refused_whatever_it_is(leaf: Any) -> None:
    deep: Any = leaf
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(GatewayError) as info:
        check_input(deep, R)
    assert "deeper than" in info.value.message


@pytest.mark.parametrize(
    ("value", "field", "said"),
    [
        ({"args": {"n": float("nan")}}, "arguments.args.n", "is NaN"),
        ({"args": {"list": [1, None, {"x": float("-inf")}]}}, "arguments.args.list[2].x", "is -Infinity"),
        ({"args": ("a", float("inf"))}, "arguments.args[1]", "is Infinity"),
    ],
)
def test_nan_and_the_infinities_are_refused_where_they_sit_which_json_would_have_made_null(
    value: dict[str, Any], field: str, said: str
) -> None:
    # What the caller passes: the call as orjson wrote it, each of these as null.
    assert b"null" in orjson.dumps(value)
    for as_json in (orjson.dumps(value), None):
        with pytest.raises(GatewayError) as info:
            check_input(value, R, as_json=as_json)
        assert info.value.code is ErrorCode.INVALID_ARGS and info.value.details["field"] == field
        assert said in info.value.message
    deep: Any = float("nan")
    for _ in range(MAX_DEPTH + 10):
        deep = [deep]
    with pytest.raises(GatewayError):  # past the depth that skips the look, found by the walk
        check_input({"x": deep}, R)
    check_input({"args": {"x": None, "y": 1e308, "z": -0.0}}, R)  # a null, and numbers JSON carries, pass


@pytest.mark.parametrize("text", ['{"n": NaN}', '{"n": [Infinity]}', '{"n": -Infinity}', '{"n": 1e400}'])
def test_args_json_that_python_reads_to_a_nan_or_an_infinity_is_refused(text: str) -> None:
    with pytest.raises(GatewayError) as info:
        parse_args({"args_json": text}, R)
    assert info.value.code is ErrorCode.INVALID_ARGS and "which is no JSON value" in info.value.message


def test_brackets_inside_text_do_not_count_as_nesting() -> None:
    check_input({"text": "[" * 500 + "{" * 500, "big": 2**70}, R)


def test_a_calls_args_are_encoded_once_and_written_into_the_whole_as_they_are() -> None:
    arguments = {"name": "a:b", "args": {"text": 'say "hi"\n', "n": [1, {"k": None}]}, "intent": {"x": "é"}}
    whole, args = encoded_call(arguments)
    assert whole == orjson.dumps(arguments) and args == orjson.dumps(arguments["args"])


@pytest.mark.parametrize(
    "arguments",
    [
        {"name": "a:b", "args": {"big": 2**70}},  # orjson refuses to write it
        {"name": "a:b", "args": {"text": "\udfff"}},
        {"name": "a:b", "args": "not an object"},
        {"name": "a:b", "args_json": '{"x": 1}'},
    ],
)
def test_args_orjson_cannot_write_or_that_are_no_object_have_no_encoding_of_their_own(
    arguments: dict[str, Any],
) -> None:
    whole, args = encoded_call(arguments)
    assert args is None
    assert whole == (None if isinstance(arguments.get("args"), dict) else orjson.dumps(arguments))


def test_what_orjson_refuses_is_still_walked_and_refused_when_the_caller_passes_no_encoding() -> None:
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    arguments = {"name": "a:b", "args": {"deep": deep, "text": "\udfff"}}
    whole, _ = encoded_call(arguments)
    assert whole is None
    with pytest.raises(GatewayError):
        check_input(arguments, R, as_json=whole)
