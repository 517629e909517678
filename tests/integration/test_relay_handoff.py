"""A relay hands its agent's stdout to the daemon (mcphost.serve.handoff): the daemon's answers go straight to the
agent, the relay only hears of them, and when the daemon dies, what it owed still reaches the agent, on a line of
its own."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import pytest

from mcphost import discovery
from tests.helpers import Daemon, Hostile, Sandbox, daemon, initialize_request, raw_agent

ALLOW_ALL = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'
READ = {"operation_type": "read"}


def call(request_id: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    params = {"name": "call_tool_read", "arguments": {"name": tool, "args": args, "intent": READ}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def wait_for(path: Path, timeout: float = 20) -> None:
    with anyio.fail_after(timeout):
        # Another process makes the file: nothing to wait on but its appearance.
        while not path.exists():  # noqa: ASYNC110
            await anyio.sleep(0.02)


async def test_the_daemon_answers_the_agent_itself_while_its_relay_is_stopped(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with daemon(sandbox), raw_agent(sandbox) as raw:
        [info] = discovery.running()
        assert info["relay"]["handoff"] is True
        await raw.initialize()
        slow = {"started": str(sandbox.root / "started"), "gate": str(sandbox.root / "gate")}
        await raw.send(call("slow", "probe:slow", slow))
        await wait_for(sandbox.root / "started")

        raw.process.send_signal(signal.SIGSTOP)
        try:
            (sandbox.root / "gate").touch()
            answer = await raw.answer_to("slow", timeout=20)
        finally:
            raw.process.send_signal(signal.SIGCONT)
        assert "result" in answer, answer

        # The relay, woken, has heard of that answer: the next call and the end of the session go as ever.
        await raw.send(call("next", "probe:read_notes", {"text": "next"}))
        again = await raw.answer_to("next")
        assert again["result"]["content"][0]["text"] == "read_notes: next"
        await raw.process.stdin.aclose()
        with anyio.fail_after(10):
            await raw.process.wait()
    assert [r["session_id"].startswith("relay-") for r in sandbox.tool_calls()] == [True, True]
    assert "Traceback" not in raw.stderr, raw.stderr


@pytest.mark.parametrize("sockets", [False, True], ids=["pipes", "sockets"])
async def test_the_daemon_reads_the_agent_itself_while_its_relay_sleeps(sandbox: Sandbox, sockets: bool) -> None:
    """The relay hands the agent's stdin over too: with the relay stopped before the agent says anything, the
    session opens and a call is answered all the same (nothing passes through the relay's process). Node agents
    (Claude Code, Cursor, VS Code) give their servers socket pairs, not pipes: the same holds there."""
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with daemon(sandbox), raw_agent(sandbox, sockets=sockets) as raw:
        [info] = discovery.running()
        assert info["relay"]["stdin"] is True
        await handed_over(raw.process.pid, info["pid"])
        raw.process.send_signal(signal.SIGSTOP)
        try:
            await raw.initialize()
            await raw.send(call("asleep", "probe:read_notes", {"text": "asleep"}))
            answer = await raw.answer_to("asleep", timeout=20)
        finally:
            raw.process.send_signal(signal.SIGCONT)
        assert answer["result"]["content"][0]["text"] == "read_notes: asleep"
        await raw.process.stdin.aclose()
        with anyio.fail_after(10):
            assert await raw.process.wait() == 0
    assert [r["session_id"].startswith("relay-") for r in sandbox.tool_calls()] == [True]
    assert "Traceback" not in raw.stderr, raw.stderr


async def test_a_daemon_killed_mid_call_on_a_node_agents_sockets_owes_that_call_and_the_session_carries_on(
    sandbox: Sandbox,
) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    slow = {"started": str(sandbox.root / "started"), "gate": str(sandbox.root / "gate")}
    try:
        async with daemon(sandbox) as d, raw_agent(sandbox, sockets=True) as raw:
            [info] = discovery.running()
            await handed_over(raw.process.pid, info["pid"])
            await raw.initialize()
            await raw.send(call("slow", "probe:slow", slow))
            await wait_for(sandbox.root / "started")
            d.process.kill()  # kill -9: the daemon holds the agent's stdin and stdout, and says nothing
            owed = await raw.answer_to("slow", timeout=20)
            assert "went away during this call" in owed["error"]["message"], owed
            # The relay reads the agent itself now, and serves it in process.
            await raw.send(call("after", "probe:read_notes", {"text": "after"}))
            after = await raw.answer_to("after", timeout=30)
            assert after["result"]["content"][0]["text"] == "read_notes: after"
            await raw.process.stdin.aclose()
            with anyio.fail_after(10):
                assert await raw.process.wait() == 0
    finally:
        (sandbox.root / "gate").touch()
    assert sandbox.tool_calls()[-1]["session_id"].startswith("stdio-")
    assert "Traceback" not in raw.stderr, raw.stderr


async def test_a_relay_whose_daemon_holds_the_agent_loads_no_mcp_sdk_until_the_daemon_goes(sandbox: Sandbox) -> None:
    """The hand over comes before any import it does not need: the agent's first answer waits for no MCP SDK (most
    of a Python MCP server's start). Once the daemon is gone, the relay loads it and serves the agent itself."""
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with daemon(sandbox) as d, raw_agent(sandbox) as raw:
        [info] = discovery.running()
        await handed_over(raw.process.pid, info["pid"])
        await raw.initialize()
        await raw.send(call("first", "probe:read_notes", {"text": "first"}))
        first = await raw.answer_to("first")
        assert first["result"]["content"][0]["text"] == "read_notes: first"
        assert not _loaded(raw.process.pid, "pydantic_core"), "the relay imported pydantic while its daemon served"

        d.process.kill()
        await raw.send(call("after", "probe:read_notes", {"text": "after"}))
        after = await raw.answer_to("after", timeout=30)
        assert after["result"]["content"][0]["text"] == "read_notes: after"
        assert _loaded(raw.process.pid, "pydantic_core")
        await raw.process.stdin.aclose()
        with anyio.fail_after(10):
            assert await raw.process.wait() == 0
    assert sandbox.tool_calls()[-1]["session_id"].startswith("stdio-")
    assert "Traceback" not in raw.stderr, raw.stderr


def _loaded(pid: int, library: str) -> bool:
    """Whether process `pid` has a shared library whose name holds `library` mapped (a compiled module imported)."""
    return library in Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")


async def handed_over(relay: int, daemon_pid: int) -> None:
    """Until the daemon holds the relay's stdin (the same pipe among its open files)."""
    stdin = Path(f"/proc/{relay}/fd/0").readlink()
    with anyio.fail_after(20):
        while True:
            held = set()
            for fd in Path(f"/proc/{daemon_pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    held.add(fd.readlink())
            if stdin in held:
                return
            await anyio.sleep(0.02)


async def test_a_line_the_relay_cannot_read_is_answered_by_the_daemon_holding_stdout(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with daemon(sandbox) as d, raw_agent(sandbox) as raw:
        await raw.initialize()
        await raw.send_line(b'{"jsonrpc": "2.0", "id": "broken", "method": "tools/call", "params": ')
        await raw.send_line(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/call"}')
        await raw.send(call("after", "probe:read_notes", {"text": "after"}))
        answers = [await raw.receive() for _ in range(3)]
    by_id = {a.get("id"): a for a in answers}
    assert by_id["after"]["result"]["content"][0]["text"] == "read_notes: after"
    assert by_id["broken"]["error"]["code"] == -32700
    assert by_id["\ud800"]["error"]["code"] == -32602
    # Answered by the daemon, which holds the agent's stdout: the relay wrote nothing of its own.
    assert d.stderr.count("answered an unreadable request from the agent") == 2
    assert "unreadable" not in raw.stderr, raw.stderr


@pytest.mark.parametrize("sockets", [False, True], ids=["pipes", "socket-pairs"])
async def test_a_daemon_killed_in_the_middle_of_a_long_answer_leaves_the_agent_a_fresh_line_and_the_error(
    sandbox: Sandbox, sockets: bool
) -> None:
    hostile = Hostile(sandbox.root)
    sandbox.write_config(ALLOW_ALL + hostile.toml())
    async with daemon(sandbox) as d:
        with relay_on(sandbox, sockets) as agent:
            # The agent's stdout, which the test does not read: it fills, and the daemon's write of the long answer
            # stops midway.
            lines = [
                initialize_request("t"),
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                call("long", "hostile:big", {"bytes": 4_000_000}),
            ]
            agent.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            agent.stdin.flush()
            with anyio.fail_after(30):
                while _unread(agent.stdout.fileno()) < 60_000:  # noqa: ASYNC110 (a full pipe: the daemon is mid-line)
                    await anyio.sleep(0.02)
            out = await kill_then_finish(d, agent)
            assert agent.process.stderr is not None
            stderr = agent.process.stderr.read().decode("utf-8", "replace")
    lines_out = out.split(b"\n")
    assert json.loads(lines_out[0])["id"] == "init"
    cut = lines_out[1]
    assert cut.startswith(b'{"jsonrpc":"2.0","id":"long"') and len(cut) < 4_000_000  # only a part came
    error = json.loads(lines_out[2])
    assert error["id"] == "long" and "went away during this call" in error["error"]["message"]
    assert "Traceback" not in stderr, stderr


@pytest.mark.parametrize("sockets", [False, True], ids=["pipes", "socket-pairs"])
@pytest.mark.parametrize(
    "text",
    [
        'é€😀 \\ " \u0001 abc ' * 20_000,  # thick with what JSON escapes: its pieces are noted in base64
        ("def f(x):\n    return x + 1\n" * 40 + "é€😀\n") * 360,  # source code: noted as latin-1 text
    ],
    ids=["escapes", "code"],
)
async def test_a_long_call_begun_when_the_daemon_dies_is_finished_by_the_relay_byte_for_byte(
    sandbox: Sandbox, text: str, sockets: bool
) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    # Longer than the agent's pipe holds (256 KiB), in characters of one to four bytes: the daemon takes it in pieces,
    # each noted in the relay's ledger with its bytes, and dies before the line ends.
    line = json.dumps(call("long", "probe:read_notes", {"text": text}), ensure_ascii=False).encode() + b"\n"
    cut = 300_000
    while line[cut] & 0xC0 != 0x80:  # inside a character: its bytes go in two pieces
        cut += 1
    async with daemon(sandbox) as d:
        with relay_on(sandbox, sockets) as agent:
            handshake = [initialize_request("t"), {"jsonrpc": "2.0", "method": "notifications/initialized"}]
            agent.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in handshake))
            agent.stdin.flush()
            assert json.loads(await anyio.to_thread.run_sync(agent.stdout.readline))["id"] == "init"

            def begin() -> None:
                agent.stdin.write(line[:cut])
                agent.stdin.flush()

            await anyio.to_thread.run_sync(begin)  # past what the pipe holds: the daemon has taken some already
            with anyio.fail_after(30):
                while agent.unsent():  # noqa: ASYNC110 (the daemon takes what it sees, a piece at a time)
                    await anyio.sleep(0.02)
            out = await kill_then_finish(d, agent, line[cut:])
            assert agent.process.stderr is not None
            stderr = agent.process.stderr.read().decode("utf-8", "replace")
    answer = json.loads(out.split(b"\n")[0])
    assert answer["id"] == "long", answer
    assert answer["result"]["content"][0]["text"] == f"read_notes: {text}"
    assert sandbox.tool_calls()[-1]["session_id"].startswith("stdio-")  # served by the relay itself
    assert "Traceback" not in stderr, stderr


@dataclass
class AgentEnds:
    """`mcphost mcp` and the agent's ends of its stdin and stdout: pipes, or socket pairs as Node agents give."""

    process: subprocess.Popen[bytes]
    stdin: BinaryIO
    stdout: BinaryIO
    unsent: Callable[[], int]  # bytes written to its stdin that it has not read yet


@contextlib.contextmanager
def relay_on(sandbox: Sandbox, sockets: bool = False) -> Iterator[AgentEnds]:
    """`mcphost mcp` with its stdin and stdout the test's to write and read; killed on the way out if still running."""
    argv = [sys.executable, "-m", "mcphost", "mcp", "--config", str(sandbox.config)]
    env = {**os.environ, **sandbox.env()}
    if not sockets:
        process = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdin is not None and process.stdout is not None
        stdin_fd = process.stdin.fileno()
        ends = AgentEnds(process, process.stdin, process.stdout, lambda: _unread(stdin_fd))
    else:
        stdin_ours, stdin_theirs = socket.socketpair()
        stdout_ours, stdout_theirs = socket.socketpair()
        with stdin_theirs, stdout_theirs:
            process = subprocess.Popen(argv, env=env, stdin=stdin_theirs, stdout=stdout_theirs, stderr=subprocess.PIPE)
        stdin_fd = stdin_ours.fileno()
        ends = AgentEnds(process, stdin_ours.makefile("wb"), stdout_ours.makefile("rb"), lambda: _unsent(stdin_fd))
        # Each socket now goes with its file: closing the file closes it, and the child reads the end of its input.
        stdin_ours.close()
        stdout_ours.close()
    try:
        yield ends
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for file in (ends.stdin, ends.stdout):
            file.close()


async def kill_then_finish(d: Daemon, agent: AgentEnds, rest: bytes = b"") -> bytes:
    """kill -9 the daemon, write `rest` and close the relay's input; all the relay wrote, once it has exited."""
    d.process.kill()
    await anyio.to_thread.run_sync(d.process.wait, 15)
    agent.stdin.write(rest)
    agent.stdin.close()
    out = await anyio.to_thread.run_sync(agent.stdout.read)
    await anyio.to_thread.run_sync(agent.process.wait, 15)
    return out


def _unsent(fd: int) -> int:
    """Bytes written on the socket `fd` that its peer has not read yet (SIOCOUTQ)."""
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.TIOCOUTQ, buf)
    return int.from_bytes(buf, sys.byteorder)


def _unread(fd: int) -> int:
    """Bytes waiting in the pipe behind `fd`."""
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)
