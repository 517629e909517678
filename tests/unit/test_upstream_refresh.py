"""Re-reading an upstream's tool list: coalesced, screened, and its failures told to every caller waiting on it.

The upstream is an MCP server object in this process (no subprocess), as in the pipeline tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from mcphost.config.models import ServerConfig
from mcphost.upstream.connection import State, UpstreamCallFailed, UpstreamServer

OBJECT: dict[str, Any] = {"type": "object"}


class Scripted:
    """A server whose tools/list answers are scripted by the test."""

    def __init__(self) -> None:
        self.tools = [types.Tool(name="t", input_schema=OBJECT)]
        self.lists = 0
        self.fail = False
        self.listing = anyio.Event()
        self.release = anyio.Event()
        self.hold = False

    def build(self) -> Server[Any]:
        async def on_list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
            self.lists += 1
            if self.hold:
                self.listing.set()
                await self.release.wait()
            if self.fail:
                raise RuntimeError("the list is on fire")
            return types.ListToolsResult(tools=self.tools)

        return Server("scripted", on_list_tools=on_list_tools)


@asynccontextmanager
async def connected(scripted: Scripted) -> AsyncIterator[UpstreamServer]:
    server = UpstreamServer("s", ServerConfig(command="unused"), connect=lambda *_: scripted.build())
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run)
        await server.wait_first_attempt(10)
        assert server.state is State.CONNECTED, server.last_error
        try:
            yield server
        finally:
            server.close()


async def test_every_caller_waiting_on_a_failed_read_hears_why() -> None:
    scripted = Scripted()
    async with connected(scripted) as server:
        before = scripted.lists
        scripted.fail, scripted.hold = True, True
        errors: list[UpstreamCallFailed] = []

        async def check() -> None:
            try:
                await server.fresh_tool("t", max_age=0)
            except UpstreamCallFailed as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(check)
            await scripted.listing.wait()
            scripted.release.set()
        assert scripted.lists == before + 1
        assert len(errors) == 3
        assert all("tool list" in e.reason for e in errors)
        assert "t" in server.tools, "a failed read keeps the last good list"


async def test_a_cancelled_caller_does_not_fail_the_others_waiting_on_its_read() -> None:
    # In a daemon the read is shared by every agent's calls to the server: one agent cancelling the call that began
    # it must not fail another agent's call with "cancelled" (found by a probe: UPSTREAM_ERROR, the call not made).
    scripted = Scripted()
    async with connected(scripted) as server:
        before = scripted.lists
        scripted.hold = True
        found: list[Any] = []

        async def check() -> None:
            found.append(await server.fresh_tool("t", max_age=0))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                async with anyio.create_task_group() as first:
                    first.start_soon(check)
                    await scripted.listing.wait()  # the first caller's read is under way
                    tg.start_soon(check)
                    tg.start_soon(check)
                    await anyio.wait_all_tasks_blocked()
                    scripted.listing = anyio.Event()
                    first.cancel_scope.cancel()
                await scripted.listing.wait()  # read again, by one of the others
                scripted.release.set()
        assert [tool.name for tool in found] == ["t", "t"]
        assert scripted.lists == before + 2


async def test_a_fresh_list_within_max_age_is_not_read_again() -> None:
    scripted = Scripted()
    async with connected(scripted) as server:
        before = scripted.lists
        for _ in range(5):
            assert await server.fresh_tool("t", max_age=3600) is not None
        assert scripted.lists == before


@pytest.mark.parametrize(
    ("name", "reason"),
    [("a:b", "':'"), ("esc\x1b[0m", "control"), ("x" * 129, "129 characters")],
)
async def test_a_tool_the_protocol_allows_but_mcphost_cannot_offer_is_dropped(name: str, reason: str) -> None:
    scripted = Scripted()
    scripted.tools.append(types.Tool(name=name, input_schema=OBJECT))
    async with connected(scripted) as server:
        assert set(server.tools) == {"t"}
        [(shown, why)] = server.dropped_tools
        assert reason in why
        assert "\x1b" not in shown


async def test_a_list_the_server_says_has_changed_is_read_again_before_a_tool_from_it_is_trusted() -> None:
    scripted = Scripted()
    async with connected(scripted) as server:
        assert server.tools["t"].annotations in (None, {})
        scripted.tools = [
            types.Tool(name="t", input_schema=OBJECT, annotations=types.ToolAnnotations(destructive_hint=True))
        ]
        # However long a read is trusted otherwise, the one before the server's word no longer counts: the next
        # look at the tool waits for a read begun after it (the background one, or its own).
        await server._on_message(types.ToolListChangedNotification())
        tool = await server.fresh_tool("t", max_age=3600)
        assert tool is not None and tool.annotations == {"destructiveHint": True}
        lists = scripted.lists
        assert await server.fresh_tool("t", max_age=3600) is not None
        assert scripted.lists == lists  # and that read is trusted again
