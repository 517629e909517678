"""A relay serving its agent in process when a signal stops it answers each request in flight with why, once: the
SDK's own shutdown answer ("Connection closed") that follows is not passed on."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from mcphost.pipes import id_key
from mcphost.serve.relay import _CallInFlight, _Relay
from mcphost.serve.stdio import STOPPED, STOPPED_UNANSWERED

CONNECTION_CLOSED = types.ErrorData(code=-32000, message="Connection closed")


async def test_each_request_in_flight_is_answered_once_with_why_the_session_stopped() -> None:
    to_agent, from_relay = anyio.create_memory_object_stream[SessionMessage](8)
    relay = _Relay(to_agent, Path("config.toml"), stop=anyio.Event())
    listing = types.JSONRPCRequest(jsonrpc="2.0", id="list", method="tools/list")
    relay.in_flight = {id_key("call"): _CallInFlight("call"), id_key("list"): listing}
    relay.stop.set()

    await relay.answer_stopped()
    for late in ("call", "list", "other"):
        await relay.deliver(types.JSONRPCError(jsonrpc="2.0", id=late, error=CONNECTION_CLOSED))
    to_agent.close()
    said = {message.message.id: message.message.error.message async for message in from_relay}

    assert said == {
        "call": f"tools/call: {STOPPED}",
        "list": f"tools/list: {STOPPED_UNANSWERED}",
        "other": "Connection closed",  # not one of ours: passed on as it came
    }
    assert not relay.in_flight and not relay.answered_stopped


async def test_requests_under_one_id_are_each_owed_their_answer_in_the_order_sent() -> None:
    # MCP forbids an id still in flight; both such requests are served, so each is owed an answer: the daemon's first
    # answer under the id settles the first, and a daemon that goes away leaves the relay both to answer.
    to_agent, from_relay = anyio.create_memory_object_stream[SessionMessage](8)
    relay = _Relay(to_agent, Path("config.toml"))
    first, second, third = (_CallInFlight("twin", read={"name": f"s:{n}"}) for n in (1, 2, 3))
    for request in (first, second, third):
        relay.owe(id_key("twin"), request)
    await relay.deliver(types.JSONRPCResponse(jsonrpc="2.0", id="twin", result={}))
    assert relay.in_flight == {id_key("twin"): second} and relay.twins == {id_key("twin"): [third]}

    await relay.fail_in_flight("the daemon went away")
    to_agent.close()
    said = [message.message async for message in from_relay]
    assert [type(m).__name__ for m in said] == ["JSONRPCResponse", "JSONRPCError", "JSONRPCError"]
    assert not relay.in_flight and not relay.twins and relay.idle()
