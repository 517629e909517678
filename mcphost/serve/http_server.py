"""Running the daemon's HTTP endpoint: uvicorn on a loopback socket, announced through the discovery file."""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from pathlib import Path
from types import FrameType
from typing import Any, cast

import anyio
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from mcphost import discovery
from mcphost.host import Host
from mcphost.pipes import read_in_chunks
from mcphost.serve.activity_api import API_PATH
from mcphost.serve.http_app import (
    MAX_REQUEST_BODY,
    MCP_PATH,
    AgentsDoor,
    Claim,
    IdleTimer,
    build_http_app,
    stopped_answer,
    stopped_event,
)
from mcphost.serve.mcp_server import HttpCalls, Sessions, build_server
from mcphost.serve.stdio import CallCut
from mcphost.serve.tokens import Secrets

logger = logging.getLogger(__name__)


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

    def write_whole(self, data: bytes) -> None:
        """A whole response: out at once, after anything held."""
        held = self._held
        if held is not None:
            self._release()
            data = held + data
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


# The most a request line and its headers may take (with what of the body shares their reads). An agent's are a few
# hundred bytes; uvicorn's limit for the h11 parser is 16 KiB, and httptools has none.
MAX_REQUEST_HEAD = 1024 * 1024
_CLOSE_EMPTY = b"content-length: 0\r\nconnection: close\r\n\r\n"


def _head_ends_within(data: bytes, room: int) -> bool:
    """Whether the head that `data` goes on with ends within its first `room` bytes (a read that holds the rest of
    the head and a body is not a head past its limit)."""
    window = data[: room + 4]
    return b"\r\n\r\n" in window or b"\n\n" in window


# A call's body up to this size is held until it is whole, for the agents' door: as large as the endpoint takes, so
# that a call carrying a file is claimed whatever its protocol revision (a 2026-era call the door does not claim goes
# the SDK's long way). A larger one goes the ASGI way as it arrives, where the SDK refuses it.
CLAIM_LIMIT = MAX_REQUEST_BODY
# What every connection together holds of bodies not yet whole. A request whose body would take more is refused, 503
# and the connection closed: a token's holder who opens many connections and stalls each just short of its end ties
# up this much, not 4 MiB a connection (the ASGI way, where it would go on, holds a body whole as well, and more).
HELD_BUDGET = 64 * 1024 * 1024
# A body this small is held whatever the others take (a connection costs more than that in any case): an agent's
# everyday call is not refused while someone stalls large ones.
SMALL_BODY = 64 * 1024
_MCP_URL = MCP_PATH.encode()


class _Held:
    total = 0  # bytes of bodies held right now, on every connection of this process


# A connection whose client has stopped reading (the answer waits in the daemon's memory, past the kernel's buffers)
# and has taken nothing of it for this long is closed: the answer is let go. A client reading slowly goes on.
STALLED_READER_S = 60.0


class _AgentsHttp(HttpToolsProtocol):
    """uvicorn's HTTP protocol, its responses in one write (`_OneWrite`), and an agent's tool call answered without
    ASGI: a POST to /mcp is held until its body is whole and offered to the agents' door, which runs every check of
    the ASGI layers in front of the call shortcut in one pass. The call it claims runs in a task and a cycle of that
    request as uvicorn makes them (its shutdown and a lost connection act on them as on any request's; its errors are
    answered as `run_asgi` answers them), without `run_asgi` or an app in between, and its answer is written in one
    piece; anything it does not claim goes on as uvicorn would have sent it, only its task started when the body was
    in.

    The ASGI way costs a call four layers, a look at the headers in each, the body read through `receive`, and
    uvicorn's `send` checking every header of the answer against two expressions."""

    door: AgentsDoor | None = None  # set on the class a server makes for itself: uvicorn makes the protocol
    _head: int | None = None  # bytes of the request's head read so far; None once it is whole
    _held_body: bytearray | None = None
    _refused = False  # a request refused before its end (`_refuse_busy`): what follows on the connection is not read
    _stall: asyncio.TimerHandle | None = None  # the watch on a client that stopped reading (`pause_writing`)
    _cut: CallCut | None = None  # the 2026-era call in flight on this connection, which its client's leaving ends
    # The keep-alive clock (`IdleTimer`): uvicorn sets a timer after every response and cancels it at the next request:
    # its handle made, pushed on the loop's heap and popped again, on every call.
    _keep_alive: IdleTimer

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's
        read_in_chunks(transport)
        self._one = _OneWrite(transport)
        super().connection_made(cast(asyncio.Transport, self._one))
        # The clock runs from the start: a connection that sends nothing, or dribbles its request, is closed once
        # keep-alive's time is up. uvicorn's stops at the first byte, and an idle or byte-a-second client held its fd
        # for good, with no token needed: enough of them and no agent or relay could connect.
        self._keep_alive = IdleTimer(self.loop, self.timeout_keep_alive, self._kept_alive_long_enough)
        self._keep_alive.idle()
        self._head = 0

    def connection_lost(self, exc: Exception | None) -> None:
        if self._held_body is not None:
            self._let_go(self._held_body)
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        super().connection_lost(exc)
        self._keep_alive.cancel()
        if self._cut is not None:
            self._cut.cancel()

    def _unset_keepalive_if_required(self) -> None:
        # uvicorn calls this for every read: the clock stops only once a request is whole (on_message_complete).
        pass

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        head = self._head
        if head is not None:
            if not head:  # a request's first bytes: it has keep-alive's time from now to be whole
                self._keep_alive.idle()
            # httptools takes a header of any length, held in memory as it arrives (200 MB sent, 300 MB kept).
            head += len(data)
            if head > MAX_REQUEST_HEAD and not _head_ends_within(data, MAX_REQUEST_HEAD - (head - len(data))):
                self._head = None
                self._refuse_head()
                return
            self._head = head
        super().data_received(data)

    def _refuse_head(self) -> None:
        logger.warning("closed an HTTP connection whose request line and headers passed %d bytes", MAX_REQUEST_HEAD)
        if not self.transport.is_closing():
            self._one.write_whole(b"HTTP/1.1 431 Request Header Fields Too Large\r\n" + _CLOSE_EMPTY)
            self.transport.close()

    def _refuse_busy(self) -> None:
        self._refused = True
        logger.warning(
            "refused a request: the unfinished request bodies held already take %d MiB (a client that stalls them?)",
            HELD_BUDGET >> 20,
        )
        if not self.transport.is_closing():
            self._one.write_whole(b"HTTP/1.1 503 Service Unavailable\r\n" + _CLOSE_EMPTY)
            self.transport.close()

    def on_response_complete(self) -> None:
        # uvicorn's, but for the keep-alive clock.
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._keep_alive.busy()
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._keep_alive.idle()

    def pause_writing(self) -> None:
        # The transport holds more than its high-water mark for the client: watch that the client takes it.
        super().pause_writing()
        if self._stall is None:
            self._stall = self.loop.call_later(STALLED_READER_S, self._stalled, self.transport.get_write_buffer_size())

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _stalled(self, before: int) -> None:
        held = self.transport.get_write_buffer_size()
        if held and held >= before:
            logger.warning(
                "closed an HTTP connection whose client took nothing of its answer for %g s (%d bytes waiting)",
                STALLED_READER_S,
                held,
            )
            self._stall = None
            self.transport.abort()
            return
        self._stall = self.loop.call_later(STALLED_READER_S, self._stalled, held) if held else None

    def _kept_alive_long_enough(self, due: float) -> None:
        self.timeout_keep_alive_handler()

    def on_headers_complete(self) -> None:
        self._head = None
        # Host, Origin and token first: a request that fails them (a client with no token, a web page) goes the ASGI
        # way, refused there with none of its body held for it.
        if self.door is not None and self._claimable() and self.door.admits(self.headers):
            self._held_body = bytearray()
            return
        super().on_headers_complete()

    def _claimable(self) -> bool:
        """A keep-alive HTTP/1.1 POST to exactly /mcp, on a connection with nothing else under way (uvicorn's cycle is
        the latest request's, so a complete one means none queued either), that does not wait for a `100 Continue`
        before it sends its body."""
        parser = self.parser
        cycle = self.cycle
        return (
            self.url == _MCP_URL
            and not self.expect_100_continue
            and (cycle is None or cycle.response_complete)
            and parser.get_method() == b"POST"
            and parser.get_http_version() == "1.1"
            and parser.should_keep_alive()
            and not parser.should_upgrade()
        )

    def on_body(self, body: bytes) -> None:
        held = self._held_body
        if self._refused:
            return
        if held is None:
            super().on_body(body)
            return
        if len(held) + len(body) > CLAIM_LIMIT:
            self._let_go(held)
            super().on_headers_complete()
            super().on_body(bytes(held) + body)
            return
        if _Held.total + len(body) > HELD_BUDGET and len(held) + len(body) > SMALL_BODY:
            self._let_go(held)
            self._refuse_busy()
            return
        held += body
        _Held.total += len(body)

    def _let_go(self, held: bytearray) -> None:
        self._held_body = None
        _Held.total -= len(held)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        # The request is whole: its answer may take as long as a person does. The next request's head is counted.
        self._keep_alive.busy()
        self._head = 0
        held = self._held_body
        if held is None:
            super().on_message_complete()
            return
        self._let_go(held)
        assert self.door is not None
        claim = None
        try:
            claim = self.door.claim(self.headers, bytes(held))
        except Exception:  # raised in a parser callback it would end the connection unanswered
            logger.exception("the agents' door failed on a request; it goes the ASGI way")
        if claim is not None and self.limit_concurrency is None and not self.config.reset_contextvars:
            self._start_claimed(claim)
            return
        super().on_headers_complete()
        if held:  # the ASGI app reads it
            super().on_body(bytes(held))
        super().on_message_complete()

    def _start_claimed(self, claim: Claim) -> None:
        """The request's cycle and task, as uvicorn's `on_headers_complete` makes them for a request whose body is in,
        less what only an ASGI app reads (the URL parsed again, a path decoded): `_claimable` knows what they are.
        The task answers the call (`_answer`); its cycle is what uvicorn's shutdown and `connection_lost` act on."""
        scope = self.scope
        scope["method"] = "POST"
        scope["path"] = self.root_path + MCP_PATH
        scope["raw_path"] = self.root_path.encode("ascii") + _MCP_URL
        scope["query_string"] = b""
        cycle = self.cycle = RequestResponseCycle(
            scope=scope,
            transport=self.transport,
            flow=self.flow,
            logger=self.logger,
            access_logger=self.access_logger,
            access_log=self.access_log,
            default_headers=self.server_state.default_headers,
            message_event=asyncio.Event(),
            expect_100_continue=False,
            keep_alive=True,
            on_response=self.on_response_complete,
        )
        cycle.more_body = False
        task = self.loop.create_task(self._answer(claim, cycle))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)
        if claim.modern is not None:
            # At this revision a client cancels a call by going away: `connection_lost` cuts it.
            self._cut = CallCut.of(task)
            task.add_done_callback(self._forget_cut)

    def _forget_cut(self, task: asyncio.Task[None]) -> None:
        if self._cut is not None and self._cut.task is task:
            self._cut = None

    async def _answer(self, claim: Claim, cycle: RequestResponseCycle) -> None:
        """Answer a claimed call, in place of uvicorn's `run_asgi` and an app: what goes wrong is logged and answered
        as `run_asgi` answers an app that raised (a 500, or the connection closed if the answer had begun)."""
        assert self.door is not None
        try:
            answer = await self.door.answer(claim, cast(Any, cycle.send))
            if answer is not None:
                if cycle.flow.write_paused and not cycle.disconnected:  # as uvicorn's `send`: the client reads slowly
                    await cycle.flow.drain()
                self._write_answer(cycle, *answer)
            elif not cycle.response_complete and not cycle.disconnected:  # a stream left open
                logger.error("the answer to a claimed call ended without completing its event stream")
                self.transport.close()
        except BaseException as exc:  # as uvicorn's `run_asgi`, cancellation included (a server stopping)
            cut, task = self._cut, asyncio.current_task()
            if isinstance(exc, asyncio.CancelledError) and cut is not None and cut.cut and cut.task is task:
                # A 2026-era call whose client went away: cut short on purpose, recorded as cancelled, unanswered.
                assert task is not None
                task.uncancel()
                return
            if isinstance(exc, asyncio.CancelledError) and not cycle.keep_alive:
                # The server stopping (uvicorn's wait for calls in flight ran out): the call is on record as
                # cancelled, and the agent, still there, is told why (as `mcphost mcp` tells it), not left with a
                # dropped connection; then the connection closes.
                self._answer_stopped(claim, cycle)
                self.transport.close()
                return
            logger.error("the answer to a claimed call failed", exc_info=exc)
            if not cycle.response_started:
                await cycle.send_500_response()
            else:
                self.transport.close()
        finally:
            cycle.on_response = _nothing

    def _answer_stopped(self, claim: Claim, cycle: RequestResponseCycle) -> None:
        """The call's error answer saying the daemon stopped: a whole response, or the last event of the event
        stream its answer had begun (written as uvicorn writes a chunk: no wait, the server is going)."""
        if cycle.disconnected or cycle.response_complete:
            return
        status, body = stopped_answer(claim.call[0])
        if not cycle.response_started:
            self._write_answer(cycle, status, body)
        elif cycle.chunked_encoding:
            event = stopped_event(body)
            self.transport.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event))
            cycle.response_complete = True

    def _write_answer(self, cycle: RequestResponseCycle, status: int, body: bytes) -> None:
        """What uvicorn's `send` does for a whole response of ours, whose headers need no checks."""
        if cycle.disconnected:
            return
        cycle.response_started = True
        head = [STATUS_LINE[status]]
        for pair in cycle.default_headers:  # a loop, not a generator: no frames of its own
            head.append(b"%s: %s\r\n" % pair)
        head.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
        if not cycle.keep_alive:  # the server began to stop while the call ran
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        head.append(body)
        self._one.write_whole(b"".join(head))
        cycle.response_complete = True
        cycle.message_event.set()
        if not cycle.keep_alive:
            self._one.close()
        cycle.on_response()


def _nothing() -> None:
    pass


class _DatedState(ServerState):
    """uvicorn's state shared by a server's connections, its default headers made when a response reads them in a
    new second. uvicorn renews them on a tick of its loop every second, whether a response is sent or not: a daemon
    nobody uses would wake once a second for them alone."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._config = config
        self._second = -1
        self._headers: list[tuple[bytes, bytes]] = []
        super().__init__()

    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        second = int(time.time())
        if second != self._second:
            # As uvicorn's `on_tick` makes them; its config's headers are encoded only once it has loaded.
            date = [(b"date", formatdate(second, usegmt=True).encode())] if self._config.date_header else []
            self._headers = date + self._config.encoded_headers
            self._second = second
        return self._headers

    @default_headers.setter
    def default_headers(self, headers: list[tuple[bytes, bytes]]) -> None:
        # ServerState's constructor sets them empty, and uvicorn's tick (not run here) would set them made.
        pass


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT after shutdown, which would skip our cleanup (discovery file, upstreams).

    Its own loop wakes every 0.1 s to see whether it should stop, and renews the Date header every tenth tick: ten
    wake-ups a second of a daemon nobody is using, each taking the GIL and a few hundred µs. Here `stop` wakes it,
    the loop sleeps until then, the Date header is made when a response reads it (`_DatedState`), and open event
    streams are ended by it, not by sse-starlette's own watch (`_sse_shutdown`)."""

    on_exit: Callable[[], None] | None = None
    _wake: Callable[[], object] | None = None

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.server_state = _DatedState(config)

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
        # Set before `should_exit` is read: a signal landing in between wakes the wait below.
        self._wake = functools.partial(asyncio.get_running_loop().call_soon_threadsafe, stopping.set)
        streams = _sse_shutdown()
        claimed = streams is not None and not streams.watcher_started
        if streams is not None:
            streams.watcher_started = True
        try:
            if not self.should_exit:
                await stopping.wait()
        finally:
            self._wake = None
            if streams is not None:
                # What its watcher does once it sees the server stopping: every open event stream ends now.
                for event in list(streams.events):
                    event.set()
                if claimed:
                    streams.watcher_started = False


def _sse_shutdown() -> Any:
    """sse-starlette's record of this thread's open event streams (the MCP SDK answers in them), or None where its
    version keeps no such record. Once it has served one stream, it polls twice a second for the life of the
    process for a server stopping, to end them: this server claims that watch and ends them itself when it stops."""
    try:
        from sse_starlette import sse

        state = sse._get_shutdown_state()
    except (ImportError, AttributeError):
        return None
    return state if hasattr(state, "events") and hasattr(state, "watcher_started") else None


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
    calls = HttpCalls(host.gateway, sessions, mcp_server)
    app, door = build_http_app(mcp_server, secrets_, port, activity_path=host.activity.path, calls=calls)
    protocol = type("AgentsHttp", (_AgentsHttp,), {"door": door})
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
            http=protocol,
        )
    )
    announced: list[Path] = []

    def stopping() -> None:
        # The file goes first, before uvicorn lets go of the port: once it is free, any local user may bind it, and
        # a command that still found the file would send that listener the agents' token (the commands also check
        # whose the listener is, `discovery.tcp_peer_uid`).
        for path in announced:
            discovery.remove(path)
        # uvicorn waits for requests in flight before it stops; a call waiting on a prompt must not hold it up.
        host.broker.close("mcphost is shutting down")

    server.on_exit = stopping
    # A signal that lands before uvicorn installs its own handlers must still end us through cleanup.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, server.handle_exit)

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
