"""A tool answer's large parts are written once: measured for the record (`ToolResult.json_size`), then put into the
agent's answer as written (`response_line`). Both must be byte for byte what writing the whole again gives."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from mcphost.pipes import dump_line
from mcphost.serve.mcp_server import outcome_data, response_line, sdk_result
from mcphost.upstream.connection import ENCODED_PART_MIN, ToolResult

PAGE = json.dumps(
    [{"id": n, "title": f'say "hi" \\ {n}', "body": "a\nb\u2028é😀"} for n in range(60)], ensure_ascii=False
)
STAMP = {"name": "mcphost", "version": "0"}

ANSWERS: dict[str, dict[str, Any]] = {
    "a page of JSON as text, mirrored": {
        "content": [{"type": "text", "text": PAGE}],
        "structuredContent": {"tool": "t", "text": PAGE},
        "isError": False,
    },
    "two large blocks and a small one": {
        "content": [{"type": "text", "text": PAGE}, {"type": "text", "text": "ok"}, {"type": "text", "text": PAGE[1:]}],
    },
    "a small answer": {"content": [{"type": "text", "text": "read_notes: x"}], "structuredContent": {"a": 1}},
    "structured content past the threshold, text short": {
        "content": [{"type": "text", "text": "see structured"}],
        "structuredContent": {"rows": [{"n": n, "s": "x" * 40} for n in range(40)]},
    },
    "an image beside a large text": {
        "content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}, {"type": "text", "text": PAGE}],
    },
}


@pytest.mark.parametrize("case", sorted(ANSWERS))
def test_an_answer_is_measured_as_writing_it_whole_measures_it(case: str) -> None:
    data = json.loads(json.dumps(ANSWERS[case]))
    answered = ToolResult.checked(data)
    assert answered.json_size() == len(orjson.dumps(data))
    assert all(len(f) >= ENCODED_PART_MIN for f in map(lambda e: orjson.dumps(e[0]), answered.encodings.values()))
    large = (
        any(len(b.get("text", "")) >= ENCODED_PART_MIN for b in data["content"])
        or len(orjson.dumps(data.get("structuredContent", {}))) >= ENCODED_PART_MIN
    )
    assert bool(answered.encodings) is large


@pytest.mark.parametrize(
    "data",
    [
        {"content": [{"type": "text", "text": PAGE}], "structuredContent": {"n": 2**70, "text": PAGE}},
        {"content": [{"type": "text", "text": PAGE + "\udfff"}]},
    ],
    ids=["an integer past 64 bits", "a lone surrogate"],
)
def test_what_orjson_cannot_write_is_measured_by_pythons_encoder_and_nothing_is_kept(data: dict[str, Any]) -> None:
    answered = ToolResult(data)
    expected = len(json.dumps(data, separators=(",", ":"), default=str).encode("utf-8", "surrogatepass"))
    assert answered.json_size() == expected
    assert answered.encodings == {}


@pytest.mark.parametrize("case", sorted(ANSWERS))
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("request_id", [7, "mcphost-7", 2**70])
def test_the_agents_answer_written_with_the_kept_parts_is_the_one_written_whole(
    case: str, version: str, request_id: Any
) -> None:
    data = json.loads(json.dumps(ANSWERS[case]))
    answered = ToolResult.checked(data)
    answered.json_size()
    kind, answer = sdk_result(version, data, STAMP)
    message = {"jsonrpc": "2.0", "id": request_id, kind: answer}
    assert response_line(request_id, kind, answer, answered.encodings) == dump_line(message)


def test_a_warning_block_added_to_the_answer_keeps_the_parts_it_shares() -> None:
    from mcphost.gateway.service import CallOutcome, Status

    data = json.loads(json.dumps(ANSWERS["a page of JSON as text, mirrored"]))
    answered = ToolResult.checked(data)
    answered.json_size()
    outcome = CallOutcome(status=Status.SUCCESS, answer=answered, warnings=["the server says it writes"])
    kind, answer = sdk_result("2025-06-18", outcome_data(outcome), STAMP)
    assert answer["content"][-1]["text"].endswith("the server says it writes")
    line = response_line(1, kind, answer, answered.encodings)
    assert line == dump_line({"jsonrpc": "2.0", "id": 1, kind: answer})


def test_the_kept_writing_is_what_goes_out_and_only_for_the_object_it_was_made_of() -> None:
    data = json.loads(json.dumps(ANSWERS["a page of JSON as text, mirrored"]))
    text = data["content"][0]["text"]
    # Another writing of the same text (escaped to ASCII), kept as if measured: it must be the one in the line.
    ascii_text = json.dumps(text).encode()
    encodings = {id(text): (text, orjson.Fragment(ascii_text))}
    kind, answer = sdk_result("2025-06-18", data, STAMP)
    line = response_line(5, kind, answer, encodings)
    assert ascii_text in line and json.loads(line) == json.loads(dump_line({"jsonrpc": "2.0", "id": 5, kind: answer}))
    # An equal text that is another object is written afresh.
    twin = json.loads(json.dumps(data))
    kind, answer = sdk_result("2025-06-18", twin, STAMP)
    assert ascii_text not in response_line(5, kind, answer, encodings)
