"""The permission policy: what happens to a call that passed the intent check, and how long a person's
approval may be remembered. Pure, no I/O: remembered grants are looked up by the caller (mcphost.approval).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mcphost.intent import ToolVariant


class Action(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    CONFIRM = "confirm"
    DENY = "deny"

    @property
    def needs_person(self) -> bool:
        return self in (Action.ASK, Action.CONFIRM)


class Remember(StrEnum):
    """How long a person's "allow" holds."""

    ONCE = "once"  # this call only
    SESSION = "session"  # this agent session, this server:tool, this variant, while the daemon runs
    ALWAYS = "always"  # persisted in the state file until revoked or the tool changes

    @property
    def rank(self) -> int:
        return _REMEMBER_ORDER.index(self)


_REMEMBER_ORDER = [Remember.ONCE, Remember.SESSION, Remember.ALWAYS]


class DecidedBy(StrEnum):
    """Who settled a call; recorded with every activity record."""

    POLICY = "policy"
    EDITOR = "editor"
    GRANT = "remembered_grant"
    TIMEOUT = "timeout"
    NO_APPROVER = "no_approver"
    ELICITATION = "elicitation"  # the agent's MCP client asked its user (no_editor = "elicit")
    AGENT = "agent"  # hooks: nobody attached here, so the agent's own permission prompt asks its user


class NoEditor(StrEnum):
    DENY = "deny"
    ELICIT = "elicit"


@dataclass(frozen=True, slots=True)
class Policy:
    """The `[permissions]` table, as plain data."""

    read: Action = Action.ALLOW
    write: Action = Action.ASK
    destructive: Action = Action.CONFIRM
    prompt_timeout: float = 300.0
    no_editor: NoEditor = NoEditor.DENY
    remember_read: Remember = Remember.ALWAYS
    remember_write: Remember = Remember.ALWAYS
    remember_destructive: Remember = Remember.SESSION  # "always" for destructive calls only when configured

    def for_variant(self, variant: ToolVariant) -> Action:
        if variant is ToolVariant.READ:
            return self.read
        if variant is ToolVariant.WRITE:
            return self.write
        return self.destructive


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    action: Action
    rule: str  # what produced the action, for the record and for the person reading a denial


def remember_limit(policy: Policy, variant: ToolVariant) -> Remember:
    if variant is ToolVariant.READ:
        return policy.remember_read
    if variant is ToolVariant.WRITE:
        return policy.remember_write
    return policy.remember_destructive


def remember_options(policy: Policy, variant: ToolVariant, has_session: bool) -> list[Remember]:
    """The scopes a person may pick for this call: up to the configured limit, and `session` only when the
    agent's connection has a session to tie the approval to."""
    limit = remember_limit(policy, variant)
    return [r for r in _REMEMBER_ORDER if r.rank <= limit.rank and (r is not Remember.SESSION or has_session)]


def clamp_remember(asked: Remember, options: list[Remember]) -> Remember:
    """The longest allowed scope not beyond what the person asked for (an editor may offer more than allowed)."""
    allowed = [r for r in options if r.rank <= asked.rank]
    return max(allowed, key=lambda r: r.rank) if allowed else Remember.ONCE


def decide(policy: Policy, variant: ToolVariant, server: str, tool: str) -> PolicyDecision:
    # server and tool are in the signature for rules per server:tool; remembered grants are looked up by the
    # caller (mcphost.approval), which has the tool's fingerprint and the agent's session.
    del server, tool
    return PolicyDecision(policy.for_variant(variant), f"permissions.{variant.operation.value}")
