"""A call cut short by its agent is on record: the agent cancels while the person is being asked, or while the
upstream works, and the record says `cancelled` and whether the call had reached the upstream."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio

from tests.editor.support import call
from tests.editor_client import editor, never
from tests.helpers import Sandbox, daemon, http_agent


async def wait_for_file(path: Path) -> None:
    with anyio.fail_after(20):
        while not path.exists():  # noqa: ASYNC110 (a file the upstream creates: no event to wait on)
            await anyio.sleep(0.02)


async def wait_for_record(box: Sandbox, status: str) -> dict[str, object]:
    with anyio.fail_after(20):
        while True:
            found = [r for r in box.tool_calls() if r.get("status") == status]
            if found:
                return found[0]
            await anyio.sleep(0.02)


async def test_an_agent_that_cancels_while_the_person_is_asked_leaves_a_cancelled_record(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d, editor(d.editor_socket, never()) as ed, http_agent(d.url, d.headers) as agent:
        pending = asyncio.create_task(call(agent, "write", "plain_echo", {"text": "x"}))
        await ed.wait_for(lambda: len(ed.prompts) == 1)
        pending.cancel()
        record = await wait_for_record(sandbox, "cancelled")
        await ed.wait_for(lambda: len(ed.cancelled) == 1)  # and the prompt is withdrawn from the person
    assert record["forwarded"] is False and record["tool"] == "plain_echo"


async def test_an_agent_that_cancels_while_the_upstream_works_leaves_a_forwarded_cancelled_record(
    sandbox: Sandbox,
) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n' + sandbox.probe_server())
    started, gate = sandbox.root / "started", sandbox.root / "gate"
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as agent:
        pending = asyncio.create_task(call(agent, "read", "slow", {"started": str(started), "gate": str(gate)}))
        await wait_for_file(started)
        pending.cancel()
        record = await wait_for_record(sandbox, "cancelled")
        gate.touch()
    assert record["forwarded"] is True
