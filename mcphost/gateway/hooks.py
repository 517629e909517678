"""The agent's own tools, asked about by its hooks: judged read, write or destructive by the `[hooks]` table (or by
the MCP server's annotations when mcphost knows the server), then let through, refused or put to the person by the
same policy, remembered grants and prompts as a call through mcphost, and put on record before the answer goes back.

mcphost does not run these tools: the agent does, once told it may. So the record is a `hook_decision`, whose status
is the answer (allowed, denied, expired, or asked: nobody was attached here, so the agent's own prompt asks).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from mcphost.activity.capture import capture_arguments
from mcphost.activity.record import (
    ActivityRecord,
    Decision,
    ErrorInfo,
    RecordIntent,
    RecordMetadata,
    RecordType,
    Status,
    new_record_id,
    utc_now,
)
from mcphost.activity.redact import PREVIEW_MARGIN, redact_head, valid_text
from mcphost.activity.writer import ActivityLog
from mcphost.approval.approvals import Approvals, Authorization, CallFacts
from mcphost.approval.prompt import GrantMatch
from mcphost.config import LoadedConfig, effective_annotations
from mcphost.errors import ErrorCode, GatewayError
from mcphost.gateway.arguments import check_input
from mcphost.gateway.tools import RETRIEVE_TOOLS
from mcphost.intent import (
    MAX_REASON_LENGTH,
    PERMISSION_PROMPT_EVENT,
    AgentToolUse,
    ToolVariant,
    classify_agent_tool,
    mcp_tool_name,
)
from mcphost.policy import DecidedBy

# What a hook can answer. "pass": no opinion, the agent goes on as if no hook had run (its own rules and prompt).
ALLOW, DENY, ASK, PASS = "allow", "deny", "ask", "pass"

# The names of mcphost's own tools, as an agent calls them through its MCP server.
MCPHOST_TOOLS = frozenset({RETRIEVE_TOOLS, *(variant.value for variant in ToolVariant)})

# The longest name, id or path a hook may send besides the tool's input (PATH_MAX is 4096 on Linux).
MAX_HOOK_FIELD_CHARS = 4096
# How long a person's allow of one call answers the same call's later PermissionRequest.
ALLOWED_MEMORY_S = 120.0
# The MCP annotations of a tool mcphost fronts, as its upstream gives them now (None: not known).
FindAnnotations = Callable[[str, str], Mapping[str, Any] | None]

# What a remembered allow of a shell command may cover, by whether it is one plain command.
_SHELL_GRANTS = {
    True: frozenset({GrantMatch.ARGUMENTS, GrantMatch.PATTERN}),
    False: frozenset({GrantMatch.ARGUMENTS}),
}

# The note on an exception whose call is already on record (see `AgentToolGate.decide`).
ON_RECORD = "mcphost: this failure is on record"

AGENT_LABELS = {"claude-code": "Claude Code", "vscode": "VS Code", "codex": "Codex", "copilot-cli": "Copilot CLI"}


@dataclass(frozen=True, slots=True)
class HookVerdict:
    decision: str  # allow | deny | ask | pass
    reason: str
    variant: str | None = None
    record_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        fields = {
            "decision": self.decision,
            "reason": self.reason,
            "variant": self.variant,
            "record_id": self.record_id,
        }
        return {key: value for key, value in fields.items() if value is not None}


def session_name(agent: str, session_id: str | None) -> str | None:
    """A name for the agent's session in records and grants: derived, never the id itself (a transcript's name)."""
    if not session_id:
        return None
    return f"{agent}-" + hashlib.sha256(f"{agent}\0{session_id}".encode("utf-8", "surrogatepass")).hexdigest()[:12]


class AgentToolGate:
    """Decides one agent tool call for a hook. Collaborators come in: the config in force, the log, the approvals,
    and how to find an MCP tool's annotations (the daemon's upstreams; nothing in a hook run without a daemon)."""

    def __init__(
        self,
        config: Callable[[], LoadedConfig],
        activity: ActivityLog,
        approvals: Approvals,
        find_annotations: FindAnnotations | None = None,
    ) -> None:
        self._config = config
        self.activity = activity
        self.approvals = approvals
        self._find = find_annotations or (lambda server, tool: None)
        # Calls a person allowed moments ago, by agent session, tool and input: the same call's PermissionRequest
        # (Codex asks again when its PreToolUse could not say allow) is answered without a second prompt.
        self._allowed: dict[str, float] = {}

    async def decide(self, use: AgentToolUse) -> HookVerdict:
        started = time.perf_counter()
        loaded = self._config()
        config = loaded.config
        mcp = mcp_tool_name(use.tool_name, config.servers)
        if mcp is not None and mcp[0] in config.hooks.mcphost_servers and mcp[1] in MCPHOST_TOOLS:
            # mcphost's own tools: the call itself is decided, prompted and recorded when it reaches mcphost. Any
            # other name under that server is no tool of mcphost's, and is judged as any other.
            # A hook leaves the search to the agent's own settings; a permission prompt has no such thing to leave
            # it to, and the search is a read.
            keep_out = mcp[1] == RETRIEVE_TOOLS and use.event != PERMISSION_PROMPT_EVENT
            return HookVerdict(PASS if keep_out else ALLOW, "mcphost decides this call itself")
        annotations: dict[str, Any] | None = None
        if mcp is not None and mcp[0] in config.servers:
            found = self._find(*mcp)
            annotations = effective_annotations(config.servers[mcp[0]], mcp[1], dict(found) if found else None)
        judged = classify_agent_tool(use.tool_name, use.tool_input, config.hooks.to_table(), annotations)
        if judged.operation is None:
            return HookVerdict(PASS, judged.because)
        variant = ToolVariant.for_operation(judged.operation)
        # Copied into the record as they came only when they are of a name's or a path's size: one refused for its
        # size (`_check_use`) is kept in part, not a megabyte twice over in every record an agent can make.
        server, tool = (_kept(part) for part in (mcp if mcp is not None else (use.agent, use.tool_name)))
        session = session_name(use.agent, use.session_id)
        client = f"{AGENT_LABELS.get(use.agent, use.agent)} (hook)"
        reason = _agent_reason(use.tool_input)
        intent = {"operation_type": judged.operation.value, **({"reason": reason} if reason else {})}
        log = config.log
        record = ActivityRecord(
            type=RecordType.HOOK_DECISION.value,
            server=server,
            tool=tool,
            metadata=RecordMetadata(
                intent=RecordIntent(**intent),
                tool_variant=variant.value,
                annotations=annotations or None,
                hook={
                    "agent": _kept(use.agent),
                    "event": _kept(use.event),
                    "tool_name": _kept(use.tool_name),
                    **({"tool_use_id": _kept(use.tool_use_id)} if use.tool_use_id else {}),
                    **({"cwd": _kept(use.cwd)} if use.cwd else {}),
                    "because": judged.because,
                },
            ),
            session_id=session,
            client=client,
        )
        try:
            _check_use(use, variant)
        except GatewayError as refusal:
            # Nothing past here could be sure to handle it (a prompt, a grant's key, the record's arguments): the
            # call is refused on record, as a call through mcphost with such arguments is.
            record.status = Status.REJECTED.value
            record.error = ErrorInfo(code=refusal.code.value, message=refusal.message)
            record.duration_ms = _ms_since(started)
            record.id, record.timestamp = new_record_id(), utc_now()
            await self.activity.write(record)
            return HookVerdict(DENY, f"mcphost: refused: {refusal.message}", variant.value, record.id)
        arguments = dict(use.tool_input)
        record.arguments, record.arguments_preview = capture_arguments(
            arguments, log.arguments_max_bytes, log.redact_keys
        )
        facts = CallFacts(
            variant=variant,
            server=server,
            tool=tool,
            intent=intent,
            annotations=annotations or {},
            call_with=variant.value,
            # What grants are bound to: the agent's tool as it is named, and how it was judged.
            description=f"{use.agent} tool {use.tool_name}",
            input_schema={},
            # A shell tool's command is what the person is shown and what a remembered allow is keyed on: never the
            # tool with any arguments, a pattern only on a plain command (`AgentToolClass.runs`).
            arguments=arguments if judged.runs is None else dict(judged.runs),
            grant_matches=None if judged.runs is None else _SHELL_GRANTS[judged.plain],
            rule_arguments=None if judged.runs is None else arguments,
            redact_keys=log.redact_keys,
            warnings=[f"{AGENT_LABELS.get(use.agent, use.agent)} asks through its {use.event} hook: {judged.because}"],
            session_id=session,
            client=client,
        )
        memo = _memo_key(use)
        now = time.monotonic()
        self._allowed = {key: until for key, until in self._allowed.items() if until > now}
        try:
            if use.event != "PreToolUse" and memo in self._allowed:
                rule = f"permissions.{judged.operation.value}"
                authorization = Authorization(
                    Decision(
                        by=DecidedBy.EDITOR.value,
                        action="ask",
                        outcome=ALLOW,
                        rule=rule,
                        remember="once",
                        approver="the same call's PreToolUse prompt",
                    )
                )
            else:
                authorization = await self.approvals.authorize(loaded, facts)
        except BaseException as exc:
            # The hook was killed or timed out while a person was asked: the call is the agent's to drop. Or a
            # fault of mcphost's (a bug, a state file it cannot read): on record as what it is, and the hook blocks.
            record.status = Status.CANCELLED.value
            if isinstance(exc, Exception):
                record.status = Status.ERROR.value
                failed = f"mcphost failed to decide the call: {type(exc).__name__}: {exc}"
                record.error = ErrorInfo(code=ErrorCode.UPSTREAM_ERROR.value, message=failed)
            record.duration_ms = _ms_since(started)
            record.id, record.timestamp = new_record_id(), utc_now()
            with anyio.CancelScope(shield=True):
                await self.activity.write(record)
            exc.add_note(ON_RECORD)  # whoever catches it next must not record the call a second time
            raise
        decision, error = authorization.decision, authorization.error
        record.warnings = list(authorization.warnings)
        answer, status, why = ALLOW, Status.ALLOWED, f"mcphost: allowed ({_who(decision)})"
        if error is not None and error.code is ErrorCode.NO_APPROVER:
            # Nobody here to ask: the agent's own prompt asks its user instead, and the record says so.
            decision = Decision(by=DecidedBy.AGENT.value, action=decision.action, outcome=ASK, rule=decision.rule)
            answer, status = ASK, Status.ASKED
            why = (
                f'mcphost: {judged.operation.value} needs a person ({decision.rule} = "{decision.action}") and no '
                "editor or `mcphost approve` is attached, so the agent asks you itself"
            )
        elif error is not None:
            answer = DENY
            status = Status.EXPIRED if error.code is ErrorCode.APPROVAL_TIMEOUT else Status.DENIED
            why = f"mcphost: {error.message}"
            record.error = ErrorInfo(code=error.code.value, message=error.message)
        record.decision = decision
        record.status = status.value
        if answer == ALLOW and decision.by == DecidedBy.EDITOR.value:
            self._allowed[memo] = time.monotonic() + ALLOWED_MEMORY_S
        record.duration_ms = _ms_since(started)
        record.id, record.timestamp = new_record_id(), utc_now()
        durable = await self.activity.write(record)
        if not durable and log.on_failure == "refuse" and answer != DENY:
            activity = self.activity
            return HookVerdict(
                DENY,
                f"mcphost: refused because its record cannot be made durable ({activity.problem}); {activity.remedy}",
                variant.value,
                record.id,
            )
        return HookVerdict(answer, why, variant.value, record.id)


def blocked_record(
    agent: str | None, event: str | None, tool_name: str | None, reason: str, *, fault: bool
) -> ActivityRecord:
    """The record of a hook that blocked before any gate saw the call: its payload could not be read (`fault`
    False: rejected, as a call with such arguments is), or mcphost could not decide (the config unreadable, a fault
    of its own: an error). What of the call could be read is kept."""
    agent, event, tool_name = (_kept(value) if value else value for value in (agent, event, tool_name))
    hook = {"agent": agent, "event": event, "tool_name": tool_name, "because": "blocked before it could be judged"}
    code = ErrorCode.UPSTREAM_ERROR if fault else ErrorCode.INVALID_ARGS
    return ActivityRecord(
        type=RecordType.HOOK_DECISION.value,
        server=agent,
        tool=tool_name or None,
        status=(Status.ERROR if fault else Status.REJECTED).value,
        metadata=RecordMetadata(hook={key: value for key, value in hook.items() if value}),
        error=ErrorInfo(code=code.value, message=reason),
        client=f"{AGENT_LABELS.get(agent, agent)} (hook)" if agent else None,
    )


def _check_use(use: AgentToolUse, variant: ToolVariant) -> None:
    """Refuse what mcphost could not record faithfully (the checks of every call's arguments): a tool input nested
    deeper than MAX_DEPTH, or text anywhere in the use that is not valid Unicode."""
    check_input(use.tool_input, variant, "tool_input")
    for field in ("agent", "event", "tool_name", "session_id", "tool_use_id", "cwd"):
        value = getattr(use, field)
        if isinstance(value, str) and len(value) > MAX_HOOK_FIELD_CHARS:
            # Copied into every record and prompt of the call: a path or a name, never a file's worth.
            raise GatewayError(
                ErrorCode.INVALID_ARGS,
                f"the hook's {field} is {len(value)} characters long (at most {MAX_HOOK_FIELD_CHARS})",
                {"variant": variant.value, "field": field},
            )
        if isinstance(value, str) and not valid_text(value):
            raise GatewayError(
                ErrorCode.INVALID_ARGS,
                f'the hook\'s {field} is not valid Unicode (it holds a lone UTF-16 surrogate such as "\\udfff")',
                {"variant": variant.value, "field": field},
            )


def _kept(value: str) -> str:
    """A hook's name, id or path as its record keeps it: whole up to MAX_HOOK_FIELD_CHARS, else its start."""
    if len(value) <= MAX_HOOK_FIELD_CHARS:
        return value
    return f"{value[:MAX_HOOK_FIELD_CHARS]}... ({len(value) - MAX_HOOK_FIELD_CHARS} more characters)"


def _memo_key(use: AgentToolUse) -> str:
    tool_input = json.dumps(use.tool_input, sort_keys=True, default=str, ensure_ascii=True)
    key = f"{use.agent}\0{use.session_id}\0{use.tool_name}\0{tool_input}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _who(decision: Decision) -> str:
    if decision.by == DecidedBy.POLICY.value:
        return f'{decision.rule} = "{decision.action}"'
    if decision.by == DecidedBy.GRANT.value:
        return f"a remembered approval ({decision.remember})"
    return f"by {decision.approver or decision.by}"


def _agent_reason(tool_input: Mapping[str, Any]) -> str | None:
    """What the agent said the call is for, when its tool carries a reason (Bash's `description`, VS Code's
    `explanation`): shown to the person as the agent's words."""
    for key in ("description", "explanation", "goal"):
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            # Redacted before it is cut, as an answer's preview is: a credential the cut went through would keep its
            # start, no format to know it by.
            return redact_head(value, MAX_REASON_LENGTH, MAX_REASON_LENGTH + PREVIEW_MARGIN)[:MAX_REASON_LENGTH]
    return None


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
