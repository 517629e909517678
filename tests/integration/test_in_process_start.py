"""`mcphost mcp` in process and `mcphost serve` spawn their upstreams before they import the MCP SDK, so that the
starts overlap: each upstream is spawned once, and the process spawned early is the one its calls reach."""

from __future__ import annotations

import json
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


def _two_probes(sandbox: Sandbox) -> None:
    sandbox.write_config(
        '[intent_declaration]\nstrict_server_validation = false\n\n[permissions]\nwrite = "allow"\n\n'
        + sandbox.probe_server("first")
        + sandbox.probe_server("second")
    )


async def _call_both(sandbox: Sandbox, *args: str, env: dict[str, str] | None = None) -> None:
    async with raw_agent(sandbox, *args, env=env) as raw:
        await raw.initialize()
        pids = {}
        for server in ("first", "second"):
            await raw.send(_call(server, server))
            answer = await raw.answer_to(server, timeout=30)
            assert "error" not in answer and not answer["result"].get("isError"), answer
            pids[server] = json.loads(answer["result"]["content"][0]["text"])["pid"]
        assert pids["first"] != pids["second"]


def _check_spawns(sandbox: Sandbox, spawns: Path) -> None:
    noted = [json.loads(line) for line in spawns.read_text(encoding="utf-8").splitlines()]
    upstreams = [n for n in noted if str(PROBE) in n["argv"]]
    assert len(upstreams) == 2, noted  # one process each: the one spawned early is the one the calls reached
    assert not any(n["sdk"] for n in upstreams), noted
    connected = [r for r in sandbox.records() if r["type"] == "upstream_connected"]
    assert sorted(r["server"] for r in connected) == ["first", "second"]


async def test_in_process_each_upstream_is_spawned_once_before_the_sdk_is_imported(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    spawns = tmp_path / "spawns.jsonl"
    env = with_sitecustomize(tmp_path, SPAWNS, MCPHOST_TEST_SPAWNS=str(spawns))
    _two_probes(sandbox)
    await _call_both(sandbox, "--in-process", env=env)
    _check_spawns(sandbox, spawns)


async def test_the_daemon_spawns_each_upstream_once_before_the_sdk_is_imported(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    spawns = tmp_path / "spawns.jsonl"
    env = with_sitecustomize(tmp_path, SPAWNS, MCPHOST_TEST_SPAWNS=str(spawns))
    _two_probes(sandbox)
    async with daemon(sandbox, env=env):
        await _call_both(sandbox)  # relayed to the daemon: the relay itself spawns nothing, and is not watched
    _check_spawns(sandbox, spawns)
