"""The daemon's HTTP server loop: asleep while nobody asks anything of it, awake the moment it is told to stop."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
import uvicorn

from mcphost.serve import http_server

pytestmark = pytest.mark.anyio


async def app(scope: dict[str, object], receive: object, send: object) -> None:
    raise AssertionError("no request is made here")


class Ticking(http_server._Server):
    """The daemon's server, telling each tick of its loop."""

    def __init__(self, ticks: int) -> None:
        super().__init__(uvicorn.Config(app, lifespan="off", log_level="warning"))
        self.ticks, self.ticked = ticks, anyio.Event()
        self.headers: list[list[tuple[bytes, bytes]]] = []

    async def on_tick(self, counter: int) -> bool:
        done = await super().on_tick(counter)
        self.headers.append(self.server_state.default_headers)
        self.ticks -= 1
        if self.ticks <= 0:
            self.ticked.set()
        return done


@asynccontextmanager
async def serving(server: Ticking) -> AsyncIterator[None]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    with sock, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            await server.ticked.wait()
            yield


async def test_stop_wakes_the_server_at_once_not_at_its_next_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_server, "TICK_S", 60.0)  # were stop not to wake it, the loop would sleep a minute
    server = Ticking(1)
    async with serving(server):
        server.stop()  # the loop is asleep after its first tick; serving fails after 10 s unless this wakes it


async def test_each_tick_renews_the_date_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_server, "TICK_S", 0.01)
    server = Ticking(3)
    async with serving(server):
        server.stop()
    renewed = [h for i, h in enumerate(server.headers) if all(h is not other for other in server.headers[:i])]
    assert len(renewed) == len(server.headers) >= 3
    assert all(any(name == b"date" for name, _ in h) for h in renewed)
