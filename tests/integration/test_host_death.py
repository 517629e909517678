"""The record holds when the host dies: a daemon killed with SIGKILL while a write is inside its upstream leaves that
call on record as started, and every reader shows it as outcome unknown; on a full disk no call is acknowledged
that is not on disk."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from tests.editor.support import call
from tests.helpers import Sandbox, daemon, error_of, http_agent, mcphost

ALLOW = '[permissions]\nwrite = "allow"\n[intent_declaration]\nstrict_server_validation = false\n'


async def wait_for(path: Path) -> None:
    with anyio.fail_after(20):
        while not path.exists():  # noqa: ASYNC110 (a file another process creates: no event to wait on)
            await anyio.sleep(0.02)


async def test_a_write_cut_short_by_sigkill_is_on_record_as_outcome_unknown(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW + sandbox.probe_server())
    started, gate = sandbox.root / "started", sandbox.root / "gate"
    async with daemon(sandbox) as d:
        with contextlib.suppress(Exception):  # the agent's connection dies with the daemon
            async with http_agent(d.url, d.headers) as agent:
                pending = asyncio.create_task(
                    call(agent, "write", "slow", {"started": str(started), "gate": str(gate)})
                )
                await wait_for(started)
                os.kill(d.process.pid, signal.SIGKILL)
                d.process.wait()
                pending.cancel()
    [start] = [r for r in sandbox.records() if r["type"] == "tool_call_started"]
    assert start["tool"] == "slow" and start["metadata"]["intent"]["operation_type"] == "write"
    assert sandbox.tool_calls() == []  # no outcome: the host died with the call in the upstream

    tail = mcphost(sandbox, "log", "tail")
    assert "probe:slow" in tail.stdout and "outcome unknown" in tail.stdout, tail.stdout
    shown = mcphost(sandbox, "activity", "show", start["id"])
    assert "outcome" in shown.stdout and "unknown" in shown.stdout, shown.stdout
    listed = json.loads(mcphost(sandbox, "activity", "list", "-o", "json").stdout)
    assert [r.get("outcome") for r in listed if r["id"] == start["id"]] == ["unknown"]
    unknown = json.loads(mcphost(sandbox, "activity", "list", "--status", "started", "-o", "json").stdout)
    assert [r["id"] for r in unknown] == [start["id"]]


async def test_a_finished_write_shows_once_with_its_outcome(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW + sandbox.probe_server())
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as agent:
        await call(agent, "write", "plain_echo", {"text": "x"})
    tail = mcphost(sandbox, "log", "tail")
    assert tail.stdout.count("probe:plain_echo") == 1 and "outcome unknown" not in tail.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to simulate a full disk")
async def test_on_a_full_disk_no_call_is_acknowledged_that_is_not_on_disk(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW + sandbox.probe_server())
    sandbox.data.mkdir(parents=True)
    sandbox.log.symlink_to("/dev/full")
    acknowledged = 0
    async with daemon(sandbox) as d:
        async with http_agent(d.url, d.headers) as agent:
            for n in range(15):
                result = await call(agent, "write" if n % 2 else "read", "plain_echo" if n % 2 else "read_notes", {})
                if not result.is_error:
                    acknowledged += 1
                else:
                    assert error_of(result)["code"] == "AUDIT_UNAVAILABLE"
        os.kill(d.process.pid, signal.SIGKILL)
        d.process.wait()
    assert acknowledged == 0


async def test_a_call_in_flight_when_the_daemon_is_stopped_is_recorded_as_cancelled(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    started, gate = sandbox.root / "started", sandbox.root / "gate"
    async with daemon(sandbox) as d:
        with contextlib.suppress(Exception):  # the agent's connection ends with the daemon
            async with http_agent(d.url, d.headers) as agent:
                pending = asyncio.create_task(call(agent, "read", "slow", {"started": str(started), "gate": str(gate)}))
                await wait_for(started)
                d.process.terminate()
                await anyio.to_thread.run_sync(d.process.wait, 20)
                pending.cancel()
    [record] = sandbox.tool_calls()
    assert record["status"] == "cancelled" and record["forwarded"] is True
