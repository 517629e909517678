"""The permission policy: what happens to a call that passed the intent check, and how long a person's
approval may be remembered. Pure, no I/O: remembered grants are looked up by the caller (mcphost.approval), and a
rule that asks where a path really is gets the resolver from its caller too.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mcphost.intent import REGEX_SECONDS, BoundedPattern, RegexTimedOut, ToolVariant


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
    batch_window: float = 0.25  # seconds one agent session's prompts gather into one batch (0: never batch)

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
    """One argument's condition. `value` is what the config gave; `test`, for a glob or a regex, its pattern compiled
    once, as a bound match (glob) or search (regex, which raises RegexTimedOut past its time)."""

    kind: ConditionKind
    value: Any
    test: Callable[[str], object] | None = None

    @classmethod
    def of(cls, kind: ConditionKind, value: Any) -> ArgCondition:
        """Raises ValueError for a regex that does not compile (a config error at load, never at call time)."""
        if kind is ConditionKind.GLOB:
            return cls(kind, value, re.compile(fnmatch.translate(value)).match)
        if kind is ConditionKind.REGEX:
            # The agent writes the text: searched for REGEX_SECONDS at most.
            return cls(kind, value, BoundedPattern(value).search)
        return cls(kind, value)

    def holds(self, given: Any, resolve: ResolvePath) -> bool:
        """The condition on its own, the reference semantics. `first_rule` does not call it: it checks the same
        thing through the checks `RuleLookup` compiles (the unit tests hold the two to the same answers)."""
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
        assert self.test is not None
        return self.test(given) is not None


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
    glob: str | None = None  # `tool` as written, which lets RuleLookup index it; None: only the pattern is known

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
            glob=tool,
        )

    def matches(self, call: RuleSubject, resolve: ResolvePath) -> bool:
        """This rule on its own, the reference semantics (`first_rule` goes through a RuleLookup instead)."""
        if self.variants is not None and call.variant not in self.variants:
            return False
        if self.tool.match(call.qualified) is None:
            return False
        if self.client is not None and (call.client is None or self.client.match(call.client) is None):
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


# How RuleLookup checks one argument: (name, one of the kinds below, what that kind compares with, the rule's next
# check or None). A rule's checks are a chain rather than a tuple, and the kinds small ints, because the loop in
# RuleLookup.first runs for every condition of every rule it reads (the chain saves it an iterator per rule).
_TEXT = 0  # glob or regex: the pattern's bound match or search
_EQ_STR = 1  # equals a string: the string
_EQ_BOOL = 2  # equals true or false: the bool (compared by identity, as _same does)
_EQ_NUM = 3  # equals an int or a float: the number
_EQ_ANY = 4  # equals anything else (a table, a list, a date): the value, through _same
_ONE_OF = 5  # (the options that are strings, as a set; all the options)
_INSIDE = 6  # the slot of the directory in RuleLookup's resolved directories

_Check = tuple[str, int, Any, "_Check | None"]
_Entry = tuple[int, _Check | None, Rule]  # (the rule's position in the file, its first check, the rule)
_Test = Callable[[str], object]  # a bound Pattern.match: None when it does not match
# Rules that share a tool glob: the test left for the glob, then by client glob (its test, the rules in file order).
# A test is None when nothing is left to check: a tool glob without a wildcard (found by a dict lookup), "server:*"
# (found by its server) or "*"; a client glob "*" (or none).
_Group = tuple[_Test | None, tuple[tuple[_Test | None, tuple[_Entry, ...]], ...]]
_MISSING: Any = object()
_WILDCARDS = frozenset("*?[")


def _position(entry: _Entry) -> int:
    return entry[0]


@dataclass(frozen=True, slots=True)
class _VariantTable:
    """One variant's rules by tool glob. A call looks up its "server:tool" in `literal` and the text before its
    first ':' in `by_server`, and matches each glob of the groups it finds there and in `other` once."""

    literal: dict[str, tuple[_Group, ...]]  # globs without a wildcard, by the one "server:tool" each names
    by_server: dict[str, tuple[_Group, ...]]  # globs that start with a literal "server:", by that server
    other: tuple[_Group, ...]  # the rest: "*", "*:delete_*", a rule built without its glob text


def _checks(rule: Rule, directories: dict[str, int]) -> _Check | None:
    """The rule's argument conditions as RuleLookup.first checks them, in order: the same answers as
    ArgCondition.holds. `directories` gives each distinct `inside` directory its slot."""
    chain: _Check | None = None
    for name, condition in reversed(rule.args):
        kind, value = condition.kind, condition.value
        if kind is ConditionKind.GLOB or kind is ConditionKind.REGEX:
            assert condition.test is not None
            chain = (name, _TEXT, condition.test, chain)
        elif kind is ConditionKind.INSIDE:
            chain = (name, _INSIDE, directories.setdefault(value, len(directories)), chain)
        elif kind is ConditionKind.ONE_OF:
            chain = (name, _ONE_OF, (frozenset(o for o in value if type(o) is str), tuple(value)), chain)
        elif type(value) is str:
            chain = (name, _EQ_STR, value, chain)
        elif type(value) is bool:
            chain = (name, _EQ_BOOL, value, chain)
        elif type(value) in (int, float):
            chain = (name, _EQ_NUM, value, chain)
        else:
            chain = (name, _EQ_ANY, value, chain)
    return chain


def _directory(resolve: ResolvePath, directory: str) -> tuple[str, str] | None:
    """An `inside` directory resolved, with the prefix a path below it starts with; None: no path is inside it."""
    try:
        where = resolve(directory)
    except (ValueError, OSError):
        return None  # no such path can exist (a NUL byte): nothing is inside it
    return where, where if where.endswith(os.sep) else where + os.sep


class RuleLookup:
    """Rules indexed for `first_rule`, built once per rule set (a loaded config's RuleSet carries one).

    A call visits only the rules whose tool glob and client glob match it, each distinct glob matched once, in file
    order, and reads their argument conditions in one loop. Immutable but for one cache: the `inside` directories
    resolved per resolver, at the first call that reaches an `inside` condition. That is where a directory was when
    the config was loaded (more exactly: at that first call), not where it is at each call: a symlink retargeted, or
    a directory created or moved, after the load takes effect at the next reload, which builds a new rule set. The
    call's own path is resolved at every call, once however many rules ask about it."""

    __slots__ = ("_by_variant", "_directories", "_resolved")

    def __init__(self, rules: Iterable[Rule]) -> None:
        directories: dict[str, int] = {}
        entries = [(rule, (i, _checks(rule, directories), rule), _place(rule)) for i, rule in enumerate(rules)]
        by_variant: dict[ToolVariant, _VariantTable] = {}
        for variant in ToolVariant:
            # (where, its key, the glob) -> (the test left, client pattern -> entries); dicts keep first-seen order
            places: dict[tuple[str, str, object], tuple[_Test | None, dict[re.Pattern[str] | None, list[_Entry]]]] = {}
            for rule, entry, (where, key, test) in entries:
                if rule.variants is None or variant in rule.variants:
                    place = places.setdefault((where, key, rule.tool if rule.glob is None else rule.glob), (test, {}))
                    place[1].setdefault(rule.client, []).append(entry)
            literal: dict[str, list[_Group]] = {}
            by_server: dict[str, list[_Group]] = {}
            other: list[_Group] = []
            for (where, key, _), (test, clients) in places.items():
                by_client = tuple((None if c is None else c.match, tuple(members)) for c, members in clients.items())
                group: _Group = (test, by_client)
                if where == "literal":
                    literal.setdefault(key, []).append(group)
                elif where == "server":
                    by_server.setdefault(key, []).append(group)
                else:
                    other.append(group)
            by_variant[variant] = _VariantTable(
                {k: tuple(v) for k, v in literal.items()}, {k: tuple(v) for k, v in by_server.items()}, tuple(other)
            )
        self._by_variant = by_variant
        self._directories = tuple(directories)  # by slot: dicts keep insertion order
        self._resolved: dict[ResolvePath, tuple[tuple[str, str] | None, ...]] = {}

    def candidates(self, call: RuleSubject) -> Sequence[_Entry]:
        """The rules whose variant, tool glob and client glob match `call`, in file order."""
        table = self._by_variant.get(call.variant)
        if table is None:
            return ()
        qualified = call.qualified
        server = call.server
        if ":" in server:
            server = server.partition(":")[0]  # the text before the first ':' of `qualified`, as indexed
        client = call.client
        found: tuple[_Entry, ...] = ()
        merged: list[_Entry] | None = None
        for groups in (table.literal.get(qualified, ()), table.by_server.get(server, ()), table.other):
            for tool, by_client in groups:
                if tool is not None and tool(qualified) is None:
                    continue
                for who, members in by_client:
                    if who is not None and (client is None or who(client) is None):
                        continue
                    if not found:
                        found = members
                    elif merged is None:
                        merged = [*found, *members]
                    else:
                        merged.extend(members)
        if merged is None:
            return found
        merged.sort(key=_position)  # groups interleave in the file: the first match in the file still wins
        return merged

    def first(self, call: RuleSubject, resolve: ResolvePath) -> Rule | None:
        candidates = self.candidates(call)
        if not candidates:
            return None
        get = call.arguments.get
        directories: tuple[tuple[str, str] | None, ...] | None = None
        paths: dict[str, str | None] | None = None  # the call's paths, resolved once per call
        for _, check, rule in candidates:
            while check is not None:
                name, kind, operand, check = check
                given = get(name, _MISSING)
                if given is _MISSING:
                    break  # a call without the argument does not match
                if kind == _TEXT:
                    if not isinstance(given, str):
                        break
                    try:
                        if operand(given) is None:
                            break
                    except RegexTimedOut:
                        raise RuleTimedOut(rule, name) from None
                elif kind == _EQ_STR:
                    if type(given) is not str or given != operand:
                        break
                elif kind == _INSIDE:
                    if not isinstance(given, str):
                        break
                    if paths is None:
                        paths = {}
                    where = paths.get(given, _MISSING)
                    if where is _MISSING:
                        try:
                            where = resolve(given)
                        except (ValueError, OSError):
                            where = None  # no such path can exist (a NUL byte): it is inside nothing
                        paths[given] = where
                    if where is None:
                        break
                    if directories is None:
                        directories = self._resolved_directories(resolve)
                    directory = directories[operand]
                    if directory is None or (where != directory[0] and not where.startswith(directory[1])):
                        break
                elif kind == _EQ_NUM:
                    if (type(given) is not int and type(given) is not float) or given != operand:
                        break
                elif kind == _ONE_OF:
                    strings, options = operand
                    if type(given) is str:
                        if given not in strings:
                            break
                    elif not any(_same(given, option) for option in options):
                        break
                elif kind == _EQ_BOOL:
                    if given is not operand:
                        break
                elif not _same(given, operand):
                    break
            else:
                return rule
        return None

    def _resolved_directories(self, resolve: ResolvePath) -> tuple[tuple[str, str] | None, ...]:
        found = self._resolved.get(resolve)
        if found is None:
            found = tuple(_directory(resolve, directory) for directory in self._directories)
            if len(self._resolved) >= 8:
                self._resolved.clear()  # callers keep one resolver; a caller that makes one per call gets no cache
            self._resolved[resolve] = found
        return found


def _place(rule: Rule) -> tuple[str, str, _Test | None]:
    """Where RuleLookup files `rule` by its tool glob: ("literal", the name), ("server", the literal server before
    the first ':') or ("other", ""), and the test left for a call found there (None: found there, it matches)."""
    glob = rule.glob
    if glob is None:
        return "other", "", rule.tool.match
    if _WILDCARDS.isdisjoint(glob):
        return "literal", glob, None
    server, colon, rest = glob.partition(":")
    if colon and _WILDCARDS.isdisjoint(server):
        # The pattern starts with the literal "server:", so a name it matches has `server` before its first ':'.
        return "server", server, None if set(rest) == {"*"} else rule.tool.match
    return "other", "", None if set(glob) == {"*"} else rule.tool.match


class RuleTimedOut(Exception):
    """`rule`'s regex on `argument` ran past REGEX_SECONDS: which rule applies to the call cannot be known."""

    def __init__(self, rule: Rule, argument: str) -> None:
        super().__init__(rule.key, argument)
        self.rule, self.argument = rule, argument


class RuleSet(tuple[Rule, ...]):
    """Compiled rules in file order, a tuple, with the RuleLookup `first_rule` uses built once beside it."""

    lookup: RuleLookup

    def __new__(cls, rules: Iterable[Rule] = ()) -> RuleSet:
        self = super().__new__(cls, rules)
        self.lookup = RuleLookup(self)
        return self


def first_rule(rules: Sequence[Rule], call: RuleSubject, resolve: ResolvePath) -> Rule | None:
    """The first rule in file order that matches `call`. A RuleSet brings its lookup; other sequences are indexed
    here, for this call only."""
    lookup = rules.lookup if isinstance(rules, RuleSet) else RuleLookup(rules)
    return lookup.first(call, resolve)


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
    try:
        rule = first_rule(rules, call, resolve) if rules else None
    except RuleTimedOut as stuck:
        # Neither the rule's action nor the rules after it can be known to apply: the call is refused, and why says
        # what to change.
        return PolicyDecision(
            Action.DENY,
            stuck.rule.key,
            f"its regex on the argument `{stuck.argument}` searched this call's text for more than {REGEX_SECONDS} s "
            "and was stopped, so the call is denied: simplify the pattern (nested repetition such as (a|aa)+ can "
            "take time that grows exponentially with the text), or use glob",
        )
    if rule is not None:
        return PolicyDecision(rule.action, rule.key, rule.reason)
    return PolicyDecision(policy.for_variant(call.variant), f"permissions.{call.variant.operation}")
