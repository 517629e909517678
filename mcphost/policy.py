"""The permission policy: what happens to a call that passed the intent check. Pure, no I/O.

`decide` is a function of (policy, variant, server, tool) so that remembered grants and per-tool rules can
slot in later without touching the handlers.
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


class DecidedBy(StrEnum):
    """Who settled a call; recorded with every activity record."""

    POLICY = "policy"
    EDITOR = "editor"
    GRANT = "remembered_grant"
    TIMEOUT = "timeout"
    NO_APPROVER = "no_approver"


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


def decide(policy: Policy, variant: ToolVariant, server: str, tool: str) -> PolicyDecision:
    # server and tool are part of the signature because remembered grants (per server:tool) decide here too.
    del server, tool
    return PolicyDecision(policy.for_variant(variant), f"permissions.{variant.operation.value}")
