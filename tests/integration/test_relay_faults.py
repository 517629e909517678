"""`mcphost mcp` when things go wrong under it (issue 13): its daemon dies mid-call or while idle, a new one starts,
and the process is told to stop while an upstream is blocked in a call. The agent's session carries on through
the first, and nothing is left running after the second."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp.shared.exceptions import MCPError

from mcphost import discovery
from mcphost.serve.stdio import STOPPED
from tests.editor_client import allow, editor
from tests.helpers import (
    Daemon,
    RawAgent,
    Sandbox,
    agent,
    daemon,
    error_of,
    poll,
    raw_agent,
    slow_read,
    stop_process,
    text_of,
    tools_call,
)

ALLOW_ALL = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'
READ = {"operation_type": "read"}


def alive(pid: int) -> bool:
    """Running, or at least not yet dead: a zombie (killed, not reaped) counts as gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def wait_for(path: Path, timeout: float = 20) -> None:
    with anyio.fail_after(timeout):
        # The probe's slow tool announces itself with a file from another process: nothing to wait on but that.
        while not path.exists():  # noqa: ASYNC110
            await anyio.sleep(0.02)


async def kill_hard(d: Daemon) -> None:
    """kill -9: nothing of the daemon's own runs, not even its cleanup."""
    d.process.kill()
    await anyio.to_thread.run_sync(d.process.wait, 15)


def slow_args(box: Sandbox) -> dict[str, Any]:
    return {"started": str(box.root / "started"), "gate": str(box.root / "gate")}


async def test_a_call_in_flight_when_the_daemon_dies_gets_an_error_and_the_session_carries_on(
    sandbox: Sandbox,
) -> None:
    sandbox.write_config(sandbox.probe_server())
    errlog_path = sandbox.root / "agent.stderr"
    try:
        with errlog_path.open("w", encoding="utf-8") as errlog:
            async with daemon(sandbox) as first, agent(sandbox, errlog=errlog) as client:
                ok = await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": READ})
                assert not ok.is_error and sandbox.tool_calls()[-1]["session_id"].startswith("relay-")

                outcome: dict[str, Any] = {}

                async def slow_call() -> None:
                    try:
                        outcome["result"] = await client.call_tool(
                            "call_tool_read", {"name": "probe:slow", "args": slow_args(sandbox), "intent": READ}
                        )
                    except MCPError as exc:
                        outcome["error"] = exc

                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow_call)
                    await wait_for(sandbox.root / "started")
                    await kill_hard(first)
                    with anyio.fail_after(20):
                        while not outcome:  # noqa: ASYNC110
                            await anyio.sleep(0.02)

                assert "error" in outcome, outcome
                message = outcome["error"].error.message
                assert f"the daemon {first.process.pid}" in message and "went away during this call" in message
                # A read has no start on record, and the daemon died before its outcome: the relay records it.
                served, lost = sandbox.tool_calls()
                assert (lost["server"], lost["tool"], lost["status"]) == ("probe", "slow", "error")
                assert lost["metadata"] == {"intent": READ, "tool_variant": "call_tool_read"}
                assert (
                    lost["error"]["code"] == "UPSTREAM_ERROR" and message == f"tools/call: {lost['error']['message']}"
                )
                assert lost["client"] == served["client"], "named as the daemon named the agent's client"

                # The next call is served at once, in this process now that no daemon runs.
                again = await client.call_tool(
                    "call_tool_read", {"name": "probe:read_notes", "args": {"text": "again"}, "intent": READ}
                )
                assert text_of(again) == "read_notes: again"
                assert sandbox.tool_calls()[-1]["session_id"].startswith("stdio-")
                nobody = await client.call_tool(
                    "call_tool_write", {"name": "probe:plain_echo", "intent": {"operation_type": "write"}}
                )
                assert error_of(nobody)["code"] == "NO_APPROVER"

                # A daemon for the same config again: the relay goes back to it between calls.
                discovery.running()  # the killed daemon's file goes, as any command that looks removes it
                async with daemon(sandbox) as second, editor(second.editor_socket, allow()) as ed:
                    with anyio.fail_after(20):
                        while True:
                            result = await client.call_tool(
                                "call_tool_write", {"name": "probe:plain_echo", "intent": {"operation_type": "write"}}
                            )
                            if not result.is_error:
                                break
                            assert error_of(result)["code"] == "NO_APPROVER"
                            await anyio.sleep(0.2)
                    assert len(ed.prompts) == 1
    finally:
        (sandbox.root / "gate").touch()  # the killed daemon's upstream is still blocked in `slow`: let it go
    stderr = errlog_path.read_text(encoding="utf-8")
    assert "Traceback" not in stderr, stderr
    assert f"the daemon {first.process.pid}" in stderr


async def test_a_read_in_flight_when_its_daemon_goes_is_on_record_once_whether_it_stopped_or_died(
    sandbox: Sandbox,
) -> None:
    sandbox.write_config(sandbox.probe_server())
    gates: list[Path] = []

    async def slow_read_cut_by(client: Any, end: Any, n: int) -> str:
        """A slow read in flight when `end` ends its daemon; the error the agent is told."""
        started, gate = sandbox.root / f"started-{n}", sandbox.root / f"gate-{n}"
        gates.append(gate)
        outcome: dict[str, Any] = {}

        async def call() -> None:
            args = {"started": str(started), "gate": str(gate)}
            try:
                outcome["result"] = await client.call_tool(
                    "call_tool_read", {"name": "probe:slow", "args": args, "intent": READ}
                )
            except MCPError as exc:
                outcome["error"] = exc.error.message

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await wait_for(started)
            await end()
            with anyio.fail_after(20):
                while not outcome:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
        assert "error" in outcome, outcome
        return str(outcome["error"])

    def slow_records() -> list[dict[str, Any]]:
        return [r for r in sandbox.tool_calls() if r.get("tool") == "slow"]

    try:
        async with daemon(sandbox) as first, agent(sandbox) as client:
            # Stopped: the daemon records the read it cut short (cancelled), and says so; the relay adds nothing.
            told = await slow_read_cut_by(client, lambda: stop_process(first.process), 1)
            assert "went away during this call" in told
            assert [r["status"] for r in slow_records()] == ["cancelled"]

            # Back to a daemon, which the relay now reads the agent for (the agent's stdin stays with the relay).
            async with daemon(sandbox) as second:
                with anyio.fail_after(20):
                    while not sandbox.tool_calls()[-1]["session_id"].startswith("relay-"):
                        await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": READ})
                        await anyio.sleep(0.1)
                # Killed: nothing of the daemon's runs; the relay records the read it was owed.
                told = await slow_read_cut_by(client, lambda: kill_hard(second), 2)
            assert f"the daemon {second.process.pid}" in told
            stopped, died = slow_records()
            assert stopped["status"] == "cancelled"
            assert (died["status"], died["error"]["code"], died["metadata"]["tool_variant"]) == (
                "error",
                "UPSTREAM_ERROR",
                "call_tool_read",
            )
            assert told == f"tools/call: {died['error']['message']}"
    finally:
        for gate in gates:
            gate.touch()


async def test_a_relay_whose_daemon_died_while_idle_moves_to_the_new_one_without_an_error(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as first, agent(sandbox) as client:
        assert not (await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": READ})).is_error
        await kill_hard(first)
        discovery.running()
        async with daemon(sandbox) as second, editor(second.editor_socket, allow()) as ed:
            # Nothing was in flight: the call that finds the daemon gone goes to the new one, unharmed.
            result = await client.call_tool(
                "call_tool_write", {"name": "probe:plain_echo", "intent": {"operation_type": "write"}}
            )
            assert not result.is_error, text_of(result)
            assert len(ed.prompts) == 1


# An upstream stuck in a call the hard way: blocked in the tool's own code, it reads nothing, not even the end of
# its input, so only a signal ends it (the probe's `slow` tool would end as soon as its stdin closed). It notes a
# SIGTERM, which only an orderly close of the host sends: a host that just dies takes its children down with
# SIGKILL (PR_SET_PDEATHSIG, on Linux), with no cleanup of its own.
STUBBORN = """
import json, os, signal, sys, time
from pathlib import Path


def stopped(signum, frame):
    Path(os.environ["STUB_STOPPED"]).write_text("SIGTERM")
    os._exit(0)


signal.signal(signal.SIGTERM, stopped)
Path(os.environ["STUB_PID"]).write_text(str(os.getpid()))
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "stubborn", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "block", "description": "Block in a call", "inputSchema": {"type": "object"},
                             "annotations": {"readOnlyHint": True}}]}
    elif method == "tools/call":
        Path(os.environ["STUB_STARTED"]).touch()
        time.sleep(120)
        result = {"content": [{"type": "text", "text": "done"}]}
    else:
        error = {"code": -32601, "message": "not here"}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def stubborn_server(box: Sandbox) -> str:
    script = box.root / "stubborn.py"
    script.write_text(STUBBORN, encoding="utf-8")
    env = ", ".join(
        f"{name} = {json.dumps(str(box.root / file))}"
        for name, file in (("STUB_PID", "stub.pid"), ("STUB_STARTED", "started"), ("STUB_STOPPED", "stopped"))
    )
    return (
        f"[servers.stubborn]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}]\n"
        f"env = {{ {env} }}\n"
    )


async def stop_during_a_blocked_call(box: Sandbox, raw: RawAgent, signum: int) -> int:
    """Block the upstream in a call, send `signum` to `mcphost mcp`; returns the upstream's pid once it is gone."""
    call = {"name": "stubborn:block", "intent": READ}
    await raw.send(
        {
            "jsonrpc": "2.0",
            "id": "block",
            "method": "tools/call",
            "params": {"name": "call_tool_read", "arguments": call},
        }
    )
    await wait_for(box.root / "started", timeout=30)
    upstream = int((box.root / "stub.pid").read_text(encoding="utf-8"))
    assert alive(upstream)
    raw.process.send_signal(signum)
    with anyio.fail_after(10):
        await raw.process.wait()
    try:
        with anyio.fail_after(10):
            # Another process's death: no event to wait on, only its /proc entry to look at.
            while alive(upstream):  # noqa: ASYNC110
                await anyio.sleep(0.05)
    except TimeoutError:
        os.kill(upstream, signal.SIGKILL)
        raise AssertionError(f"the upstream {upstream} outlived `mcphost mcp`") from None
    stopped = box.root / "stopped"
    assert stopped.exists(), "the upstream was killed with its host, not closed by it"
    return upstream


async def answers_to_the_end(raw: RawAgent) -> list[dict[str, Any]]:
    """Every message `mcphost mcp` wrote that is still to be read, up to the end of its stdout."""
    answers: list[dict[str, Any]] = []
    with contextlib.suppress(anyio.EndOfStream):
        while True:
            answers.append(await raw.receive(timeout=10))
    return answers


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
async def test_a_signal_ends_mcphost_mcp_and_the_upstream_blocked_in_a_call(sandbox: Sandbox, signum: int) -> None:
    sandbox.write_config(ALLOW_ALL + stubborn_server(sandbox))
    async with raw_agent(sandbox, "--in-process") as raw:
        await raw.initialize()
        await stop_during_a_blocked_call(sandbox, raw, signum)
        answer = await raw.answer_to("block", timeout=5)
    assert "Traceback" not in raw.stderr, raw.stderr
    assert signal.Signals(signum).name in raw.stderr
    # The agent is still there: told why its call ended, not left waiting on a pipe that closes.
    assert "mcphost was stopped (a shutdown signal) during this call" in answer["error"]["message"], answer
    assert [r["status"] for r in sandbox.tool_calls()] == ["cancelled"]


async def test_sigterm_ends_a_relay_serving_in_process_and_its_upstream(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + stubborn_server(sandbox))
    async with daemon(sandbox) as d, raw_agent(sandbox) as raw:
        await raw.initialize()
        await kill_hard(d)
        daemons_upstream = int((sandbox.root / "stub.pid").read_text(encoding="utf-8"))
        (sandbox.root / "stub.pid").unlink()
        upstream = await stop_during_a_blocked_call(sandbox, raw, signal.SIGTERM)
        assert upstream != daemons_upstream
        answers = await answers_to_the_end(raw)
    # The agent is still there: told why its call ended, once, as `mcphost mcp --in-process` tells it (the SDK that
    # serves in process here would have said only "Connection closed").
    [answer] = [a for a in answers if a.get("id") == "block"]
    assert "mcphost was stopped (a shutdown signal) during this call" in answer["error"]["message"], answer
    assert [r["status"] for r in sandbox.tool_calls()] == ["cancelled"]
    assert "relaying to the daemon" in raw.stderr
    assert "Traceback" not in raw.stderr, raw.stderr


async def test_sigterm_ends_a_relay_at_once_and_leaves_its_daemon_serving(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        async with raw_agent(sandbox) as raw:
            await raw.initialize()
            raw.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(10):
                await raw.process.wait()
        assert d.process.poll() is None
        async with agent(sandbox) as client:
            assert not (await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": READ})).is_error
    assert "Traceback" not in raw.stderr, raw.stderr


async def test_a_call_in_flight_when_a_signal_ends_its_relay_is_answered_with_why_by_the_daemon(
    sandbox: Sandbox,
) -> None:
    # The daemon holds the agent's stdin and stdout: the relay, stopped, cannot answer, and the daemon that cut the
    # call left the agent with its stdout closing and no answer.
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    started, gate = sandbox.root / "started", sandbox.root / "gate"
    async with daemon(sandbox) as d, raw_agent(sandbox) as raw:
        await raw.initialize()
        await raw.send(tools_call("slow", "call_tool_read", slow_read(started, gate)))
        await poll(started.exists, "the call to reach the upstream")
        raw.process.send_signal(signal.SIGTERM)
        answers = await answers_to_the_end(raw)
        gate.touch()
        assert d.process.poll() is None, "the daemon serves on"
    [answer] = answers
    assert answer["id"] == "slow" and answer["error"]["message"] == f"tools/call: {STOPPED}", answer
    assert [(r["tool"], r["status"]) for r in sandbox.tool_calls()] == [("slow", "cancelled")]


async def test_a_burst_of_calls_and_listings_through_a_relay_gets_each_answer_once(sandbox: Sandbox) -> None:
    # Tool calls go to the daemon's socket at once while nothing is queued before them; anything else waits its turn
    # in the relay's queue. Written without waiting for answers, the two must neither lose, repeat nor swap one.
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with daemon(sandbox), raw_agent(sandbox) as raw:
        await raw.initialize()
        sent: list[Any] = []
        for n in range(40):
            if n % 7 == 3:
                await raw.send({"jsonrpc": "2.0", "id": f"list-{n}", "method": "tools/list"})
                sent.append(f"list-{n}")
            else:
                arguments = {"name": "probe:read_notes", "args": {"text": f"call {n}"}, "intent": READ}
                await raw.send(tools_call(n, "call_tool_read", arguments))
                sent.append(n)
        answers: dict[Any, dict[str, Any]] = {}
        with anyio.fail_after(60):
            while len(answers) < len(sent):
                message = await raw.receive()
                if "method" in message:
                    continue
                assert message["id"] not in answers, f"answered twice: {message}"
                answers[message["id"]] = message
    assert set(answers) == set(sent)
    for request_id, answer in answers.items():
        if isinstance(request_id, int):
            assert answer["result"]["content"][0]["text"] == f"read_notes: call {request_id}", answer
        else:
            assert "call_tool_read" in {tool["name"] for tool in answer["result"]["tools"]}, answer
    texts = sorted(record["arguments"]["text"] for record in sandbox.tool_calls())
    assert texts == sorted(f"call {n}" for n in sent if isinstance(n, int))
    assert "relaying to the daemon" in raw.stderr, raw.stderr


@pytest.mark.parametrize("end", ["answered", "killed"])
async def test_two_calls_under_one_id_through_a_relay_each_get_an_answer_and_a_record(
    sandbox: Sandbox, end: str
) -> None:
    # MCP forbids an id still in flight; an agent that reuses one anyway has both calls served, as in process. When
    # the daemon died under them, the relay (and its ledger of what a daemon holding the agent's stdio took) owed
    # only the last one an answer and a record: the other ran unrecorded, and its agent waited for good.
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    gate = sandbox.root / "gate"
    try:
        async with daemon(sandbox) as d, raw_agent(sandbox) as raw:
            await raw.initialize()
            for n in (1, 2):
                args = {"started": str(sandbox.root / f"started-{n}"), "gate": str(gate)}
                await raw.send(
                    tools_call("twin", "call_tool_read", {"name": "probe:slow", "args": args, "intent": READ})
                )
            for n in (1, 2):
                await wait_for(sandbox.root / f"started-{n}")
            if end == "killed":
                await kill_hard(d)
            else:
                gate.touch()
            answers = [await raw.answer_to("twin", timeout=20) for _ in range(2)]
    finally:
        gate.touch()
    records = [r for r in sandbox.tool_calls() if r.get("tool") == "slow"]
    if end == "killed":
        assert all("went away during this call" in a["error"]["message"] for a in answers), answers
        assert [(r["status"], r["error"]["code"]) for r in records] == [("error", "UPSTREAM_ERROR")] * 2
    else:
        assert all("result" in a for a in answers), answers
        assert [r["status"] for r in records] == ["success"] * 2
