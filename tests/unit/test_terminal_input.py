"""What `mcphost approve` takes from a real terminal (a pseudo-terminal here): an answer is for the prompt the person
could read, and detaching with Ctrl-D never sends what was half typed."""

from __future__ import annotations

import asyncio
import io
import os
import pty
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from mcphost.approval import terminal_approver
from mcphost.approval.prompt import Answer, PermissionResponse
from mcphost.approval.terminal_approver import StdinLines, TerminalApprover
from mcphost.console import Style
from mcphost.policy import Remember
from tests.helpers import poll
from tests.unit.test_terminal_prompt import request


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    """(what the person types into, what mcphost reads)."""
    leader, follower = pty.openpty()
    yield leader, follower
    os.close(leader)
    os.close(follower)


@asynccontextmanager
async def prompted(follower: int) -> AsyncIterator[tuple[io.StringIO, asyncio.Task[PermissionResponse]]]:
    """An approver reading the terminal, with a write prompt on screen: what it printed, and the prompt's answer."""
    out = io.StringIO()
    lines = StdinLines(follower)
    approver = TerminalApprover(out=out, style=Style(), lines=lines)
    lines.start(approver.wake)
    running = asyncio.create_task(approver.run())
    asked = asyncio.create_task(approver.ask(request()))
    try:
        await poll(lambda: "Allow?" in out.getvalue(), "the prompt")
        yield out, asked
    finally:
        approver.stop()
        running.cancel()
        await asyncio.gather(running, asked, return_exceptions=True)


async def test_ctrl_d_on_a_half_typed_answer_detaches_without_sending_it(terminal: tuple[int, int]) -> None:
    leader, follower = terminal
    lines = StdinLines(follower)
    assert lines.tty
    lines.start(lambda: None)
    os.write(leader, b"yes\x04")  # "yes" typed, no Enter, then Ctrl-D (the terminal hands over what was typed)
    os.write(leader, b"\x04")  # Ctrl-D again on an empty line: end of input
    await poll(lambda: lines.eof, "the end of input")
    assert lines.pop() is None  # nothing to answer with: "yes" was never entered


async def test_an_allow_typed_as_a_prompt_appears_is_not_taken_for_it(
    terminal: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `y` Enter typed twice for one prompt: the second landed on the next, on screen for a few milliseconds.
    monkeypatch.setattr(terminal_approver, "TOO_QUICK_S", 0.3)
    leader, follower = terminal
    async with prompted(follower) as (out, asked):
        os.write(leader, b"o\n")
        await poll(lambda: "too soon to have read it" in out.getvalue(), "the quick answer refused")
        assert not asked.done()
        await asyncio.sleep(0.3)  # the person reads the prompt
        os.write(leader, b"o\n")
        async with asyncio.timeout(10):
            assert await asked == PermissionResponse(decision=Answer.ALLOW, remember=Remember.ONCE)


async def test_a_deny_is_taken_however_quick(terminal: tuple[int, int]) -> None:
    leader, follower = terminal
    async with prompted(follower) as (_, asked):
        os.write(leader, b"d\n")
        async with asyncio.timeout(10):
            assert (await asked).decision == Answer.DENY
