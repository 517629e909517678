"""`mcphost hook`: an agent's hook asks about one of its own tool calls (a hook payload on stdin, the agent's answer
on stdout); `mcphost hook install|uninstall --agent A`: put that hook into the agent's settings, or take it out.

The decision is the running daemon's when one serves this config (its editors are asked, its grants apply); else it
is made here from the config file, and a call that needs a person is handed to the agent's own prompt. Whatever
goes wrong, the call is blocked, never let through unasked.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

from mcphost import discovery
from mcphost.intent import AgentToolUse
from mcphost.paths import config_path
from mcphost.serve.hook import (
    AGENTS,
    MAX_PAYLOAD_BYTES,
    HookAnswer,
    HookInputError,
    HookRequest,
    as_far_as_read,
    blocked,
    handled,
    parse_payload,
    render,
)

INSTALL_AGENTS = ("claude-code", "vscode", "codex")
# gateway.hooks.ON_RECORD, not imported: that module's start-up would be on every tool call's path (a test keeps
# the two equal).
_ON_RECORD = "mcphost: this failure is on record"
# How long a hook waits for the daemon's answer: less than the timeout it is installed with (agent_settings'
# HOOK_TIMEOUT, 600 s; not imported, for pydantic's start-up would be on every tool call's path), since an agent
# that times a hook out goes on with the call unasked. What is left decides from the config file, which is quick.
DAEMON_DEADLINE = 570.0


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.description = (
        "Read one hook payload (PreToolUse or PermissionRequest) on stdin and print the decision in the format "
        "the agent reads. Agents run this; `mcphost hook install` sets it up."
    )
    p.add_argument("--agent", choices=AGENTS, default=None, help="the agent that runs the hook (default: detected)")
    p.set_defaults(func=run)
    actions = p.add_subparsers(dest="hook_action", metavar="ACTION")
    for name, summary in (
        ("install", "add mcphost's hook to an agent's settings (merged, with a backup)"),
        ("uninstall", "remove exactly mcphost's hook from an agent's settings"),
    ):
        a = actions.add_parser(name, parents=[parent], help=summary, description=summary)
        a.add_argument("--agent", choices=INSTALL_AGENTS, required=True)
        a.add_argument(
            "--scope",
            choices=("user", "project"),
            default="user",
            help="user: every project of yours; project: this directory's settings (default: user)",
        )
        a.add_argument("--project", default=None, metavar="DIR", help="the project directory (default: this one)")
        if name == "install":
            a.add_argument("--uninstall", action="store_true", help="the same as `mcphost hook uninstall`")
        a.set_defaults(func=install, install=name == "install")


# ---- deciding


def run(args: argparse.Namespace) -> int:
    read: list[HookRequest] = []  # the payload, once read: a block is told in its agent's words
    try:
        return _run(args, read)
    except Exception as exc:
        # A fault of mcphost's own must not let the call through: an agent reads a hook's traceback (exit 1) as "no
        # objection", and a PermissionRequest hook's exit code not at all. Blocked, with what went wrong.
        reason = f"mcphost hook: could not decide ({type(exc).__name__}: {str(exc)[:300]}); the call is blocked"
        request = read[0] if read else None
        if _ON_RECORD in getattr(exc, "__notes__", ()):  # the gate recorded it as it failed
            return _answer(blocked(reason, request))
        return _block(reason, request, fault=True)


def _run(args: argparse.Namespace, read: list[HookRequest]) -> int:
    try:
        raw = read_payload(sys.stdin.buffer, MAX_PAYLOAD_BYTES + 1, PAYLOAD_DEADLINE)
    except OSError as exc:
        return _block(f"mcphost hook: cannot read the payload: {exc}", as_far_as_read(None, args.agent))
    except PayloadLate as late:
        return _block(f"mcphost hook: {late}; the call is blocked", as_far_as_read(late.partial, args.agent))
    try:
        request = parse_payload(raw, args.agent)
    except HookInputError as exc:
        readable = as_far_as_read(raw if len(raw) <= MAX_PAYLOAD_BYTES else None, args.agent)
        return _block(f"mcphost hook: {exc}; the call is blocked", readable)
    read.append(request)
    if not handled(request):
        return 0
    try:
        verdict = decide(request.use, args.config)
    except HookTooLarge as exc:
        return _block(f"mcphost hook: {exc}; the call is blocked", request)
    except HookFailure as exc:
        return _block(f"mcphost hook: {exc}; the call is blocked", request, fault=True)
    return _answer(render(request, str(verdict.get("decision")), str(verdict.get("reason") or "")))


def _block(reason: str, request: HookRequest | None, *, fault: bool = False) -> int:
    """Block the call, on record: no gate saw it, so no record says it was blocked but this one."""
    record_block(reason, request, fault=fault)
    return _answer(blocked(reason, request))


def record_block(reason: str, request: HookRequest | None, *, fault: bool) -> None:
    """Write the block's record to the activity log, durably, within RECORD_DEADLINE; never raises (the call is
    blocked whatever the disk says, and a failure to record it is said on stderr)."""
    try:
        with _within(RECORD_DEADLINE, "recording the block"):
            from mcphost.activity.writer import ActivityLog
            from mcphost.gateway.hooks import blocked_record
            from mcphost.paths import activity_log_path

            use = request.use if request is not None else None
            record = blocked_record(
                request.dialect if request is not None else None,
                request.event if request is not None else None,
                use.tool_name if use is not None else None,
                reason.removeprefix("mcphost hook: "),
                fault=fault,
            )
            log = ActivityLog(activity_log_path())
            try:
                seq = log.append(record)
                if seq is None or not log.sync_through(seq):
                    raise OSError(log.last_error or "the activity log cannot be written")
            finally:
                log.close()
    except Exception as exc:
        print(f"mcphost hook: the block could not be recorded: {str(exc)[:300]}", file=sys.stderr)


# Recording a block has no policy to read and nobody to ask: well under a second, unless the log's lock is held.
RECORD_DEADLINE = 10


# An agent writes its payload at once. One that leaves stdin open afterwards is read up to the end of the JSON
# object; one that never finishes it is blocked after this long, before the agent's own hook timeout runs out and the
# call goes on unasked.
PAYLOAD_DEADLINE = 10.0


class PayloadLate(Exception):
    def __init__(self, partial: bytes) -> None:
        super().__init__(f"the hook payload did not end within {PAYLOAD_DEADLINE:g} s ({len(partial)} bytes read)")
        self.partial = partial


def read_payload(stream: Any, limit: int, deadline: float) -> bytes:
    """Up to `limit` bytes of `stream`: to its end, or to the end of the JSON object it holds when the writer leaves
    it open. PayloadLate past `deadline` s. A terminal (a person typing) is read to its end, however long."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return bytes(stream.read(limit))
    if os.isatty(fd) or not hasattr(select, "poll"):
        return bytes(stream.read(limit))
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    until = time.monotonic() + deadline
    data = bytearray()
    while len(data) < limit:
        left = until - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            raise PayloadLate(bytes(data))
        chunk = os.read(fd, min(limit - len(data), 1 << 16))
        if not chunk:
            break
        data += chunk
        # The end's last bytes only: stripping the whole payload after each chunk took seconds over tens of MB.
        if _ends_an_object(data) and _whole_json(data):
            break
    return bytes(data)


def _ends_an_object(data: bytearray) -> bool:
    end = len(data)
    while end and data[end - 1] in b" \t\r\n":
        end -= 1
    return end > 0 and data[end - 1] == 0x7D  # "}"


def _whole_json(data: bytearray) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):  # too deep to tell: read on, and parse_payload refuses it
        return False
    return True


class HookFailure(Exception):
    """No decision can be made (the config cannot be read): the call is blocked."""


class HookTooLarge(HookFailure):
    """A daemon runs, and the payload is more than its channel carries: decided here instead, the daemon's editor
    would never see the call (and the agent be told nobody was there to ask). Blocked, as a payload past what this
    command reads is."""


def decide(use: AgentToolUse, config: str | None) -> dict[str, Any]:
    """The verdict on `use`: the daemon's, else one made here."""
    verdict = through_daemon(use, config)
    if verdict is not None:
        return verdict
    import anyio

    with _within(IN_PROCESS_DEADLINE, "deciding from the config file"):
        return anyio.run(in_process, use, config)


# Deciding from the config file asks nobody: it takes well under a second. Past this, something holds it (a process
# stopped while it held the activity log's lock), and the agent would time the hook out and run the call unasked.
IN_PROCESS_DEADLINE = 20


@contextlib.contextmanager
def _within(seconds: int, doing: str) -> Iterator[None]:
    """Raise HookFailure if the block (`doing`) takes longer than `seconds`: SIGALRM breaks even a blocking wait."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def late(signum: int, frame: object) -> None:
        raise HookFailure(f"{doing} took over {seconds} s (is the activity log locked?)")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def through_daemon(use: AgentToolUse, config: str | None, deadline: float = DAEMON_DEADLINE) -> dict[str, Any] | None:
    """The running daemon's verdict, or None when no daemon serves this config or it cannot answer."""
    target = discovery.for_config(config_path(config))
    if target is None or not target.get("editor_socket"):
        return None
    from mcphost.cli.channel import MAX_SENT_BYTES, MessageTooLarge, ask

    # Field by field: `asdict` copies the tool input deeply, which recursion ends at a few hundred levels.
    params = {field.name: getattr(use, field.name) for field in fields(use)}
    params["tool_input"] = dict(use.tool_input)
    try:
        result = ask(target, "mcphost hook", "mcphost/authorize", params, timeout=deadline)
    except MessageTooLarge as exc:
        raise HookTooLarge(
            f"the call is {exc.size / 2**20:.1f} MiB as the daemon would be sent it, more than the "
            f"{MAX_SENT_BYTES / 2**20:.0f} MiB its channel takes"
        ) from None
    except discovery.NoDaemon as exc:
        print(f"mcphost hook: {exc}; deciding from the config file", file=sys.stderr)
        return None
    if not isinstance(result, dict) or result.get("decision") not in ("allow", "deny", "ask", "pass"):
        return None
    return result


async def in_process(use: AgentToolUse, config: str | None) -> dict[str, Any]:
    """Decided here: the config file's policy and the remembered grants; nobody here to ask a person, so a call
    that needs one goes to the agent's own prompt. On record like any other."""
    from mcphost.activity.writer import ActivityLog, LogSettings
    from mcphost.approval.approvals import Approvals
    from mcphost.approval.broker import PermissionBroker
    from mcphost.approval.grants import GrantStore
    from mcphost.config import ConfigError, load_config
    from mcphost.config.starter import embedded_default
    from mcphost.config.state import state_path
    from mcphost.gateway.hooks import AgentToolGate
    from mcphost.paths import activity_log_path

    try:
        loaded = load_config(config, default=embedded_default)
    except ConfigError as exc:
        raise HookFailure(f"the config cannot be read ({exc})") from None
    activity = ActivityLog(activity_log_path(), LogSettings.of(loaded.config.log))
    try:
        gate = AgentToolGate(lambda: loaded, activity, Approvals(PermissionBroker(), GrantStore(state_path())))
        return (await gate.decide(use)).to_dict()
    finally:
        activity.close()


def _answer(answer: HookAnswer) -> int:
    if answer.stdout:
        sys.stdout.write(answer.stdout)
        sys.stdout.flush()
    if answer.stderr:
        sys.stderr.write(answer.stderr)
        sys.stderr.flush()
    return answer.exit_code


# ---- installing


def hook_command(agent: str) -> str:
    """The command the agent runs: this very mcphost by its absolute path (an agent's PATH may not have it, or may
    find another program of the same name first)."""
    for script in (Path(sys.argv[0]), Path(sys.executable).parent / "mcphost"):
        if script.name == "mcphost" and script.is_file():
            return f"{shlex.quote(str(script.absolute()))} hook --agent {agent}"
    return f"{shlex.quote(sys.executable)} -m mcphost hook --agent {agent}"


def install(args: argparse.Namespace) -> int:
    from mcphost.config.agent_settings import SettingsError, any_mcphost, apply, hook_target

    installing = args.install and not getattr(args, "uninstall", False)
    project = Path(args.project).resolve() if args.project else Path.cwd()
    target = hook_target(args.agent, args.scope, Path.home(), project)
    command = hook_command(args.agent)
    try:
        change = apply(target, command if installing else any_mcphost(args.agent), install=installing)
    except (SettingsError, OSError) as exc:
        print(f"mcphost: {exc}", file=sys.stderr)
        return 1
    what = "installed in" if installing else "removed from"
    if not change.changed:
        state = "already in" if installing else "not in"
        print(f"mcphost's hook is {state} {change.path}; nothing changed")
        return 0
    print(f"mcphost's {', '.join(target.events)} hook {what} {change.path}")
    if change.backup is not None:
        print(f"  the previous file is kept as {change.backup}")
    if installing:
        print(f"  command: {command}")
        print(f"  {_next_step(args.agent)}")
    return 0


def _next_step(agent: str) -> str:
    if agent == "codex":
        return "Codex runs a new hook only once you trust it: open Codex and review it with /hooks."
    if agent == "vscode":
        return "VS Code reads it in agent mode (chat.hookFilesLocations); reload the window if a chat is open."
    return "Claude Code reads it at the next session start (or review it with /hooks)."
