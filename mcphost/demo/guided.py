"""`mcphost demo`: a guided run of mcphost on the bundled todo server, in a throwaway data directory.

Everything runs in this process: a Host on the embedded default config, an approver in this terminal attached
straight to the host's permission broker, and a scripted agent (the official MCP SDK client, connected in memory
to the agent-facing server) that makes four calls: a read the policy allows, a write a person must allow, a
delete disguised as a read that mcphost refuses, and the delete done properly, which a person must confirm.
On a terminal the person answers the prompts; otherwise scripted answers are typed for them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

# Variables that would make the demo's todo server or its token reach outside the throwaway directory.
_ISOLATED = ("MCPHOST_DATA_DIR", "TODO_DB", "TODO_TOKEN", "TODO_JWT_SECRET")
TASK_TITLE = "Try mcphost"


@contextlib.contextmanager
def _isolated_data_dir(path: Path) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in _ISOLATED}
    for key in _ISOLATED:
        os.environ.pop(key, None)
    os.environ["MCPHOST_DATA_DIR"] = str(path)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _payload(result: Any) -> Any:
    """The upstream's answer: its structured content, else its first text block as JSON, else that text."""
    if isinstance(result.structured_content, dict) and "error" not in result.structured_content:
        return result.structured_content
    for block in result.content:
        text = getattr(block, "text", None)
        if text is not None:
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return text
    return None


def _message(result: Any) -> str:
    for block in result.content:
        text = getattr(block, "text", None)
        if text is not None:
            return str(text)
    return ""


class _Narrator:
    def __init__(self, out: TextIO, color: bool) -> None:
        self.out = out
        self.color = color
        self.steps = 0

    def write(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def step(self, title: str, *explain: str) -> None:
        self.steps += 1
        heading = f"Step {self.steps}: {title}"
        self.write()
        self.write(f"\x1b[1m{heading}\x1b[0m" if self.color else heading)
        for line in explain:
            self.write(f"  {line}")

    def result(self, text: str) -> None:
        self.write(f"  -> {text}")


def scripted_answer(request: Any) -> str:
    """What the demo types for the person when nobody is at a terminal: allow once, confirming a destructive call
    the way a person must (by typing `yes`)."""
    from mcphost.approval.terminal import needs_typed_confirmation

    return "yes" if needs_typed_confirmation(request) else "once"


async def run_demo(out: TextIO, *, interactive: bool, keep: bool = False) -> int:
    from mcphost.console import detect_style

    style = detect_style(out)
    say = _Narrator(out, style.color)
    root = Path(tempfile.mkdtemp(prefix="mcphost-demo-"))
    say.write("mcphost demo: an agent uses the bundled todo server through mcphost, step by step.")
    say.write(f"It runs in a temporary data directory, {root}: your own activity log, todo list and remembered")
    say.write(
        "approvals are not touched"
        + (" (the directory is kept: --keep)." if keep else ", and it is removed at the end.")
    )
    if interactive:
        say.write("You answer the permission prompts here, as you would in `mcphost approve`.")
    else:
        say.write("stdin is not a terminal, so the prompts are answered with scripted decisions (shown as typed).")
    try:
        with _isolated_data_dir(root):
            await _guided(say, style, root, interactive)
    finally:
        if not keep:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
    return 0


async def _guided(say: _Narrator, style: Any, root: Path, interactive: bool) -> None:
    import asyncio

    import mcp_types as types
    from mcp import Client

    from mcphost.activity import display
    from mcphost.approval.terminal_approver import StdinLines, TerminalApprover
    from mcphost.config import LoadedConfig
    from mcphost.demo.default import default_config
    from mcphost.host import Host
    from mcphost.serve.mcp_server import build_server

    loaded = LoadedConfig(default_config(), root / "config.toml", exists=False)
    policy = loaded.config.permissions
    lines = StdinLines() if interactive else None
    approver = TerminalApprover(
        say.out,
        style,
        lines=lines,
        script=None if interactive else scripted_answer,
        id="demo",
        label="mcphost demo (this terminal)" if interactive else "mcphost demo (scripted answers)",
    )
    async with Host(loaded) as host:
        host.broker.attach(approver)
        if lines is not None:
            lines.start(approver.wake)
        answering = asyncio.ensure_future(approver.run())
        try:
            agent = Client(
                build_server(host.gateway),
                mode="legacy",
                cache=None,
                client_info=types.Implementation(name="demo-agent", version="1"),
            )
            async with agent:
                await _calls(say, agent, policy)
        finally:
            approver.stop()
            host.broker.detach(approver.id)
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answering

    records = [json.loads(line) for line in host.activity.path.read_text(encoding="utf-8").splitlines() if line]
    calls = [r for r in records if r.get("type") == "tool_call"]
    say.step(
        "what mcphost recorded",
        f"One activity record per call, in {host.activity.path} (normally <data dir>/activity.jsonl;",
        "`mcphost log tail -f` follows it, `mcphost activity show ID` shows one in full):",
    )
    for record in calls:
        say.write("    " + display.line(record, style.ascii_only))
    say.write()
    say.write("That is mcphost. For your own agents: run `mcphost serve` (or open VS Code with the mcphost extension),")
    say.write("point the agent at the endpoint `mcphost status` shows, and answer prompts with `mcphost approve`.")


async def _calls(say: _Narrator, agent: Any, policy: Any) -> None:
    def intent(kind: str, reason: str) -> dict[str, str]:
        return {"operation_type": kind, "data_sensitivity": "private", "reason": reason}

    say.step(
        "the agent lists the tasks with call_tool_read",
        f'Reads are let through by the policy (permissions.read = "{policy.read.value}"): nobody is asked.',
    )
    listed = await agent.call_tool(
        "call_tool_read",
        {"name": "todo:list_tasks", "args": {}, "intent": intent("read", "See what is on the user's todo list")},
    )
    if listed.is_error:
        say.result(f"error: {_message(listed)}")
    else:
        page = _payload(listed)
        total = page.get("total", 0) if isinstance(page, dict) else "?"
        say.result(f"the todo server answered: {total} tasks (a fresh list)")

    say.step(
        "the agent adds a task with call_tool_write",
        f'Writes need a person\'s OK (permissions.write = "{policy.write.value}"), so mcphost shows this prompt:',
    )
    added = await agent.call_tool(
        "call_tool_write",
        {
            "name": "todo:add_task",
            "args": {"title": TASK_TITLE, "description": "Added by the mcphost demo"},
            "intent": intent("write", "The user asked me to remember to try mcphost"),
        },
    )
    task_id: str | None = None
    if added.is_error:
        say.result(f"the agent was told: {_message(added)}")
    else:
        task = _payload(added)
        task_id = task.get("id") if isinstance(task, dict) else None
        say.result(f"task added: {TASK_TITLE!r} (id {task_id})")

    say.step(
        "the agent tries to delete it through call_tool_read",
        "It declares a read, but the todo server marks delete_task destructive (destructiveHint = true),",
        "so mcphost refuses the call before anyone is asked and tells the agent which variant to use:",
    )
    sneaky = await agent.call_tool(
        "call_tool_read",
        {
            "name": "todo:delete_task",
            "args": {"task_id": task_id or "00000000-0000-0000-0000-000000000000"},
            "intent": intent("read", "Just tidying up"),
        },
    )
    say.result(f"rejected: {_message(sneaky)}" if sneaky.is_error else "it went through (unexpected!)")

    say.step(
        "the agent deletes it properly with call_tool_destructive",
        f'Destructive calls need a deliberate confirmation (permissions.destructive = "{policy.destructive.value}"):',
        "the tool's name or `yes` must be typed, a single key is not enough.",
    )
    if task_id is None:
        say.result("skipped: there is no task to delete, since the add did not happen")
        return
    deleted = await agent.call_tool(
        "call_tool_destructive",
        {
            "name": "todo:delete_task",
            "args": {"task_id": task_id},
            "intent": intent("destructive", "The user tried mcphost; the reminder is done"),
        },
    )
    say.result(f"the agent was told: {_message(deleted)}" if deleted.is_error else f"task {task_id} deleted")
