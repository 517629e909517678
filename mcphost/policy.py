"""The permission policy: what happens to a call that passed the intent check, and how long a person's
approval may be remembered. Pure, no I/O: remembered grants are looked up by the caller (mcphost.approval), and a
rule that asks where a path really is gets the resolver from its caller too.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

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
    reason: str | None = None  # a rule's own words, shown to the person and, on deny, to the agent


# ---- rules: [[rules]] in config.toml, first match wins, before the per-variant default

# Where a path really is: `~` and `..` resolved, symlinks followed, a relative path taken against the workspace.
ResolvePath = Callable[[str], str]


class ConditionKind(StrEnum):
    GLOB = "glob"
    REGEX = "regex"
    INSIDE = "inside"
    EQUALS = "equals"
    ONE_OF = "one_of"


@dataclass(frozen=True, slots=True)
class ArgCondition:
    """One argument's condition. `pattern` is compiled once (glob, regex); `value` is what the config gave."""

    kind: ConditionKind
    value: Any
    pattern: re.Pattern[str] | None = None

    @classmethod
    def of(cls, kind: ConditionKind, value: Any) -> ArgCondition:
        """Raises ValueError for a regex that does not compile (a config error at load, never at call time)."""
        if kind is ConditionKind.GLOB:
            return cls(kind, value, re.compile(fnmatch.translate(value)))
        if kind is ConditionKind.REGEX:
            try:
                return cls(kind, value, re.compile(value))
            except re.error as exc:
                raise ValueError(f"{value!r} is not a regular expression: {exc}") from None
        return cls(kind, value)

    def holds(self, given: Any, resolve: ResolvePath) -> bool:
        kind = self.kind
        if kind is ConditionKind.EQUALS:
            return _same(given, self.value)
        if kind is ConditionKind.ONE_OF:
            return any(_same(given, option) for option in self.value)
        if not isinstance(given, str):
            return False  # a pattern or a directory says nothing about a number or a list
        if kind is ConditionKind.INSIDE:
            try:
                return path_inside(resolve(given), resolve(self.value))
            except (ValueError, OSError):
                return False  # no such path can exist (a NUL byte): it is inside nothing
        assert self.pattern is not None
        if kind is ConditionKind.GLOB:
            return self.pattern.match(given) is not None
        return self.pattern.search(given) is not None


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: true is not 1, "1" is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if type(a) in (int, float) and type(b) in (int, float):
        return bool(a == b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict | list):
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    return bool(a == b)


def path_inside(path: str, directory: str) -> bool:
    """Whether resolved `path` is `directory` or below it (by whole components: /work2 is not inside /work)."""
    if path == directory:
        return True
    prefix = directory if directory.endswith(os.sep) else directory + os.sep
    return path.startswith(prefix)


@dataclass(frozen=True, slots=True)
class Rule:
    """One `[[rules]]` table, compiled. `index` counts from 0 in the file's order and names it in records."""

    index: int
    tool: re.Pattern[str]  # the glob on "server:tool"
    variants: frozenset[ToolVariant] | None  # None: every variant
    client: re.Pattern[str] | None  # None: any client, an unnamed one too
    args: tuple[tuple[str, ArgCondition], ...]
    action: Action
    reason: str | None = None

    @property
    def key(self) -> str:
        return f"rules[{self.index}]"

    @classmethod
    def of(
        cls,
        index: int,
        *,
        tool: str,
        variants: Sequence[ToolVariant] | None,
        client: str | None,
        args: Mapping[str, ArgCondition],
        action: Action,
        reason: str | None,
    ) -> Rule:
        return cls(
            index=index,
            tool=re.compile(fnmatch.translate(tool)),
            variants=frozenset(variants) if variants else None,
            client=None if client in (None, "*") else re.compile(fnmatch.translate(client or "")),
            args=tuple(args.items()),
            action=action,
            reason=reason,
        )

    def matches(
        self, call: RuleSubject, resolve: ResolvePath, seen: tuple[dict[Any, bool], dict[Any, bool]] | None = None
    ) -> bool:
        """`seen` carries glob results (tools, clients) from rule to rule within one call: rules often share a
        glob (compiled once, so the same pattern object), and a hundred rules should cost one match of each."""
        if self.variants is not None and call.variant not in self.variants:
            return False
        tools, clients = ({}, {}) if seen is None else seen
        # Keyed by identity: hashing a pattern hashes its text, and the rules share the pattern objects themselves.
        hit = tools.get(id(self.tool))
        if hit is None:
            hit = tools[id(self.tool)] = self.tool.match(call.qualified) is not None
        if not hit:
            return False
        client = self.client
        if client is not None:
            hit = clients.get(id(client))
            if hit is None:
                hit = clients[id(client)] = call.client is not None and client.match(call.client) is not None
            if not hit:
                return False
        arguments = call.arguments
        for name, condition in self.args:
            if name not in arguments or not condition.holds(arguments[name], resolve):
                return False
        return True


@dataclass(frozen=True, slots=True)
class RuleSubject:
    """What rules look at: the call's governing variant, its tool, its agent's client, its arguments."""

    variant: ToolVariant
    server: str
    tool: str
    client: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)

    @property
    def qualified(self) -> str:
        return f"{self.server}:{self.tool}"


def first_rule(rules: Sequence[Rule], call: RuleSubject, resolve: ResolvePath) -> Rule | None:
    seen: tuple[dict[Any, bool], dict[Any, bool]] = ({}, {})
    resolved: dict[str, str] = {}

    def resolve_once(path: str) -> str:
        # One call names a path once, however many rules ask where it is (resolving touches the disk).
        found = resolved.get(path)
        if found is None:
            found = resolved[path] = resolve(path)
        return found

    for rule in rules:
        if rule.matches(call, resolve_once, seen):
            return rule
    return None


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


def decide(
    policy: Policy, call: RuleSubject, rules: Sequence[Rule] = (), resolve: ResolvePath = os.path.normpath
) -> PolicyDecision:
    """The first rule that matches the call, else the per-variant default. Remembered grants are looked up by the
    caller (mcphost.approval), which has the tool's fingerprint and the agent's session."""
    rule = first_rule(rules, call, resolve) if rules else None
    if rule is not None:
        return PolicyDecision(rule.action, rule.key, rule.reason)
    return PolicyDecision(policy.for_variant(call.variant), f"permissions.{call.variant.operation.value}")
