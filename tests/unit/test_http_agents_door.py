"""The daemon's HTTP protocol answers a tool call the agents' door claims without any ASGI layer, in one write, and
hands every other request to the ASGI app exactly as uvicorn would have: the whole body, in order, nothing lost."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from mcphost.pipes import READ_CHUNK
from mcphost.serve import http_server
from mcphost.serve.http_app import Claim
from mcphost.serve.http_server import CLAIM_LIMIT, _AgentsHttp, _Held

BODY = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"call_tool_read","arguments":{}}}'


def request(body: bytes = BODY, *, path: bytes = b"/mcp", version: bytes = b"1.1", extra: bytes = b"") -> bytes:
    return (
        b"POST " + path + b" HTTP/" + version + b"\r\nhost: 127.0.0.1:1\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body
    )


class Door:
    """Claims every request it is offered, and answers each with what `answers` holds for it (or waits on `gate`)."""

    def __init__(self) -> None:
        self.offered: list[tuple[list[tuple[bytes, bytes]], bytes]] = []
        self.gate: asyncio.Event | None = None
        self.answer_body = b'{"jsonrpc":"2.0","id":7,"result":{}}'
        self.admitting = True  # what the Host, Origin and token checks say of every request

    def admits(self, headers: list[tuple[bytes, bytes]]) -> bool:
        return self.admitting

    def claim(self, headers: list[tuple[bytes, bytes]], body: bytes) -> Claim | None:
        self.offered.append((list(headers), body))
        return Claim("session", (7, "call_tool_read", {}), None)

    async def answer(self, claim: Claim, send: Any) -> tuple[int, bytes] | None:
        if self.gate is not None:
            await self.gate.wait()
        return (200 if self.answer_body else 202), self.answer_body


class Transport(asyncio.Transport):
    max_size = 256 * 1024  # asyncio's socket transports read this much at a time

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.closing = asyncio.Event()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True
        self.closing.set()

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 1), "peername": ("127.0.0.1", 2)}.get(name, default)

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    buffered = 0  # what the client has not taken yet

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def abort(self) -> None:
        self.aborted = True
        self.close()


class Asgi:
    """The ASGI app behind the door: it notes each request it is handed, with its whole body, and answers 200 "asgi"."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.requests.append((scope["method"], scope["path"], body))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"asgi"})


def connect(door: Door | None, keep_alive: float = 5) -> tuple[_AgentsHttp, Transport, Asgi, ServerState]:
    app = Asgi()
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,
        timeout_keep_alive=keep_alive,
    )
    config.load()
    state = ServerState()
    state.default_headers = [(b"date", b"Thu, 26 Nov 2026 10:00:00 GMT")]
    protocol_class: Any = type("Protocol", (_AgentsHttp,), {"door": door})
    protocol = protocol_class(config=config, server_state=state, app_state={})
    transport = Transport()
    protocol.connection_made(transport)
    return protocol, transport, app, state


async def settle(state: ServerState) -> None:
    while state.tasks:
        await asyncio.gather(*state.tasks)
    await asyncio.sleep(0)


async def test_a_claimed_call_is_answered_past_the_asgi_app_in_one_write() -> None:
    door = Door()
    protocol, transport, app, state = connect(door)
    protocol.data_received(request())
    await settle(state)
    [(headers, body)] = door.offered
    assert body == BODY and (b"host", b"127.0.0.1:1") in headers
    assert app.requests == []
    answer = door.answer_body
    assert transport.writes == [
        b"HTTP/1.1 200 OK\r\ndate: Thu, 26 Nov 2026 10:00:00 GMT\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(answer)).encode() + b"\r\n\r\n" + answer
    ]
    assert not transport.closed and state.total_requests == 1
    assert transport.max_size == READ_CHUNK  # a read allocates what it asks for: 256 KiB is an mmap a call


async def test_a_claimed_call_sees_the_scope_uvicorn_would_have_made() -> None:
    # The cycle of a claimed call is uvicorn's: what its `send`, its shutdown and an access log read must be there.
    declined = Door()
    declined.claim = lambda headers, body: None  # type: ignore[method-assign,assignment,return-value]
    asgi_way, _, _, asgi_state = connect(declined)
    asgi_way.data_received(request())
    await settle(asgi_state)
    protocol, _, _, state = connect(Door())
    protocol.data_received(request())
    assert protocol.cycle is not None and protocol.cycle.scope is protocol.scope
    await settle(state)
    assert protocol.scope == asgi_way.scope


async def test_a_claimed_call_in_flight_is_a_task_the_server_waits_for() -> None:
    door, protocol, transport, state = await call_in_flight()
    assert len(state.tasks) == 1 and protocol.cycle is not None and not protocol.cycle.response_complete
    door.gate.set()
    await settle(state)
    assert state.tasks == set() and protocol.cycle.response_complete and len(transport.writes) == 1


async def test_a_claimed_call_whose_answer_fails_gets_uvicorns_500(caplog: Any) -> None:
    door = Door()

    async def broken(claim: Claim, send: Any) -> bytes | None:
        raise RuntimeError("a bug in the answer")

    door.answer = broken  # type: ignore[method-assign]
    protocol, transport, _, state = connect(door)
    protocol.data_received(request())
    await settle(state)
    written = b"".join(transport.writes)
    assert written.startswith(b"HTTP/1.1 500 Internal Server Error\r\n") and written.endswith(b"Internal Server Error")
    assert transport.closed and "a bug in the answer" in caplog.text


async def test_a_claimed_call_that_fails_once_its_stream_began_closes_the_connection(caplog: Any) -> None:
    door = Door()

    async def half_streamed(claim: Claim, send: Any) -> bytes | None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"event: message\n\n", "more_body": True})
        raise RuntimeError("a bug mid-stream")

    door.answer = half_streamed  # type: ignore[method-assign]
    protocol, transport, _, state = connect(door)
    protocol.data_received(request())
    await settle(state)
    assert transport.closed and b"500" not in b"".join(transport.writes)
    assert "a bug mid-stream" in caplog.text


async def test_a_claimed_call_whose_stream_is_left_open_closes_the_connection(caplog: Any) -> None:
    door = Door()

    async def unfinished(claim: Claim, send: Any) -> bytes | None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        return None

    door.answer = unfinished  # type: ignore[method-assign]
    protocol, transport, _, state = connect(door)
    protocol.data_received(request())
    await settle(state)
    assert transport.closed and "without completing its event stream" in caplog.text


async def test_a_call_cut_short_by_its_client_gets_an_empty_202() -> None:
    door = Door()
    door.answer_body = b""
    protocol, transport, _, state = connect(door)
    protocol.data_received(request())
    await settle(state)
    [written] = transport.writes
    assert written.startswith(b"HTTP/1.1 202 Accepted\r\n") and written.endswith(b"content-length: 0\r\n\r\n")


async def test_a_body_that_arrives_in_pieces_is_offered_whole() -> None:
    door = Door()
    protocol, _, _, state = connect(door)
    whole = request()
    for at in range(0, len(whole), 17):
        protocol.data_received(whole[at : at + 17])
    await settle(state)
    assert [body for _, body in door.offered] == [BODY]


async def test_a_chunked_body_is_offered_whole() -> None:
    door = Door()
    protocol, _, _, state = connect(door)
    head = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:1\r\ntransfer-encoding: chunked\r\n\r\n"
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (BODY[:30], BODY[30:])) + b"0\r\n\r\n"
    protocol.data_received(head + chunks)
    await settle(state)
    assert [body for _, body in door.offered] == [BODY]


async def test_requests_the_door_is_never_offered_reach_the_asgi_app_whole() -> None:
    not_offered = [
        request(path=b"/mcp?x=1"),
        request(path=b"/api/v1/activity"),
        request(version=b"1.0"),
        request(extra=b"connection: close\r\n"),
        request(extra=b"expect: 100-continue\r\n"),
    ]
    for raw in not_offered:
        door = Door()
        protocol, transport, app, state = connect(door)
        protocol.data_received(raw)
        await settle(state)
        assert door.offered == [], raw
        assert [body for _, _, body in app.requests] == [BODY], raw
        assert transport.writes[-1].endswith(b"asgi"), raw


async def test_a_request_the_door_declines_reaches_the_asgi_app_whole() -> None:
    door = Door()
    door.claim = lambda headers, body: door.offered.append((headers, body))  # type: ignore[method-assign,func-returns-value]
    protocol, transport, app, state = connect(door)
    protocol.data_received(request())
    await settle(state)
    assert len(door.offered) == 1
    assert app.requests == [("POST", "/mcp", BODY)]
    assert b"".join(transport.writes).endswith(b"asgi")


async def test_a_door_that_fails_leaves_the_request_to_the_asgi_app(caplog: Any) -> None:
    door = Door()

    def broken(headers: list[tuple[bytes, bytes]], body: bytes) -> Claim | None:
        raise RuntimeError("a bug")

    door.claim = broken  # type: ignore[method-assign]
    protocol, transport, app, state = connect(door)
    protocol.data_received(request())
    await settle(state)
    assert app.requests == [("POST", "/mcp", BODY)]
    assert b"".join(transport.writes).endswith(b"asgi") and not transport.closed
    assert "the agents' door failed" in caplog.text


async def test_a_body_past_the_limit_goes_the_asgi_way_as_it_arrives() -> None:
    door = Door()
    protocol, _, app, state = connect(door)
    big = b'{"pad":"' + b"x" * (CLAIM_LIMIT + 10) + b'"}'
    protocol.data_received(request(big))
    await settle(state)
    assert door.offered == []
    assert [body for _, _, body in app.requests] == [big]


async def test_a_request_without_the_token_or_from_a_web_page_has_none_of_its_body_held() -> None:
    # Held until whole, a stalled 4 MiB body on each of a few hundred connections took gigabytes, with no token.
    door = Door()
    door.admitting = False
    protocol, _, _, state = connect(door)
    big = b'{"pad":"' + b"x" * 500_000 + b'"}'
    protocol.data_received(request(big)[:300_000])  # the body stalls short of its end
    assert _Held.total == 0 and protocol._held_body is None and protocol.cycle is not None  # the ASGI way's
    protocol.connection_lost(None)
    await settle(state)
    assert door.offered == []


async def test_bodies_held_count_against_one_budget_and_are_let_go_with_their_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_server, "HELD_BUDGET", 10_000)
    monkeypatch.setattr(http_server, "SMALL_BODY", 1_000)
    body = b'{"pad":"' + b"x" * 20_000 + b'"}'
    stalled, _, _, _ = connect(Door())
    stalled.data_received(request(body)[:9_000])
    held = _Held.total
    assert 8_000 < held < 9_000
    # Another large body past the budget: refused at once, its connection closed, nothing more of it read.
    refused, transport, app, _ = connect(Door())
    refused.data_received(request(body)[:5_000])
    refused.data_received(request(body)[5_000:])
    assert transport.closed and b"".join(transport.writes).startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert _Held.total == held and app.requests == []
    # An everyday call is still taken whatever the others hold.
    door = Door()
    small, _, _, small_state = connect(door)
    small.data_received(request())
    await settle(small_state)
    assert [offered for _, offered in door.offered] == [BODY]
    stalled.connection_lost(None)
    assert _Held.total == 0


async def test_a_client_that_stops_reading_its_answer_is_let_go_one_reading_slowly_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 100 clients that never read a 7.8 MB answer held 635 MB of the daemon's memory, for as long as they liked.
    monkeypatch.setattr(http_server, "STALLED_READER_S", 0.05)
    stalled, transport, _, _ = connect(Door())
    transport.buffered = 8_000_000
    stalled.pause_writing()  # the transport is past its high-water mark
    await asyncio.wait_for(transport.closing.wait(), 5)
    assert transport.aborted
    monkeypatch.setattr(http_server, "STALLED_READER_S", 3600)  # each period's end is called here instead
    slow, slow_transport, _, _ = connect(Door())
    slow_transport.buffered = 8_000_000
    slow.pause_writing()
    for _ in range(3):  # it takes a little in every period
        before, slow_transport.buffered = slow_transport.buffered, slow_transport.buffered - 1_000_000
        slow._stalled(before)
        assert not slow_transport.closed and slow._stall is not None
    slow_transport.buffered = 0
    slow.resume_writing()
    assert slow._stall is None


async def test_a_request_pipelined_behind_a_claimed_call_is_answered_after_it_in_order() -> None:
    door = Door()
    door.gate = asyncio.Event()
    protocol, transport, app, state = connect(door)
    protocol.data_received(request() + request(b"{}", path=b"/other"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert transport.writes == [] and app.requests == []  # the second waits for the first's answer
    door.gate.set()
    await settle(state)
    await settle(state)
    assert len(door.offered) == 1 and app.requests == [("POST", "/other", b"{}")]
    assert transport.writes[0].endswith(door.answer_body) and transport.writes[-1].endswith(b"asgi")
    assert state.total_requests == 2


async def call_in_flight() -> tuple[Door, _AgentsHttp, Transport, ServerState]:
    """A claimed call whose answer waits on its door's gate."""
    door = Door()
    door.gate = asyncio.Event()
    protocol, transport, _, state = connect(door)
    protocol.data_received(request())
    await asyncio.sleep(0)
    return door, protocol, transport, state


async def test_a_call_answered_after_the_server_began_to_stop_closes_its_connection() -> None:
    door, protocol, transport, state = await call_in_flight()
    protocol.shutdown()
    assert not transport.closed  # the call in flight is answered first
    door.gate.set()
    await settle(state)
    [written] = transport.writes
    assert b"\r\nconnection: close\r\n" in written and written.endswith(door.answer_body)
    assert transport.closed


async def test_a_client_gone_before_the_answer_gets_nothing_written() -> None:
    door, protocol, transport, state = await call_in_flight()
    protocol.connection_lost(None)
    door.gate.set()
    await settle(state)
    assert transport.writes == []


async def test_a_2026_era_call_whose_client_goes_away_is_cut_short_quietly_and_a_handshake_call_is_not(
    caplog: Any,
) -> None:
    # At 2026-07-28 a client cancels a call by going away; in the handshake era it sends notifications/cancelled.
    for modern, cut in ((("2026-07-28", None), True), (None, False)):
        door = Door()
        door.gate = asyncio.Event()
        door.claim = lambda headers, body, modern=modern: Claim(  # type: ignore[method-assign]
            None if modern else "session", (7, "call_tool_read", {}), None, modern
        )
        protocol, transport, _, state = connect(door)
        protocol.data_received(request())
        await asyncio.sleep(0)
        [task] = protocol.tasks
        protocol.connection_lost(None)
        await asyncio.sleep(0)
        assert task.done() is cut
        door.gate.set()
        await settle(state)
        assert transport.writes == [] and not task.cancelled()
    assert "claimed call failed" not in caplog.text


async def test_without_a_door_every_request_is_uvicorns() -> None:
    protocol, transport, app, state = connect(None)
    protocol.data_received(request())
    await settle(state)
    assert app.requests == [("POST", "/mcp", BODY)]
    assert transport.writes[-1].endswith(b"asgi")


@pytest.mark.parametrize("door", [Door(), None], ids=["claimed calls", "the asgi way"])
async def test_a_connection_idle_for_the_keep_alive_time_after_its_last_answer_is_closed(door: Door | None) -> None:
    # As uvicorn does, with one timer a connection instead of one a request: it is looked at again while the
    # connection is in use, and closes it only once the last answer is `timeout_keep_alive` old.
    protocol, transport, _, state = connect(door, keep_alive=0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    timers: list[Any] = []  # each timer the connection had (kept, so no two share an id)
    while loop.time() - started < 0.5:  # requests every 50 ms for half a second: busy, never idle for long
        protocol.data_received(request())
        await settle(state)
        if not any(timer is protocol._keep_alive.timer for timer in timers):
            timers.append(protocol._keep_alive.timer)
        await asyncio.sleep(0.05)
        assert not transport.closed
    last_answer = loop.time()
    await asyncio.wait_for(transport.closing.wait(), 2)
    assert 0.1 <= loop.time() - last_answer < 1
    assert state.total_requests >= 8 and len(timers) <= 4  # not one per request


async def test_a_connection_lost_leaves_no_keep_alive_timer_behind() -> None:
    protocol, _, _, state = connect(Door(), keep_alive=60)
    protocol.data_received(request())
    await settle(state)
    assert protocol._keep_alive.timer is not None
    protocol.connection_lost(None)
    assert protocol._keep_alive.timer is None
