"""A session used only for tool calls through the HTTP shortcut keeps its idle clock as the SDK keeps it for its own
requests: stopped while a call runs, started again from the last call's end."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import pytest

from mcphost.serve.http_app import CallShortcut, Claim, _hold, _release


@dataclass
class Transport:  # the SDK transport's fields the SDK's own request bookkeeping uses
    idle_scope: anyio.CancelScope | None
    _idle_timeout: float | None = 60.0
    _requests_in_flight: int = 0


async def test_the_idle_clock_stops_while_calls_run_and_restarts_when_the_last_ends() -> None:
    with anyio.CancelScope() as idle:
        transport = Transport(idle)
        assert _hold(transport)
        assert _hold(transport)
        await anyio.lowlevel.checkpoint()  # the calls wait on their upstreams
        assert idle.deadline == math.inf and transport._requests_in_flight == 2
        _release(transport)
        assert idle.deadline == math.inf and transport._requests_in_flight == 1
        before = asyncio.get_running_loop().time()
        _release(transport)
        after = asyncio.get_running_loop().time()
        assert transport._requests_in_flight == 0
        assert before + 60 <= idle.deadline <= after + 60


class _FailingCalls:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def answer(self, *args: object) -> None:
        assert self.transport._requests_in_flight == 1  # counted while it runs
        raise RuntimeError("the call failed")


async def test_a_call_that_fails_still_restarts_the_clock() -> None:
    with anyio.CancelScope() as idle:
        transport = Transport(idle)
        shortcut = CallShortcut(app=None, manager=None, calls=_FailingCalls(transport))  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="the call failed"):
            await shortcut.answer(Claim("s", (1, "call_tool_read", {}), transport), None)  # type: ignore[arg-type]
        assert transport._requests_in_flight == 0 and idle.deadline < math.inf


async def test_a_session_without_an_idle_clock_is_left_alone() -> None:
    transport = Transport(None)
    assert not _hold(transport)
    assert transport._requests_in_flight == 0
