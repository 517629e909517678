"""Upstreams that misbehave: malformed tools, huge answers, stderr floods, silent changes, and hosts that die.

Most tests drive one `UpstreamServer` against the hostile test server (tests/servers/hostile.py) in a real
subprocess; the process-lifetime tests start a whole host (`mcphost mcp`, `mcphost serve`) and kill it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from mcphost.config.models import ServerConfig
from mcphost.upstream.connection import (
    State,
    UpstreamCallFailed,
    UpstreamResultTooLarge,
    UpstreamUnavailable,
)
from mcphost.upstream.manager import UpstreamManager
from tests.helpers import PROBE, Events, Hostile, Sandbox, daemon, http_agent, running


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    return Hostile(tmp_path)


async def poll(check: Callable[[], bool], limit_s: float, what: str) -> None:
    """Wait for a condition another process brings about (a file written, a process gone): nothing to await."""
    with anyio.fail_after(limit_s):
        while not check():  # noqa: ASYNC110
            await anyio.sleep(0.02)


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (a killed orphan may wait a while to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def text(result: Any) -> str:
    return "".join(block.text for block in result.model.content)


# ---- 1. malformed tools


async def test_malformed_tools_are_dropped_with_a_reason_and_the_others_are_served(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    hostile.set(bad_tools=True)
    caplog.set_level(logging.WARNING, logger="mcphost.upstream")
    async with running(hostile.config()) as server:
        assert server.state is State.CONNECTED, server.last_error
        assert set(server.tools) == {"echo", "big", "block", "slow", "shout", "spawn", "shifty", "malformed"}
        assert server.tools["echo"].description == "Echo text back"  # the first of the two echo tools
        dropped = dict(server.dropped_tools)
        assert "inputSchema" in dropped["schema_not_object"]
        [unnamed] = [reason for name, reason in dropped.items() if name.startswith("<tool #")]
        assert "name" in unnamed
        assert "':'" in dropped["has:colon"]
        assert "control" in dropped["bell\\x07and\\x1b[31mred"]  # shown escaped, never raw
        assert "1000000 characters" in dropped["huge_description"]
        assert "same name" in dropped["echo"]
        # Deeper than pydantic parses a line: read all the same, so the page's other tools are served.
        assert "nests deeper than 100 levels" in dropped["deep_schema"]
        # Refused by pydantic's parser for one description: read all the same (the whole list was lost, and the
        # server said not to start).
        assert "not Unicode" in dropped["unpaired"]
        assert "must be true or false" in dropped["yes_read"]  # the SDK's model read "yes" as true
        assert "NaN or Infinity" in dropped["not_a_number"]  # passed on as such, no agent could read the list
        assert len(server.dropped_tools) == 10
        result = await server.call_tool("echo", {"text": "still here"})
        assert text(result) == "still here"
    warnings = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    for name in ("schema_not_object", "has:colon", "huge_description", "without a name"):
        assert name in warnings
    assert "\x1b" not in warnings


async def test_a_repaired_tool_list_clears_the_dropped_tools(hostile: Hostile) -> None:
    hostile.set(bad_tools=True)
    async with running(hostile.config()) as server:
        assert server.dropped_tools
        hostile.set(bad_tools=False)
        await server.refresh()
        assert server.dropped_tools == []


async def test_status_names_the_dropped_tools_and_why(hostile: Hostile) -> None:
    hostile.set(bad_tools=True)
    events: list[tuple[str, str, dict[str, Any]]] = []
    async with UpstreamManager(on_event=lambda kind, name, details: events.append((kind, name, details))) as manager:
        manager.apply({"hostile": hostile.config()})
        await manager.wait_ready(20)
        [status] = [s.to_dict() for s in manager.statuses()]
    assert status["state"] == "connected" and status["tools"] == 8
    assert {"name": "has:colon", "reason": "the name contains ':', which separates server and tool in mcphost"} in (
        status["dropped_tools"]
    )
    [connected] = [details for kind, _, details in events if kind == "upstream_connected"]
    assert len(connected["dropped_tools"]) == 10


# ---- 2. answer time


async def test_a_call_unanswered_within_call_timeout_fails_saying_so_and_the_server_is_told_and_stays(
    hostile: Hostile,
) -> None:
    async with running(hostile.config(call_timeout=0.3)) as server:
        with anyio.fail_after(5):
            with pytest.raises(UpstreamCallFailed, match=r"no answer within call_timeout \(0.3s\)"):
                await server.call_tool("slow", {"seconds": 1.5})
        # Once it wakes, the server reads that the call was given up, and its late answer goes nowhere.
        await poll(lambda: hostile.requests("notifications/cancelled") == 1, 10, "the cancellation reaching it")
        result = await server.call_tool("echo", {"text": "next"})
        assert text(result) == "next"
        assert server.state is State.CONNECTED


# ---- 3. answer size


@pytest.mark.parametrize("result_first", [False, True], ids=["id-first", "result-first"])
async def test_an_answer_over_max_result_bytes_is_refused_with_its_size_and_the_server_stays(
    hostile: Hostile, result_first: bool
) -> None:
    hostile.set(result_first=result_first)
    async with running(hostile.config(max_result_bytes=100_000)) as server:
        with pytest.raises(UpstreamResultTooLarge) as refused:
            await server.call_tool("big", {"bytes": 1_000_000})
        assert refused.value.size > 1_000_000
        assert refused.value.limit == 100_000
        assert refused.value.server == "hostile"
        assert "1000" in refused.value.reason and "max_result_bytes" in refused.value.reason
        assert server.state is State.CONNECTED
        assert text(await server.call_tool("big", {"bytes": 50_000})) == "x" * 50_000


async def test_a_20_mb_answer_is_refused_promptly_under_the_default_limit(hostile: Hostile) -> None:
    async with running(hostile.config(call_timeout=60)) as server:
        with anyio.fail_after(15), pytest.raises(UpstreamResultTooLarge) as refused:
            await server.call_tool("big", {"bytes": 20_000_000})
    assert refused.value.size > 20_000_000
    assert refused.value.limit == 10 * 1024 * 1024


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ({"content": "just text"}, "content: Input should be a valid list"),
        ({"content": [{"type": "text"}]}, "content.0.text.text: Field required"),
        ({"content": [{"type": "video"}]}, "content.0: Input tag 'video' found using 'type' does not match"),
        ({"content": [{"text": "no type"}]}, "content.0: Unable to extract tag using discriminator 'type'"),
        ({"content": [], "isError": [1]}, "isError: Input should be a valid boolean"),
    ],
)
async def test_an_answer_that_is_no_tool_result_fails_the_call_and_says_why(
    hostile: Hostile, result: dict[str, Any], problem: str
) -> None:
    async with running(hostile.config()) as server:
        with pytest.raises(UpstreamCallFailed) as failed:
            await server.call_tool("malformed", {"result": result})
        assert server.state is State.CONNECTED
        good = await server.call_tool("malformed", {"result": {"content": [{"type": "text", "text": "fine"}]}})
    assert "the answer is not a tool result" in failed.value.reason and problem in failed.value.reason, failed.value
    assert text(good) == "fine"


async def test_an_answer_nested_past_what_can_be_passed_on_fails_the_call_and_one_within_passes(
    hostile: Hostile,
) -> None:
    # Past some 250 levels pydantic's and orjson's serializers give up: after the call ran, recorded as a success.
    text_only = {"content": [{"type": "text", "text": "x"}]}
    async with running(hostile.config()) as server:
        within = await server.call_tool("malformed", {"result": text_only, "nest": 50})
        with pytest.raises(UpstreamCallFailed) as structured:
            await server.call_tool("malformed", {"result": text_only, "nest": 150})
        with pytest.raises(UpstreamCallFailed) as with_an_image:
            image = {"content": [{"type": "image", "data": "", "mimeType": "image/png"}]}
            await server.call_tool("malformed", {"result": image, "nest": 150})
        assert server.state is State.CONNECTED
    assert within.model.structured_content is not None
    for failed in (structured, with_an_image):
        assert failed.value.reason == "the answer nests deeper than 200 levels, more than mcphost can pass on"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        # No JSON, yet Python's reader takes each: read, the agent got a null the server never sent, as a success.
        ("NaN", "the answer holds NaN, a number JSON cannot carry"),
        ("[1, -Infinity]", "the answer holds -Infinity, a number JSON cannot carry"),
        ("1e400", "the answer holds 1e400, a number JSON cannot carry"),
        ("-1e99999", "the answer holds -1e99999, a number JSON cannot carry"),
    ],
)
async def test_an_answer_holding_nan_or_an_infinity_fails_the_call_saying_which(
    hostile: Hostile, raw: str, reason: str
) -> None:
    plain = {"content": [{"type": "text", "text": "x"}]}
    async with running(hostile.config()) as server:
        with pytest.raises(UpstreamCallFailed) as failed:
            await server.call_tool("malformed", {"result": plain, "raw": raw})
        assert server.state is State.CONNECTED
        finite = await server.call_tool("malformed", {"result": plain, "raw": "1e308"})
    assert failed.value.reason == reason
    assert finite.model.structured_content == {"n": 1e308}


async def test_an_answer_too_deep_for_any_reader_fails_the_call_saying_so(hostile: Hostile) -> None:
    plain = {"content": [{"type": "text", "text": "x"}]}
    async with running(hostile.config()) as server:
        with pytest.raises(UpstreamCallFailed) as failed:
            await server.call_tool("malformed", {"result": plain, "raw": "1", "deep": 5000})
        assert server.state is State.CONNECTED
    assert failed.value.reason == "the answer nests too deep to read (past Python's limit)"


async def test_an_answer_with_junk_before_it_on_its_line_fails_the_call_at_once(hostile: Hostile) -> None:
    # A server that logs to stdout without a newline: the answer's line is no JSON, yet it names the request. Left
    # unanswered, the call waited out call_timeout.
    plain = {"content": [{"type": "text", "text": "x"}]}
    async with running(hostile.config(call_timeout=60)) as server:
        with anyio.fail_after(10):
            with pytest.raises(UpstreamCallFailed) as failed:
                await server.call_tool("malformed", {"result": plain, "junk": "[debug] answering "})
            assert server.state is State.CONNECTED
            after = await server.call_tool("malformed", {"result": plain})
    assert failed.value.reason == "the answer is not valid JSON"
    assert text(after) == "x"


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ({"code": -32603, "message": "the disk is on fire"}, "the disk is on fire"),
        # What an SDK server sends for an exception with no text (a bare TimeoutError): said as such, not ": ."
        ({"code": -32603, "message": ""}, "it answered with JSON-RPC error -32603 and no message"),
        ({"code": 0, "message": "  "}, "it answered with JSON-RPC error 0 and no message"),
        ({"code": 1, "message": 5}, "an unreadable error: {'code': 1, 'message': 5}"),
    ],
)
async def test_an_error_answer_fails_the_call_with_its_message_or_what_it_was(
    hostile: Hostile, error: dict[str, Any], reason: str
) -> None:
    async with running(hostile.config()) as server:
        with pytest.raises(UpstreamCallFailed) as failed:
            await server.call_tool("malformed", {"result": {"error": error}})
        assert server.state is State.CONNECTED
    assert failed.value.reason == reason


# ---- 4. stderr


async def test_a_stderr_flood_reaches_the_host_prefixed_escaped_cut_and_rate_limited(
    hostile: Hostile, capfd: pytest.CaptureFixture[str]
) -> None:
    async with running(hostile.config()) as server:
        assert text(await server.call_tool("shout", {"lines": 3000, "width": 10})) == "shouted"
        assert text(await server.call_tool("shout", {"lines": 1, "width": 100_000})) == "shouted"
    err = capfd.readouterr().err
    ours = [line for line in err.splitlines() if "line " in line or "dropped" in line]
    assert ours and all(line.startswith("mcphost: [hostile] ") for line in ours), ours[:3]
    assert "\x1b" not in err
    assert "\\x1b[31mred" in err
    assert all(len(line) < 2200 for line in ours)
    shown = [line for line in ours if "line " in line]
    assert len(shown) < 3000
    dropped = sum(int(line.split("... ")[1].split()[0]) for line in ours if line.endswith("lines dropped"))
    assert len(shown) + dropped == 3001


async def test_a_server_that_exits_at_once_is_reported_with_its_status_and_last_words(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # The usual newcomer's mistake: a variable the server needs is not set, and it exits before it answers. Its
    # status and its last line on stderr are what `mcphost status` and the agent's error show.
    config = ServerConfig(command="/bin/sh", args=["-c", "echo 'config error: API_KEY is not set' >&2; exit 3"])
    async with running(config) as server:
        assert server.state is State.RECONNECTING
        assert server.last_error is not None
        assert "the server exited with status 3: config error: API_KEY is not set" in server.last_error
        with pytest.raises(UpstreamUnavailable) as down:
            await server.call_tool("anything", {})
        assert "API_KEY is not set" in down.value.reason
    assert "mcphost: [hostile] config error: API_KEY is not set" in capfd.readouterr().err


async def test_a_server_that_dies_in_a_session_is_reported_lost_with_its_status(tmp_path: Path) -> None:
    events: Events = []
    async with running(ServerConfig(command=sys.executable, args=[str(PROBE)]), events) as server:
        assert server.state is State.CONNECTED, server.last_error
        with pytest.raises(UpstreamCallFailed):
            await server.call_tool("crash", {})
        await poll(lambda: any(kind == "upstream_lost" for kind, _ in events), 20, "the loss to be reported")
    [lost] = [details for kind, details in events if kind == "upstream_lost"]
    assert "the server exited with status 3" in lost["reason"], lost


async def test_a_server_killed_while_a_child_of_its_holds_its_output_is_lost_at_once(hostile: Hostile) -> None:
    # The child keeps the pipe open: the output never ends, so only the process's own exit can say the server is gone
    # (the call under way waited for call_timeout, and the server stayed "connected", before).
    events: Events = []
    child_pid, started = hostile.root / "child.pid", hostile.root / "server.pid"
    async with running(hostile.config(), events) as server:
        await server.call_tool("spawn", {"pidfile": str(child_pid)})  # inherits the server's stdout
        child = int(child_pid.read_text())
        failed: list[str] = []

        async def blocked() -> None:
            with pytest.raises(UpstreamCallFailed) as call:
                await server.call_tool("block", {"started": str(started)})
            failed.append(call.value.reason)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(blocked)
                await poll(started.exists, 10, "the call to be under way")
                os.kill(int(started.read_text()), signal.SIGKILL)
        assert failed == [
            "the connection closed during the call (the server was ended by SIGKILL; a process it started kept its "
            "output open)"
        ], failed
        await poll(lambda: any(kind == "upstream_lost" for kind, _ in events), 10, "the loss to be reported")
        [lost] = [details for kind, details in events if kind == "upstream_lost"]
        assert "the server was ended by SIGKILL; a process it started kept its output open" in lost["reason"], lost
        await poll(lambda: not alive(child), 15, "the child, left in the server's group, to be stopped")
        await poll(lambda: server.state is State.CONNECTED, 20, "the server to be back")


async def test_a_server_that_closes_its_output_and_stays_is_not_said_to_have_been_killed() -> None:
    config = ServerConfig(command="/bin/sh", args=["-c", "exec 1>&-; exec sleep 60"])
    async with running(config) as server:
        assert server.last_error is not None
        assert server.last_error.endswith("; the server closed its output and did not exit"), server.last_error
        assert "SIG" not in server.last_error


async def test_an_upstreams_error_at_start_is_escaped_wherever_it_is_told(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcphost.upstream")
    hostile.set(init_error="\x1b]0;pwned\x07bad \x1b[2J thing\nmcphost: ERROR forged line")
    async with running(hostile.config()) as server:
        assert server.last_error == "\\x1b]0;pwned\\x07bad \\x1b[2J thing\\nmcphost: ERROR forged line"
    told = [record.getMessage() for record in caplog.records]
    assert any("forged line" in message for message in told), told
    assert not any(c in message for message in told for c in "\x1b\x07\n"), told
    # It exited because the host closed its input, not by itself: that is no part of the reason.
    assert not any("exited with status" in message for message in told), told


async def test_a_line_that_is_not_json_rpc_is_reported_once_and_is_a_servers_last_words(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcphost.upstream")
    hostile.set(junk="Starting notes server v1.0 on stdio")
    async with running(hostile.config()) as server:
        assert text(await server.call_tool("echo", {"text": "fine"})) == "fine"
    told = [record.getMessage() for record in caplog.records]
    assert told == ["upstream sent a line that is not JSON-RPC: Starting notes server v1.0 on stdio"], told
    usage = ServerConfig(command="/bin/sh", args=["-c", "echo 'usage: notes-server --db PATH'; exit 2"])
    async with running(usage) as server:
        assert server.last_error is not None
        assert server.last_error.endswith("the server exited with status 2: usage: notes-server --db PATH")


# ---- 5. no upstream outlives its host


async def test_closing_the_connection_stops_the_server_and_its_process_group(hostile: Hostile) -> None:
    # A server that ignores SIGTERM and the end of its stdin, with a child that inherits both.
    hostile.set(linger=True)
    pidfile = hostile.root / "grandchild.pid"
    async with running(hostile.config()) as server:
        await server.call_tool("spawn", {"pidfile": str(pidfile)})
        grandchild = int(pidfile.read_text())
        started = hostile.root / "server.pid"
        with anyio.move_on_after(0.5):
            await server.call_tool("block", {"started": str(started)})
        server_pid = int(started.read_text())
        assert alive(server_pid) and alive(grandchild)
    await poll(lambda: not alive(server_pid) and not alive(grandchild), 15, "the server and its child to be gone")


async def test_closing_all_upstreams_ends_a_call_in_flight_at_once(hostile: Hostile) -> None:
    started = hostile.root / "started"
    failures: list[UpstreamCallFailed] = []
    async with UpstreamManager() as manager:
        manager.apply({"hostile": hostile.config()})
        await manager.wait_ready(20)
        server = manager.servers["hostile"]

        ended = anyio.Event()

        async def call() -> None:
            try:
                await server.call_tool("block", {"started": str(started)})
            except UpstreamCallFailed as exc:
                failures.append(exc)
            finally:
                ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await poll(lambda: started.exists() and started.read_text() != "", 20, "the call to start")
            upstream = int(started.read_text())
            manager.close_all()
            with anyio.fail_after(10):
                await ended.wait()
    assert len(failures) == 1
    await poll(lambda: not alive(upstream), 10, "the upstream to be stopped")


def _start_mcp_host(box: Sandbox, stderr_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcphost", "mcp", "--in-process", "--config", str(box.config)],
        env={**os.environ, **box.env()},
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=stderr_path.open("wb"),
    )


def _send(process: subprocess.Popen[bytes], *messages: dict[str, Any]) -> None:
    assert process.stdin is not None
    for message in messages:
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    process.stdin.flush()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["SIGTERM", "SIGINT", "SIGKILL"])
async def test_an_upstream_busy_in_a_call_dies_with_the_mcp_host(
    sandbox: Sandbox, hostile: Hostile, sig: signal.Signals
) -> None:
    sandbox.write_config(hostile.toml())
    started = sandbox.root / "started"
    host = _start_mcp_host(sandbox, sandbox.root / "host-stderr.txt")
    try:
        _send(
            host,
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "pytest", "version": "1"},
                },
            },
            {"method": "notifications/initialized"},
            {
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "call_tool_read",
                    "arguments": {
                        "name": "hostile:block",
                        "args": {"started": str(started)},
                        "intent": {"operation_type": "read"},
                    },
                },
            },
        )
        await poll(lambda: started.exists() and started.read_text() != "", 30, "the upstream call to start")
        upstream = int(started.read_text())
        assert alive(upstream)
        host.send_signal(sig)
        await anyio.to_thread.run_sync(host.wait, 15)
        await poll(lambda: not alive(upstream), 5, "the upstream to die with its host")
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


@pytest.mark.parametrize(
    "sig",
    [
        signal.SIGTERM,
        signal.SIGKILL,
    ],
    ids=["SIGTERM", "SIGKILL"],
)
async def test_an_upstream_busy_in_a_call_dies_with_the_daemon(
    sandbox: Sandbox, hostile: Hostile, sig: signal.Signals
) -> None:
    sandbox.write_config(hostile.toml())
    started = sandbox.root / "started"
    async with daemon(sandbox) as d:

        async def call() -> None:
            arguments = {
                "name": "hostile:block",
                "args": {"started": str(started)},
                "intent": {"operation_type": "read"},
            }
            # The daemon dies under this call: how the agent's side ends is not the point here.
            with contextlib.suppress(Exception):
                async with http_agent(d.url, d.headers) as agent:
                    await agent.call_tool("call_tool_read", arguments)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await poll(lambda: started.exists() and started.read_text() != "", 30, "the upstream call to start")
            upstream = int(started.read_text())
            d.process.send_signal(sig)
            await anyio.to_thread.run_sync(d.process.wait, 10)
            await poll(lambda: not alive(upstream), 5, "the upstream to die with the daemon")
            tg.cancel_scope.cancel()


# ---- 6. silent changes


async def test_fresh_tool_rereads_a_stale_list_and_reports_a_silent_annotation_change(hostile: Hostile) -> None:
    events: Events = []
    async with running(hostile.config(), events) as server:
        assert server.tools["shifty"].annotations == {"readOnlyHint": True}
        first_read = server.tools_read_at
        assert first_read is not None
        lists = hostile.requests("tools/list")
        # The rug pull: destructive now, and no notifications/tools/list_changed.
        hostile.set(shifty={"destructiveHint": True})

        cached = await server.fresh_tool("shifty", max_age=3600)
        assert cached is not None and cached.annotations == {"readOnlyHint": True}
        assert hostile.requests("tools/list") == lists

        fresh = await server.fresh_tool("shifty", max_age=0)
        assert fresh is not None and fresh.annotations == {"destructiveHint": True}
        assert server.tools_read_at is not None and server.tools_read_at > first_read
    changes = [details for kind, details in events if kind == "annotations_changed"]
    assert changes == [{"tool": "shifty", "old": {"readOnlyHint": True}, "new": {"destructiveHint": True}}]


async def test_concurrent_fresh_tool_calls_share_one_tools_list(hostile: Hostile) -> None:
    async with running(hostile.config()) as server:
        before = hostile.requests("tools/list")
        found: list[Any] = []

        async def check() -> None:
            found.append(await server.fresh_tool("echo", max_age=0))

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(check)
        assert hostile.requests("tools/list") == before + 1
        assert len(found) == 20 and all(tool is not None and tool.name == "echo" for tool in found)
        assert await server.fresh_tool("no_such_tool", max_age=0) is None


async def test_fresh_tool_on_a_server_that_is_down_says_why(tmp_path: Path) -> None:
    config = ServerConfig(command=str(tmp_path / "no-such-server"), connect_timeout=5)
    async with running(config) as server:
        with pytest.raises(UpstreamUnavailable) as down:
            await server.fresh_tool("anything", max_age=0)
    assert "no-such-server" in down.value.reason
