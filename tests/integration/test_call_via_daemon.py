"""`mcphost call` with a daemon running: the call goes through the daemon, so its editors are asked."""

from __future__ import annotations

import json

import anyio.to_thread

from tests.editor_client import allow, editor
from tests.helpers import Sandbox, daemon, mcphost


async def test_a_call_from_the_terminal_is_approved_in_the_attached_editor(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d, editor(d.editor_socket, allow()) as ed:
        result = await anyio.to_thread.run_sync(
            lambda: mcphost(sandbox, "call", "tool-write", "probe:plain_echo", "--args", '{"text": "hi"}')
        )
    assert result.returncode == 0, result.stderr
    assert "plain_echo: hi" in result.stdout
    assert f"calling through the daemon {d.process.pid}" in result.stderr
    assert [p["tool"] for p in ed.prompts] == ["plain_echo"]
    [record] = sandbox.tool_calls()
    assert record["decision"]["by"] == "editor"


async def test_in_process_calls_reach_no_editor(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d, editor(d.editor_socket, allow()) as ed:
        result = await anyio.to_thread.run_sync(
            lambda: mcphost(sandbox, "call", "tool-write", "probe:plain_echo", "--in-process")
        )
    assert result.returncode == 1
    assert "NO_APPROVER" in result.stderr
    assert ed.prompts == []


async def test_a_refused_call_through_the_daemon_prints_the_code_and_message(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox):
        result = await anyio.to_thread.run_sync(
            lambda: mcphost(sandbox, "call", "tool-read", "probe:wipe_notes", "-o", "json")
        )
    assert result.returncode == 1
    assert "SERVER_MISMATCH: Tool 'probe:wipe_notes' is marked destructive by server" in result.stderr
    assert json.loads(result.stdout)["error"]["code"] == "SERVER_MISMATCH"
