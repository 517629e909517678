"""Running the daemon's HTTP endpoint: uvicorn on a loopback socket, announced through the discovery file."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any, cast

import anyio
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mcphost import discovery
from mcphost.host import Host
from mcphost.serve.activity_api import API_PATH
from mcphost.serve.http_app import MCP_PATH, Secrets, build_http_app
from mcphost.serve.mcp_server import HttpCalls, Sessions, build_server

TICK_S = 1.0


class _OneWrite:
    """A connection's transport as uvicorn's HTTP protocol sees it. uvicorn writes a response's status line and
    headers, then its body, in two writes: two TCP segments, and an agent that wakes for the head, then again for the
    body. The head is held here until the body is written in the same turn of the loop, and both go out in one
    write; a response whose body waits (a stream) sends its head at the next turn."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held: bytes | None = None
        self._flush: asyncio.Handle | None = None
        # What uvicorn asks of every request's transport, bound here rather than found by `__getattr__` each time.
        self.is_closing = transport.is_closing
        self.get_extra_info = transport.get_extra_info
        self.pause_reading = transport.pause_reading
        self.resume_reading = transport.resume_reading

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._release()
            self._transport.write(held + data)
        elif data[:9] == b"HTTP/1.1 ":
            self._held = data
            self._flush = asyncio.get_running_loop().call_soon(self._send_held)
        else:
            self._transport.write(data)

    def close(self) -> None:
        self._send_held()
        self._transport.close()

    def _send_held(self) -> None:
        held = self._held
        if held is not None:
            self._release()
            self._transport.write(held)

    def _release(self) -> None:
        self._held = None
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _OneWriteProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        super().connection_made(cast(asyncio.Transport, _OneWrite(transport)))


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT after shutdown, which would skip our cleanup (discovery file, upstreams).

    Its own loop wakes every 0.1 s to see whether it should stop: ten wake-ups a second of a daemon nobody is
    using, each taking the GIL and a few hundred µs. Here `stop` wakes it, and it ticks once a second, when the
    Date header it sends is renewed."""

    on_exit: Callable[[], None] | None = None
    _wake: Callable[[], object] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.stop()

    def stop(self) -> None:
        self.should_exit = True
        if self._wake is not None:
            # Thread-safe, so safe in a signal handler too: it writes to the loop's self-pipe, waking its select.
            self._wake()
        if self.on_exit is not None:
            self.on_exit()

    async def main_loop(self) -> None:
        stopping = asyncio.Event()
        self._wake = functools.partial(asyncio.get_running_loop().call_soon_threadsafe, stopping.set)
        try:
            ticks = 0
            while not await self.on_tick(ticks):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), TICK_S)
                ticks += 10  # uvicorn counts tenths of a second: a multiple of 10 renews the headers
        finally:
            self._wake = None


async def serve_http(
    host: Host,
    sock: socket.socket,
    secrets_: Secrets,
    url: str,
    *,
    editor_socket: Path | None = None,
    agent_socket: Path | None = None,
    until: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve agents until a signal, or until `until` returns (`serve --stdio`: the editor closed the channel)."""
    port = sock.getsockname()[1]
    sessions = Sessions()
    mcp_server = build_server(host.gateway, sessions=sessions)
    calls = HttpCalls(host.gateway, sessions)
    app = build_http_app(mcp_server, secrets_, port, activity_path=host.activity.path, calls=calls)
    # A call blocked in an upstream must not keep a stopping daemon alive: after 3 s uvicorn drops the requests in
    # flight (a call cut short is recorded as cancelled) and the upstreams are closed. No proxy stands in front of a
    # loopback daemon: X-Forwarded-* from any local process is not to be believed (and its middleware cost every
    # request); a Server header would only name the software to whoever asks.
    server = _Server(
        uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            access_log=False,
            timeout_graceful_shutdown=3,
            proxy_headers=False,
            server_header=False,
            http=_OneWriteProtocol,
        )
    )
    # uvicorn waits for requests in flight before it stops; a call waiting on a prompt must not hold it up.
    server.on_exit = lambda: host.broker.close("mcphost is shutting down")
    # A signal that lands before uvicorn installs its own handlers must still end us through cleanup.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, server.handle_exit)
    announced: list[Path] = []

    async def announce_when_listening() -> None:
        # The discovery file promises a working endpoint, so it appears only once uvicorn has started.
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.01)
        announced.append(
            discovery.write(
                url=url,
                token=secrets_.agent_token,
                api_url=url.removesuffix(MCP_PATH) + API_PATH,
                api_token=secrets_.api_token,
                relay_socket=str(agent_socket) if agent_socket else None,
                config_path=str(host.loaded.path),
                editor_socket=str(editor_socket) if editor_socket else None,
            )
        )
        print(f"mcphost: agent endpoint {url}", file=sys.stderr)
        print(f"mcphost: bearer token in {announced[0]}", file=sys.stderr, flush=True)
        print(
            f"mcphost: REST API {url.removesuffix(MCP_PATH) + API_PATH} (its own token: `api.token` there)",
            file=sys.stderr,
            flush=True,
        )
        if editor_socket:
            print(f"mcphost: editors attach at {editor_socket} (try `mcphost approve`)", file=sys.stderr, flush=True)

    async def stop_when_done() -> None:
        assert until is not None
        try:
            await until()
        finally:
            server.stop()

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce_when_listening)
        if until is not None:
            tg.start_soon(stop_when_done)
        try:
            await server.serve(sockets=[sock])
        finally:
            tg.cancel_scope.cancel()
            for path in announced:
                discovery.remove(path)
