"""A session used only for tool calls through the HTTP shortcut keeps its idle clock as the SDK keeps it for its own
requests: stopped while a call runs, started again from the last call's end, and the session ended once it has been
idle for its idle timeout. The shortcut keeps that time with one timer per session instead of the SDK's timer per
request, and hands the clock back and forth with the SDK's own requests in the same session."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.lowlevel
import httpx2
import pytest
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

from mcphost.serve.http_app import CallShortcut, Claim, SessionManager, _hold, _release
from mcphost.serve.mcp_server import HttpCalls, Sessions
from tests.helpers import poll

IDLE = 0.2  # the session's idle timeout in these tests, seconds


@dataclass
class Transport:  # the SDK transport's fields the SDK's own request bookkeeping uses
    idle_scope: anyio.CancelScope | None
    _idle_timeout: float | None = IDLE
    _requests_in_flight: int = 0
    ended_at: list[float] = field(default_factory=list)  # when the session's task left its idle scope
    gone: anyio.Event = field(default_factory=anyio.Event)

    def sdk_request_starts(self) -> None:
        # What the SDK's `handle_request` does around a request of its own.
        assert self.idle_scope is not None
        self._requests_in_flight += 1
        self.idle_scope.deadline = math.inf

    def sdk_request_ends(self) -> None:
        assert self.idle_scope is not None and self._idle_timeout is not None
        self._requests_in_flight -= 1
        if not self._requests_in_flight:
            self.idle_scope.deadline = anyio.current_time() + self._idle_timeout


@asynccontextmanager
async def session() -> AsyncIterator[Transport]:
    """A session as the SDK's manager runs it: its task inside the idle scope until the scope is cancelled."""
    idle = anyio.CancelScope()
    transport = Transport(idle)

    async def run() -> None:
        with idle:
            await anyio.sleep_forever()
        transport.ended_at.append(now())
        transport.gone.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.lowlevel.checkpoint()  # the task is in its scope
        yield transport
        tg.cancel_scope.cancel()


def now() -> float:
    return asyncio.get_running_loop().time()


async def ended(transport: Transport, within: float = 2) -> float:
    with anyio.fail_after(within):
        await transport.gone.wait()
    return transport.ended_at[0]


async def test_a_session_is_held_while_calls_run_and_ends_its_idle_timeout_after_the_last() -> None:
    async with session() as transport:
        assert _hold(transport) and _hold(transport)
        await anyio.sleep(IDLE * 2)  # the calls outlast the idle timeout: the session stays
        assert transport.ended_at == [] and transport._requests_in_flight == 2
        _release(transport)
        await anyio.sleep(IDLE * 2)  # one call still runs
        assert transport.ended_at == []
        last_end = now()
        _release(transport)
        assert transport._requests_in_flight == 0
        assert IDLE <= await ended(transport) - last_end < IDLE + 0.5


async def test_a_busy_session_stays_and_its_clock_uses_one_timer_per_idle_period_not_one_per_call() -> None:
    async with session() as transport:
        loop = asyncio.get_running_loop()
        timers: list[Any] = []
        started = now()
        while now() - started < IDLE * 3:  # a call every 20 ms for three idle timeouts
            assert _hold(transport)
            await anyio.lowlevel.checkpoint()
            _release(transport)
            last_end = now()
            timer = transport._mcphost_idle_clock.timer  # type: ignore[attr-defined]
            if not any(timer is seen for seen in timers):
                timers.append(timer)
            await anyio.sleep(0.02)
            assert transport.ended_at == []
        assert transport.idle_scope is not None and transport.idle_scope.deadline == math.inf
        assert len(timers) <= 5  # about one per idle timeout, never one per call
        assert not any(isinstance(h, asyncio.TimerHandle) and h.cancelled() for h in loop._scheduled)  # type: ignore[attr-defined]
        assert IDLE <= await ended(transport) - last_end < IDLE + 0.5


async def test_the_sdks_own_request_ending_last_leaves_the_clock_to_the_sdk() -> None:
    async with session() as transport:
        assert _hold(transport)
        _release(transport)  # the shortcut's clock runs
        await anyio.sleep(IDLE / 2)
        transport.sdk_request_starts()
        transport.sdk_request_ends()  # the SDK's deadline: IDLE from now
        sdk_end = now()
        assert IDLE <= await ended(transport) - sdk_end < IDLE + 0.5


async def test_a_call_after_the_sdks_request_stops_the_sdks_clock_while_it_runs() -> None:
    async with session() as transport:
        transport.sdk_request_starts()
        transport.sdk_request_ends()  # the SDK's deadline is set
        assert _hold(transport)
        await anyio.sleep(IDLE * 2)  # past the SDK's deadline: the call holds the session
        assert transport.ended_at == []
        last_end = now()
        _release(transport)
        assert IDLE <= await ended(transport) - last_end < IDLE + 0.5


async def test_an_sdk_request_running_when_the_clock_is_due_holds_the_session_until_it_ends() -> None:
    async with session() as transport:
        assert _hold(transport)
        _release(transport)
        transport.sdk_request_starts()  # an open GET stream, say
        await anyio.sleep(IDLE * 2)  # the shortcut's timer comes due meanwhile
        assert transport.ended_at == []
        transport.sdk_request_ends()
        sdk_end = now()
        assert IDLE <= await ended(transport) - sdk_end < IDLE + 0.5


class _FailingCalls:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def answer(self, *args: object) -> None:
        assert self.transport._requests_in_flight == 1  # counted while it runs
        raise RuntimeError("the call failed")


async def test_a_call_that_fails_still_restarts_the_clock() -> None:
    async with session() as transport:
        shortcut = CallShortcut(app=None, manager=None, calls=_FailingCalls(transport))  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="the call failed"):
            await shortcut.answer(Claim("s", (1, "call_tool_read", {}), transport), None)  # type: ignore[arg-type]
        failed_at = now()
        assert transport._requests_in_flight == 0
        assert IDLE <= await ended(transport) - failed_at < IDLE + 0.5


class SlottedTransport:
    """A transport that takes no attribute beyond its own (should the SDK's ever get `__slots__`)."""

    __slots__ = ("_idle_timeout", "_requests_in_flight", "idle_scope")

    def __init__(self, idle_scope: anyio.CancelScope) -> None:
        self.idle_scope = idle_scope
        self._idle_timeout = IDLE
        self._requests_in_flight = 0


async def test_a_transport_that_cannot_hold_the_clock_gets_the_sdks_own_deadline() -> None:
    with anyio.CancelScope() as idle:
        transport = SlottedTransport(idle)
        assert _hold(transport)
        assert idle.deadline == math.inf
        released = now()
        _release(transport)
        assert transport._requests_in_flight == 0
        assert released + IDLE <= idle.deadline <= now() + IDLE
        await anyio.sleep(IDLE * 2)
    assert idle.cancelled_caught  # ended by its deadline, as the SDK's own requests end it


async def test_a_session_without_an_idle_clock_is_left_alone() -> None:
    transport = Transport(None)
    assert not _hold(transport)
    assert transport._requests_in_flight == 0


async def test_the_sdks_transport_has_what_the_clock_reads_and_ends_like_the_fakes() -> None:
    # The fakes above copy the SDK transport's fields; this holds the real one to them, so that an SDK that renames
    # them fails here rather than in a daemon's calls.
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    transport = StreamableHTTPServerTransport(mcp_session_id="s", idle_timeout=IDLE)
    async with transport.connect():
        idle = transport.idle_scope
        assert idle is not None and transport._requests_in_flight == 0
        with idle:
            assert _hold(transport)
            assert idle.deadline == math.inf and transport._requests_in_flight == 1
            released = now()
            _release(transport)
            await anyio.sleep(IDLE * 3)
        assert idle.cancelled_caught and transport._requests_in_flight == 0
        assert transport._mcphost_idle_clock._since >= released  # type: ignore[attr-defined]


@dataclass
class Served:
    """An SDK session manager behind the call shortcut, over HTTP in memory."""

    manager: StreamableHTTPSessionManager
    calls: HttpCalls
    http: httpx2.AsyncClient

    async def open_session(self) -> str:
        answer = await self.http.post("/mcp", json=OPENING, headers=HEADERS)
        assert answer.status_code == 200, answer.text
        return str(answer.headers["mcp-session-id"])


HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
OPENING = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "a", "version": "1"}},
}


@asynccontextmanager
async def served(manager: StreamableHTTPSessionManager) -> AsyncIterator[Served]:
    class Gateway:
        def asks_agents_clients(self) -> bool:
            return False

    calls = HttpCalls(cast(Any, Gateway()), Sessions(), cast(Any, manager.app))
    app = CallShortcut(StreamableHTTPASGIApp(manager), manager, calls)
    async with manager.run(), httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://x") as http:
        yield Served(manager, calls, http)


async def test_a_session_the_sdk_ended_without_a_delete_is_forgotten_by_the_shortcut() -> None:
    # An agent that goes away sends no DELETE: the SDK ends its session once idle. What the shortcut keeps per
    # session must go with it, or a daemon that runs for weeks keeps every session it ever saw.
    server: Server[Any] = Server("mcphost")
    async with served(StreamableHTTPSessionManager(app=server, session_idle_timeout=IDLE)) as it:
        first = await it.open_session()
        assert it.calls.version_of(first) == "2025-11-25"
        await poll(lambda: first not in it.manager._server_instances, "the SDK to end the idle session")
        second = await it.open_session()
        assert it.calls.version_of(first) is None
        assert it.calls.version_of(second) == "2025-11-25"


async def test_past_the_session_limit_the_session_idle_longest_is_ended_not_the_new_one_refused() -> None:
    # At the SDK's limit a new session was refused (503) for as long as the old ones stayed: 10 000 `initialize`s
    # and no DELETE locked every handshake-era agent out for half an hour.
    server: Server[Any] = Server("mcphost")
    manager = SessionManager(app=server, session_idle_timeout=3600, max_sessions=3)
    async with served(manager) as it:
        oldest, busy, used = [await it.open_session() for _ in range(3)]
        manager._server_instances[busy]._requests_in_flight += 1  # a request in flight: in use
        manager.used(oldest)  # a call through the shortcut: the oldest is now the one used last
        fourth = await it.open_session()
        assert list(manager._server_instances) == [busy, oldest, fourth]  # `used` was idle the longest
        ping = {"jsonrpc": "2.0", "method": "ping", "id": 2}
        gone = await it.http.post("/mcp", json=ping, headers={**HEADERS, "mcp-session-id": used})
        assert gone.status_code == 404
        await poll(lambda: it.calls.version_of(used) is None, "the ended session to be forgotten by the shortcut")
        manager._server_instances[busy]._requests_in_flight -= 1
