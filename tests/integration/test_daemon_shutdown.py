"""Stopping the daemon while a call waits on a prompt: the call ends at once, nothing hangs."""

from __future__ import annotations

import anyio
import anyio.to_thread

from tests.editor_client import editor, never
from tests.helpers import Sandbox, daemon, error_of, http_agent


async def test_a_waiting_prompt_ends_as_no_approver_when_the_daemon_is_stopped(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d, editor(d.editor_socket, never()) as ed, http_agent(d.url, d.headers) as agent:
        results = []

        async def call() -> None:
            results.append(
                await agent.call_tool(
                    "call_tool_write",
                    {"name": "probe:plain_echo", "intent": {"operation_type": "write"}},
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(10):
                await ed.prompted.wait()
            d.process.terminate()
        code = await anyio.to_thread.run_sync(d.process.wait, 15)
    assert code == 0
    error = error_of(results[0])
    assert error["code"] == "NO_APPROVER"
    assert "shutting down" in error["message"]
    [record] = sandbox.tool_calls()
    assert record["decision"]["by"] == "no_approver"
