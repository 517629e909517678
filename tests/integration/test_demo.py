"""`mcphost demo`: the guided run, scripted (no terminal) and answered by a person on a terminal (a pty)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from mcphost.approval.terminal_approver import TOO_QUICK_S
from tests.helpers import Sandbox, mcphost


def test_the_scripted_demo_walks_through_the_four_calls(sandbox: Sandbox) -> None:
    # The person's own config is not used, broken or not: the demo runs on the embedded default.
    sandbox.write_config("[permissions]\nwrite = 'maybe'\n")
    started = time.perf_counter()
    done = mcphost(sandbox, "demo", timeout=30)
    elapsed = time.perf_counter() - started
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert elapsed < 10, elapsed

    temp = re.search(r"temporary data directory, (\S+):", out)
    assert temp is not None, out
    assert "your own activity log, todo list and remembered" in out
    assert not Path(temp.group(1)).exists(), "the demo's data directory is removed at the end"
    assert not sandbox.data.exists() or not any(sandbox.data.iterdir()), "the person's data dir was touched"

    steps = re.findall(r"^Step (\d): (.*)$", out, re.MULTILINE)
    assert [n for n, _ in steps] == ["1", "2", "3", "4", "5"]
    assert "call_tool_read" in steps[0][1] and "call_tool_write" in steps[1][1]
    assert "call_tool_read" in steps[2][1] and "call_tool_destructive" in steps[3][1]

    assert "the todo server answered: 0 tasks" in out
    # the write prompt, answered by the script as typed
    assert "📝 WRITE  todo:add_task   via call_tool_write" in out
    assert "Allow? [o]nce, [s]ession, [a]lways or [d]eny: once   (scripted answer)" in out
    assert "task added: 'Try mcphost'" in out
    # the delete disguised as a read
    assert "-> rejected: Tool 'todo:delete_task' is marked destructive by server, use call_tool_destructive" in out
    # the real delete, with its banner and a typed confirmation
    assert "⚠  DESTRUCTIVE  this call may delete or overwrite data" in out
    assert "Type delete_task or yes to allow it once" in out and "yes   (scripted answer)" in out
    assert re.search(r"-> task [0-9a-f-]{36} deleted", out)

    activity = out[out.index("Step 5") :]
    rows = [line.strip() for line in activity.splitlines() if re.match(r"^ {4}\d{4}-\d\d-\d\d ", line)]
    assert len(rows) == 4, activity
    assert "📖  todo:list_tasks  success" in rows[0] and "allow by policy" in rows[0]
    assert "📝  todo:add_task  success" in rows[1] and "allow by person" in rows[1]
    assert "📖  todo:delete_task  rejected SERVER_MISMATCH" in rows[2]
    assert "💥  todo:delete_task  success" in rows[3] and "allow by person" in rows[3]


def test_on_a_terminal_the_person_answers_the_demo_prompts(sandbox: Sandbox) -> None:
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, **sandbox.env(), "TERM": "dumb", "PYTHONIOENCODING": "utf-8"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mcphost", "demo"], stdin=follower, stdout=follower, stderr=subprocess.PIPE, env=env
    )
    os.close(follower)
    seen = b""

    def expect(text: str, timeout: float = 15) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while text.encode() not in seen:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([leader], [], [], max(0.0, left))
            if not ready:
                raise AssertionError(f"demo never printed {text!r}:\n{seen.decode('utf-8', 'replace')}")
            try:
                seen += os.read(leader, 65536)
            except OSError:  # the demo exited and closed the terminal
                raise AssertionError(f"demo ended before {text!r}:\n{seen.decode('utf-8', 'replace')}") from None

    try:
        expect("You answer the permission prompts here")
        expect("or [d]eny: ")
        time.sleep(TOO_QUICK_S)  # the person reads the prompt: an allow typed sooner is taken for a slip
        os.write(leader, b"s\n")
        expect("allowed todo:add_task for this agent session")
        expect("Type delete_task or yes")
        time.sleep(TOO_QUICK_S)
        os.write(leader, b"y\n")  # one key is not enough for a destructive call
        expect("needs a typed confirmation, not a single key")
        os.write(leader, b"delete_task\n")
        expect("allowed todo:delete_task once")
        expect("answer prompts with `mcphost approve`")
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
        assert process.stderr is not None
        process.stderr.close()
    text = seen.decode("utf-8", "replace")
    assert "(scripted answer)" not in text
    assert "allow by person" in text
