"""`mcphost approve` as a person uses it: a real daemon, a real agent, and the command driven through a stdin pipe.

The agent's call blocks in the daemon until the answer typed into approve's stdin comes back over the editor
socket; each test reads approve's stdout to know when a prompt is on screen before it types.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import pytest_asyncio

from mcphost import __version__
from tests.editor_client import editor
from tests.helpers import Daemon, Hosted, Sandbox, daemon, error_of, http_agent, mcphost, text_of

WRITE = {"name": "probe:plain_echo", "args": {"text": "hello"}, "intent": {"operation_type": "write"}}
DESTRUCTIVE = {
    "name": "probe:wipe_notes",
    "args": {"text": "all of them"},
    "intent": {"operation_type": "destructive", "reason": "The user wants a clean notebook"},
}


class Approve:
    """`mcphost approve` running as a subprocess: what it printed so far, and a pipe to type answers into."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.output = ""
        self.stderr = ""
        self._changed = asyncio.Event()
        self._tasks = [
            asyncio.create_task(self._read(process.stdout, "output")),
            asyncio.create_task(self._read(process.stderr, "stderr")),
        ]

    async def _read(self, stream: asyncio.StreamReader | None, name: str) -> None:
        assert stream is not None
        while chunk := await stream.read(4096):
            setattr(self, name, getattr(self, name) + chunk.decode("utf-8", "replace"))
            self._changed.set()
        self._changed.set()

    async def expect(self, text: str, count: int = 1, timeout: float = 10) -> None:
        """Wait until `text` has appeared `count` times in the output."""
        try:
            async with asyncio.timeout(timeout):
                while self.output.count(text) < count:
                    if self.process.returncode is not None and all(t.done() for t in self._tasks):
                        raise AssertionError(f"approve exited ({self.process.returncode}) before {text!r}")
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"approve never printed {text!r} x{count}:\n{self.output}\n--- stderr\n{self.stderr}"
            ) from None

    async def type(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode("utf-8") + b"\n")
        await self.process.stdin.drain()

    async def finish(self, timeout: float = 10) -> int:
        """End its input (Ctrl-D) and wait for it to detach."""
        assert self.process.stdin is not None
        if not self.process.stdin.is_closing():
            self.process.stdin.close()
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
            await asyncio.gather(*self._tasks)
        return code


@contextlib.asynccontextmanager
async def approving(box: Sandbox, *args: str) -> AsyncIterator[Approve]:
    env = {**os.environ, **box.env(), "PYTHONIOENCODING": "utf-8"}
    env.pop("NO_COLOR", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mcphost",
        "approve",
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    ap = Approve(process)
    try:
        await ap.expect("Waiting for permission prompts")
        yield ap
    finally:
        if process.returncode is None:
            with contextlib.suppress(Exception):
                await ap.finish(5)
        if process.returncode is None:
            process.kill()
            await process.wait()


@contextlib.asynccontextmanager
async def probe_daemon(box: Sandbox) -> AsyncIterator[Daemon]:
    box.write_config(box.probe_server())
    async with daemon(box) as d:
        yield d


# The tests that share the module's daemon (each with an `approve`, editors and agents of its own) run on the
# module's loop; the others start a daemon of their own (one is killed, one sees its config broken, two leave
# "always" grants on disk).
ON_SHARED_HOST = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared_host(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Sandbox, Daemon]]:
    box = Sandbox(tmp_path_factory.mktemp("approve"))
    async with probe_daemon(box) as d:
        yield box, d


@pytest.fixture
def hosted(shared_host: tuple[Sandbox, Daemon]) -> Hosted:
    return Hosted.now(*shared_host)


def call_in_background(client: Any, variant: str, arguments: dict[str, Any]) -> asyncio.Task[Any]:
    return asyncio.create_task(client.call_tool(variant, arguments))


async def result_of(task: asyncio.Task[Any]) -> Any:
    async with asyncio.timeout(10):
        return await task


@ON_SHARED_HOST
async def test_a_write_waits_for_the_answer_typed_into_approve_and_once_asks_again(hosted: Hosted) -> None:
    d = hosted.daemon
    async with approving(hosted.box) as ap, http_agent(d.url, d.headers) as agent:
        arguments = {
            **WRITE,
            "intent": {"operation_type": "write", "reason": "Greet the user", "data_sensitivity": "public"},
        }
        call = call_in_background(agent, "call_tool_write", arguments)
        await ap.expect("Allow? [o]nce")
        assert not call.done(), "the call went through before anyone answered"
        shown = ap.output
        assert "📝 WRITE  probe:plain_echo" in shown
        assert '"text": "hello"' in shown
        assert "the agent's own words" in shown and "│ Greet the user" in shown
        assert "public  (as the agent declared it)" in shown
        assert "mcphost recommends call_tool_write" in shown
        assert "expires     in " in shown
        assert "DESTRUCTIVE" not in shown
        await ap.type("o")
        assert text_of(await result_of(call)) == "plain_echo: hello"
        await ap.expect("allowed probe:plain_echo once")

        # "once" is that call only: the next one is asked again.
        again = call_in_background(agent, "call_tool_write", WRITE)
        await ap.expect("Allow? [o]nce", count=2)
        await ap.type("once")
        assert not (await result_of(again)).is_error
        assert await ap.finish() == 0
    assert "end of input; detached" in ap.output
    decisions = [c["decision"] for c in hosted.tool_calls()]
    assert [(x["by"], x["remember"]) for x in decisions] == [("editor", "once"), ("editor", "once")]
    assert all("mcphost approve" in x["approver"] for x in decisions)


@ON_SHARED_HOST
async def test_session_answers_the_rest_of_the_agent_session_without_a_prompt(hosted: Hosted) -> None:
    d = hosted.daemon
    async with approving(hosted.box) as ap:
        async with http_agent(d.url, d.headers, mode="legacy") as agent:
            call = call_in_background(agent, "call_tool_write", WRITE)
            await ap.expect("[s]ession")
            await ap.type("s")
            assert not (await result_of(call)).is_error
            second = await agent.call_tool("call_tool_write", WRITE)
            assert not second.is_error
        await ap.expect("allowed probe:plain_echo for this agent session")
        assert ap.output.count("Allow?") == 1
    assert [c["decision"]["by"] for c in hosted.tool_calls()] == ["editor", "remembered_grant"]


async def test_always_is_persisted_and_listed_by_grants(sandbox: Sandbox) -> None:
    async with probe_daemon(sandbox) as d, approving(sandbox, "--once") as ap, http_agent(d.url, d.headers) as agent:
        call = call_in_background(agent, "call_tool_write", WRITE)
        await ap.expect("[a]lways")
        await ap.type("a")
        assert not (await result_of(call)).is_error
        # --once: it detaches by itself after that answer, and the answer still counted.
        async with asyncio.timeout(10):
            assert await ap.process.wait() == 0
        await ap.expect("(--once); detached")
        listed = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "grants", "list", "-o", "json"))
        assert listed.returncode == 0, listed.stderr
        grants = json.loads(listed.stdout)["grants"]
        assert [(g["scope"], g["server"], g["tool"], g["variant"]) for g in grants] == [
            ("always", "probe", "plain_echo", "call_tool_write")
        ]
        # Nobody is attached now; the remembered approval answers.
        assert not (await agent.call_tool("call_tool_write", WRITE)).is_error
    assert "state.toml" in {p.name for p in sandbox.data.iterdir()}


async def test_always_narrowed_to_a_typed_pattern_covers_matching_calls_only(sandbox: Sandbox) -> None:
    async with probe_daemon(sandbox) as d, approving(sandbox, "--once") as ap, http_agent(d.url, d.headers) as agent:
        call = call_in_background(agent, "call_tool_write", {**WRITE, "args": {"text": "draft: one"}})
        await ap.expect("Allow?")
        assert "'text=draft: one'" in ap.output  # the suggestion, quoted to be typed as it is
        await ap.type("a text=nothing*")  # does not cover this call: asked again, nothing sent
        await ap.expect("does not match")
        await ap.type('a "text=draft: *"')
        assert not (await result_of(call)).is_error
        # Nobody is attached now: the grant answers what it covers, and only that.
        covered = await agent.call_tool("call_tool_write", {**WRITE, "args": {"text": "draft: two"}})
        other = await agent.call_tool("call_tool_write", {**WRITE, "args": {"text": "final"}})
    assert not covered.is_error, text_of(covered)
    assert error_of(other)["code"] == "NO_APPROVER"
    listed = mcphost(sandbox, "grants", "list")
    assert "text=draft: *" in listed.stdout, listed.stdout


@ON_SHARED_HOST
async def test_deny_reaches_the_agent_naming_approve(hosted: Hosted) -> None:
    d = hosted.daemon
    async with approving(hosted.box) as ap, http_agent(d.url, d.headers) as agent:
        call = call_in_background(agent, "call_tool_write", WRITE)
        await ap.expect("Allow?")
        await ap.type("maybe")
        await ap.expect("Not understood: answer o (once)")
        await ap.type("d")
        error = error_of(await result_of(call))
        await ap.expect("denied probe:plain_echo")
    assert error["code"] == "PERMISSION_DENIED"
    assert "Permission denied by the user (mcphost approve" in error["message"]
    assert error["details"]["approver"].startswith("mcphost approve")
    assert hosted.tool_calls()[0]["status"] == "denied"


@ON_SHARED_HOST
async def test_a_destructive_prompt_is_unmistakable_and_needs_the_typed_tool_name(hosted: Hosted) -> None:
    d = hosted.daemon
    async with approving(hosted.box) as ap, http_agent(d.url, d.headers) as agent:
        call = call_in_background(agent, "call_tool_destructive", DESTRUCTIVE)
        await ap.expect("Type wipe_notes or yes to allow it once")
        shown = ap.output
        assert "⚠  DESTRUCTIVE  this call may delete or overwrite data" in shown
        assert "💥 DESTRUCTIVE  probe:wipe_notes   via call_tool_destructive" in shown
        assert "│ The user wants a clean notebook" in shown
        assert "destructiveHint=true" in shown
        assert "[a]lways" not in shown  # remember_destructive is "session" by default: always is not offered
        # A single key, or an allow word, is not a confirmation.
        for key in ("y", "o", "allow"):
            await ap.type(key)
        await ap.expect("needs a typed confirmation, not a single key", count=3)
        await ap.type("yes always")
        await ap.expect("cannot be remembered as 'always'")
        assert not call.done()
        await ap.type("wipe_notes")
        assert text_of(await result_of(call)) == "wipe_notes: all of them"
        await ap.expect("allowed probe:wipe_notes once")


@ON_SHARED_HOST
async def test_prompts_arriving_together_are_asked_one_at_a_time(hosted: Hosted) -> None:
    d = hosted.daemon
    async with approving(hosted.box) as ap, http_agent(d.url, d.headers) as agent:
        first = call_in_background(agent, "call_tool_write", WRITE)
        await ap.expect("Allow?")
        second = call_in_background(agent, "call_tool_destructive", DESTRUCTIVE)
        await ap.expect("(another prompt is waiting: 💥 probe:wipe_notes; it comes next)")
        assert "DESTRUCTIVE" not in ap.output  # not shown while the first one waits
        await ap.type("d")
        assert error_of(await result_of(first))["code"] == "PERMISSION_DENIED"
        await ap.expect("Type wipe_notes or yes")
        await ap.type("deny")
        assert error_of(await result_of(second))["code"] == "PERMISSION_DENIED"


@ON_SHARED_HOST
async def test_a_prompt_answered_in_another_editor_is_withdrawn_from_approve(hosted: Hosted) -> None:
    d = hosted.daemon
    go = asyncio.Event()

    async def after_approve_shows_it(_request: dict[str, Any]) -> dict[str, Any]:
        await go.wait()
        return {"decision": "allow", "remember": "once"}

    async with (
        approving(hosted.box) as ap,
        editor(d.editor_socket, after_approve_shows_it, name="other-editor") as ed,
        http_agent(d.url, d.headers) as agent,
    ):
        call = call_in_background(agent, "call_tool_write", WRITE)
        await ap.expect("Allow?")
        await ed.prompted.wait()
        go.set()
        assert not (await result_of(call)).is_error
        await ap.expect("withdrawn: the prompt")
        # (a line longer than the terminal's width goes on, indented, on the next)
        assert "answered in another editor, expired, or its call ended" in " ".join(ap.output.split())
        # Typing now answers nothing: an answer is for the prompt on screen.
        await ap.type("o")
        await ap.expect("(no prompt is waiting; ignored: 'o')")
        assert await ap.finish() == 0
    assert "allowed probe:plain_echo" not in ap.output
    assert hosted.tool_calls()[0]["decision"]["approver"].startswith("other-editor")


async def test_without_a_daemon_approve_says_how_to_start_one(sandbox: Sandbox) -> None:
    done = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "approve"))
    assert done.returncode == 1
    assert "no mcphost daemon is running: start one with `mcphost serve`" in done.stderr
    wrong = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "approve", "--pid", "999999"))
    assert wrong.returncode == 1
    assert "no running mcphost daemon has pid 999999" in wrong.stderr


@ON_SHARED_HOST
async def test_detaching_with_a_prompt_on_screen_hands_it_back(hosted: Hosted) -> None:
    d = hosted.daemon
    async with approving(hosted.box) as ap, http_agent(d.url, d.headers) as agent:
        call = call_in_background(agent, "call_tool_write", WRITE)
        await ap.expect("Allow?")
        assert await ap.finish() == 0  # Ctrl-D with the prompt unanswered
        error = error_of(await result_of(call))
    assert error["code"] == "NO_APPROVER"
    assert "end of input; detached" in ap.output


async def test_approve_says_so_when_the_daemon_dies_under_a_prompt(sandbox: Sandbox) -> None:
    async with probe_daemon(sandbox) as d, approving(sandbox) as ap:

        async def doomed_call() -> None:
            with contextlib.suppress(Exception):  # the daemon dies under it
                async with http_agent(d.url, d.headers) as agent:
                    await agent.call_tool("call_tool_write", WRITE)

        call = asyncio.create_task(doomed_call())
        await ap.expect("Allow?")
        d.process.kill()  # a crash: the editor socket closes at once
        async with asyncio.timeout(10):
            assert await ap.process.wait() == 1
            await call
        await ap.expect("the daemon closed the editor channel (did it stop?); detached")
    assert "Traceback" not in ap.stderr


@ON_SHARED_HOST
async def test_auto_answers_writes_but_still_asks_for_destructive_calls(hosted: Hosted) -> None:
    d = hosted.daemon
    async with (
        approving(hosted.box, "--auto", "allow") as ap,
        http_agent(d.url, d.headers) as agent,
    ):
        assert not (await agent.call_tool("call_tool_write", WRITE)).is_error
        await ap.expect("or [d]eny: once   (--auto)")
        call = call_in_background(agent, "call_tool_destructive", DESTRUCTIVE)
        await ap.expect("Type wipe_notes or yes")
        await ap.type("deny")
        assert error_of(await result_of(call))["code"] == "PERMISSION_DENIED"
    assert [c["status"] for c in hosted.tool_calls()] == ["success", "denied"]


@ON_SHARED_HOST
async def test_a_call_from_the_terminal_is_asked_as_mcphost_call_and_answered_in_its_words(hosted: Hosted) -> None:
    async with approving(hosted.box) as ap:
        args = ("call", "tool-write", "probe:plain_echo", "--args", '{"text": "t"}')
        call = asyncio.create_task(anyio.to_thread.run_sync(lambda: mcphost(hosted.box, *args)))
        # A one-shot `mcphost call` is a session of one call: a session grant would end with it, and the prompt
        # says so instead of offering it.
        await ap.expect("Allow? [o]nce, [a]lways or [d]eny: ")
        # One exchange of the 2026 revision, which has no session to name.
        assert f"from        mcphost call {__version__}\n" in ap.output
        assert "no [s]ession: a one-shot `mcphost call` is its own session" in ap.output
        await ap.type("s")
        await ap.expect("A session grant would end with this one-shot `mcphost call`")
        await ap.type("d")
        async with asyncio.timeout(30):
            done = await call
    assert done.returncode == 1
    assert "mcphost: PERMISSION_DENIED: Permission denied by the user (mcphost approve" in done.stderr
    assert "this `mcphost call tool-write` call to 'probe:plain_echo'." in done.stderr
    assert "call_tool_write" not in done.stderr and "ask the user" not in done.stderr
    (record,) = hosted.tool_calls()
    assert record["client"] == f"mcphost call {__version__}"
    # The record keeps the message the agent-facing contract gives.
    assert "this call_tool_write call" in record["error"]["message"] and "ask the user" in record["error"]["message"]


async def test_a_config_error_is_told_once_as_a_line_and_no_library_warning_reaches_the_terminal(
    sandbox: Sandbox,
) -> None:
    assert not sandbox.config.exists()
    async with daemon(sandbox), approving(sandbox) as ap:
        # No file: the embedded default is in force, and approve and status say so rather than name a missing file.
        default = f"none at {sandbox.config}; using the built-in default (`mcphost config init` writes"
        assert f"config: {default}" in ap.output
        status = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "status"))
        assert f"config          {default}" in status.stdout and status.stderr == ""

        sandbox.write_config('[permissions]\nwrte = "ask"\n')
        await ap.expect("mcphost approve: the config file has an error")
        await ap.expect("line 2, column 1: permissions.wrte: unknown key 'wrte'")
        for argv in (("status",), ("grants", "list")):
            # Each attaches to the daemon, which tells every attached editor its status again.
            shown = await anyio.to_thread.run_sync(lambda argv=argv: mcphost(sandbox, *argv))
            assert shown.returncode == 0 and shown.stderr == "", shown.stderr
            assert "permissions.wrte: unknown key 'wrte'" in shown.stdout or argv != ("status",)

        sandbox.write_config('[permissions]\nwrite = "ask"\n')
        await ap.expect("the config error is fixed")
        assert await ap.finish() == 0
    assert ap.output.count("the config file has an error") == 1
    assert ap.stderr == "", ap.stderr  # no pygls warning about the diagnostics it has no file to show on
