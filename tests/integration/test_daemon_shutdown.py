"""Stopping the daemon: a call waiting on a prompt ends at once, nothing hangs, and nobody is sent to its port."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.to_thread

from tests.editor_client import editor, never
from tests.helpers import Sandbox, daemon, error_of, http_agent, poll


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


async def test_a_stopping_daemon_withdraws_its_discovery_file_before_it_lets_go_of_its_port(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    # Once the port is free any local user may bind it; a command that still found the file would send that
    # listener the agents' token. A call in flight keeps the daemon stopping for seconds after its port is gone.
    started, gate = tmp_path / "started", tmp_path / "gate"
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with daemon(sandbox) as d:
        announced = sandbox.root / "run" / f"daemon-{d.process.pid}.json"
        port = urlsplit(d.url).port
        assert announced.exists() and port is not None
        args = json.dumps({"started": str(started), "gate": str(gate)})
        argv = [sys.executable, "-m", "mcphost", "call", "tool-read", "probe:slow", "--args", args]
        async with await anyio.open_process(
            argv, env={**os.environ, **sandbox.env()}, stdout=subprocess.DEVNULL
        ) as call:
            await poll(started.exists, "the slow call to reach the upstream")
            d.process.terminate()
            seen = []
            with anyio.fail_after(15):
                while d.process.poll() is None:
                    # The port first, then the file: the file must be gone by the time the port is seen free.
                    with socket.socket() as probe:
                        listening = probe.connect_ex(("127.0.0.1", port)) == 0
                    seen.append((listening, announced.exists()))
                    if not listening:
                        break
                    await anyio.sleep(0.001)
            gate.touch()
            with anyio.fail_after(30):
                await call.wait()
    assert seen and not seen[-1][0], "the daemon never let go of its port"
    assert (False, True) not in seen, seen
