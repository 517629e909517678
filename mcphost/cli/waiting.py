"""What `mcphost call` tells the person while its call waits on the daemon: the call itself has no time limit (a
prompt may wait for a person as long as they take), so a wait without a word would look the same whether a prompt
waits in an editor, the upstream is working, or the daemon is stopped or stuck.

`waiting_for` is the judgement, over the daemon's status as `mcphost status` reads it; `WaitWatch` looks on a thread
of its own (the standard library only: the command's start stays a few milliseconds) and says what it sees on
stderr, once, and again only when that changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from mcphost.cli.channel import STATUS, ask
from mcphost.console import safe
from mcphost.discovery import NoDaemon, process_stopped

# A call answered within this long gets no word; a prompt's own shows up in the editor at once.
FIRST_LOOK_S = 2.0
# How often the daemon's process is looked at (a read of /proc), and how often its status is asked for.
STOPPED_EVERY_S = 1.0
STATUS_EVERY_S = 10.0
WITHDRAW = "Ctrl-C withdraws the call"


def waiting_for(
    pid: int,
    server: str,
    tool: str,
    *,
    status: dict[str, Any] | None = None,
    unanswered: str | None = None,
    stopped: bool = False,
) -> str:
    """What the call to `server:tool` through daemon `pid` waits for: the daemon stopped, the daemon not answering its
    status either (`unanswered`, why), a prompt for the call, an upstream still connecting, or the upstream's work."""
    if stopped:
        return (
            f"the daemon {pid} is stopped (Ctrl-Z or SIGSTOP) and answers nothing until it is resumed (`fg` in its "
            f"terminal or `kill -CONT {pid}`); {WITHDRAW}"
        )
    if status is None:
        return (
            f"the daemon {pid} answers neither the call nor a status request ({unanswered}): it may be stuck; "
            f"{WITHDRAW} (`mcphost log tail` shows whether it was made)"
        )
    prompts = status.get("prompts")
    for prompt in prompts if isinstance(prompts, list) else []:
        if isinstance(prompt, dict) and prompt.get("server") == server and prompt.get("tool") == tool:
            editors = [e.get("name") for e in status.get("editors") or [] if isinstance(e, dict) and e.get("name")]
            where = f"in {', '.join(safe(str(name)) for name in editors)}" if editors else "with `mcphost approve`"
            until = _clock(prompt.get("expires_at"))
            expiry = f"; it expires at {until}" if until else ""
            return (
                f"waiting for a person to answer the prompt for {safe(server)}:{safe(tool)} {where}{expiry}; {WITHDRAW}"
            )
    for upstream in status.get("servers") or []:
        if isinstance(upstream, dict) and upstream.get("name") == server and upstream.get("state") != "connected":
            error = upstream.get("error")
            why = f": {safe(str(error))}" if error else ""
            return f"waiting for the upstream {safe(server)} ({safe(str(upstream.get('state')))}{why}); {WITHDRAW}"
    return f"waiting for the upstream {safe(server)} to answer; {WITHDRAW}"


def _clock(stamp: Any) -> str | None:
    """An RFC 3339 time as this machine's local clock time, as a person reads it."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return None


class WaitWatch:
    """Looks at the daemon while the call waits and says, through `say`, what it waits for: first after
    FIRST_LOOK_S, then whenever that changes. Nothing is said once `stop` has returned."""

    def __init__(
        self,
        info: dict[str, Any],
        name: str,
        say: Callable[[str], None],
        *,
        first_look: float = FIRST_LOOK_S,
        status_every: float = STATUS_EVERY_S,
    ) -> None:
        self._info = info
        self._server, _, self._tool = name.partition(":")
        self._say = say
        self._first_look = first_look
        self._status_every = status_every
        self._done = threading.Event()
        self._lock = threading.Lock()  # held while saying something, and by `stop`: no word after the answer
        self._thread = threading.Thread(target=self._run, name="mcphost-call-watch", daemon=True)

    def __enter__(self) -> WaitWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        with self._lock:
            self._done.set()

    def _run(self) -> None:
        pid = int(self._info["pid"])
        if self._done.wait(self._first_look):
            return
        said: str | None = None
        asked_at: float | None = None
        status_said = ""
        while not self._done.is_set():
            if process_stopped(pid):
                text = waiting_for(pid, self._server, self._tool, stopped=True)
                asked_at = None  # once it resumes, its status is asked for at once
            else:
                if asked_at is None or time.monotonic() - asked_at >= self._status_every:
                    status_said = self._look(pid)
                    asked_at = time.monotonic()
                text = status_said
            if text != said:
                with self._lock:
                    if self._done.is_set():
                        return
                    self._say(text)
                said = text
            if self._done.wait(STOPPED_EVERY_S):
                return

    def _look(self, pid: int) -> str:
        try:
            status = ask(self._info, "mcphost call", STATUS)
        except NoDaemon as exc:
            return waiting_for(pid, self._server, self._tool, unanswered=str(exc))
        except Exception as exc:  # a look that fails is said as such, never a traceback over the person's terminal
            return waiting_for(pid, self._server, self._tool, unanswered=f"{type(exc).__name__}: {exc}")
        if not isinstance(status, dict):
            return waiting_for(pid, self._server, self._tool, unanswered="an answer that is no status")
        return waiting_for(pid, self._server, self._tool, status=status)
