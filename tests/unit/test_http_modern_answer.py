"""How the call shortcut answers a 2026-era call over HTTP: plain JSON with the SDK's status for an error, or an
event stream once the call has run past the SDK's deferral window, kept open by pings; and which requests' Accept
and Content-Type it takes as the SDK takes them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.requests import Request

from mcphost.serve import http_app
from mcphost.serve.http_app import CallShortcut, Claim, accepts_both, json_content


def line_of(response: dict[str, Any]) -> tuple[bytes, int | None]:
    """What `HttpCalls.answer_modern` returns for `response`: its line, and its error's code."""
    error = response.get("error")
    return json.dumps(response).encode() + b"\n", error["code"] if error is not None else None


class Calls:
    """`HttpCalls.answer_modern` in miniature: answers `response` once `release` is set."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self.release = asyncio.Event()
        self.seen: list[tuple[Any, ...]] = []

    async def answer_modern(self, *args: Any) -> tuple[bytes, int | None]:
        self.seen.append(args)
        await self.release.wait()
        return line_of(self.response)


class Sent:
    """The answer's `send`: what it sent, and `reached` set once `enough` holds of that."""

    def __init__(self, enough: Callable[[list[dict[str, Any]]], bool]) -> None:
        self.messages: list[dict[str, Any]] = []
        self.enough = enough
        self.reached = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)
        if self.enough(self.messages):
            self.reached.set()


PING = b": ping\r\n\r\n"


def shortcut(calls: Calls) -> CallShortcut:
    return CallShortcut(cast(Any, None), cast(Any, None), cast(Any, calls))


CLAIM = Claim(None, (7, "call_tool_read", {"name": "probe:read_notes"}), None, ("2026-07-28", "agent 1"))
RESULT = {"jsonrpc": "2.0", "id": 7, "result": {"content": [], "resultType": "complete"}}


async def test_a_call_answered_within_the_window_is_plain_json_and_its_error_gets_the_sdks_status() -> None:
    for response, status in [
        (RESULT, 200),
        ({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "Invalid request parameters"}}, 400),
        ({"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "Handler returned an invalid result"}}, 200),
    ]:
        calls = Calls(response)
        calls.release.set()
        send = Sent(lambda sent: False)
        answer = await shortcut(calls).answer(CLAIM, send)
        assert answer is not None and send.messages == []
        assert answer[0] == status and json.loads(answer[1]) == response
    assert calls.seen == [(7, "call_tool_read", {"name": "probe:read_notes"}, "2026-07-28", "agent 1")]


async def test_a_call_past_the_window_commits_to_an_event_stream_kept_open_by_pings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_app, "SSE_DEFER_S", 0.05)
    calls = Calls(RESULT)
    send = Sent(lambda sent: sum(m.get("body") == PING for m in sent) >= 2)
    answering = asyncio.create_task(shortcut(calls).answer(CLAIM, send))
    await asyncio.wait_for(send.reached.wait(), 5)
    calls.release.set()
    assert await answering is None  # the answer went out on the stream
    head, *pings, last = send.messages
    assert head == {"type": "http.response.start", "status": 200, "headers": http_app._SSE_HEAD}
    assert pings and all(p == {"type": "http.response.body", "body": PING, "more_body": True} for p in pings)
    assert last["more_body"] is False
    event = last["body"]
    assert event.startswith(b"event: message\r\ndata: ") and event.endswith(b"\r\n\r\n")
    assert json.loads(event.removeprefix(b"event: message\r\ndata: ")) == RESULT


async def test_a_call_that_ends_as_its_stream_was_to_begin_is_still_answered_as_plain_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The window's timer fires in the same turn of the loop as the call's end: its stream never began.
    monkeypatch.setattr(http_app, "SSE_DEFER_S", 0)

    class Quick(Calls):
        async def answer_modern(self, *args: Any) -> tuple[bytes, int | None]:
            await asyncio.sleep(0)  # the timer's turn comes after this one's
            await asyncio.sleep(0)  # the timer has fired: the stream's task is made, and runs after this turn
            return line_of(self.response)

    send = Sent(lambda sent: False)
    answer = await shortcut(Quick(RESULT)).answer(CLAIM, send)
    assert send.messages == []
    assert answer is not None and answer[0] == 200 and json.loads(answer[1]) == RESULT


async def test_a_call_cut_short_stops_its_pings_and_sends_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_app, "SSE_DEFER_S", 0.02)
    calls = Calls(RESULT)
    send = Sent(lambda sent: len(sent) >= 2)
    answering = asyncio.create_task(shortcut(calls).answer(CLAIM, send))
    await asyncio.wait_for(send.reached.wait(), 5)
    answering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await answering
    count = len(send.messages)
    await asyncio.sleep(0.1)
    assert len(send.messages) == count and all(m.get("more_body", True) for m in send.messages)


def _request(**headers: str) -> Request:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "headers": raw, "path": "/mcp", "query_string": b""})


@pytest.mark.parametrize(
    "accept",
    [
        "application/json, text/event-stream",
        "text/event-stream,application/json;q=0.9",
        "*/*",
        "application/*, text/*",
        "APPLICATION/JSON, Text/Event-Stream",
        "application/jsonx, text/event-streamy",
        "application/json",
        "text/event-stream",
        "",
    ],
)
def test_accept_is_read_as_the_sdk_reads_it(accept: str) -> None:
    has_json, has_sse = check_accept_headers(_request(accept=accept))
    assert accepts_both(accept.encode()) is (has_json and has_sse)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/json-patch+json",
        "text/plain",
        "text/plain, application/json",
        "application/jsonx",
        "",
    ],
)
async def test_content_type_is_taken_only_where_both_of_the_sdks_checks_take_it(content_type: str) -> None:
    request = _request(**{"content-type": content_type})
    security = await TransportSecurityMiddleware(None).validate_request(request, is_post=True)
    parts = [part.strip() for part in content_type.split(";")[0].split(",")]
    transport = any(part == "application/json" for part in parts)
    assert json_content(content_type.encode() if content_type else None) is (security is None and transport)
