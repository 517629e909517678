"""Who lets a call through: the policy, a remembered grant, or a person asked through the broker (or, with
`no_editor = "elicit"`, through the agent's own MCP client). The gateway calls `Approvals.authorize` once per call
that passed the intent check; the decision and the error to end the call with come back as plain data.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from mcphost.activity.capture import capture_arguments
from mcphost.activity.record import Decision
from mcphost.activity.redact import scrub
from mcphost.approval.broker import BrokerResult, Outcome, PermissionBroker, ms_since
from mcphost.approval.grants import (
    Grant,
    GrantStore,
    arguments_digest,
    pattern_matches,
    pattern_problem,
    tool_fingerprint,
)
from mcphost.approval.prompt import (
    Answer,
    GrantMatch,
    PermissionRequest,
    PermissionResponse,
    PromptIntent,
    one_shot_client,
)
from mcphost.config import LoadedConfig
from mcphost.errors import ErrorCode, GatewayError
from mcphost.intent import VARIANTS_BY_VALUE, ToolVariant, stricter_variant
from mcphost.policy import (
    Action,
    DecidedBy,
    NoEditor,
    Policy,
    Remember,
    ResolvePath,
    RuleSubject,
    clamp_remember,
    decide,
    remember_options,
)

logger = logging.getLogger(__name__)

# What a prompt shows of the arguments (redacted): beyond this, the start of their JSON.
PROMPT_ARGUMENTS_MAX_BYTES = 16 * 1024
# What a grant for exact arguments keeps to be listed by: the start of their redacted JSON.
GRANT_PREVIEW_BYTES = 160
# A suggested pattern names at most this many arguments, each value at most this long.
SUGGEST_MAX_ARGUMENTS = 4
SUGGEST_MAX_VALUE = 300


@dataclass(frozen=True, slots=True)
class Elicited:
    """An answer given before this request (2026-07-28: in the repeated call), with how long ago it was asked."""

    approve: bool
    asked_ms: float


class InputRequired(Exception):
    """An `Elicit` that cannot wait for its answer raises this (2026-07-28: the question goes back in the call's
    result, and the agent's client repeats the call with the answer). The call ends here, unforwarded, as "asked";
    `decision` says so for its record."""

    def __init__(self, message: str, schema: dict[str, Any]) -> None:
        super().__init__(message)
        self.message = message
        self.schema = schema
        self.decision: Decision | None = None


# Asks the agent's MCP client to put a yes/no question to its user; True for yes. None where the client cannot.
Elicit = Callable[[str, dict[str, Any]], Awaitable[bool | Elicited]]


@dataclass(slots=True)
class CallFacts:
    """What a person needs to decide on one call, and what grants are keyed on."""

    variant: ToolVariant
    server: str
    tool: str
    intent: dict[str, str]
    annotations: dict[str, Any]
    call_with: str
    # The tool's definition as the server gives it, for the fingerprint grants are bound to.
    description: str
    input_schema: dict[str, Any]
    # The tool's arguments as the agent sent them: only their redacted capture ever leaves this process.
    arguments: dict[str, Any] = field(default_factory=dict)
    redact_keys: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    session_id: str | None = None
    client: str | None = None
    # What a remembered allow may cover (None: anything `match_options` offers). A shell command's is never the tool
    # with any arguments: that would be any command at all judged a write, and all a shell can do is one.
    grant_matches: frozenset[GrantMatch] | None = None
    # What rules look at, when it is more than `arguments` (a shell tool's whole input; its command is shown).
    rule_arguments: dict[str, Any] | None = None

    @property
    def qualified(self) -> str:
        return f"{self.server}:{self.tool}"

    @property
    def fingerprint(self) -> str:
        # Computed only for calls that need a person: hashing the schema is no work for a call the policy allows.
        return tool_fingerprint(self.description, self.input_schema, self.annotations)


@dataclass(slots=True)
class Authorization:
    decision: Decision
    error: GatewayError | None = None
    warnings: list[str] = field(default_factory=list)  # for the record and the agent


def _expires_at(seconds: float) -> str:
    moment = datetime.now(UTC) + timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Approvals:
    def __init__(self, broker: PermissionBroker, grants: GrantStore, workspace: Path | None = None) -> None:
        self.broker = broker
        # Rules that ask where a path is (`inside`) resolve relative paths against the workspace the host started in.
        self.resolve_path = path_resolver(workspace or Path.cwd())
        self.grants = grants
        # server:tool -> (old, new) annotations, from the upstream's own change notices; shown until a person
        # has decided on the tool once since.
        self._annotation_changes: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}

    def note_annotation_change(
        self, server: str, tool: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        self._annotation_changes[f"{server}:{tool}"] = (old, new)

    async def authorize(self, loaded: LoadedConfig, facts: CallFacts, elicit: Elicit | None = None) -> Authorization:
        policy = loaded.config.permissions.to_policy()
        # The stricter of what the agent declared and what the server says: a tool the server does not mark
        # read-only is no read, whichever variant it is called through (strict validation aside, which rejects).
        governing = stricter_variant(facts.variant, VARIANTS_BY_VALUE[facts.call_with])
        subject = RuleSubject(
            governing,
            facts.server,
            facts.tool,
            facts.client,
            facts.arguments if facts.rule_arguments is None else facts.rule_arguments,
        )
        verdict = decide(policy, subject, loaded.config.compiled_rules, self.resolve_path)
        key = verdict.rule
        details: dict[str, Any] = {
            "variant": str(facts.variant),
            "tool": facts.qualified,
            "policy": str(verdict.action),
        }
        escalated: list[str] = []
        if governing is not facts.variant:
            escalated.append(
                f"{facts.qualified} is not marked read-only by its server, so this {facts.variant.value} call is "
                f'treated as {governing.operation.value} ({key} = "{verdict.action.value}"); a per-server '
                "annotation override in the config declares a tool read-only"
                if facts.variant is ToolVariant.READ
                else f"{facts.qualified} is marked destructive by its server, so this {facts.variant.value} call is "
                f'treated as destructive ({key} = "{verdict.action.value}")'
            )

        def decision(by: DecidedBy, outcome: str, **extra: Any) -> Decision:
            # The members themselves: the model keeps their values as plain str, without `.value`'s property call.
            return Decision(
                by=by,
                action=verdict.action,
                outcome=outcome,
                rule=verdict.rule,
                reason=verdict.reason,
                **extra,
            )

        if verdict.action is Action.DENY:
            if verdict.rule.startswith("rules["):
                because = f": {verdict.reason}" if verdict.reason else ""
                message = (
                    f"Permission denied by {verdict.rule} in {loaded.path}{because}. Do not retry it as is; ask the "
                    "user if it should be allowed."
                )
                details["rule"] = verdict.rule
                if verdict.reason:
                    details["reason"] = verdict.reason
            else:
                message = (
                    f'Permission denied by policy: {key} = "deny" in {loaded.path}. '
                    f'Change it to "allow", "ask" or "confirm" to let {governing.operation.value} calls through.'
                )
            return Authorization(
                decision(DecidedBy.POLICY, "deny"),
                GatewayError(ErrorCode.PERMISSION_DENIED, message, {**details, "denied_by": DecidedBy.POLICY.value}),
                escalated,
            )
        if verdict.action is Action.ALLOW:
            return Authorization(decision(DecidedBy.POLICY, "allow"), warnings=escalated)

        warnings: list[str] = escalated
        fingerprint = facts.fingerprint
        found = self.grants.lookup(
            facts.session_id,
            facts.server,
            facts.tool,
            facts.variant.value,
            fingerprint,
            facts.arguments,
            facts.grant_matches,
        )
        for stale in found.stale:
            warnings.append(
                f"a remembered approval ({stale.scope}) for {facts.qualified} was dropped: the tool's definition or "
                "annotations changed since it was given"
            )
        for wide in found.too_wide:
            warnings.append(
                f"a remembered approval ({wide.scope}, {wide.id}) for {facts.qualified} with any arguments does not "
                "cover this call: a shell command is remembered by its command (exactly, or a pattern on a plain "
                f"command); `mcphost grants revoke {wide.id}` removes it"
            )
        if found.grant is not None:
            grant = found.grant
            return Authorization(
                Decision(
                    by=DecidedBy.GRANT.value,
                    action=verdict.action.value,
                    outcome="allow",
                    rule=f"grant:{grant.scope}:{grant.id}",
                    remember=grant.scope,
                    approver=grant.approver,
                    match=None if grant.match is GrantMatch.TOOL else grant.match.value,
                ),
                warnings=warnings,
            )

        changed = self._annotation_changes.get(facts.qualified)
        if changed is not None:
            warnings.append(
                f"the server changed this tool's annotations since mcphost last saw them: {_hints(changed[0])} -> "
                f"{_hints(changed[1])}"
            )
        has_session = facts.session_id is not None and not one_shot_client(facts.client)
        options = remember_options(policy, governing, has_session)
        # A person is shown the arguments whatever the log keeps of them ([log] arguments_max_bytes may be 0).
        shown, preview = capture_arguments(facts.arguments, PROMPT_ARGUMENTS_MAX_BYTES, facts.redact_keys)
        offered = match_options(options, facts.arguments, facts.grant_matches)
        request = PermissionRequest(
            id=uuid.uuid4().hex[:16],
            variant=facts.variant.value,
            operation=governing.operation.value,
            action="confirm" if verdict.action is Action.CONFIRM else "ask",
            server=facts.server,
            tool=facts.tool,
            arguments=shown,
            arguments_preview=preview,
            intent=PromptIntent(**facts.intent),
            annotations=facts.annotations,
            call_with=facts.call_with,
            warnings=[*facts.warnings, *warnings],
            expires_at=_expires_at(policy.prompt_timeout),
            remember_options=options,
            session_id=facts.session_id,
            client=facts.client,
            rule=verdict.rule,
            rule_reason=verdict.reason,
            match_options=offered,
            suggested_pattern=suggest_pattern(facts.arguments, shown) if GrantMatch.PATTERN in offered else None,
        )
        # Everything the agent or the server chose (its reason, names, warnings quoting them) is redacted for the
        # person's screen as it is for the disk: a prompt is no way around the log's promise.
        request = PermissionRequest.model_validate(scrub(request.model_dump(mode="json"), facts.redact_keys))

        if not self.broker.approvers and policy.no_editor is NoEditor.ELICIT and elicit is not None:
            if verdict.action is Action.CONFIRM:
                # A deliberate confirmation is the person's, in their editor or terminal: the agent's own client
                # answering a yes/no form is exactly what confirm exists to rule out.
                return Authorization(
                    decision(DecidedBy.NO_APPROVER, "deny"),
                    no_approver_error(
                        loaded,
                        governing,
                        verdict.action,
                        "a call that needs a deliberate confirmation is never left to the agent's own client",
                        details,
                    ),
                    warnings,
                )
            return await self._elicit(policy, facts, request, elicit, verdict.action, warnings)

        result = await self.broker.request(request, expires_in=policy.prompt_timeout, batch_window=policy.batch_window)
        if result.outcome is Outcome.ANSWERED:
            self._annotation_changes.pop(facts.qualified, None)
            return self._answered(
                result, facts, options, offered, verdict.action, verdict.rule, verdict.reason, warnings
            )
        if result.outcome is Outcome.TIMEOUT:
            return Authorization(
                decision(DecidedBy.TIMEOUT, "expired", wait_ms=result.wait_ms),
                GatewayError(
                    ErrorCode.APPROVAL_TIMEOUT,
                    f"Nobody answered the approval prompt for '{facts.qualified}' within "
                    f"{policy.prompt_timeout:g} seconds ([permissions] prompt_timeout in {loaded.path}); the call "
                    "was not made. Retry when the user is at their editor, or ask them to raise prompt_timeout.",
                    {**details, "prompt_timeout": policy.prompt_timeout},
                ),
                warnings,
            )
        return Authorization(
            decision(DecidedBy.NO_APPROVER, "deny", wait_ms=result.wait_ms or None),
            no_approver_error(loaded, governing, verdict.action, result.reason, details),
            warnings,
        )

    def _answered(
        self,
        result: BrokerResult,
        facts: CallFacts,
        options: list[Remember],
        offered: list[GrantMatch],
        action: Action,
        rule: str,
        reason: str | None,
        warnings: list[str],
    ) -> Authorization:
        assert result.response is not None
        response = result.response

        def decided(outcome: str, remember: str | None = None, match: GrantMatch | None = None) -> Decision:
            return Decision(
                by=DecidedBy.EDITOR.value,
                action=action.value,
                outcome=outcome,
                rule=rule,
                reason=reason,
                wait_ms=result.wait_ms,
                remember=remember,
                approver=result.approver,
                match=None if match is None or match is GrantMatch.TOOL else match.value,
                batch=result.batch,
            )

        if response.decision is Answer.DENY:
            # A batch's answer turned into a deny says why (a destructive call allowed without being named).
            why = f" ({result.reason})" if result.reason else ""
            return Authorization(
                decided("deny"),
                GatewayError(
                    ErrorCode.PERMISSION_DENIED,
                    f"Permission denied by the user ({result.approver}): they did not approve this "
                    f"{facts.variant.value} call to '{facts.qualified}'{why}. Do not retry it as is; ask the user "
                    "how to proceed.",
                    {
                        "variant": facts.variant.value,
                        "tool": facts.qualified,
                        "denied_by": DecidedBy.EDITOR.value,
                        "approver": result.approver,
                    },
                ),
                warnings,
            )
        remember = clamp_remember(response.remember, options)
        if remember is not response.remember:
            warnings.append(
                f"remember '{response.remember.value}' is not allowed for this call ([permissions] "
                f"remember_{facts.variant.operation.value}); remembered as '{remember.value}'"
            )
        match = GrantMatch.TOOL
        if remember is not Remember.ONCE:
            narrowed = narrow_grant(response, facts, offered)
            if isinstance(narrowed, str):
                warnings.append(f"the approval was not remembered: {narrowed}; allowed once")
                remember = Remember.ONCE
            else:
                match = narrowed.get("match", GrantMatch.TOOL)
                remember = self._remembered(
                    remember,
                    warnings,
                    Grant(
                        scope="session" if remember is Remember.SESSION else "always",
                        server=facts.server,
                        tool=facts.tool,
                        variant=facts.variant.value,
                        fingerprint=facts.fingerprint,
                        session_id=facts.session_id if remember is Remember.SESSION else None,
                        approver=result.approver,
                        **narrowed,
                    ),
                )
        return Authorization(decided("allow", remember.value, match), None, warnings)

    def _remembered(self, remember: Remember, warnings: list[str], grant: Grant) -> Remember:
        """`grant` kept; what the person's answer is remembered as: ONCE, with a warning, when the state file
        cannot take it (a full disk, its lock held by a stopped process). The person allowed the call all the same."""
        try:
            self.grants.add(grant)
        except (OSError, ValueError) as exc:  # ValueError: text no file can hold (a lone surrogate)
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)[:200]
            warnings.append(
                f"the approval was not remembered: {self.grants.path.name} cannot be written ({why}); allowed once"
            )
            return Remember.ONCE
        return remember

    async def _elicit(
        self,
        policy: Policy,
        facts: CallFacts,
        request: PermissionRequest,
        elicit: Elicit,
        action: Action,
        warnings: list[str],
    ) -> Authorization:
        started = time.perf_counter()
        message = elicitation_message(request)
        schema = {
            "type": "object",
            "properties": {"approve": {"type": "boolean", "title": f"Allow {facts.variant.value} {facts.qualified}?"}},
            "required": ["approve"],
        }
        rule = f"permissions.no_editor = {policy.no_editor.value}"
        answer: bool | None = None
        wait_ms: float | None = None
        try:
            with anyio.move_on_after(policy.prompt_timeout):
                given = await elicit(message, schema)
                if isinstance(given, Elicited):
                    wait_ms = given.asked_ms
                    # Answered in a later request: an answer given after the prompt's time is no answer.
                    answer = given.approve if given.asked_ms <= policy.prompt_timeout * 1000 else None
                else:
                    answer = given
        except InputRequired as asked:
            asked.decision = Decision(
                by=DecidedBy.ELICITATION.value, action=action.value, outcome="asked", rule=rule, wait_ms=0.0
            )
            raise
        except Exception as exc:
            logger.info("elicitation for %s failed: %s", facts.qualified, exc)
            answer = False
        if wait_ms is None:
            wait_ms = ms_since(started)
        details = {"variant": facts.variant.value, "tool": facts.qualified, "denied_by": DecidedBy.ELICITATION.value}
        if answer is None:
            return Authorization(
                Decision(
                    by=DecidedBy.TIMEOUT.value, action=action.value, outcome="expired", rule=rule, wait_ms=wait_ms
                ),
                GatewayError(
                    ErrorCode.APPROVAL_TIMEOUT,
                    f"Nobody answered the approval question for '{facts.qualified}' within "
                    f"{policy.prompt_timeout:g} seconds; the call was not made. Retry when the user is there.",
                    details,
                ),
                warnings,
            )
        outcome = "allow" if answer else "deny"
        decided = Decision(
            by=DecidedBy.ELICITATION.value,
            action=action.value,
            outcome=outcome,
            rule=rule,
            wait_ms=wait_ms,
            remember=Remember.ONCE.value if answer else None,
            approver="agent client (elicitation)",
        )
        if answer:
            return Authorization(decided, None, warnings)
        return Authorization(
            decided,
            GatewayError(
                ErrorCode.PERMISSION_DENIED,
                f"Permission denied by the user (asked through the agent's client): the {facts.variant.value} call "
                f"to '{facts.qualified}' was not approved. Do not retry it as is; ask the user how to proceed.",
                details,
            ),
            warnings,
        )


def match_options(
    remember: list[Remember], arguments: dict[str, Any], allowed: frozenset[GrantMatch] | None = None
) -> list[GrantMatch]:
    """What a remembered allow may be narrowed to, of what is `allowed`: nothing when nothing can be remembered; a
    pattern only where there is a string argument to put a glob on."""
    if all(r is Remember.ONCE for r in remember):
        return []
    options = [GrantMatch.TOOL]
    if arguments:
        options.append(GrantMatch.ARGUMENTS)
    if any(isinstance(v, str) for v in arguments.values()):
        options.append(GrantMatch.PATTERN)
    return options if allowed is None else [match for match in options if match in allowed]


def _glob_literal(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def suggest_pattern(arguments: dict[str, Any], shown: dict[str, Any] | None) -> dict[str, str] | None:
    """A starting point for a pattern grant, from what the person is shown: a path-like argument widened to its
    directory (`dir/*`), any other short string as it is. An argument redaction changed is left out (its glob
    could only name the placeholder), as is anything long. The person edits and confirms it; never applied unseen."""
    if not shown:
        return None
    pattern: dict[str, str] = {}
    for name, value in arguments.items():
        if len(pattern) >= SUGGEST_MAX_ARGUMENTS:
            break
        if not isinstance(value, str) or shown.get(name) != value or not value or len(value) > SUGGEST_MAX_VALUE:
            continue
        head, sep, _ = value.rpartition("/")
        pattern[name] = f"{_glob_literal(head)}/*" if sep and head else _glob_literal(value)
    return pattern or None


def narrow_grant(response: PermissionResponse, facts: CallFacts, offered: list[GrantMatch]) -> dict[str, Any] | str:
    """The Grant fields that narrow a remembered allow to what the person picked, or why it cannot be remembered:
    it must be one the prompt offered (a client may answer anything), and a pattern must be well formed and match
    this very call (else the person confirmed something other than what they saw)."""
    match = response.match
    if match not in offered:
        words = {GrantMatch.TOOL: "any arguments", GrantMatch.ARGUMENTS: "exact arguments"}
        return (
            f"it was answered for {words.get(match, 'a pattern')}, which this call was not offered (offered: "
            f"{', '.join(m.value for m in offered) or 'nothing'})"
        )
    if match is GrantMatch.PATTERN:
        problem = pattern_problem(response.pattern)
        if problem is not None:
            return problem
        assert response.pattern is not None
        if not pattern_matches(response.pattern, facts.arguments):
            return "the pattern does not match this call's arguments"
        return {"match": match, "pattern": dict(response.pattern)}
    if match is GrantMatch.ARGUMENTS:
        salt = secrets.token_hex(8)
        shown, preview = capture_arguments(facts.arguments, GRANT_PREVIEW_BYTES, facts.redact_keys)
        text = json.dumps(shown, ensure_ascii=False) if shown is not None else f"{preview}…"
        return {
            "match": match,
            "digest": arguments_digest(facts.arguments, salt),
            "salt": salt,
            "arguments_preview": scrub(text, facts.redact_keys),
        }
    return {}


def no_approver_error(
    loaded: LoadedConfig, variant: ToolVariant, action: Action, reason: str | None, details: dict[str, Any]
) -> GatewayError:
    key = f"permissions.{variant.operation.value}"
    why = f" ({reason})" if reason else ""
    return GatewayError(
        ErrorCode.NO_APPROVER,
        f'{variant.value} needs approval ({key} = "{action.value}") and nobody is attached to answer{why}: '
        "open VS Code with the mcphost extension or run `mcphost approve` in a terminal, or set "
        f'{key} = "allow" in {loaded.path}.',
        {**details, "denied_by": DecidedBy.NO_APPROVER.value},
    )


def elicitation_message(request: PermissionRequest) -> str:
    """The question put to the person through the agent's client: plain text, the agent's words quoted."""
    arguments = request.arguments_preview
    if request.arguments is not None:
        arguments = json.dumps(request.arguments, ensure_ascii=False)
    lines = [
        f"mcphost: the agent wants to run {request.operation.upper()} tool {request.server}:{request.tool}.",
        f"Arguments: {arguments}",
    ]
    if request.intent.reason:
        lines.append(f"The agent's reason (its own words): {json.dumps(request.intent.reason, ensure_ascii=False)}")
    lines.extend(f"Warning: {w}" for w in request.warnings)
    return "\n".join(lines)


def _hints(annotations: dict[str, Any] | None) -> str:
    if not annotations:
        return "{}"
    keys = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
    shown = {k: annotations[k] for k in keys if k in annotations}
    return "{" + ", ".join(f"{k}: {str(v).lower()}" for k, v in shown.items()) + "}"


def path_resolver(workspace: Path) -> ResolvePath:
    """Where a path an agent names really is: ~ expanded, relative to `workspace`, `..` and symlinks resolved (a
    link inside the workspace that points out of it is outside)."""

    base = str(workspace)

    def resolve(path: str) -> str:
        # Plain os.path on strings: pathlib's objects cost a quarter of this on every call a rule asks about.
        return os.path.realpath(os.path.join(base, os.path.expanduser(path)))  # noqa: PTH111, PTH118

    return resolve
