"""A tool's answer off the lane: plain text answers are read by a look at their keys, everything else by the SDK's
model, and both ways agree on what is an answer and whether it is an error."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mcphost.activity.reader import NonFinite
from mcphost.upstream.connection import TooDeep, ToolResult, _CheckedResult, plain_text_result

TEXT = {"type": "text", "text": "read_notes: x"}

# Answers the SDK's model takes, plain or not.
VALID: list[Any] = [
    {"content": [TEXT]},
    {"content": [TEXT, TEXT], "isError": False},
    {"content": [TEXT], "isError": True},
    {"content": []},
    {"content": [TEXT], "structuredContent": {"a": [1, 2]}, "_meta": {"k": "v"}},
    {"content": [TEXT], "structuredContent": None, "_meta": None},
    {"content": [{"type": "text", "text": "\udfff lone"}]},
    # Not plain: another kind of block, a block's annotations, the model's own field names, an unknown key.
    {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}]},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 0.5}}]},
    {"content": [TEXT], "is_error": True},
    {"content": [TEXT], "isError": 1},
    {"content": [TEXT], "somethingNew": {"x": 1}},
]

# Answers it refuses: each must still be refused.
INVALID: list[Any] = [
    None,
    [],
    "text",
    {},
    {"isError": True},
    {"content": None},
    {"content": "text"},
    {"content": [{"type": "text"}]},
    {"content": [{"type": "text", "text": 5}]},
    {"content": [{"text": "no type"}]},
    {"content": ["text"]},
    {"content": [TEXT], "isError": "maybe"},
    {"content": [TEXT], "_meta": "not an object"},
]


@pytest.mark.parametrize("data", VALID)
def test_an_answer_the_model_takes_is_taken_with_the_models_error_flag(data: dict[str, Any]) -> None:
    model = _CheckedResult.model_validate(data)
    result = ToolResult.checked(data)
    assert result.data is data
    assert result.is_error is model.is_error
    assert result.model.model_dump() == model.model_dump()


@pytest.mark.parametrize("data", INVALID)
def test_an_answer_the_model_refuses_is_refused(data: Any) -> None:
    assert not plain_text_result(data)
    with pytest.raises(ValidationError):
        ToolResult.checked(data)


def test_plain_text_answers_skip_the_validator_and_others_do_not() -> None:
    plain = [data for data in VALID if plain_text_result(data)]
    assert len(plain) == 7
    assert all(ToolResult.checked(data)._model is None for data in plain)
    assert all(ToolResult.checked(data)._model is not None for data in VALID if data not in plain)


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize("levels", [210, 300])
def test_an_answer_nested_past_what_can_be_passed_on_is_refused_both_ways(levels: int) -> None:
    # Off the lane (`checked`) and from the SDK's client (`of`, whose dump stops near 250 levels): one refusal.
    answer = {"content": [TEXT], "structuredContent": _nested(levels)}
    with pytest.raises(TooDeep):
        ToolResult.checked(answer)
    with pytest.raises(TooDeep):
        ToolResult.of(_CheckedResult.model_validate(answer))


def test_an_answer_nested_within_the_limit_passes_both_ways() -> None:
    answer = {"content": [TEXT], "structuredContent": _nested(150), "_meta": {"wide": list(range(1000))}}
    assert ToolResult.checked(answer).data is answer
    assert ToolResult.of(_CheckedResult.model_validate(answer)).data["structuredContent"] == answer["structuredContent"]


@pytest.mark.parametrize(
    ("answer", "found"),
    [
        ({"content": [TEXT], "structuredContent": {"a": [1, float("nan")]}}, "NaN (at structuredContent.a[1])"),
        ({"content": [TEXT], "_meta": {"t": float("inf")}}, "Infinity (at _meta.t)"),
        ({"content": [{**TEXT, "_meta": {"t": -float("inf")}}]}, "-Infinity (at content[0]._meta.t)"),
        (
            {"content": [{"type": "resource", "resource": {"uri": "a:b", "text": "", "_meta": {"n": float("nan")}}}]},
            "NaN (at content[0].resource._meta.n)",
        ),
    ],
)
def test_an_sdk_answer_holding_nan_or_an_infinity_is_refused_saying_where(answer: Any, found: str) -> None:
    # The SDK's reader takes `NaN`, `Infinity` and `1e400` from an HTTP server's answer; its writer makes each a
    # null, which the agent got as the server's answer.
    with pytest.raises(NonFinite) as refused:
        ToolResult.of(_CheckedResult.model_validate(answer))
    assert str(refused.value) == found


def test_an_sdk_answer_with_only_finite_numbers_passes() -> None:
    answer = {"content": [TEXT], "structuredContent": {"a": [1, 1e308, -0.0]}, "_meta": {"t": 2.5}}
    assert ToolResult.of(_CheckedResult.model_validate(answer)).data["structuredContent"] == answer["structuredContent"]
