"""`mcphost approve`: answer permission prompts in a terminal, attached to the daemon like an editor.

Prompts are shown one at a time, in the order they came; answers are read from stdin line by line, so a pipe
can drive it as well as a person. End of input (Ctrl-D) or Ctrl-C detaches; prompts still waiting then go to
the other attached editors, or end as NO_APPROVER when there are none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcphost.approval.terminal import needs_typed_confirmation
from mcphost.approval.terminal_approver import StdinLines, TerminalApprover
from mcphost.cli.common import config_file_said, config_in_force, fail
from mcphost.console import detect_style, safe, safe_lines
from mcphost.editor import protocol as p
from mcphost.editor.client import NoDaemon, attached, pick_daemon

if TYPE_CHECKING:
    from mcphost.approval.prompt import PermissionRequest
    from mcphost.approval.terminal_approver import Script
    from mcphost.console import Style


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.description = (
        "Attach to the running mcphost daemon as an approver and answer its permission prompts here. "
        "Answers are read from stdin, one per line; end of input (Ctrl-D) or Ctrl-C detaches."
    )
    p.add_argument("--pid", type=int, default=None, help="the daemon to attach to (see `mcphost status`)")
    p.add_argument("--once", action="store_true", help="detach after one answered prompt")
    p.add_argument(
        "--auto",
        choices=("allow", "deny"),
        default=None,
        help="answer without asking: allow (once) or deny; prompts that need a typed confirmation (destructive "
        "calls) are still asked",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    try:
        info = pick_daemon(args.pid)
    except NoDaemon as exc:
        fail(str(exc))
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    style = detect_style(sys.stdout)
    script: Script | None = None
    if args.auto is not None:
        script = _auto_script(args.auto)
    try:
        return asyncio.run(_approve(info, style, once=args.once, script=script))
    except NoDaemon as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        print("\nmcphost approve: detached (Ctrl-C)", flush=True)
        return 0


def _auto_script(answer: str) -> Script:

    def script(request: PermissionRequest) -> str | None:
        if answer == "allow" and needs_typed_confirmation(request):
            return None  # a destructive call is never allowed unseen
        return "once" if answer == "allow" else "deny"

    return script


class ConfigNotes:
    """The daemon's config error, told to the person once when it appears (or changes), and once when it is fixed:
    the daemon repeats it in every status it sends, and as diagnostics, which a terminal has no file to show on."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._shown: str | None = None
        self._started = False

    def start(self, status: Any) -> None:
        """From the status the daemon answered on attaching; notifications before it are older news."""
        self._started = True
        self._shown = _config_error(status)
        if self._shown:
            self._say(_config_error_text(self._shown))

    def notification(self, method: str, params: Any) -> None:
        if method != p.STATUS or not self._started:
            return  # diagnostics: the same error, for editors; activity: not asked for
        error = _config_error(params)
        if error == self._shown:
            return
        if error:
            self._say(_config_error_text(error))
        else:
            self._say("mcphost approve: the config error is fixed; the daemon runs on the saved file")
        self._shown = error


def _config_error(status: Any) -> str | None:
    error = status.get("config_error") if isinstance(status, dict) else None
    return str(error) if error else None


def _config_error_text(error: str) -> str:
    return (
        "mcphost approve: the config file has an error; the daemon keeps the last good config until it is fixed:\n"
        + "\n".join(f"  {line}" for line in safe_lines(error).splitlines())
    )


async def _approve(info: dict[str, Any], style: Style, *, once: bool, script: Script | None) -> int:

    lines = StdinLines()
    approver = TerminalApprover(sys.stdout, style, lines=lines, script=script, once=once, script_note="--auto")
    notes = ConfigNotes(approver.say)
    lines.start(approver.wake)
    async with attached(
        info,
        "mcphost approve",
        approver=True,
        activity=False,
        on_prompt=approver.ask,
        on_notification=notes.notification,
    ) as client:
        # The daemon handles messages in order: once it answers this, it has us down as an approver.
        status = await client.request(p.STATUS)
        path = str(status.get("config_path"))
        config = config_in_force(path, await _config_file(client, path))
        approver.say(
            f"mcphost approve: attached to the daemon {safe(info.get('pid'))}\n  config: {safe(config)}\n"
            "Waiting for permission prompts; end of input (Ctrl-D) or Ctrl-C detaches."
        )
        notes.start(status)
        running = asyncio.ensure_future(approver.run())
        gone = asyncio.ensure_future(client.closed.wait())
        try:
            done, _ = await asyncio.wait({running, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not running.done():
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
            approver.stop()
            await approver.drain()
        if running not in done:
            approver.say("mcphost approve: the daemon closed the editor channel (did it stop?); detached")
            return 1
        why = running.result()
    if why == "eof":
        approver.say("mcphost approve: end of input; detached")
    elif why == "once":
        approver.say("mcphost approve: one prompt answered (--once); detached")
    return 0


async def _config_file(client: Any, path: str) -> str:
    """Where the daemon's config comes from (see `config_in_force`): the daemon is asked only when the file is gone,
    since whether it had read one is what this command cannot see."""
    if await asyncio.to_thread(os.path.exists, path):  # a stat; the file itself is not opened
        return "present"
    try:
        shown = await client.request(p.CONFIG)
    except Exception:  # an older daemon, or one going away: said as not known
        return "unknown"
    return config_file_said(shown)
