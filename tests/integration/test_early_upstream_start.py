"""`mcphost mcp` in process and `mcphost serve` spawn their upstreams before they import the MCP SDK, so that the
starts overlap: each upstream is spawned once, and the process spawned early is the one its calls reach."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PROBE, Sandbox, daemon, raw_agent, with_sitecustomize

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the early start is POSIX's")

# Every process mcphost spawns, noted at the moment it spawns it: its argv, and whether the MCP SDK is imported by then.
SPAWNS = """
import json, os, sys


def _note(event, args):
    if event == "subprocess.Popen":
        with open(os.environ["MCPHOST_TEST_SPAWNS"], "a") as f:
            argv = [os.fsdecode(a) for a in args[1]]
            f.write(json.dumps({"argv": argv, "sdk": "mcp" in sys.modules}) + "\\n")


sys.addaudithook(_note)
"""


def _call(request_id: str, server: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": "call_tool_read",
            "arguments": {"name": f"{server}:whoami", "intent": {"operation_type": "read"}},
        },
    }


@pytest.mark.parametrize("door", ["in-process", "daemon"])
async def test_each_upstream_is_spawned_once_and_before_the_sdk_is_imported(
    sandbox: Sandbox, tmp_path: Path, door: str
) -> None:
    spawns = tmp_path / "spawns.jsonl"
    watched = with_sitecustomize(tmp_path, SPAWNS, MCPHOST_TEST_SPAWNS=str(spawns))
    sandbox.write_config(
        '[intent_declaration]\nstrict_server_validation = false\n\n[permissions]\nwrite = "allow"\n\n'
        + sandbox.probe_server("first")
        + sandbox.probe_server("second")
    )
    async with contextlib.AsyncExitStack() as stack:
        if door == "daemon":
            # The agent's `mcphost mcp` relays to it: the relay spawns nothing, and is not watched.
            await stack.enter_async_context(daemon(sandbox, env=watched))
            args, env = [], None
        else:
            args, env = ["--in-process"], watched
        raw = await stack.enter_async_context(raw_agent(sandbox, *args, env=env))
        await raw.initialize()
        pids = {}
        for server in ("first", "second"):
            await raw.send(_call(server, server))
            answer = await raw.answer_to(server, timeout=30)
            assert "error" not in answer and not answer["result"].get("isError"), answer
            pids[server] = json.loads(answer["result"]["content"][0]["text"])["pid"]
        assert pids["first"] != pids["second"]
    noted = [json.loads(line) for line in spawns.read_text(encoding="utf-8").splitlines()]
    upstreams = [n for n in noted if str(PROBE) in n["argv"]]
    assert len(upstreams) == 2, noted  # one process each: the one spawned early is the one the calls reached
    assert not any(n["sdk"] for n in upstreams), noted
    connected = [r for r in sandbox.records() if r["type"] == "upstream_connected"]
    assert sorted(r["server"] for r in connected) == ["first", "second"]


@pytest.mark.parametrize("command", ["call", "tools"])
def test_a_command_without_a_daemon_spawns_its_upstreams_once_and_before_the_sdk_is_imported(
    sandbox: Sandbox, tmp_path: Path, command: str
) -> None:
    spawns = tmp_path / "spawns.jsonl"
    watched = with_sitecustomize(tmp_path, SPAWNS, MCPHOST_TEST_SPAWNS=str(spawns))
    sandbox.write_config(
        '[permissions]\nread = "allow"\n\n' + sandbox.probe_server("first") + sandbox.probe_server("second")
    )
    argv = {
        # A call starts only the server it names.
        "call": ["call", "tool-read", "--in-process", "first:read_notes", "--args", '{"text": "x"}'],
        "tools": ["tools", "notes", "--in-process", "-o", "json"],
    }[command]
    done = subprocess.run(
        [sys.executable, "-m", "mcphost", *argv],
        env={**os.environ, **sandbox.env(), **watched},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if command == "call":
        assert done.stdout.strip() == "read_notes: x"
    else:
        assert {"first:read_notes", "second:read_notes"} <= {t["name"] for t in json.loads(done.stdout)["tools"]}
    noted = [json.loads(line) for line in spawns.read_text(encoding="utf-8").splitlines()]
    upstreams = [n for n in noted if str(PROBE) in n["argv"]]
    assert len(upstreams) == (1 if command == "call" else 2), noted
    assert not any(n["sdk"] for n in upstreams), noted
