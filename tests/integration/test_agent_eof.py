"""An agent that closes its input has not given up on its answers: `printf '...' | mcphost mcp` and agents that
close stdin right after their last request read the answers afterwards. Whatever `mcphost mcp` read before the end
of its input is answered before it exits, in process and relayed to a daemon alike, and nobody is blamed for the
end: it is the normal end of a session. A signal still ends it at once (issue 15)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest

from tests.helpers import RawAgent, Sandbox, daemon, initialize_request, poll, raw_agent, slow_read, tools_call

PATHS = ["in-process", "relay"]
INITIALIZE = initialize_request("closes-early")
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": "list", "method": "tools/list"}
READ = {"name": "probe:read_notes", "args": {"text": "last words"}, "intent": {"operation_type": "read"}}
CALL = tools_call("call", "call_tool_read", READ)
# What would blame the daemon (or anyone) for an end the agent chose.
BLAME = ("closed the", "is gone", "went away", "no daemon serves")


@asynccontextmanager
async def session(box: Sandbox, path: str) -> AsyncIterator[RawAgent]:
    """`mcphost mcp` for `box`, in process or relayed to a daemon of its own."""
    async with AsyncExitStack() as stack:
        if path == "relay":
            await stack.enter_async_context(daemon(box))
        yield await stack.enter_async_context(raw_agent(box))


async def read_to_end(raw: RawAgent, timeout: float = 30) -> list[dict[str, Any]]:
    """Every line `mcphost mcp` writes until it closes its stdout, as JSON."""
    data = b""
    with anyio.fail_after(timeout):
        while True:
            try:
                data += await raw.process.stdout.receive()
            except anyio.EndOfStream:
                break
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def by_id(messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in messages if "method" not in m}


def check_said(raw: RawAgent, path: str) -> None:
    assert ("relaying to the daemon" in raw.stderr) == (path == "relay"), raw.stderr
    assert not any(words in raw.stderr for words in BLAME), raw.stderr
    assert "Traceback" not in raw.stderr, raw.stderr


@pytest.mark.parametrize("path", PATHS)
async def test_requests_sent_just_before_the_agent_closes_its_input_are_answered(sandbox: Sandbox, path: str) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with session(sandbox, path) as raw:
        # All at once, and the input closed right behind them: nothing has been answered yet.
        for message in (INITIALIZE, INITIALIZED, LIST, CALL):
            await raw.send(message)
        await raw.process.stdin.aclose()
        answers = by_id(await read_to_end(raw))
        with anyio.fail_after(30):
            code = await raw.process.wait()
    assert set(answers) == {"init", "list", "call"}, answers
    assert answers["init"]["result"]["serverInfo"]["name"] == "mcphost"
    assert "call_tool_read" in {tool["name"] for tool in answers["list"]["result"]["tools"]}
    assert answers["call"]["result"]["content"][0]["text"] == "read_notes: last words"
    assert code == 0
    check_said(raw, path)
    [record] = sandbox.tool_calls()
    assert record["status"] == "success"


@pytest.mark.parametrize("path", PATHS)
async def test_a_call_under_way_when_the_agent_closes_its_input_is_answered_before_the_process_exits(
    sandbox: Sandbox, path: str
) -> None:
    sandbox.write_config(sandbox.probe_server())
    started, gate = sandbox.root / "started", sandbox.root / "gate"
    arguments = slow_read(started, gate)
    async with session(sandbox, path) as raw:
        await raw.initialize()
        await raw.send(tools_call(7, "call_tool_read", arguments))
        await poll(started.exists, "the call to reach the upstream")
        await raw.process.stdin.aclose()
        gate.touch()
        answers = by_id(await read_to_end(raw))
        with anyio.fail_after(30):
            code = await raw.process.wait()
    assert not answers[7]["result"]["isError"], answers[7]
    assert code == 0
    check_said(raw, path)


@pytest.mark.parametrize("path", PATHS)
async def test_a_signal_after_the_agent_closed_its_input_ends_the_wait_for_answers(sandbox: Sandbox, path: str) -> None:
    sandbox.write_config(sandbox.probe_server())
    started, gate = sandbox.root / "started", sandbox.root / "gate"
    async with session(sandbox, path) as raw:
        await raw.initialize()
        arguments = slow_read(started, gate)
        await raw.send(tools_call(8, "call_tool_read", arguments))
        await poll(started.exists, "the call to reach the upstream")
        await raw.process.stdin.aclose()
        raw.process.send_signal(signal.SIGTERM)
        # The gate never opens: only the signal can end the wait, well before the probe's own 30 s limit.
        with anyio.fail_after(20):
            code = await raw.process.wait()
    assert code == 0
    assert "SIGTERM" in raw.stderr
    if path == "relay":
        assert "closing the upstream servers" not in raw.stderr, "a relay has none of its own to close"


def test_requests_read_from_a_file_are_answered_before_the_process_exits(sandbox: Sandbox) -> None:
    # A regular file on stdin takes the SDK's transport (no pipes to put on the event loop): the same promise holds.
    sandbox.write_config(sandbox.probe_server())
    requests = sandbox.root / "requests.jsonl"
    requests.write_text("".join(json.dumps(m) + "\n" for m in (INITIALIZE, INITIALIZED, LIST, CALL)), encoding="utf-8")
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "mcphost", "mcp", "--in-process", "--config", str(sandbox.config)],
            env={**os.environ, **sandbox.env()},
            stdin=stdin,
            capture_output=True,
            timeout=60,
            check=False,
        )
    answers = by_id([json.loads(line) for line in done.stdout.splitlines() if line.strip()])
    assert set(answers) == {"init", "list", "call"}, (answers, done.stderr)
    assert answers["call"]["result"]["content"][0]["text"] == "read_notes: last words"
    assert done.returncode == 0, done.stderr
