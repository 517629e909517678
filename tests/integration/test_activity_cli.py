"""The activity log from an agent's calls to a person's terminal: what is stored, `log tail`, `activity`."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

from tests.helpers import TESTS, Sandbox, agent, error_of, mcphost

ALLOW_ALL = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'


def intent(op: str, **extra: str) -> dict[str, Any]:
    return {"operation_type": op, **extra}


def fake_github_token() -> str:
    return "ghp_" + "Ab3" * 12


async def make_calls(sandbox: Sandbox, secret: str) -> None:
    sandbox.write_config(ALLOW_ALL + '[log]\nredact_keys = ["pin_number"]\n' + sandbox.probe_server())
    async with agent(sandbox) as client:
        await client.call_tool(
            "call_tool_read",
            {
                "name": "probe:read_notes",
                "args": {"text": f"use {secret} please", "password": "hunter2", "pin_number": "1234"},
                "intent": intent("read", reason="look up notes", data_sensitivity="private"),
            },
        )
        await client.call_tool(
            "call_tool_write",
            {"name": "probe:plain_echo", "args": {"text": "w"}, "intent": intent("write", reason="note it")},
        )
        rejected = await client.call_tool("call_tool_read", {"name": "probe:wipe_notes", "intent": intent("read")})
        assert error_of(rejected)["code"] == "SERVER_MISMATCH"
        await client.call_tool(
            "call_tool_destructive",
            {"name": "probe:wipe_notes", "args": {"text": "all"}, "intent": intent("destructive", reason="clean")},
        )


async def test_planted_secrets_never_reach_the_disk_and_the_rest_is_on_record(sandbox: Sandbox) -> None:
    secret = fake_github_token()
    await make_calls(sandbox, secret)
    raw = "".join(p.read_text(encoding="utf-8") for p in sandbox.data.glob("activity.jsonl*"))
    for planted in (secret, "hunter2", "1234"):
        assert planted not in raw
    first = sandbox.tool_calls()[0]
    assert first["arguments"]["text"] == "use [REDACTED:github] please"
    assert first["arguments"]["password"] == "[REDACTED]" and first["arguments"]["pin_number"] == "[REDACTED]"
    assert "read_notes: use [REDACTED:github] please" in first["response_preview"], "the echo is redacted too"
    assert first["request_bytes"] > 0 and first["response_bytes"] > 0
    assert first["metadata"]["intent"] == {
        "operation_type": "read",
        "data_sensitivity": "private",
        "reason": "look up notes",
    }
    assert first["client"] and first["session_id"]


async def test_log_tail_and_activity_commands_read_what_the_agent_did(sandbox: Sandbox) -> None:
    await make_calls(sandbox, fake_github_token())

    tail = mcphost(sandbox, "log", "tail", "-n", "3", "-o", "json")
    assert tail.returncode == 0, tail.stderr
    lines = [json.loads(line) for line in tail.stdout.splitlines()]
    assert [r["tool"] for r in lines] == ["plain_echo", "wipe_notes", "wipe_notes"], "the last 3, oldest first"

    text = mcphost(sandbox, "log", "tail", "--intent-type", "destructive")
    assert text.returncode == 0
    assert text.stdout.count("\n") == 1 and "💥" in text.stdout and "probe:wipe_notes" in text.stdout

    rejected = mcphost(sandbox, "log", "tail", "--status", "rejected", "-o", "json")
    assert [json.loads(line)["error"]["code"] for line in rejected.stdout.splitlines()] == ["SERVER_MISMATCH"]

    listed = mcphost(sandbox, "activity", "list", "--server", "probe", "--type", "tool_call")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split()[:3] == ["TIME", "INTENT", "TOOL"]
    assert len(rows) == 4 and "destructive" in rows[0] and "read" in rows[-1], "newest first"

    as_json = json.loads(mcphost(sandbox, "activity", "list", "--intent-type", "write", "-o", "json").stdout)
    assert [r["tool"] for r in as_json] == ["plain_echo"]
    as_yaml = mcphost(sandbox, "activity", "list", "--tool", "plain_echo", "-o", "yaml").stdout
    assert "tool: plain_echo" in as_yaml

    shown = mcphost(sandbox, "activity", "show", as_json[0]["id"])
    assert shown.returncode == 0
    assert "operation_type    write" in shown.stdout and "reason            note it" in shown.stdout
    assert "data_sensitivity  (not declared)" in shown.stdout
    missing = mcphost(sandbox, "activity", "show", "01ZZZZZZZZZZZZZZZZZZZZZZZZ")
    assert missing.returncode == 1 and "no record with id" in missing.stderr

    summary = json.loads(mcphost(sandbox, "activity", "summary", "-o", "json").stdout)
    assert summary["by_intent"] == {"read": 2, "write": 1, "destructive": 1}
    assert summary["by_status"] == {"success": 3, "rejected": 1}


def test_bad_filters_exit_2_and_list_the_valid_values(sandbox: Sandbox) -> None:
    cases = [
        (("log", "tail", "--intent-type", "delete"), "--intent-type: 'delete' is not valid; use one of: read, write"),
        (("activity", "list", "--status", "ok"), "use one of: success, error, rejected, denied, expired"),
        (("activity", "list", "--type", "nope"), "use one of: tool_call, tool_call_started, config_reload"),
        (("activity", "summary", "--since", "last tuesday"), "--since: 'last tuesday' is neither a time"),
        (("activity", "list", "--limit", "-3"), "--limit: -3 is negative"),
    ]
    for args, message in cases:
        result = mcphost(sandbox, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, result.stderr


def test_hand_made_lines_that_no_writer_makes_are_listed_not_crashed_on(sandbox: Sandbox) -> None:
    # mcphost never writes these (its scrub replaces lone surrogates; ids are strings; warnings a list), but a log may
    # be edited by hand or come from elsewhere: each crashed the readers (found by a probe of the readers).
    head = '"timestamp":"2026-11-28T17:18:02.000Z","server":"probe","status":"success"'
    lines = [
        f'{{"id":"A1","type":"tool_call",{head},"tool":"x\\udfff"}}',  # JSON's escape of a lone surrogate
        f'{{"id":[],"type":"tool_call_started",{head},"tool":"t"}}',
        f'{{"id":"C1","type":"tool_call",{head},"tool":"t","warnings":5}}',
    ]
    sandbox.data.mkdir(parents=True, exist_ok=True)
    (sandbox.data / "activity.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    listing = mcphost(sandbox, "activity", "list")
    assert listing.returncode == 0, listing.stderr
    assert "probe:x\\udfff" in listing.stdout and "outcome unknown" in listing.stdout and "C1" in listing.stdout
    as_json = mcphost(sandbox, "log", "tail", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert [json.loads(line)["tool"] for line in as_json.stdout.splitlines()] == ["x\udfff", "t", "t"]
    shown = mcphost(sandbox, "activity", "show", "C1")
    assert shown.returncode == 0 and "warning" in shown.stdout and "5" in shown.stdout, shown.stderr
    assert mcphost(sandbox, "activity", "show", "A1").returncode == 0


def test_every_listing_reads_a_damaged_line_alike_and_writes_only_utf8(sandbox: Sandbox) -> None:
    # `--limit 0` takes the fast path (msgspec, which does not look inside the strings it skips, lines passed on as
    # they are); `--limit 20` the full one. A byte that is not UTF-8 in an agent's arguments was listed by the first
    # (and passed on, making `-o json` invalid) and left out by the second; a lone surrogate crashed `-o json`.
    head = '"timestamp":"2026-11-28T17:18:02.000Z","server":"probe","status":"success","type":"tool_call"'
    lines = [
        f'{{"id":"01KB0000000000000000000001",{head},"tool":"a","arguments":{{"p":"caf'.encode() + b"\xe9" + b'"}}',
        f'{{"id":"01KB0000000000000000000002",{head},"tool":"b","arguments":{{"p":"\\udfff"}}}}'.encode(),
        f'{{"id":"01KB0000000000000000000003",{head},"tool":"c\u00e9"}}'.encode(),
    ]
    sandbox.data.mkdir(parents=True, exist_ok=True)
    (sandbox.data / "activity.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    listings = []
    for limit in ("0", "20"):
        result = subprocess.run(
            [sys.executable, "-m", "mcphost", "activity", "list", "--limit", limit, "-o", "json"],
            env=sandbox.env(),
            capture_output=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        listings.append(json.loads(result.stdout.decode("utf-8")))  # strict: raises on bytes that are not UTF-8
    assert listings[0] == listings[1]
    assert [(r["tool"], r.get("arguments")) for r in listings[0]] == [
        ("c\u00e9", None),
        ("b", {"p": "\udfff"}),
        ("a", {"p": "caf\ufffd"}),
    ]
    text = mcphost(sandbox, "activity", "list", "--limit", "0")
    assert text.returncode == 0 and text.stdout.count("probe:") == 3, text.stderr


def test_lines_that_hold_no_record_are_left_out_with_a_word_from_every_reader(sandbox: Sandbox) -> None:
    # A damaged record of a destructive call, and lines no parser reads as a record: left out of every listing, as
    # before, but no longer in silence (found by a probe of the readers).
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    head = f'"timestamp":"{now}","server":"probe","status":"success","type":"tool_call"'
    lines = [
        f'{{"id":"01KB0000000000000000000001",{head},"tool":"a"}}',
        '{"id":"01KB00000000000000000000D1","type":"tool_call","tool":"wipe","status":"suc',
        "[1,2,3]",
        "[" * 5000,
        f'{{"id":"01KB0000000000000000000002",{head},"tool":"b"}}',
    ]
    sandbox.data.mkdir(parents=True, exist_ok=True)
    log = sandbox.data / "activity.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for command, listed in (
        (("log", "tail"), "probe:a"),
        (("activity", "list"), "probe:b"),
        (("activity", "list", "--limit", "0", "-o", "json"), '"tool":"b"'),
        (("activity", "summary"), "2 records since 24h"),
    ):
        result = mcphost(sandbox, *command)
        assert result.returncode == 0, (command, result.stderr)
        assert listed in result.stdout.replace(", ", ",").replace(": ", ":"), (command, result.stdout)
        assert "mcphost: warning: 3 lines of the activity log held no record and were left out" in result.stderr, (
            command,
            result.stderr,
        )
        assert f"`grep -n -v '^{{' {log}*` shows them" in result.stderr
    shown = mcphost(sandbox, "activity", "show", "01KB00000000000000000000D1")
    assert shown.returncode == 1
    assert "1 line of the activity log held no record and was left out" in shown.stderr, shown.stderr
    clean = mcphost(sandbox, "activity", "show", "01KB0000000000000000000002")
    assert clean.returncode == 0 and "held no record" not in clean.stderr, clean.stderr


def test_a_record_nested_past_yaml_and_named_in_lowercase_is_shown(sandbox: Sandbox) -> None:
    deep: Any = "bottom"
    for _ in range(500):
        deep = {"a": deep}
    record = {"id": "01KB0000000000000000000ABC", "type": "tool_call", "tool": "t", "arguments": deep}
    sandbox.data.mkdir(parents=True, exist_ok=True)
    (sandbox.data / "activity.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    for output in ("yaml", "json", "text"):
        shown = mcphost(sandbox, "activity", "show", "01kb0000000000000000000abc", "-o", output)
        assert shown.returncode == 0, (output, shown.stderr)
        assert "Traceback" not in shown.stderr and "01KB0000000000000000000ABC" in shown.stdout
    # Past PyYAML's depth the record is written as JSON, which is YAML too (PyYAML itself cannot read it back).
    as_yaml = mcphost(sandbox, "activity", "show", "01KB0000000000000000000ABC", "-o", "yaml").stdout
    assert json.loads(as_yaml) == record


def test_a_log_that_is_not_a_readable_file_is_named_with_what_is_wrong(sandbox: Sandbox) -> None:
    sandbox.data.mkdir(parents=True, exist_ok=True)
    live = sandbox.data / "activity.jsonl"
    commands = [("log", "tail"), ("activity", "list"), ("activity", "list", "--limit", "0"), ("activity", "summary")]
    commands.append(("activity", "show", "01KB0000000000000000000ABC"))
    live.mkdir()
    for command in commands:
        result = mcphost(sandbox, *command, timeout=20)
        assert result.returncode == 1, (command, result.stderr)
        assert f"cannot read the activity log {live}: it is a directory" in result.stderr, (command, result.stderr)
        assert "Traceback" not in result.stderr
    live.rmdir()
    os.mkfifo(live)  # opened without O_NONBLOCK, every reader waited for a writer that never comes
    for command in commands:
        result = mcphost(sandbox, *command, timeout=20)
        assert result.returncode == 1 and "it is not a regular file" in result.stderr, (command, result.stderr)
    live.unlink()
    live.write_text("{}\n", encoding="utf-8")
    if os.geteuid() != 0:  # root reads a file whatever its mode
        live.chmod(0)
        result = mcphost(sandbox, "log", "tail", timeout=20)
        assert result.returncode == 1 and f"cannot read the activity log {live}: Permission denied" in result.stderr


def test_every_reader_warns_that_a_log_where_others_can_write_may_hold_their_records(sandbox: Sandbox) -> None:
    # mcphost writes no record in such a place (test_activity_writer.py), so whatever is there someone else may have
    # put: a call shown as denied, or one left out. Still listed (the person may want to see it), never silently.
    sandbox.data.mkdir(parents=True, exist_ok=True)
    live = sandbox.data / "activity.jsonl"
    forged = '{"id":"F1","type":"tool_call","timestamp":"2026-11-28T17:18:02.000Z","server":"probe","tool":"t",'
    live.write_text(forged + '"status":"denied"}\n', encoding="utf-8")
    commands = [("log", "tail"), ("activity", "list"), ("activity", "summary"), ("activity", "show", "F1")]
    for command in commands:
        result = mcphost(sandbox, *command, timeout=20)
        assert result.returncode == 0 and "warning" not in result.stderr, (command, result.stderr)
    sandbox.data.chmod(0o777)
    for command in commands:
        result = mcphost(sandbox, *command, timeout=20)
        assert result.returncode == 0, (command, result.stderr)
        assert f"warning: the activity log {live} may hold records another user wrote" in result.stderr, command
        assert (
            f"it has mode 0777, so other users can write it (mcphost writes none there; `chmod o-w {sandbox.data}`"
            in (result.stderr)
        )
    named = mcphost(sandbox, "log", "tail", "--file", str(live), timeout=20)
    assert named.returncode == 0 and "warning" not in named.stderr, "a file named by hand is the person's choice"
    sandbox.data.chmod(0o700)
    live.chmod(0o666)
    result = mcphost(sandbox, "log", "tail", timeout=20)
    assert "warning" in result.stderr and "the file: it has mode 0666" in result.stderr, result.stderr


def test_follow_reads_a_log_emptied_by_hand_from_its_start_and_says_so(sandbox: Sandbox) -> None:
    env = sandbox.env()
    writer = [sys.executable, str(TESTS / "servers" / "log_writer.py"), str(sandbox.log)]
    subprocess.run([*writer, "seed", "3"], env=env, check=True)
    follower = subprocess.Popen(
        [sys.executable, "-m", "mcphost", "log", "tail", "-f", "-n", "1", "-o", "json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert [r["server"] for r in read_json_lines(follower, 1, settle=0)] == ["seed"]
        # Between two of its polls, the file is emptied (`: > activity.jsonl`) and written again, longer than where
        # the follower stopped: its size alone does not tell.
        follower.send_signal(signal.SIGSTOP)
        try:
            sandbox.log.write_bytes(b"")
            subprocess.run([*writer, "after", "5"], env=env, check=True)
        finally:
            follower.send_signal(signal.SIGCONT)
        seen = read_json_lines(follower, 5)
        assert [(r["server"], r["details"]["seq"]) for r in seen] == [("after", i) for i in range(5)]
    finally:
        follower.terminate()
        _, err = follower.communicate(timeout=10)
    assert f"{sandbox.log} was cut short (emptied by hand?); following it from its start" in err.decode()


def test_log_tail_on_a_new_machine_says_there_is_no_activity_yet(sandbox: Sandbox) -> None:
    result = mcphost(sandbox, "log", "tail")
    assert result.returncode == 0 and result.stdout == ""
    assert "no activity yet" in result.stderr


def test_follow_prints_each_record_once_across_rotation(sandbox: Sandbox) -> None:
    env = {**os.environ, **sandbox.env()}
    writer = [sys.executable, str(TESTS / "servers" / "log_writer.py"), str(sandbox.log)]
    subprocess.run([*writer, "seed", "1"], env=env, check=True)

    def follow(*flags: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "mcphost", "log", "tail", "-f", "-n", "1", "-o", "json", *flags],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    plain, filtered = follow(), follow("--tool", "t0")
    try:
        for process in (plain, filtered):  # the seed record shows each one is attached
            assert [r["server"] for r in read_json_lines(process, 1, settle=0)] == ["seed"]
        writers = [subprocess.Popen([*writer, f"w{n}", "300", "8000", "1000"], env=env) for n in range(2)]
        for w in writers:
            assert w.wait(timeout=60) == 0
        assert len(list(sandbox.data.glob("activity.jsonl.*"))) > 5, "the writers rotated the log"
        seen = read_json_lines(plain, 600)
        assert sorted((r["server"], r["details"]["seq"]) for r in seen) == sorted(
            (f"w{n}", i) for n in range(2) for i in range(300)
        )
        picked = read_json_lines(filtered, 2)
        assert sorted((r["server"], r["tool"]) for r in picked) == [("w0", "t0"), ("w1", "t0")]
    finally:
        for p in (plain, filtered):
            p.terminate()
            p.wait(timeout=10)


def read_json_lines(
    process: subprocess.Popen[bytes], count: int, limit: float = 30, settle: float = 0.5
) -> list[dict[str, Any]]:
    """`count` JSON lines from a process's stdout, and then `settle` seconds more to catch any duplicate."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    buffer = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        lines = buffer.count(b"\n")
        wait = settle if lines >= count else deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, wait))
        if not ready:
            if lines >= count:
                break
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
    return [json.loads(line) for line in buffer.splitlines()]


MARKS = "\x9b2K\u202e\u2028\u200b\u061c\ufeff\x85\x7f"  # a C1 CSI, a bidi override, a line separator, ...


def test_json_outputs_write_the_marks_a_terminal_acts_on_as_escapes(sandbox: Sandbox) -> None:
    # orjson writes them into the log as they are, and `log tail -o json` and `activity list -o json` (which streams
    # the log's lines) passed them to the terminal raw, where `activity show -o json` escaped them.
    record = {"id": "01KB0000000000000000000ABD", "type": "tool_call", "tool": "t" + MARKS, "status": "success"}
    deep: Any = MARKS
    for _ in range(500):
        deep = {"a": deep}
    nested = {**record, "id": "01KB0000000000000000000ABE", "arguments": deep}
    sandbox.data.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r, ensure_ascii=False) for r in (record, nested)]
    (sandbox.data / "activity.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    outputs = [
        ("log", "tail", "-o", "json"),
        ("activity", "list", "-o", "json"),
        ("activity", "list", "--limit", "0", "-o", "json"),
        ("activity", "show", "01KB0000000000000000000ABD", "-o", "json"),
        ("activity", "show", "01KB0000000000000000000ABE", "-o", "yaml"),  # past PyYAML's depth: JSON
    ]
    for command in outputs:
        shown = mcphost(sandbox, *command)
        assert shown.returncode == 0, (command, shown.stderr)
        assert not any(mark in shown.stdout for mark in MARKS.replace("2K", "")), (command, shown.stdout[:300])
        assert "\\u009b2K" in shown.stdout, command
    # Still the same JSON: the records read back as they were written.
    listed = json.loads(mcphost(sandbox, "activity", "list", "--limit", "0", "-o", "json").stdout)
    assert [r["tool"] for r in listed] == ["t" + MARKS] * 2
