"""An agent that closes its end of `mcphost mcp`'s output no longer reads what mcphost answers: it has crashed, or
its user stopped it. Nobody is left to act for, so the session ends at once, in process and relayed to a daemon
alike: the call under way is cut short and on record as cancelled, and nothing the agent sent is run afterwards,
although its input is still open. (An agent that only closes its input is still there to be answered:
test_agent_eof.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest

from tests.helpers import RawAgent, Sandbox, daemon, poll, raw_agent, slow_read, tools_call

ALLOW_ALL = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'
WIPE = {"name": "probe:wipe_notes", "args": {"text": "everything"}, "intent": {"operation_type": "destructive"}}


@asynccontextmanager
async def session(box: Sandbox, path: str, sockets: bool) -> AsyncIterator[RawAgent]:
    async with AsyncExitStack() as stack:
        if path == "relay":
            await stack.enter_async_context(daemon(box))
        yield await stack.enter_async_context(raw_agent(box, sockets=sockets))


@pytest.mark.parametrize("sockets", [False, True], ids=["pipes", "socket-pairs"])
@pytest.mark.parametrize("path", ["in-process", "relay"])
async def test_an_agent_that_stops_reading_its_answers_ends_the_session_and_its_call_under_way(
    sandbox: Sandbox, path: str, sockets: bool
) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    started, gate = sandbox.root / "started", sandbox.root / "gate"
    async with session(sandbox, path, sockets) as raw:
        await raw.initialize()
        await raw.send(tools_call(7, "call_tool_read", slow_read(started, gate)))
        await poll(started.exists, "the call to reach the upstream")
        await raw.stop_reading()
        # The slow call's gate never opens, and the agent's input stays open: only the session's end ends the wait.
        with anyio.fail_after(20):
            await raw.process.wait()
        # Too late: whatever the agent sends now reaches nobody who would run it.
        with pytest.raises((anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)):
            for _ in range(50):
                await raw.send(tools_call(8, "call_tool_destructive", WIPE))
                await anyio.sleep(0.01)
    assert "Traceback" not in raw.stderr, raw.stderr
    if path == "in-process":  # relayed, the daemon says it in its own log
        assert "the agent closed its end of the session's output" in raw.stderr, raw.stderr
    [record] = await poll(sandbox.tool_calls, "the cut call's record")
    assert (record["tool"], record["status"]) == ("slow", "cancelled"), record
    assert not [r for r in sandbox.records() if r.get("tool") == "wipe_notes"]
