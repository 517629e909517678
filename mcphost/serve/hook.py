"""The hook door: what an agent writes on a command hook's stdin, and the answer it reads back, for every agent that
asks (Claude Code, VS Code's agent hooks, Codex, Copilot CLI). Standard library only: a hook runs before every tool
call the agent makes, so its start-up is on the agent's path.

The formats, with the source of every field: tests/fixtures/hooks/README.md. In short: one JSON object in; for
`PreToolUse`, `hookSpecificOutput.permissionDecision` allow / deny / ask out (Codex takes only deny; Copilot CLI's
camelCase hooks want the keys at the top level); for `PermissionRequest`, `hookSpecificOutput.decision.behavior`.
Exit 2 with the reason on stderr blocks where the agent honours it; where it does not, a deny is printed instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mcphost.console import safe
from mcphost.intent import AgentToolUse

AGENTS = ("claude-code", "vscode", "codex", "copilot-cli")
PRE_TOOL_USE = "PreToolUse"
PERMISSION_REQUEST = "PermissionRequest"
# The largest payload read: a Write of a big file carries the whole file in `tool_input.content`.
MAX_PAYLOAD_BYTES = 32 * 1024 * 1024
# Claude Code caps the strings of a hook's answer at 10 000 characters.
MAX_REASON_CHARS = 9000
_EVENTS = {"pretooluse": PRE_TOOL_USE, "permissionrequest": PERMISSION_REQUEST}


class HookInputError(ValueError):
    """The payload cannot be read as a hook's: the answer is a block, never a silent pass."""


@dataclass(frozen=True, slots=True)
class HookRequest:
    dialect: str  # one of AGENTS
    event: str  # PreToolUse | PermissionRequest | the event as sent, for events mcphost has no say in
    use: AgentToolUse
    camel_case: bool = False  # Copilot CLI's own format (toolName / toolArgs), answered at the top level


@dataclass(frozen=True, slots=True)
class HookAnswer:
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


def detect_dialect(payload: dict[str, Any]) -> str:
    """Which agent wrote `payload` (tests/fixtures/hooks/README.md §0.1)."""
    timestamp = payload.get("timestamp")
    if "toolName" in payload or "toolArgs" in payload or isinstance(timestamp, int | float):
        return "copilot-cli"
    if "turn_id" in payload:
        return "codex"
    if isinstance(timestamp, str):
        if "tool_use_id" in payload or "hookEventName" in payload or "sessionId" in payload:
            return "vscode"
        return "copilot-cli"
    return "claude-code"


def parse_payload(raw: bytes, agent: str | None = None) -> HookRequest:
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise HookInputError(f"the hook payload is over {MAX_PAYLOAD_BYTES // (1024 * 1024)} MB")
    if not raw.strip():
        raise HookInputError("no hook payload on stdin (run by an agent's hook, which writes one JSON object)")
    try:
        payload = json.loads(raw)
    except RecursionError:
        raise HookInputError("the hook payload is nested too deeply to read") from None
    except ValueError as exc:
        raise HookInputError(f"the hook payload is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise HookInputError("the hook payload is not a JSON object")
    dialect = agent or detect_dialect(payload)
    # Copilot CLI's own format is read, and answered, only from Copilot CLI: under `--agent claude-code` it was
    # answered in keys Claude Code does not read, a deny taken for no decision. From another agent it names no tool.
    camel = dialect == "copilot-cli" and ("toolName" in payload or "toolArgs" in payload)
    if camel:
        name, tool_input = payload.get("toolName"), payload.get("toolArgs", {})
        if isinstance(tool_input, str):  # older Copilot CLI releases send the arguments as a JSON string
            try:
                tool_input = json.loads(tool_input) if tool_input.strip() else {}
            except (ValueError, RecursionError):
                tool_input = {"arguments": tool_input}
    else:
        name, tool_input = payload.get("tool_name"), payload.get("tool_input", {})
    event = _event_of(payload, camel)
    if not isinstance(name, str) or not name:
        raise HookInputError("the hook payload names no tool (tool_name)")
    if tool_input is None:
        tool_input = {}
    if not isinstance(tool_input, dict):
        raise HookInputError(f"the hook payload's tool input is a {type(tool_input).__name__}, not an object")
    return HookRequest(
        dialect=dialect,
        event=event,
        camel_case=camel,
        use=AgentToolUse(
            agent=dialect,
            event=event,
            tool_name=name,
            tool_input=tool_input,
            session_id=_text(payload.get("session_id", payload.get("sessionId"))),
            tool_use_id=_text(payload.get("tool_use_id")),
            cwd=_text(payload.get("cwd")),
        ),
    )


def as_far_as_read(raw: bytes | None, agent: str | None) -> HookRequest | None:
    """For a payload `parse_payload` refused: its agent and event, as far as they can be read, so that its block is
    said in the words that agent reads (Copilot CLI and a PermissionRequest read no exit code). None when nothing
    tells the agent."""
    payload: Any = None
    if raw is not None:
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError):
            payload = None
    fields = payload if isinstance(payload, dict) else {}
    dialect = agent or (detect_dialect(fields) if fields else None)
    if dialect is None:
        return None
    camel = dialect == "copilot-cli" and ("toolName" in fields or "toolArgs" in fields or "tool_name" not in fields)
    try:
        event = _event_of(fields, camel)
    except HookInputError:
        event = PRE_TOOL_USE  # blocked as the event an installed hook most likely stands for
    use = AgentToolUse(agent=dialect, event=event, tool_name="", tool_input={})
    return HookRequest(dialect=dialect, event=event, use=use, camel_case=camel)


def _event_of(payload: dict[str, Any], camel: bool) -> str:
    """The hook's event, as mcphost names it (PreToolUse when none is given)."""
    named = payload.get("hookEventName") if camel else payload.get("hook_event_name") or payload.get("hookEventName")
    if named is None or named == "":
        return PRE_TOOL_USE
    # An event mcphost has no say in gets no answer, and the call goes on: only a name that reads as an event's may
    # do that. A number, a list or a name with odd characters in it is blocked as unreadable.
    if not isinstance(named, str) or not _EVENT_NAME.fullmatch(named.strip()):
        raise HookInputError(f"the hook payload's event name is no event's ({safe(repr(named), 80)})")
    event = named.strip()
    return _EVENTS.get(event.lower(), event)


_EVENT_NAME = re.compile(r"[A-Za-z][A-Za-z_-]{0,63}")


def handled(request: HookRequest) -> bool:
    """Whether mcphost has a say in this event (other events get no answer: the agent goes on)."""
    return request.event in (PRE_TOOL_USE, PERMISSION_REQUEST)


def render(request: HookRequest, decision: str, reason: str) -> HookAnswer:
    """The answer `request`'s agent reads for `decision` (allow | deny | ask | pass)."""
    reason = reason[:MAX_REASON_CHARS] or "mcphost"
    dialect, event = request.dialect, request.event
    if decision == "pass" or not handled(request):
        return HookAnswer()
    if request.camel_case:  # Copilot CLI's own format: the keys at the top level
        if event == PERMISSION_REQUEST:
            if decision == "ask":
                return HookAnswer()
            body: dict[str, Any] = {"behavior": decision}
            if decision == "deny":
                body["message"] = reason
            return _json(body)
        return _json({"permissionDecision": decision, "permissionDecisionReason": reason})
    if event == PERMISSION_REQUEST:
        # The agent is about to show its own prompt: "ask" is no answer, and lets it.
        if decision == "ask":
            return HookAnswer()
        behavior: dict[str, Any] = {"behavior": decision}
        if decision == "deny":
            behavior["message"] = reason
        return _json({"hookSpecificOutput": {"hookEventName": PERMISSION_REQUEST, "decision": behavior}})
    if dialect == "codex" and decision != "deny":
        # Codex reads only a deny (an allow or ask would fail the hook); saying nothing leaves the call to its
        # own approval, which is what both amount to.
        return HookAnswer()
    return _json(
        {
            "hookSpecificOutput": {
                "hookEventName": PRE_TOOL_USE,
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
            }
        }
    )


def blocked(reason: str, request: HookRequest | None = None) -> HookAnswer:
    """mcphost cannot decide (an unreadable payload or config): the call must not go ahead. Exit 2 blocks a
    PreToolUse in Claude Code, VS Code and Codex; a PermissionRequest and Copilot CLI's hooks ignore exit codes, so
    they are printed a deny."""
    reason = reason[:MAX_REASON_CHARS]
    if request is not None and (
        request.camel_case or request.dialect == "copilot-cli" or request.event == PERMISSION_REQUEST
    ):
        return render(request, "deny", reason)
    return HookAnswer(stderr=reason + "\n", exit_code=2)


def _json(body: dict[str, Any]) -> HookAnswer:
    return HookAnswer(stdout=json.dumps(body, ensure_ascii=True) + "\n")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
