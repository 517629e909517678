"""The person at this terminal as an approver: prompts queued and shown one at a time, answers read from stdin.

Used by `mcphost approve` (as the editor channel's prompt handler) and `mcphost demo` (attached straight to an
in-process broker). The look of a prompt and the reading of an answer are `mcphost.approval.terminal`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from mcphost.approval.broker import ApproverGone
from mcphost.approval.prompt import Answer, PermissionRequest, PermissionResponse
from mcphost.approval.terminal import (
    parse_answer,
    question,
    render_decision,
    render_prompt,
    render_waiting,
    render_withdrawn,
)
from mcphost.console import Style, safe

# What a script answers for a prompt (a line, as if typed), or None to ask the person.
Script = Callable[[PermissionRequest], str | None]
Stopped = Literal["eof", "once"]
# An allow typed at a terminal this soon after its prompt appeared was meant for the one before it (`y` Enter typed
# twice), not for a prompt on screen too briefly to be read.
TOO_QUICK_S = 0.4


class _Nothing:
    """No line typed yet (and input has not ended)."""


NOTHING = _Nothing()


class StdinLines:
    """Lines from stdin (a terminal, a pipe or a file), read by a daemon thread with plain `os.read`, so that a
    read still blocked when the program ends holds no lock that interpreter shutdown would wait for."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.lines: deque[tuple[float, str]] = deque()
        self.eof = False
        self.arrived_at = 0.0  # when the line `pop` returned last came in (time.monotonic)
        self._wake: Callable[[], None] = lambda: None
        try:
            self.tty = os.isatty(fd)
        except OSError:
            self.tty = False

    def start(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._pump, args=(loop,), name="stdin-lines", daemon=True).start()

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            *complete, pending = (pending + chunk).split(b"\n")
            for raw in complete:
                if not self._send(loop, raw):
                    return
        # A line left unfinished at the end of input is an answer from a pipe (its last line, no newline), but on a
        # terminal it is what was typed when Ctrl-D was pressed to detach: "yes" half-typed is no allow.
        if pending and not self.tty:
            self._send(loop, pending)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening any more
            loop.call_soon_threadsafe(self._ended)

    def _send(self, loop: asyncio.AbstractEventLoop, raw: bytes) -> bool:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        try:
            loop.call_soon_threadsafe(self._push, text)
        except RuntimeError:
            return False
        return True

    def _push(self, text: str) -> None:
        self.lines.append((time.monotonic(), text))
        self._wake()

    def _ended(self) -> None:
        self.eof = True
        self._wake()

    def pop(self) -> str | _Nothing | None:
        """The next line; None when input has ended and every line was read; NOTHING while waiting for more."""
        if self.lines:
            self.arrived_at, text = self.lines.popleft()
            return text
        return None if self.eof else NOTHING

    def discard_typeahead(self) -> None:
        """What was typed before a prompt appeared must not answer it."""
        self.lines.clear()
        if not self.tty:
            return
        with contextlib.suppress(Exception):
            import termios

            termios.tcflush(self.fd, termios.TCIFLUSH)


@dataclass(eq=False)
class _Entry:
    request: PermissionRequest
    future: asyncio.Future[PermissionResponse]
    task: asyncio.Task[Any] | None = None
    shown: bool = False


@dataclass(eq=False)
class TerminalApprover:
    """Asks the person at this terminal, one prompt at a time, in the order the prompts came.

    `ask` is both the editor channel's prompt handler (`mcphost approve`) and the broker's `Approver.ask` (the
    in-process approver of `mcphost demo`); `run` is the loop that shows prompts and reads answers.
    """

    out: TextIO
    style: Style
    lines: StdinLines | None = None  # None: answers come from `script` only
    script: Script | None = None
    once: bool = False
    script_note: str = "scripted answer"
    id: str = "terminal"
    label: str = "mcphost approve (terminal)"
    answered: int = 0
    _queue: deque[_Entry] = field(default_factory=deque)
    _current: _Entry | None = None
    _event: asyncio.Event = field(default_factory=asyncio.Event)
    _done: list[_Entry] = field(default_factory=list)
    _stopped: bool = False
    _mid_line: bool = False  # a question is on screen, waiting for its answer on the same line
    _question: str | None = None  # that question

    # ---- output

    def say(self, text: str) -> None:
        if self._mid_line:
            # Something came up while a question waits for its answer (another prompt, a withdrawal): say it on
            # its own line, then ask again, so the question stays right above where the answer is typed.
            self.out.write("\n" + text + "\n")
            if self._question is not None:
                self.out.write(self._question)
            else:
                self._mid_line = False
            self.out.flush()
            return
        self.out.write(text + "\n")
        self.out.flush()

    def _ask_line(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._question = text
        self._mid_line = True

    def _answered_line(self) -> None:
        self._question = None
        self._mid_line = False

    def wake(self) -> None:
        self._event.set()

    # ---- the prompt handler

    async def ask(self, request: PermissionRequest) -> PermissionResponse:
        if self._stopped:
            raise ApproverGone("the terminal approver has stopped")
        entry = _Entry(request, asyncio.get_running_loop().create_future(), asyncio.current_task())
        if self._current is not None or self._queue:
            self.say(render_waiting(request, self.style))
        self._queue.append(entry)
        self.wake()
        try:
            return await entry.future
        except asyncio.CancelledError:
            # The daemon withdrew it: answered in another editor, expired, or the agent's call ended.
            if entry is self._current:
                self._question = None  # not to be asked again
            if not self._stopped:
                self.say(render_withdrawn(request, self.style, shown=entry.shown))
            self.wake()
            raise

    # ---- the loop

    async def run(self) -> Stopped:
        """Show prompts and read answers until input ends, `--once` is satisfied, or `stop()`."""
        try:
            while True:
                entry = await self._next()
                if entry is None:
                    return "eof"
                self._current = entry
                try:
                    outcome = await self._settle(entry)
                finally:
                    self._current = None
                if outcome == "eof":
                    return "eof"
                if outcome == "answered" and self.once:
                    return "once"
        finally:
            self.stop()

    def stop(self) -> None:
        """No more prompts are taken; those still waiting here go back to the daemon (or broker) unanswered."""
        self._stopped = True
        pending = list(self._queue)
        if self._current is not None:
            pending.append(self._current)
        self._queue.clear()
        for entry in pending:
            if not entry.future.done():
                entry.future.set_exception(ApproverGone("the person at the terminal detached"))
        self.wake()

    async def drain(self) -> None:
        """Let the answers already given reach the channel before it closes (pygls sends a handler's result from
        the task's done-callback)."""
        tasks = {e.task for e in self._done if e.task is not None and not e.task.done()}
        if tasks:
            await asyncio.wait(tasks, timeout=2)

    async def _next(self) -> _Entry | None:
        while True:
            while self._queue and self._queue[0].future.done():
                self._queue.popleft()  # withdrawn before its turn (already announced)
            if self._queue:
                return self._queue.popleft()
            if self._stopped:
                return None
            if self.lines is not None:
                # An answer is for the prompt on screen: what is typed while none is shown answers nothing.
                while isinstance(line := self.lines.pop(), str):
                    if line.strip():
                        self.say(f"(no prompt is waiting; ignored: {safe(line, 40)!r})")
                if line is None:
                    return None  # end of input
            self._event.clear()
            await self._event.wait()

    async def _settle(self, entry: _Entry) -> Literal["answered", "withdrawn", "eof"]:
        request = entry.request
        entry.shown = True
        if self.lines is not None:
            self.lines.discard_typeahead()
        self.say(render_prompt(request, self.style, waiting=len(self._queue)))
        shown_at = time.monotonic()
        scripted = self.script(request) if self.script is not None else None
        while True:
            if entry.future.done():
                return "withdrawn"
            if scripted is not None:
                line: str | None = scripted
                scripted = None  # a script's answer is used once; if it is not usable, the person is asked
                typed = False
                self.say(f"{question(request, self.style)}{line}   ({self.script_note})")
            elif self.lines is None:
                return "eof"
            else:
                self._ask_line(question(request, self.style))
                got = await self._read_line(entry)
                if isinstance(got, _Nothing):
                    if self._mid_line:
                        self.out.write("\n")
                    self._answered_line()
                    return "withdrawn"
                if isinstance(got, str) and not self.lines.tty:
                    self.out.write(safe(got, 80))  # a terminal echoes what is typed; a pipe does not
                self.out.write("\n")
                self._answered_line()
                line, typed = got, True
            if line is None:
                return "eof"
            answer = parse_answer(request, line, self.style)
            if isinstance(answer, str):
                self.say(answer)
                continue
            if (
                answer.decision == Answer.ALLOW
                and typed
                and self.lines is not None
                and self.lines.tty
                and self.lines.arrived_at - shown_at < TOO_QUICK_S
            ):
                # Typed twice for the prompt before (`y` Enter, `y` Enter): the second landed on this one, which
                # was on screen too briefly to be read.
                self.say(
                    f"(typed {max(0.0, self.lines.arrived_at - shown_at) * 1000:.0f} ms after this prompt appeared, "
                    "too soon to have read it: not taken; answer again)"
                )
                continue
            if entry.future.done():
                return "withdrawn"
            entry.future.set_result(answer)
            self._done.append(entry)
            self.answered += 1
            self.say(render_decision(request, answer, self.style))
            return "answered"

    async def _read_line(self, entry: _Entry) -> str | _Nothing | None:
        """The next line; None at end of input; NOTHING when the prompt was withdrawn meanwhile."""
        assert self.lines is not None
        while True:
            if entry.future.done():
                return NOTHING
            got = self.lines.pop()
            if not isinstance(got, _Nothing):
                return got
            self._event.clear()
            await self._event.wait()
