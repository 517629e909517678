"""`mcphost hook` run the way an agent runs it (a child process, the payload on stdin, a timeout), with and without a
daemon, and `mcphost permission-server` driven by the official MCP SDK client as Claude Code drives it."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client, StdioServerParameters

from mcphost.cli import hook
from mcphost.config.agent_settings import HOOK_TIMEOUT
from mcphost.gateway.hooks import ON_RECORD
from tests.editor_client import allow, deny, editor, never
from tests.helpers import Sandbox, daemon, poll, text_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
AGENT_TIMEOUT = 60  # what the agent would give the hook before it gives up on it


def payload(name: str, **changes: Any) -> bytes:
    data = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    if "command" in changes:
        data["tool_input"]["command"] = changes.pop("command")
    data.update(changes)
    return json.dumps(data).encode()


def run_hook(box: Sandbox, stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "mcphost", "hook", *args],
        input=stdin,
        env={**os.environ, **box.env()},
        capture_output=True,
        timeout=AGENT_TIMEOUT,
        check=False,
    )


def start_hook(box: Sandbox, stdin: bytes, *, close: bool = True) -> subprocess.Popen[bytes]:
    """`mcphost hook` as an agent starts it, its payload written; stdin closed after it unless `close` is False."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mcphost", "hook"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **box.env()},
    )
    assert process.stdin is not None
    process.stdin.write(stdin)
    if close:
        process.stdin.close()
    else:
        process.stdin.flush()
    return process


def decision(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"])


def hook_records(box: Sandbox) -> list[dict[str, Any]]:
    return [r for r in box.records() if r["type"] == "hook_decision"]


def test_without_a_daemon_the_policy_decides_and_a_person_is_left_to_the_agents_prompt(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\nwrite = "ask"\ndestructive = "deny"\n')
    assert decision(run_hook(sandbox, payload("claude-code/pretooluse-read.json"))) == "allow"
    assert decision(run_hook(sandbox, payload("claude-code/pretooluse-write.json"))) == "ask"
    denied = run_hook(sandbox, payload("claude-code/pretooluse-bash-rm.json"))
    assert decision(denied) == "deny"
    assert 'permissions.destructive = \\"deny\\"' in denied.stdout.decode()
    read, write, rm = hook_records(sandbox)
    assert (read["status"], read["decision"]["by"], read["tool"]) == ("allowed", "policy", "Read")
    assert (write["status"], write["decision"]["by"], write["decision"]["outcome"]) == ("asked", "agent", "ask")
    assert (rm["status"], rm["metadata"]["tool_variant"], rm["server"]) == (
        "denied",
        "call_tool_destructive",
        "claude-code",
    )
    assert rm["metadata"]["hook"]["agent"] == "claude-code" and rm["metadata"]["hook"]["event"] == "PreToolUse"
    assert rm["metadata"]["hook"]["because"].endswith("rm")
    assert rm["client"] == "Claude Code (hook)"
    assert rm["session_id"].startswith("claude-code-") and "abc123" not in json.dumps(rm)


def test_codex_is_told_only_what_it_reads(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "allow"\ndestructive = "deny"\n')
    allowed = run_hook(sandbox, payload("codex/pretooluse-bash.json", command="npm test"), "--agent", "codex")
    assert (allowed.returncode, allowed.stdout) == (0, b"")
    denied = run_hook(sandbox, payload("codex/pretooluse-bash.json", command="git reset --hard"), "--agent", "codex")
    assert set(json.loads(denied.stdout)["hookSpecificOutput"]) == {
        "hookEventName",
        "permissionDecision",
        "permissionDecisionReason",
    }


def test_an_unreadable_payload_or_config_blocks_the_call(sandbox: Sandbox) -> None:
    garbage = run_hook(sandbox, b"{not json")
    assert garbage.returncode == 2 and b"blocked" in garbage.stderr and garbage.stdout == b""
    sandbox.write_config("[permissions\nread = ")
    broken = run_hook(sandbox, payload("claude-code/pretooluse-read.json"))
    assert broken.returncode == 2 and b"config" in broken.stderr
    # A PermissionRequest ignores exit codes: the block is a printed deny.
    asked = run_hook(sandbox, payload("claude-code/permissionrequest-bash.json"))
    assert asked.returncode == 0
    assert json.loads(asked.stdout)["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    # No gate saw these calls; each block is on record all the same, with what of the call could be read.
    garbled, config, permission = hook_records(sandbox)
    assert (garbled["status"], garbled["error"]["code"]) == ("rejected", "INVALID_ARGS")
    assert "not JSON" in garbled["error"]["message"] and "tool" not in garbled
    assert (config["status"], config["error"]["code"]) == ("error", "UPSTREAM_ERROR")
    assert "config" in config["error"]["message"] and config["tool"] == "Read"
    assert config["metadata"]["hook"] == {
        "agent": "claude-code",
        "event": "PreToolUse",
        "tool_name": "Read",
        "because": "blocked before it could be judged",
    }
    assert permission["metadata"]["hook"]["event"] == "PermissionRequest" and permission["status"] == "error"


@pytest.mark.parametrize("event", [5, ["PreToolUse"], True, "Pre\ud800ToolUse", "PreToolUse; x"])
def test_a_payload_whose_event_is_no_events_name_is_blocked_on_record(sandbox: Sandbox, event: Any) -> None:
    # Read as an event mcphost has no say in, each got no answer and no record: the agent went on unasked.
    sandbox.write_config('[hooks]\ndestructive = ["Deploy"]\n\n[permissions]\ndestructive = "deny"\n')
    body = json.dumps({"hook_event_name": event, "tool_name": "Deploy", "tool_input": {}}).encode()
    result = run_hook(sandbox, body, "--agent", "claude-code")
    assert result.returncode == 2 and b"event name" in result.stderr, result
    [record] = hook_records(sandbox)
    assert (record["status"], record["error"]["code"]) == ("rejected", "INVALID_ARGS")


def test_an_event_name_with_spaces_around_it_is_that_event(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n')
    body = payload("claude-code/pretooluse-read.json", hook_event_name=" PreToolUse ")
    assert decision(run_hook(sandbox, body)) == "allow"


def test_a_name_under_mcphosts_own_server_that_is_no_tool_of_mcphosts_is_judged(sandbox: Sandbox) -> None:
    # mcphost decides its own tools' calls when they reach it; any other name was let through unjudged, unrecorded.
    sandbox.write_config('[permissions]\nread = "allow"\nwrite = "deny"\n')
    for name, expected in (("mcp__mcphost__call_tool_read", "allow"), ("mcp__mcphost__x__delete_everything", "deny")):
        assert decision(run_hook(sandbox, payload("claude-code/pretooluse-mcp.json", tool_name=name))) == expected
    [judged] = hook_records(sandbox)
    assert (judged["status"], judged["tool"]) == ("denied", "x__delete_everything")


def test_a_credential_the_reasons_cut_goes_through_is_redacted_whole(sandbox: Sandbox) -> None:
    # The agent's reason is cut to its length after redaction: cut first, the credential's start was kept.
    sandbox.write_config('[permissions]\nwrite = "allow"\n')
    token = "ghp_" + "a1B2" * 9
    description = "x" * 994 + " " + token
    body = json.dumps(
        {
            **json.loads(payload("claude-code/pretooluse-bash.json", command="npm test")),
            "tool_input": {"command": "npm test", "description": description},
        }
    ).encode()
    assert decision(run_hook(sandbox, body)) == "allow"
    [record] = hook_records(sandbox)
    assert "ghp_" not in sandbox.log.read_text(encoding="utf-8")
    assert record["metadata"]["intent"]["reason"].startswith("x" * 994 + " [RED")


def hostile_payloads() -> dict[str, bytes]:
    """Payloads an agent (or whatever writes its hook's stdin) could send that mcphost cannot record faithfully."""
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(800):  # readable by json.loads, too deep for a record, a prompt or a grant's key
        inner["a"] = {}
        inner = inner["a"]
    base = json.loads(payload("claude-code/pretooluse-write.json"))
    bad_text = '"\\ud800 rm -rf"'
    return {
        "deep tool input": json.dumps({**base, "tool_input": {"content": deep}}).encode(),
        "lone surrogate in tool_name": json.dumps(base).replace('"Write"', '"Write\\udfff"').encode(),
        "lone surrogate in session_id": json.dumps({**base, "session_id": "x"}).replace('"x"', bad_text).encode(),
        "lone surrogate in the input": json.dumps({**base, "tool_input": {"content": "x"}})
        .replace('"x"', bad_text)
        .encode(),
        "a cwd of 5 MB": json.dumps({**base, "cwd": "/" + "d" * 5_000_000}).encode(),
        "a tool_name of 5 MB": json.dumps({**base, "tool_name": "W" * 5_000_000}).encode(),
    }


def assert_refused_on_record(box: Sandbox, results: dict[str, subprocess.CompletedProcess[bytes]]) -> None:
    for what, result in results.items():
        assert decision(result) == "deny", what
        assert b"mcphost: refused" in result.stdout and b"Traceback" not in result.stderr, what
    records = hook_records(box)
    assert [r["status"] for r in records] == ["rejected"] * len(results)
    assert {r["error"]["code"] for r in records} == {"INVALID_ARGS"}
    assert "deeper than 64 levels" in records[0]["error"]["message"]
    # What was refused for its size is kept in part: kept whole (twice, for a tool's name), a few such calls rotated
    # every record before them out of the log.
    assert max(len(json.dumps(r)) for r in records) < 20_000


def test_a_payload_that_cannot_be_recorded_faithfully_is_refused_on_record(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "allow"\n')
    results = {what: run_hook(sandbox, body) for what, body in hostile_payloads().items()}
    assert_refused_on_record(sandbox, results)


async def test_through_a_daemon_a_payload_that_cannot_be_recorded_is_refused_on_record(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "allow"\n')
    async with daemon(sandbox):
        results = {
            what: await anyio.to_thread.run_sync(run_hook, sandbox, body) for what, body in hostile_payloads().items()
        }
    assert_refused_on_record(sandbox, results)
    assert all(b"deciding from the config file" not in r.stderr for r in results.values())


@pytest.mark.parametrize(
    ("agent", "body", "where"),
    [
        ("copilot-cli", b'{"toolName": "bash", "toolArgs": "[\\"rm -rf /\\"]", "timestamp": 1}', "top"),
        ("copilot-cli", b'{"timestamp": 1, "toolName": "bash", "toolArgs": {"command": "rm -rf /"},', "top"),
        ("copilot-cli", b"", "top"),
        ("copilot-cli", b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": "x"}', "pre"),
        ("claude-code", b'{"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": "x"}', "asked"),
        ("codex", b'{"hook_event_name": "PermissionRequest", "tool_input": {}}', "asked"),
    ],
)
def test_an_unreadable_payload_is_blocked_in_words_its_agent_reads(
    sandbox: Sandbox, agent: str, body: bytes, where: str
) -> None:
    # Copilot CLI reads no exit code, nor does any agent for a PermissionRequest: exit 2 alone let these through.
    result = run_hook(sandbox, body, "--agent", agent)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    if where == "top":
        assert answer["permissionDecision"] == "deny" and "blocked" in answer["permissionDecisionReason"]
    elif where == "pre":
        assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    else:
        assert answer["hookSpecificOutput"]["decision"]["behavior"] == "deny"


def test_a_fault_inside_the_hook_blocks_the_call_instead_of_a_traceback(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An agent reads a hook's traceback (exit 1) as no objection and runs the call.
    def broken(use: Any, config: Any) -> dict[str, Any]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(hook, "decide", broken)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload("claude-code/pretooluse-write.json"))))
    assert hook.run(argparse.Namespace(agent=None, config=None)) == 2
    out, err = capsys.readouterr()
    assert out == "" and "could not decide (RecursionError: maximum recursion" in err and "blocked" in err
    # A PermissionRequest hook's exit code is not read: the block is a printed deny.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload("claude-code/permissionrequest-bash.json"))))
    assert hook.run(argparse.Namespace(agent=None, config=None)) == 0
    decided = json.loads(capsys.readouterr().out)["hookSpecificOutput"]["decision"]
    assert decided["behavior"] == "deny" and "could not decide (RecursionError" in decided["message"]
    # No gate recorded these: the hook did, as blocks for a fault of mcphost's.
    assert [(r["status"], r["metadata"]["hook"]["event"]) for r in hook_records(sandbox)] == [
        ("error", "PreToolUse"),
        ("error", "PermissionRequest"),
    ]


def test_a_fault_while_deciding_is_on_record_as_an_error_not_a_cancellation(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcphost.approval.approvals import Approvals

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("'int' object is not iterable")

    sandbox.write_config('[permissions]\nwrite = "ask"\n')
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(Approvals, "authorize", broken)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload("claude-code/pretooluse-write.json"))))
    assert hook.run(argparse.Namespace(agent=None, config=None)) == 2
    assert "could not decide (TypeError" in capsys.readouterr().err
    [record] = hook_records(sandbox)  # the gate's, once: the hook knows it is on record (ON_RECORD)
    assert hook._ON_RECORD == ON_RECORD
    assert record["status"] == "error" and "TypeError: 'int' object is not iterable" in record["error"]["message"]


def test_a_decision_held_up_by_a_locked_log_is_blocked_before_the_agent_gives_up(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A process stopped while it held the activity log's lock: the hook waited on it until its agent timed it out,
    # and the agent then ran the call unasked.
    import fcntl

    sandbox.write_config('[permissions]\nread = "allow"\n')
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(hook, "IN_PROCESS_DEADLINE", 1)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload("claude-code/pretooluse-read.json"))))
    sandbox.data.mkdir(parents=True, exist_ok=True)
    held = os.open(sandbox.log, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert hook.run(argparse.Namespace(agent=None, config=None)) == 2
    finally:
        os.close(held)
    assert "took over 1 s (is the activity log locked?); the call is blocked" in capsys.readouterr().err


def test_the_hook_gives_up_on_the_daemon_before_its_agent_gives_up_on_the_hook() -> None:
    # An agent that times its hook out goes on with the call unasked; the fallback needs a moment too.
    assert hook.DAEMON_DEADLINE <= HOOK_TIMEOUT - 10


def test_a_full_disk_is_a_deny_not_a_silent_pass(sandbox: Sandbox) -> None:
    if not Path("/dev/full").exists():
        return
    sandbox.data.mkdir(parents=True)
    sandbox.log.symlink_to("/dev/full")
    sandbox.write_config('[permissions]\nread = "allow"\n')
    result = run_hook(sandbox, payload("claude-code/pretooluse-read.json"))
    assert decision(result) == "deny"
    assert b"cannot be made durable" in result.stdout and b"free space on the disk" in result.stdout


def test_a_log_that_is_a_directory_is_a_deny_that_says_what_would_fix_it(sandbox: Sandbox) -> None:
    sandbox.log.mkdir(parents=True)
    sandbox.write_config('[permissions]\nread = "allow"\n')
    result = run_hook(sandbox, payload("claude-code/pretooluse-read.json"))
    assert decision(result) == "deny"
    # Freeing space would not help: the reason says what would.
    assert b"a file this user can write" in result.stdout and b"free space" not in result.stdout


async def test_with_a_daemon_the_person_decides_in_the_editor(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "ask"\n')
    async with daemon(sandbox) as d:
        async with editor(d.editor_socket, allow()) as ed:
            result = await anyio.to_thread.run_sync(run_hook, sandbox, payload("vscode/pretooluse-create_file.json"))
            assert decision(result) == "allow"
            [prompt] = ed.prompts
            assert (prompt["server"], prompt["tool"], prompt["variant"]) == ("vscode", "create_file", "call_tool_write")
            assert prompt["client"] == "VS Code (hook)"
            assert prompt["arguments"]["filePath"].endswith("hello.ts")
        async with editor(d.editor_socket, deny()):
            result = await anyio.to_thread.run_sync(run_hook, sandbox, payload("vscode/pretooluse-create_file.json"))
            assert decision(result) == "deny"
            assert b"denied by the user" in result.stdout
        # Nobody attached: the agent's own prompt asks.
        result = await anyio.to_thread.run_sync(run_hook, sandbox, payload("vscode/pretooluse-create_file.json"))
        assert decision(result) == "ask"
    statuses = [(r["status"], r["decision"]["by"]) for r in hook_records(sandbox)]
    assert statuses == [("allowed", "editor"), ("denied", "editor"), ("asked", "agent")]


async def test_a_stopped_daemon_costs_a_hook_seconds_not_its_agents_timeout(sandbox: Sandbox) -> None:
    # Copilot CLI gives a hook 30 s by default, then runs the call: attaching must not wait as long as a person may.
    sandbox.write_config('[permissions]\nread = "allow"\n')
    async with daemon(sandbox) as d:
        d.process.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            result = await anyio.to_thread.run_sync(run_hook, sandbox, payload("claude-code/pretooluse-read.json"))
            took = time.monotonic() - started
        finally:
            d.process.send_signal(signal.SIGCONT)
    assert decision(result) == "allow"
    assert b"deciding from the config file" in result.stderr and took < 20, (took, result.stderr)


async def test_a_daemon_stopped_while_a_person_is_asked_costs_the_hook_seconds_not_its_agents_timeout(
    sandbox: Sandbox,
) -> None:
    # Attached and asking, the hook may wait as long as a person takes; a daemon that stops answering anyone
    # (SIGSTOP, a debugger) is given up on in seconds, and the config file decides: the agent's own prompt asks.
    sandbox.write_config('[permissions]\nwrite = "ask"\n')
    async with daemon(sandbox) as d, editor(d.editor_socket, never()) as ed:
        process = start_hook(sandbox, payload("claude-code/pretooluse-write.json"))
        await poll(lambda: ed.prompts, "the prompt")
        d.process.send_signal(signal.SIGSTOP)
        try:
            await anyio.to_thread.run_sync(process.wait, 30)
        finally:
            d.process.send_signal(signal.SIGCONT)
    assert process.stdout is not None and process.stderr is not None
    out, err = process.stdout.read(), process.stderr.read()
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "ask", err
    assert b"has been stopped" in err and b"deciding from the config file" in err


def test_a_payload_on_stdin_left_open_is_decided_without_waiting_for_its_end(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n')
    process = start_hook(sandbox, payload("claude-code/pretooluse-read.json"), close=False)
    assert process.stdin is not None and process.stdout is not None
    agent_timeout = threading.Timer(AGENT_TIMEOUT, process.kill)
    agent_timeout.start()
    try:
        answer = process.stdout.read()  # until the hook exits
    finally:
        agent_timeout.cancel()
        process.stdin.close()
        process.wait(10)
    assert json.loads(answer)["hookSpecificOutput"]["permissionDecision"] == "allow"


def test_a_payload_that_never_ends_is_blocked_before_its_agent_gives_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n')
    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(hook, "PAYLOAD_DEADLINE", 0.3)
    reading, writing = os.pipe()
    os.write(writing, payload("claude-code/pretooluse-read.json")[:-20])
    try:
        with os.fdopen(reading, "rb", buffering=0) as stdin:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
            # Half a payload says no agent for certain: exit 2, the block every agent's PreToolUse hook reads.
            assert hook.run(argparse.Namespace(agent=None, config=None)) == 2
    finally:
        os.close(writing)
    assert "did not end within 0.3 s" in capsys.readouterr().err


async def test_a_hook_ended_by_its_agent_withdraws_its_prompt(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "ask"\n')
    async with daemon(sandbox) as d, editor(d.editor_socket, never()) as ed:
        process = start_hook(sandbox, payload("claude-code/pretooluse-write.json"))
        await poll(lambda: ed.prompts, "the prompt")
        process.send_signal(signal.SIGTERM)  # the agent's timeout
        await anyio.to_thread.run_sync(process.wait, 10)
        await poll(lambda: ed.cancelled, "the prompt withdrawn")
        [record] = await poll(lambda: hook_records(sandbox), "the record")
    assert record["status"] == "cancelled"


async def test_a_person_allowing_codexs_pre_tool_use_is_not_asked_again_by_its_permission_request(
    sandbox: Sandbox,
) -> None:
    sandbox.write_config('[permissions]\nwrite = "ask"\n')
    pre = payload("codex/pretooluse-bash.json", command="npm install")
    asks = json.loads(pre)
    asks.update(hook_event_name="PermissionRequest")
    del asks["tool_use_id"]
    async with daemon(sandbox) as d, editor(d.editor_socket, allow()) as ed:
        first = await anyio.to_thread.run_sync(run_hook, sandbox, pre)
        assert first.stdout == b""  # Codex cannot take an allow here
        second = await anyio.to_thread.run_sync(run_hook, sandbox, json.dumps(asks).encode())
        assert json.loads(second.stdout)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
        assert len(ed.prompts) == 1
    assert [r["status"] for r in hook_records(sandbox)] == ["allowed", "allowed"]


def test_install_and_uninstall_from_the_command_line(sandbox: Sandbox, tmp_path: Path) -> None:
    project = tmp_path / "project"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"model": "opus"}', encoding="utf-8")
    argv = [sys.executable, "-m", "mcphost", "hook"]
    env = {**os.environ, **sandbox.env()}
    scope = ["--agent", "claude-code", "--scope", "project", "--project", str(project)]
    done = subprocess.run([*argv, "install", *scope], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(settings.read_text())["hooks"]["PreToolUse"]
    command = entry["hooks"][0]["command"]
    assert command.endswith("hook --agent claude-code")
    # The command installed is one the agent can run: it answers a payload.
    ran = subprocess.run(command, shell=True, input=payload("claude-code/pretooluse-read.json"), env=env,
                         capture_output=True, check=False, timeout=AGENT_TIMEOUT)  # fmt: skip
    assert decision(ran) == "allow"
    gone = subprocess.run([*argv, "uninstall", *scope], env=env, capture_output=True, text=True, check=False)
    assert gone.returncode == 0, gone.stderr
    assert json.loads(settings.read_text()) == {"model": "opus"}
    assert json.loads((settings.parent / "settings.json.mcphost-backup").read_text())["hooks"]


def permission_server(box: Sandbox) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcphost", "permission-server", "--config", str(box.config)], env=box.env()
    )


async def test_the_permission_prompt_tool_answers_in_claude_codes_format(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\nwrite = "ask"\ndestructive = "deny"\n')
    documented = json.loads((FIXTURES / "claude-code/permission-prompt-tool-arguments.json").read_text())
    async with Client(permission_server(sandbox), cache=None) as client:
        [tool] = (await client.list_tools()).tools
        assert tool.name == "approve"
        read = await client.call_tool(
            "approve", {"tool_name": "Read", "input": {"file_path": "/x"}, "tool_use_id": "t"}
        )
        assert json.loads(text_of(read)) == {"behavior": "allow", "updatedInput": {"file_path": "/x"}}
        write = await client.call_tool("approve", documented)
        body = json.loads(text_of(write))
        assert body["behavior"] == "deny" and "mcphost approve" in body["message"]  # headless: nobody to ask
        rm = await client.call_tool("approve", {"tool_name": "Bash", "input": {"command": "rm -rf /"}})
        assert json.loads(text_of(rm))["behavior"] == "deny"
        # A question to the user, or a plan to approve: allowed, nobody would have seen them.
        for tool in ("AskUserQuestion", "ExitPlanMode"):
            asked = await client.call_tool("approve", {"tool_name": tool, "input": {"plan": "rm -rf ~"}})
            body = json.loads(text_of(asked))
            assert body["behavior"] == "deny" and "nobody can answer it in a headless run" in body["message"], body
        search = await client.call_tool("approve", {"tool_name": "mcp__mcphost__retrieve_tools", "input": {}})
        assert json.loads(text_of(search))["behavior"] == "allow"  # mcphost's own search, a read
        # Nested past what a parser reads: answered with an error (the SDK's transport dropped it unanswered, and
        # Claude Code waited out its timeout).
        deep: Any = "x"
        for _ in range(220):
            deep = {"a": deep}
        with anyio.fail_after(20), pytest.raises(Exception, match="nests deeper"):
            await client.call_tool("approve", {"tool_name": "Write", "input": deep})
    events = {r["metadata"]["hook"]["event"] for r in hook_records(sandbox)}
    assert events == {"permission-prompt-tool"}


async def test_the_permission_prompt_tool_asks_the_person_through_the_daemon(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "ask"\n')
    async with daemon(sandbox) as d, editor(d.editor_socket, allow()) as ed:
        async with Client(permission_server(sandbox), cache=None) as client:
            result = await client.call_tool("approve", {"tool_name": "Edit", "input": {"file_path": "/a"}})
        assert json.loads(text_of(result)) == {"behavior": "allow", "updatedInput": {"file_path": "/a"}}
        assert [p["tool"] for p in ed.prompts] == ["Edit"]


async def test_with_a_daemon_a_payload_its_channel_cannot_carry_is_blocked_on_record(sandbox: Sandbox) -> None:
    # The daemon closed the channel at its message bound, and the hook decided from the config file instead: the
    # person's editor never saw the call, and the agent was told nobody was attached to ask.
    sandbox.write_config('[permissions]\nwrite = "allow"\n')
    base = json.loads(payload("claude-code/pretooluse-bash.json", command="rm -rf ~"))
    body = json.dumps({**base, "tool_input": {**base["tool_input"], "description": "p" * (17 * 2**20)}}).encode()
    assert len(body) < 32 * 2**20  # read whole by the hook
    async with daemon(sandbox):
        result = await anyio.to_thread.run_sync(run_hook, sandbox, body)
    assert result.returncode == 2 and b"MiB its channel takes" in result.stderr, result.stderr[-500:]
    assert b"deciding from the config file" not in result.stderr
    [record] = hook_records(sandbox)
    assert (record["status"], record["error"]["code"]) == ("rejected", "INVALID_ARGS")


@pytest.mark.parametrize("agent", ["claude-code", "vscode", "codex"])
def test_copilots_own_format_from_another_agent_is_blocked_in_that_agents_words(sandbox: Sandbox, agent: str) -> None:
    # Read as Copilot CLI's and answered in its top-level keys, which the named agent does not read: a deny was
    # taken for no decision, and the call went on.
    sandbox.write_config('[permissions]\ndestructive = "deny"\n')
    body = json.dumps({"hookEventName": "PreToolUse", "toolName": "Bash", "toolArgs": {"command": "rm -rf ~"}})
    result = run_hook(sandbox, body.encode(), "--agent", agent)
    assert result.returncode == 2 and b"names no tool" in result.stderr, result
    [record] = hook_records(sandbox)
    assert record["status"] == "rejected"
