"""Which 2026-era tool calls the stdio shortcut takes from the SDK, and how it shapes their results: only what the
SDK would take as it is, from a client that cannot be asked, on a stream the SDK serves in that era; everything else
goes on to the SDK, which answers it as it always did."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.server import Server
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INVALID_PARAMS,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types.methods import validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcphost.serve import mcp_server
from mcphost.serve.mcp_server import DirectCalls, modern_call, sdk_result, shortcut_call
from mcphost.serve.stdio import CallCut

MODERN = "2026-07-28"
INFO = {"name": "agent", "version": "1.2"}
READ = {"name": "probe:read_notes", "args": {"text": "x"}, "intent": {"operation_type": "read"}}
STAMP = {"name": "mcphost", "version": "0"}


def envelope(**changes: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        PROTOCOL_VERSION_META_KEY: MODERN,
        CLIENT_INFO_META_KEY: INFO,
        CLIENT_CAPABILITIES_META_KEY: {},
    }
    for key, value in changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return meta


def request(request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def call(request_id: Any = 2, meta: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    return request(
        request_id, "tools/call", {"name": "call_tool_read", "arguments": READ, "_meta": meta or envelope(), **params}
    )


class Gateway:
    """What the shortcut asks of the gateway before it takes a call: whether the config may ask the agent's client."""

    def __init__(self, asks: bool) -> None:
        self.asks = asks

    def asks_agents_clients(self) -> bool:
        return self.asks


def direct_calls(asks_clients: bool = True) -> DirectCalls:
    async def send(line: bytes, answers: Any = None, ok: bool = True) -> None:
        raise AssertionError("nothing is run here")

    gateway: Any = Gateway(asks_clients)
    return DirectCalls(gateway=gateway, session_id="stdio-test", send=send, server_info=STAMP)


def opened_modern(asks_clients: bool = True) -> DirectCalls:
    calls = direct_calls(asks_clients)
    assert calls.take(request(1, "server/discover", {"_meta": envelope()}), b"") is False  # the SDK's: it answers it
    return calls


def test_after_a_2026_opening_a_plain_call_is_taken() -> None:
    assert isinstance(opened_modern().take(call(), b""), CallCut)


def test_the_opening_request_is_the_sdks_even_when_it_is_a_call() -> None:
    calls = direct_calls()
    assert calls.take(call(1), b"") is False  # the SDK decides the stream's era from it
    assert isinstance(calls.take(call(2), b""), CallCut)


def test_a_handshake_stream_takes_no_2026_call() -> None:
    calls = direct_calls()
    handshake = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO}
    assert calls.take(request(0, "initialize", handshake), b"") is False
    assert calls.take(call(), b"") is False  # the SDK refuses an enveloped request on a handshake stream


@pytest.mark.parametrize(
    ("why", "message"),
    [
        ("a client that can be asked", call(meta=envelope(**{CLIENT_CAPABILITIES_META_KEY: {"elicitation": {}}}))),
        ("the repeat of a call that asked", call(requestState="sealed")),
        ("answers to a question", call(inputResponses={"mcphost_approval": {}})),
        ("no capabilities in the envelope", call(meta=envelope(**{CLIENT_CAPABILITIES_META_KEY: None}))),
        ("an unsupported version", call(meta=envelope(**{PROTOCOL_VERSION_META_KEY: "2099-01-01"}))),
        ("a mis-shaped client info", call(meta=envelope(**{CLIENT_INFO_META_KEY: {"name": 5}}))),
        ("no tool name", request(2, "tools/call", {"arguments": READ, "_meta": envelope()})),
        ("arguments that are no object", call(arguments=["x"])),
        ("an id that is no id", call(request_id=1.5)),
    ],
)
def test_what_the_sdk_would_answer_otherwise_goes_to_it(why: str, message: dict[str, Any]) -> None:
    assert opened_modern().take(message, b"") is False, why


def test_a_client_that_can_be_asked_is_taken_while_the_config_asks_no_client() -> None:
    # `no_editor = "deny"` (the default): nothing would put a question to the agent's client, so whether it could
    # answer one changes nothing in its call; with "elicit" only the SDK's boundary can seal the question's state.
    asked = call(meta=envelope(**{CLIENT_CAPABILITIES_META_KEY: {"elicitation": {}}}))
    assert isinstance(opened_modern(asks_clients=False).take(asked, b""), CallCut)
    assert opened_modern(asks_clients=True).take(asked, b"") is False
    assert opened_modern(asks_clients=False).take(call(requestState="sealed"), b"") is False  # a repeat, still


def test_the_record_names_the_client_only_from_a_full_envelope() -> None:
    taken = modern_call(call())
    assert taken is not None and taken[3:] == (MODERN, "agent 1.2")
    anonymous = modern_call(call(meta=envelope(**{CLIENT_INFO_META_KEY: None})))
    assert anonymous is not None and anonymous[4] is None


def test_a_result_is_shaped_for_its_era_and_stamped_with_the_server() -> None:
    data = {
        "content": [{"type": "text", "text": "read_notes: x"}],
        "structuredContent": {"tool": "read_notes"},
        "isError": False,
        "notInTheSchema": 1,
    }
    kind, shaped = sdk_result(MODERN, data, STAMP)
    assert kind == "result"
    assert shaped == {
        "content": [{"type": "text", "text": "read_notes: x"}],
        "structuredContent": {"tool": "read_notes"},
        "isError": False,
        "resultType": "complete",
        "_meta": {SERVER_INFO_META_KEY: STAMP},
    }


def test_a_handshake_era_result_is_sieved_as_the_sdk_sieves_it_and_not_stamped() -> None:
    # An upstream may write what no SDK would: nulls, members no schema has. The agent gets what the SDK's own path
    # would send it, whichever way its call took.
    data = {
        "content": [
            {"type": "text", "text": "x", "annotations": None},
            {"type": "image", "data": "aGk=", "mimeType": "a"},
        ],
        "structuredContent": None,
        "notInTheSchema": 1,
    }
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        assert sdk_result(version, json.loads(json.dumps(data)), STAMP) == (
            "result",
            {
                "content": [{"type": "text", "text": "x"}, {"type": "image", "data": "aGk=", "mimeType": "a"}],
                "isError": False,
            },
        )
        kind, shaped = sdk_result(version, {"content": [{"type": "text", "text": "x"}]}, STAMP)
        assert kind == "result" and shaped == {"content": [{"type": "text", "text": "x"}], "isError": False}


@pytest.mark.parametrize(
    "data", [{"content": "not a list"}, {"content": [{"type": "text"}]}, {"content": [], "isError": "maybe"}]
)
def test_a_result_the_handler_could_not_make_is_the_error_the_sdk_gives(data: dict[str, Any]) -> None:
    # The schema of the era alone would let these through as an empty result: the content silently gone.
    kind, error = sdk_result(MODERN, data, STAMP)
    assert (kind, error) == ("error", {"code": INVALID_PARAMS, "message": "Invalid request parameters", "data": ""})


TEXT = {"type": "text", "text": "read_notes: x"}
RESULTS = {
    "a text block": {"content": [TEXT]},
    "text blocks and an error": {
        "content": [TEXT, {"type": "text", "text": "mcphost warning: é ☃ \u0000"}],
        "isError": True,
    },
    "no content": {"content": []},
    "not an error, said": {"content": [TEXT], "isError": False},
    "no content at all": {},
    "an error only": {"isError": True},
    "an error said as text": {"content": [TEXT], "isError": "true"},
    "an error said as null": {"content": [TEXT], "isError": None},
    "an error said as 1": {"content": [TEXT], "isError": 1},
    "structured content": {"content": [TEXT], "structuredContent": {"a": None, "b": [1, None]}},
    "structured content, deep and odd": {
        "content": [TEXT],
        "isError": True,
        "structuredContent": {"n": 2**70, "f": -0.0, "u": "é\u0000☃", "d": {"e": [{"x": None}, [], {}]}, "": True},
    },
    "structured content only": {"structuredContent": {"tool": "read_notes", "text": "x"}},
    "structured content that is a list": {"content": [TEXT], "structuredContent": [1, 2]},
    "structured content that is text": {"content": [TEXT], "structuredContent": "x"},
    "structured content that is null": {"content": [TEXT], "structuredContent": None},
    "structured content that is empty": {"content": [TEXT], "structuredContent": {}},
    "an image": {"content": [TEXT, {"type": "image", "data": "aGk=", "mimeType": "image/png"}]},
    "a block with annotations": {"content": [{**TEXT, "annotations": {"priority": 0.5}}]},
    "a block with null annotations": {"content": [{**TEXT, "annotations": None}]},
    "a block with its own _meta": {"content": [{**TEXT, "_meta": {"k": "v"}}]},
    "a block of no type": {"content": [{"text": "x", "kind": "text"}]},
    "text that is no string": {"content": [{"type": "text", "text": 5}]},
    "a block that is no object": {"content": ["x"]},
    "the result's own _meta": {"content": [TEXT], "_meta": {"k": "v"}},
    "a key the schema lacks": {"content": [TEXT], "other": 1},
}


@pytest.mark.parametrize("version", sorted({*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS}))
@pytest.mark.parametrize("case", RESULTS)
def test_a_text_result_made_directly_is_what_the_models_make_of_it(
    case: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = RESULTS[case]
    direct = sdk_result(version, json.loads(json.dumps(data)), STAMP)
    monkeypatch.setattr(mcp_server, "_TEXT_SHAPED", frozenset())
    by_models = sdk_result(version, json.loads(json.dumps(data)), STAMP)
    assert direct == by_models
    assert json.dumps(direct) == json.dumps(by_models)  # the same keys in the same order, on the wire too


def test_a_plain_text_result_is_made_without_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the models' way")

    monkeypatch.setattr(mcp_server, "serialize_server_result", refuse)
    assert sdk_result(MODERN, {"content": [TEXT], "isError": True}, STAMP)[0] == "result"
    assert sdk_result(MODERN, RESULTS["structured content"], STAMP)[0] == "result"
    with pytest.raises(AssertionError, match="the models' way"):
        sdk_result(MODERN, RESULTS["an image"], STAMP)


def test_the_stamp_is_the_servers_own() -> None:
    server: Server[Any] = Server("mcphost", version="9.9", title="mcphost")
    seen: list[dict[str, Any]] = []

    async def send(line: bytes, answers: Any = None, ok: bool = True) -> None:
        seen.append({})

    factory = DirectCalls.factory(None, "stdio-x", server)  # type: ignore[arg-type]

    class Out:
        put = send

    made = factory(Out())  # type: ignore[arg-type]
    assert (
        made._server_info
        == server.server_info_stamp
        == types.Implementation(name="mcphost", version="9.9", title="mcphost").model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
    )


async def test_the_schema_a_2026_http_call_is_checked_against_is_the_one_tools_list_advertises() -> None:
    from mcp import Client

    from mcphost.serve.mcp_server import build_server

    server = build_server(None, session_id="stdio-x")  # type: ignore[arg-type]  # listing needs no gateway
    async with Client(server, mode="auto", cache=None) as client:
        listed = (await client.list_tools()).tools
    assert len(listed) == 4
    lookup = server.get_tool_input_schema
    assert lookup is not None
    for tool in listed:
        assert lookup(tool.name) == tool.input_schema, tool.name
    assert lookup("probe:read_notes") is None  # as a listing that does not advertise it: nothing to check


PLAIN_PARAMS = [
    {"name": "t", "arguments": {"a": [1, None], "b": {"c": "d"}}},
    {"name": "t"},
    {"name": "", "arguments": None},
    {"name": "t", "arguments": {}},
    {"name": "t", "arguments": {}, "_meta": {"progressToken": "p-1"}},
    {"name": "t", "_meta": {"progressToken": -7}},
]


@pytest.mark.parametrize("version", sorted(HANDSHAKE_PROTOCOL_VERSIONS))
@pytest.mark.parametrize("params", PLAIN_PARAMS)
def test_params_the_shortcut_takes_unchecked_are_params_the_sdk_takes(version: str, params: dict[str, Any]) -> None:
    # These skip the SDK's checks on the shortcut: they must be what those checks pass.
    assert mcp_server._plain_params(params)
    validate_client_request("tools/call", version, params)
    types.CallToolRequestParams.model_validate(params, by_name=False)
    assert shortcut_call({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, version) is not None


OTHER_PARAMS = {
    "a whole progress token": {"_meta": {"progressToken": 1.0}},
    "a progress token with a fraction": {"_meta": {"progressToken": 1.5}},
    "a progress token that is an object": {"_meta": {"progressToken": {}}},
    "a progress token that is true": {"_meta": {"progressToken": True}},
    "a null progress token": {"_meta": {"progressToken": None}},
    "a meta member of the client's own": {"_meta": {"x/y": [1]}},
    "a progress token and more": {"_meta": {"progressToken": "p", "x/y": 1}},
    "a meta that is no object": {"_meta": 5},
    "a null meta": {"_meta": None},
    "a task": {"task": {"ttl": 1000}},
    "a task that is no object": {"task": 5},
    "a param no schema has": {"other": 1},
}


@pytest.mark.parametrize("version", sorted(HANDSHAKE_PROTOCOL_VERSIONS))
@pytest.mark.parametrize("case", OTHER_PARAMS)
def test_any_other_params_are_taken_only_where_the_sdk_takes_them(version: str, case: str) -> None:
    params = {"name": "t", "arguments": {}, **OTHER_PARAMS[case]}
    taken = shortcut_call({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, version) is not None
    try:
        validate_client_request("tools/call", version, params)
        types.CallToolRequestParams.model_validate(params, by_name=False)
    except ValidationError:
        assert not taken
    else:
        assert taken


def test_a_message_with_members_of_no_request_is_left_to_the_sdk() -> None:
    plain = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    assert shortcut_call(plain, "2025-06-18") is not None
    for odd in ({**plain, "jsonrpc": "1.0"}, {**plain, "error": {}}, {**plain, "result": {}}, {**plain, "x": 1}):
        assert shortcut_call(odd, "2025-06-18") is None, odd
    del plain["jsonrpc"]
    assert shortcut_call(plain, "2025-06-18") is None


def test_a_2026_era_message_with_members_of_no_request_is_left_to_the_sdk() -> None:
    assert modern_call(call()) is not None
    for odd in ({"jsonrpc": "1.0"}, {"error": {"code": 1, "message": "x"}}, {"result": {}}, {"x": 1}):
        assert modern_call({**call(), **odd}) is None, odd


ENVELOPES = {
    "the usual": envelope(),
    "no client info": envelope(**{CLIENT_INFO_META_KEY: None}),
    "capabilities a client declares": envelope(
        **{CLIENT_CAPABILITIES_META_KEY: {"roots": {"listChanged": True}, "sampling": {}, "experimental": {"x": {}}}}
    ),
    "a progress token": {**envelope(), "progressToken": "p-1"},
    "a progress token that is true": {**envelope(), "progressToken": True},
    "a progress token with a fraction": {**envelope(), "progressToken": 1.5},
    "a whole float for a progress token": {**envelope(), "progressToken": 1.0},
    "a log level": {**envelope(), "io.modelcontextprotocol/logLevel": "debug"},
    "a log level no one has": {**envelope(), "io.modelcontextprotocol/logLevel": "loud"},
    "a member of the client's own": {**envelope(), "x/y": [1, {"z": None}]},
    "a client info of numbers": envelope(**{CLIENT_INFO_META_KEY: {"name": 5, "version": 1}}),
    "a client info with icons": envelope(**{CLIENT_INFO_META_KEY: {**INFO, "icons": [{"src": "a.png"}]}}),
    "icons that are no list": envelope(**{CLIENT_INFO_META_KEY: {**INFO, "icons": "a.png"}}),
    "capabilities that are no object": envelope(**{CLIENT_CAPABILITIES_META_KEY: []}),
    "an elicitation of no object": envelope(**{CLIENT_CAPABILITIES_META_KEY: {"elicitation": "yes"}}),
    "a null client info": envelope(**{CLIENT_INFO_META_KEY: {"name": "a", "version": "1", "title": None}}),
    "a version that is no string": envelope(**{PROTOCOL_VERSION_META_KEY: 2026}),
}
CALL_PARAMS = {
    "plain": {"name": "t", "arguments": {"a": 1}},
    "no arguments": {"name": "t"},
    "null arguments": {"name": "t", "arguments": None},
    "a member no schema has": {"name": "t", "arguments": {}, "other": [1]},
    "a name that is no string": {"name": 5, "arguments": {}},
    "no name": {"arguments": {}},
    "arguments that are a list": {"name": "t", "arguments": [1]},
    "arguments that are a string": {"name": "t", "arguments": "{}"},
}


def sdk_takes(params: dict[str, Any]) -> bool:
    try:
        validate_client_request("tools/call", MODERN, params)
    except (ValidationError, KeyError, ValueError):
        return False
    return True


@pytest.mark.parametrize("meta", ENVELOPES)
def test_a_remembered_envelope_gives_the_sdks_verdict_on_every_call_that_carries_it(meta: str) -> None:
    # Each call's params asked twice over, first with nothing remembered, then after the envelope's plain call has
    # been taken: the two ways must agree with the SDK's schema for every name, arguments and member beside them.
    mcp_server._VALID_ENVELOPES.clear()
    for case, fields in CALL_PARAMS.items():
        params = {**fields, "_meta": ENVELOPES[meta]}
        mcp_server._VALID_ENVELOPES.clear()
        assert mcp_server._envelope_valid(MODERN, params) is sdk_takes(params), case
        mcp_server._envelope_valid(MODERN, {"name": "t", "arguments": {}, "_meta": ENVELOPES[meta]})
        assert mcp_server._envelope_valid(MODERN, params) is sdk_takes(params), case


def test_an_envelope_the_schema_took_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    mcp_server._VALID_ENVELOPES.clear()
    holding_null = {"name": "t", "_meta": {**envelope(), "x": None}}
    assert mcp_server._envelope_valid(MODERN, {"name": "t", "arguments": {}, "_meta": envelope()})
    assert mcp_server._envelope_valid(MODERN, holding_null)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("checked again")

    monkeypatch.setattr(mcp_server, "validate_client_request", refuse)
    assert mcp_server._envelope_valid(MODERN, {"name": "other", "arguments": {"b": 2}, "_meta": envelope()})
    reordered = dict(reversed(list(envelope().items())))
    with pytest.raises(AssertionError, match="checked again"):  # another envelope, though an equal one
        mcp_server._envelope_valid(MODERN, {"name": "t", "_meta": reordered})
    with pytest.raises(AssertionError, match="checked again"):  # orjson writes NaN as null: nulls are never kept
        mcp_server._envelope_valid(MODERN, holding_null)


def test_the_envelopes_remembered_are_bounded_in_number_and_in_size() -> None:
    mcp_server._VALID_ENVELOPES.clear()
    for n in range(mcp_server._ENVELOPES_KEPT * 3):
        assert mcp_server._envelope_valid(MODERN, {"name": "t", "_meta": {**envelope(), "x/n": n}})
    assert 0 < len(mcp_server._VALID_ENVELOPES) <= mcp_server._ENVELOPES_KEPT
    mcp_server._VALID_ENVELOPES.clear()
    for n in range(8):  # each valid, each checked in full, none kept
        assert mcp_server._envelope_valid(MODERN, {"name": "t", "_meta": {**envelope(), "x/big": f"{n}" * 1_000_000}})
    assert not mcp_server._VALID_ENVELOPES
