"""The guard between an upstream's transport and the SDK session: oversized answers, malformed tool lists."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from mcphost.upstream.guard import DROPPED_META, RESULT_TOO_LARGE, Guard, MessageTooLarge, envelope, too_large

OBJECT = {"type": "object"}


def guard(limit: int = 1000, *, measure: bool = False) -> Guard:
    return Guard("s", limit, measure=measure, on_eof=lambda: None)


def request(g: Guard, request_id: int, method: str) -> None:
    g.outbound(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method)))


def response(request_id: int, result: dict[str, Any]) -> SessionMessage:
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))


def error_of(item: Any) -> MCPError:
    assert isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCError)
    return MCPError.from_jsonrpc_error(item.message)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"jsonrpc":"2.0","id":7,"result":{"content":[', ("response", 7)),
        ('{"result":{"content":[{"id":99}]},"jsonrpc":"2.0","id":8}', ("response", 8)),
        ('{"result":{"x":{"id":99}}}', ("response", None)),
        ('{"jsonrpc": "2.0", "id": "abc", "error": {"code": 1', ("response", "abc")),
        ('{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"', ("other", None)),
        ('{"method":"sampling/createMessage","params":{},"jsonrpc":"2.0","id":3}', ("other", 3)),
        ("garbage", (None, None)),
    ],
)
def test_the_envelope_of_an_oversized_line_is_read_from_its_ends(line: str, expected: tuple[Any, Any]) -> None:
    data = line.encode()
    assert envelope(data[:512], data[-512:]) == expected


def test_an_oversized_answer_becomes_an_error_for_its_request_carrying_the_size() -> None:
    g = guard()
    request(g, 4, "tools/call")
    error = error_of(g.inbound(MessageTooLarge(5000, 1000, "response", 4)))
    assert error.code == RESULT_TOO_LARGE
    found = too_large(error)
    assert found is not None and (found.size, found.limit) == (5000, 1000)


def test_an_oversized_answer_without_a_readable_id_goes_to_the_only_waiting_request() -> None:
    g = guard()
    request(g, 9, "tools/call")
    assert too_large(error_of(g.inbound(MessageTooLarge(5000, 1000, None, None)))) is not None


def test_an_oversized_message_that_answers_nothing_waiting_is_dropped() -> None:
    g = guard()
    assert g.inbound(MessageTooLarge(5000, 1000, "response", 1)) is None
    request(g, 1, "tools/call")
    request(g, 2, "tools/call")
    assert g.inbound(MessageTooLarge(5000, 1000, None, None)) is None  # two could be its request: neither is
    assert g.inbound(MessageTooLarge(5000, 1000, "other", None)) is None  # a notification is no answer


def test_a_server_cannot_forge_the_refusal() -> None:
    assert too_large(MCPError(RESULT_TOO_LARGE, "big", {"size": 1, "limit": 0})) is None


def test_an_http_answer_over_the_limit_is_measured_and_refused() -> None:
    g = guard(limit=100, measure=True)
    request(g, 1, "tools/call")
    request(g, 2, "tools/call")
    assert too_large(error_of(g.inbound(response(1, {"content": [{"type": "text", "text": "x" * 200}]})))) is not None
    small = response(2, {"content": []})
    assert g.inbound(small) is small


def test_a_tools_list_page_loses_its_malformed_tools_and_says_so_in_its_meta() -> None:
    g = guard(limit=10_000_000)
    request(g, 1, "tools/list")
    page = {"tools": [{"name": "good", "inputSchema": OBJECT}, {"name": "bad", "inputSchema": "x"}]}
    out = g.inbound(response(1, page))
    assert isinstance(out, SessionMessage) and isinstance(out.message, types.JSONRPCResponse)
    result = types.ListToolsResult.model_validate(out.message.result, by_name=False)
    assert [t.name for t in result.tools] == ["good"]
    assert result.meta is not None
    [[name, reason]] = result.meta[DROPPED_META]
    assert name == "bad" and reason.startswith("inputSchema")


def test_a_valid_page_passes_untouched_but_a_server_cannot_claim_drops_of_its_own() -> None:
    g = guard(limit=10_000_000)
    request(g, 1, "tools/list")
    valid = response(1, {"tools": [{"name": "good", "inputSchema": OBJECT}]})
    assert g.inbound(valid) is valid
    request(g, 2, "tools/list")
    forged = g.inbound(response(2, {"tools": [], "_meta": {DROPPED_META: [["x", "y"]], "other": 1}}))
    assert isinstance(forged, SessionMessage) and isinstance(forged.message, types.JSONRPCResponse)
    assert forged.message.result["_meta"] == {"other": 1}


def test_the_negotiated_version_is_learnt_from_the_initialize_answer() -> None:
    g = guard()
    request(g, 0, "initialize")
    g.inbound(response(0, {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "x"}}))
    assert g.version == "2025-06-18"


def test_a_cancelled_request_no_longer_takes_an_oversized_answer() -> None:
    g = guard()
    request(g, 5, "tools/call")
    cancel = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 5})
    g.outbound(SessionMessage(cancel))
    assert g.inbound(MessageTooLarge(5000, 1000, None, None)) is None


def test_the_refusal_message_is_json_rpc_the_sdk_reads() -> None:
    g = guard()
    request(g, 4, "tools/call")
    item = g.inbound(MessageTooLarge(5000, 1000, "response", 4))
    assert isinstance(item, SessionMessage)
    wire = json.loads(item.message.model_dump_json(by_alias=True, exclude_none=True))
    assert wire["id"] == 4 and wire["error"]["code"] == RESULT_TOO_LARGE
