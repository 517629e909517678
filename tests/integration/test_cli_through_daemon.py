"""`mcphost call`, `tools`, `status` and `grants` with a daemon running: they ask the daemon (its streamable HTTP
endpoint, its editor socket) with the standard library only, start no upstream of their own, print exactly what the
same command prints without a daemon, and import none of the SDK, pygls or the web stack."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from mcphost import __version__
from tests.editor_client import allow, editor, never
from tests.helpers import Sandbox, agent, daemon, http_agent, mcphost, poll, records_of

ALLOW_WRITES = '[permissions]\nwrite = "allow"\n'
# What a command asking a daemon must never import (each costs a large part of a second to start).
HEAVY = ["mcp", "mcp_types", "pygls", "lsprotocol", "uvicorn", "httpx2", "starlette", "anyio", "pydantic"]
HEAVY += ["mcphost.host", "mcphost.gateway.service", "mcphost.serve.mcp_server", "mcphost.editor.client"]


async def run(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(lambda: mcphost(box, *args))


async def connected(box: Sandbox) -> int:
    """How many upstream connections are on record, once the daemon's probe is up."""
    await poll(lambda: records_of(box, "upstream_connected"), "the daemon's upstream to connect")
    return len(records_of(box, "upstream_connected"))


def same_output(through: subprocess.CompletedProcess[str], here: subprocess.CompletedProcess[str]) -> None:
    assert through.returncode == here.returncode, (through.stderr, here.stderr)
    assert through.stdout == here.stdout
    assert through.stderr.replace(f"mcphost: calling through the daemon {daemon_pid(through)}\n", "") == here.stderr


def daemon_pid(result: subprocess.CompletedProcess[str]) -> str:
    first = result.stderr.splitlines()[0] if result.stderr else ""
    assert first.startswith("mcphost: calling through the daemon "), result.stderr
    return first.rsplit(" ", 1)[1]


async def test_tools_asks_the_daemon_and_starts_no_upstream_of_its_own(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox):
        before = await connected(sandbox)
        text = await run(sandbox, "tools", "erase notes")
        as_json = await run(sandbox, "tools", "-o", "json")
        assert len(records_of(sandbox, "upstream_connected")) == before, "no upstream started for `tools`"
        here = await run(sandbox, "tools", "--in-process", "-o", "json")
        assert len(records_of(sandbox, "upstream_connected")) == before + 1, "the control: in-process starts one"
    assert text.returncode == 0 and text.stderr == "", text.stderr
    header, first = (line.split() for line in text.stdout.splitlines()[:2])
    assert header == ["SCORE", "TOOL", "CALL", "WITH", "DESCRIPTION"]
    assert first[1] == "probe:wipe_notes" and first[2] == "tool-destructive"
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == json.loads(here.stdout)
    assert as_json.stdout == here.stdout


async def test_a_read_through_the_daemon_prints_what_an_in_process_read_prints(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        for output in ("text", "json"):
            args = ("call", "tool-read", "probe:read_notes", "--args", '{"text": "r"}', "-o", output)
            through, here = await run(sandbox, *args), await run(sandbox, *args, "--in-process")
            assert daemon_pid(through) == str(d.process.pid)
            same_output(through, here)
    assert through.returncode == 0
    payload = json.loads(through.stdout)
    assert payload["structuredContent"] == {"tool": "read_notes", "text": "r"}
    # Recorded (and prompted) as the command that made them, whichever way they went.
    assert {r["client"] for r in sandbox.tool_calls()} == {f"mcphost call {__version__}"}
    # Through the daemon a call is one 2026-era exchange, which has no session; here, the command is the session.
    assert [r.get("session_id", "none")[:4] for r in sandbox.tool_calls()] == ["none", "cli-", "none", "cli-"]


async def test_a_write_the_policy_denies_is_an_error_with_its_code(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "deny"\n' + sandbox.probe_server())
    async with daemon(sandbox):
        args = ("call", "tool-write", "probe:plain_echo", "--args", '{"text": "w"}', "-o", "json")
        through, here = await run(sandbox, *args), await run(sandbox, *args, "--in-process")
    same_output(through, here)
    assert through.returncode == 1
    assert json.loads(through.stdout)["error"]["code"] == "PERMISSION_DENIED"
    assert "mcphost: PERMISSION_DENIED: " in through.stderr
    assert [r["status"] for r in sandbox.tool_calls()] == ["denied", "denied"]


async def test_upstream_errors_and_warnings_reach_stderr(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_WRITES + sandbox.probe_server())
    async with daemon(sandbox):
        for args in (
            ("call", "tool-write", "probe:fail"),
            ("call", "tool-write", "probe:fail", "-o", "json"),
            ("call", "tool-write", "probe:read_notes", "--args", '{"text": "w"}'),  # read-only: a warning
        ):
            through, here = await run(sandbox, *args), await run(sandbox, *args, "--in-process")
            same_output(through, here)
        assert through.returncode == 0
        assert "mcphost: warning: Tool 'probe:read_notes' is marked read-only by server" in through.stderr
        failed = await run(sandbox, "call", "tool-write", "probe:fail")
        assert failed.returncode == 1 and "the tool failed on purpose" in failed.stderr and failed.stdout == ""
        crashed = await run(sandbox, "call", "tool-write", "probe:crash")
    assert crashed.returncode == 1
    assert "mcphost: UPSTREAM_ERROR: " in crashed.stderr and "probe" in crashed.stderr


@asynccontextmanager
async def a_write_waiting_for_a_person(box: Sandbox, ed: Any) -> AsyncIterator[subprocess.Popen[str]]:
    """`mcphost call tool-write` started as a person's terminal starts it (Popen only forks: wait in a thread), once
    its prompt is in the editor `ed`; killed at the end if it still runs."""
    process = subprocess.Popen(  # noqa: ASYNC220 (Popen only forks; the waits are in threads)
        [sys.executable, "-m", "mcphost", "call", "tool-write", "probe:plain_echo", "--args", '{"text": "x"}'],
        env={**os.environ, **box.env()},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell that runs the suite in the background hands its children SIGINT ignored, and Python keeps it so:
        # the terminal's Ctrl-C these tests stand for is a default handler.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        async with asyncio.timeout(30):
            await ed.prompted.wait()
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# A timeout wrapper or an agent ending its child; a closed terminal: left up, the prompt would run the call, for
# nobody, once allowed. SIGKILL: nothing runs in the command; the kernel closes its connection, which the daemon
# takes as its leaving. (signal, what the command says, its exit status.)
ENDINGS = [
    (signal.SIGINT, "interrupted", 130),
    (signal.SIGTERM, "ended by SIGTERM", 143),
    (signal.SIGHUP, "ended by SIGHUP", 129),
    (signal.SIGKILL, None, -signal.SIGKILL),
]


async def test_ctrl_c_or_an_ending_signal_withdraws_a_call_waiting_for_a_person(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    # One daemon for every signal (its start is most of the test's time); each call is withdrawn before the next.
    async with daemon(sandbox) as d, editor(d.editor_socket, never()) as ed:
        for turn, (signum, said, code) in enumerate(ENDINGS):
            ed.prompted.clear()
            ed.withdrawn.clear()
            async with a_write_waiting_for_a_person(sandbox, ed) as process:
                await asyncio.sleep(1 if turn == 0 else 0.2)  # still waiting: the call has no read timeout
                assert process.poll() is None
                process.send_signal(signum)
                _out, err = await anyio.to_thread.run_sync(lambda: process.communicate(timeout=10))
                async with asyncio.timeout(10):
                    await ed.withdrawn.wait()
            await poll(lambda n=turn: len(sandbox.tool_calls()) > n, "the cancelled call's record")
            assert process.returncode == code, (signum, err)
            assert said is None or f"{said}; the call was withdrawn" in err, (signum, err)
            assert "Traceback" not in err
            assert ed.cancelled == [prompt["id"] for prompt in ed.prompts], signum
            assert [r["status"] for r in sandbox.tool_calls()] == ["cancelled"] * (turn + 1), signum


async def test_a_waiting_call_says_what_it_waits_for_and_is_withdrawn_once_a_stopped_daemon_runs_again(
    sandbox: Sandbox,
) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d, editor(d.editor_socket, never()) as ed:
        async with a_write_waiting_for_a_person(sandbox, ed) as process:
            assert process.stderr is not None
            said = await anyio.to_thread.run_sync(lambda: _stderr_until(process, "waiting for a person"))
            assert "the prompt for probe:plain_echo in test-editor 1; it expires at " in said[-1], said
            assert said[-1].endswith("; Ctrl-C withdraws the call\n"), said
            d.process.send_signal(signal.SIGSTOP)  # hung: nothing it could answer
            try:
                said = await anyio.to_thread.run_sync(lambda: _stderr_until(process, "is stopped"))
                assert f"the daemon {d.process.pid} is stopped (Ctrl-Z or SIGSTOP)" in said[-1], said
                assert f"`kill -CONT {d.process.pid}`" in said[-1]
                process.send_signal(signal.SIGINT)
                # The command does not wait on the daemon to end: its closed connection is the withdrawal.
                await anyio.to_thread.run_sync(lambda: process.wait(timeout=5))
                err = process.stderr.read()
            finally:
                d.process.send_signal(signal.SIGCONT)
            async with asyncio.timeout(10):
                await ed.withdrawn.wait()
        await poll(lambda: sandbox.tool_calls(), "the cancelled call's record")
    assert process.returncode == 130, err
    assert "interrupted; the call was withdrawn" in err
    assert [r["status"] for r in sandbox.tool_calls()] == ["cancelled"]


def _stderr_until(process: subprocess.Popen[str], words: str) -> list[str]:
    """The command's stderr lines up to the first that holds `words` (which must come within 15 s)."""
    assert process.stderr is not None
    lines: list[str] = []
    deadline = threading.Timer(15, process.kill)  # a line that never comes fails the test instead of hanging it
    deadline.start()
    try:
        while words not in (line := process.stderr.readline()):
            assert line, f"stderr ended before {words!r}: {lines}"
            lines.append(line)
    finally:
        deadline.cancel()
    return [*lines, line]


async def test_status_and_grants_ask_the_daemon_on_its_editor_socket(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    # A session grant lives in the daemon alone: a handshake-era agent session gets one (a one-shot `mcphost call`
    # is offered none).
    async with daemon(sandbox) as d, http_agent(d.url, d.headers, mode="legacy") as agent:
        async with editor(d.editor_socket, allow("session"), name="approver"):
            first = await agent.call_tool(
                "call_tool_write", {"name": "probe:plain_echo", "args": {}, "intent": {"operation_type": "write"}}
            )
            assert not first.is_error, first
            status = json.loads((await run(sandbox, "status", "-o", "json")).stdout)
        listed = json.loads((await run(sandbox, "grants", "list", "-o", "json")).stdout)["grants"]
        revoked = await run(sandbox, "grants", "revoke", "probe:plain_echo")
        after = json.loads((await run(sandbox, "grants", "list", "-o", "json")).stdout)["grants"]
        text = await run(sandbox, "status")
    (report,) = status["daemons"]
    assert report["pid"] == d.process.pid and [e["name"] for e in report["editors"]] == ["approver 1"]
    assert [(s["name"], s["state"]) for s in report["servers"]] == [("probe", "connected")]
    assert [(g["scope"], g["tool"], g["daemon"]) for g in listed] == [("session", "plain_echo", d.process.pid)]
    assert revoked.returncode == 0 and f"revoked {listed[0]['id']} (session) probe:plain_echo" in revoked.stdout
    assert after == []
    assert f"daemon {d.process.pid} (mcphost" in text.stdout
    (row,) = [line.split() for line in text.stdout.splitlines() if "probe" in line]
    assert row == ["probe", "connected", str(report["servers"][0]["tools"]), report["servers"][0]["protocol"]]
    assert not (sandbox.data / "state.toml").exists(), "a session grant never reaches the state file"


# The commands that ask a daemon.
ASKING = [
    ["status"],
    ["grants", "list"],
    ["config", "show"],
    ["config", "show", "-o", "json"],
    ["call", "tool-read", "probe:read_notes"],
    ["call", "tool-read", "probe:wipe_notes", "-o", "json"],
    ["tools", "notes"],
    ["log", "tail"],
    ["activity", "list"],
]


async def test_a_command_asking_the_daemon_imports_only_what_it_runs(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())

    def imported(argv: list[str]) -> tuple[list[str], str]:
        probe = (
            "import json, sys\n"
            "from mcphost.cli import main\n"
            f"code = main({argv!r})\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **sandbox.env()},
            check=False,
        )
        return json.loads(done.stderr.strip().splitlines()[-1]), done.stderr

    # One daemon for every command (its start would be most of each one's time).
    async with daemon(sandbox):
        for argv in ASKING:
            loaded, stderr = await anyio.to_thread.run_sync(imported, argv)
            assert loaded == [], f"{argv} imported {loaded}"
            if argv[0] in ("call", "tools"):
                assert "this process" not in stderr, f"{argv} went through the daemon"


async def test_config_show_is_the_daemons_while_it_runs_on_the_file_as_it_is_and_the_files_once_it_changed(
    sandbox: Sandbox,
) -> None:
    secret = "Bearer s3cr3t-token-for-the-test"
    remote = f'[servers.remote]\nurl = "http://127.0.0.1:9/mcp"\nheaders = {{ Authorization = "{secret}" }}\n'
    sandbox.write_config('[permissions]\nwrite = "ask"\n' + remote + sandbox.probe_server())
    alone = [mcphost(sandbox, "config", "show", *output) for output in ((), ("-o", "json"))]
    async with daemon(sandbox):
        through = [await run(sandbox, "config", "show", *output) for output in ((), ("-o", "json"))]
        assert [(r.returncode, r.stdout, r.stderr) for r in through] == [(0, r.stdout, "") for r in alone]
        assert secret not in through[0].stdout + through[1].stdout
        assert json.loads(through[1].stdout)["config"]["servers"]["remote"]["headers"]["Authorization"] == "[REDACTED]"

        # A broken save: the daemon keeps the last good config in force, and the command reports the file's error.
        sandbox.write_config('[permissions]\nwrite = "maybe"\n' + sandbox.probe_server())
        await poll(lambda: records_of(sandbox, "config_error"), "the daemon to reject the save")
        broken = await run(sandbox, "config", "show")
        assert broken.returncode == 1 and "permissions.write" in broken.stderr and broken.stdout == ""

        # A good save is shown as saved, whether or not the daemon has reloaded it yet.
        sandbox.write_config('[permissions]\nwrite = "deny"\n' + sandbox.probe_server())
        fixed = json.loads((await run(sandbox, "config", "show", "-o", "json")).stdout)
        assert fixed["config"]["permissions"]["write"] == "deny"


# ---------------------------------------------------------------------------------------------- no daemon to ask


@contextmanager
def unreachable_daemon(box: Sandbox) -> Iterator[int]:
    """A discovery file for a live process of ours whose agent endpoint nobody listens on."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    try:
        run_dir = box.root / "run"
        run_dir.mkdir(mode=0o700, exist_ok=True)
        stat = Path(f"/proc/{sleeper.pid}/stat").read_text(encoding="utf-8")
        info: dict[str, Any] = {
            "pid": sleeper.pid,
            "pid_start": int(stat.rsplit(")", 1)[1].split()[19]),
            "version": "0.1.0",
            "started_at": "2026-01-01T00:00:00Z",
            "mcp": {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"Authorization": "Bearer x"}},
            "config_path": str(box.config),
            "editor_socket": None,
        }
        path = run_dir / f"daemon-{sleeper.pid}.json"
        path.write_text(json.dumps(info), encoding="utf-8")
        path.chmod(0o600)
        yield sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the planted file needs the process start time")
def test_a_daemon_that_does_not_answer_leaves_the_call_to_this_process(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    with unreachable_daemon(sandbox):
        start = time.monotonic()
        called = mcphost(sandbox, "call", "tool-read", "probe:read_notes", "--args", '{"text": "z"}')
        tools = mcphost(sandbox, "tools", "notes")
    assert called.returncode == 0, called.stderr
    assert called.stdout.strip() == "read_notes: z"
    assert "cannot reach the daemon" in called.stderr and "calling from this process instead" in called.stderr
    assert tools.returncode == 0 and "probe:read_notes" in tools.stdout
    assert "asking the upstream servers from this process" in tools.stderr
    assert time.monotonic() - start < 30


async def test_a_stopped_daemon_leaves_a_new_call_and_a_new_agent_session_to_this_process(sandbox: Sandbox) -> None:
    # Ctrl-Z on `mcphost serve` in its terminal: it answers nobody until resumed, and every command waited on it.
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        d.process.send_signal(signal.SIGSTOP)
        try:
            called = await anyio.to_thread.run_sync(
                lambda: mcphost(sandbox, "call", "tool-read", "probe:read_notes", "--args", '{"text": "s"}', timeout=30)
            )
            async with agent(sandbox) as session:
                notes = {"name": "probe:read_notes", "args": {"text": "a"}, "intent": {"operation_type": "read"}}
                async with asyncio.timeout(30):
                    answered = await session.call_tool("call_tool_read", notes)
        finally:
            d.process.send_signal(signal.SIGCONT)
    assert called.returncode == 0, called.stderr
    assert f"the daemon {d.process.pid} is stopped" in called.stderr and "calling from this process" in called.stderr
    assert not answered.is_error
    assert [r["status"] for r in sandbox.tool_calls()] == ["success", "success"]
