"""The daemon's HTTP server loop: asleep while nobody asks anything of it, awake the moment it is told to stop, and
a Date header as fresh as the second a response is sent in."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.utils import parsedate_to_datetime
from types import SimpleNamespace

import anyio
import pytest
import uvicorn
from sse_starlette import EventSourceResponse

from mcphost.serve import http_server
from tests.helpers import timers_due_within

pytestmark = pytest.mark.anyio


async def app(scope: dict[str, object], receive: object, send: object) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/events":  # an event stream that never ends by itself, as the MCP SDK's GET stream
        await EventSourceResponse(endless())(scope, receive, send)  # type: ignore[arg-type]
        return
    await send({"type": "http.response.start", "status": 204, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]


async def endless() -> AsyncIterator[dict[str, str]]:
    yield {"data": "open"}
    await anyio.sleep_forever()


@asynccontextmanager
async def serving() -> AsyncIterator[tuple[http_server._Server, int]]:
    server = http_server._Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    with sock, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:  # noqa: ASYNC110  # uvicorn sets a flag, no event
                await anyio.sleep(0.005)
            yield server, sock.getsockname()[1]


async def head_of_a_response(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return head


async def test_an_idle_server_leaves_no_timer_on_the_loop_and_stop_wakes_it_at_once() -> None:
    async with serving() as (server, _port):
        await anyio.sleep(0.05)  # past anything startup left to run
        assert (
            timers_due_within(5) == []
        )  # uvicorn's own loop would hold a 0.1 s tick here, and renew headers every tenth
        server.stop()  # serving fails after 10 s unless this wakes the loop


async def test_an_open_event_stream_leaves_no_timer_and_stop_ends_it_at_once() -> None:
    if http_server._sse_shutdown() is None:
        pytest.skip("this sse-starlette keeps no record of its streams to end: its own watch ends them")
    async with serving() as (server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /events HTTP/1.1\r\nhost: x\r\n\r\n")
        assert b"data: open" in await reader.readuntil(b"data: open")
        await anyio.sleep(0.05)
        # sse-starlette's own watch polls for a stopping server every 0.5 s, from the first stream to the end of the
        # process; its 15 s ping is the stream's own
        assert timers_due_within(5) == []
        server.stop()  # the stream ends now, and with it the server: no graceful-shutdown limit is set here
        await reader.read()  # until the connection closes: within the test's 10 s, not never
        assert reader.at_eof()
        writer.close()


async def test_stop_before_the_loop_starts_still_ends_it() -> None:
    server = http_server._Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    server.stop()
    with anyio.fail_after(5):
        await server.main_loop()


async def test_a_response_carries_the_date_of_the_second_it_is_sent_in() -> None:
    async with serving() as (server, port):
        head = await head_of_a_response(port)
        server.stop()
    dates = [line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"date:")]
    assert len(dates) == 1
    assert abs(parsedate_to_datetime(dates[0].decode()).timestamp() - time.time()) < 2


def test_the_date_header_is_made_again_only_in_a_new_second(monkeypatch: pytest.MonkeyPatch) -> None:
    config = uvicorn.Config(app, headers=[("x-extra", "1")], server_header=False)
    config.load()
    state = http_server._DatedState(config)
    clock = SimpleNamespace(time=lambda: 86400.2)
    monkeypatch.setattr(http_server, "time", clock)
    first = state.default_headers
    assert first == [(b"date", b"Fri, 02 Jan 1970 00:00:00 GMT"), (b"x-extra", b"1")]
    clock.time = lambda: 86400.9
    assert state.default_headers is first  # the same second: nothing made
    clock.time = lambda: 86401.0
    assert state.default_headers[0] == (b"date", b"Fri, 02 Jan 1970 00:00:01 GMT")


def test_without_a_date_header_only_the_configured_headers_are_sent() -> None:
    config = uvicorn.Config(app, date_header=False, server_header=False)
    config.load()
    assert http_server._DatedState(config).default_headers == []
