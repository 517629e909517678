"""[[rules]]: the pure matcher (policy.decide over compiled rules) and the config that builds the rules."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from mcphost.approval.approvals import path_resolver
from mcphost.config import ConfigError
from mcphost.config.loader import parse_config
from mcphost.intent import REGEX_SECONDS, RegexTimedOut, ToolVariant
from mcphost.policy import (
    Action,
    ArgCondition,
    ConditionKind,
    Policy,
    Rule,
    RuleSet,
    RuleSubject,
    decide,
    first_rule,
)

EXAMPLE = """
[[rules]]
tool = "git:push"
args = { branch = { equals = "main" }, force = { equals = true } }
action = "deny"
reason = "no force push to main"

[[rules]]
tool = "files:*"
variant = "write"
args = { path = { inside = "project" } }
action = "allow"
reason = "edits inside the workspace"

[[rules]]
tool = "files:*"
variant = ["write", "destructive"]
action = "confirm"
reason = "anything outside the workspace"
"""

WRITE, READ, DESTRUCTIVE = ToolVariant.WRITE, ToolVariant.READ, ToolVariant.DESTRUCTIVE


def rules_of(text: str) -> Any:
    return parse_config(text, Path("config.toml")).compiled_rules


def verdict(text: str, variant: ToolVariant, qualified: str, workspace: Path | None = None, **kw: Any) -> Any:
    server, tool = qualified.split(":")
    client = kw.pop("client", None)
    subject = RuleSubject(variant, server, tool, client, kw)
    resolve = path_resolver(workspace or Path.cwd())
    return decide(Policy(), subject, rules_of(text), resolve)


def test_the_first_matching_rule_decides_and_names_itself(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    inside = verdict(EXAMPLE, WRITE, "files:write", tmp_path, path="project/src/a.py")
    assert (inside.action, inside.rule, inside.reason) == (Action.ALLOW, "rules[1]", "edits inside the workspace")
    outside = verdict(EXAMPLE, WRITE, "files:write", tmp_path, path="/etc/passwd")
    assert (outside.action, outside.rule) == (Action.CONFIRM, "rules[2]")
    push = verdict(EXAMPLE, WRITE, "git:push", tmp_path, branch="main", force=True)
    assert (push.action, push.rule, push.reason) == (Action.DENY, "rules[0]", "no force push to main")


def test_no_match_falls_back_to_the_variant_default() -> None:
    assert verdict(EXAMPLE, READ, "files:read", path="x").rule == "permissions.read"
    assert verdict(EXAMPLE, WRITE, "git:push", branch="main", force=False).rule == "permissions.write"
    # A rule whose argument the call lacks does not match.
    assert verdict(EXAMPLE, WRITE, "git:push", branch="main").rule == "permissions.write"


@pytest.mark.parametrize(
    "path",
    [
        "project/../secrets.txt",  # .. walks out
        "projectile/a.txt",  # a sibling that shares the prefix
        "~/project/a.txt",  # ~ is the home, not the workspace
        "/tmp/../etc/passwd",
        "project/\x00/a",  # no such path can exist
    ],
)
def test_inside_resolves_the_path_before_judging_it(tmp_path: Path, path: str) -> None:
    (tmp_path / "project").mkdir()
    assert verdict(EXAMPLE, WRITE, "files:write", tmp_path, path=path).rule == "rules[2]"


def test_a_symlink_inside_the_workspace_that_points_out_is_outside(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "escape").symlink_to("/etc")
    assert verdict(EXAMPLE, WRITE, "files:write", tmp_path, path="project/escape/passwd").rule == "rules[2]"
    assert verdict(EXAMPLE, WRITE, "files:write", tmp_path, path="project/./ok.txt").rule == "rules[1]"


def test_equals_and_one_of_compare_json_values_strictly() -> None:
    text = """
[[rules]]
tool = "*"
variant = "write"
args = { force = { equals = true }, n = { one_of = [1, "two"] } }
action = "deny"
"""
    assert verdict(text, WRITE, "a:b", force=True, n=1).action is Action.DENY
    assert verdict(text, WRITE, "a:b", force=True, n="two").action is Action.DENY
    assert verdict(text, WRITE, "a:b", force=1, n=1).rule == "permissions.write"  # 1 is not true
    assert verdict(text, WRITE, "a:b", force=True, n="1").rule == "permissions.write"
    assert verdict(text, WRITE, "a:b", force=True, n=2).rule == "permissions.write"


def test_glob_regex_and_client_conditions() -> None:
    text = """
[[rules]]
tool = "shell:*"
client = "claude-code*"
args = { command = { regex = "^git (status|log)\\\\b" } }
action = "allow"
variant = "write"

[[rules]]
tool = "gh:*"
variant = "write"
args = { repo = { glob = "acme/*" } }
action = "ask"
reason = "acme repos"
"""
    assert verdict(text, WRITE, "shell:run", client="claude-code 2.1", command="git status -s").rule == "rules[0]"
    assert verdict(text, WRITE, "shell:run", client="cursor 1", command="git status").rule == "permissions.write"
    assert verdict(text, WRITE, "shell:run", command="git status").rule == "permissions.write"  # no client name
    assert verdict(text, WRITE, "shell:run", client="claude-code", command="rm -rf / ; git status").rule != "rules[0]"
    assert verdict(text, WRITE, "gh:merge", repo="acme/api").rule == "rules[1]"
    assert verdict(text, WRITE, "gh:merge", repo=["acme/api"]).rule == "permissions.write"  # not text


# (a|aa)+$ on a run of a's that does not end the text tries every way to split the run: time that doubles with
# about every character, in `re` and in `regex` alike. The person wrote the pattern; the agent writes the text.
SLOW = '"^(a|aa)+$"'
SLOW_TEXT = "a" * 36 + "!"  # unbounded, some 10 s here: a regression fails, not hangs


@pytest.mark.parametrize("action", ["allow", "deny"])
def test_a_rule_whose_regex_runs_past_its_time_denies_the_call_and_says_why(action: str) -> None:
    text = f"""
[[rules]]
tool = "shell:*"
variant = "write"
args = {{ command = {{ regex = {SLOW} }} }}
action = "{action}"

[[rules]]
tool = "shell:*"
variant = "write"
action = "allow"
"""
    started = time.perf_counter()
    decided = verdict(text, WRITE, "shell:run", command=SLOW_TEXT)
    assert time.perf_counter() - started < 10 * REGEX_SECONDS + 1
    # Neither this rule's action nor the next rule can be known to apply: refused, naming the rule and its argument.
    assert (decided.action, decided.rule) == (Action.DENY, "rules[0]")
    assert "regex on the argument `command`" in decided.reason and "simplify the pattern" in decided.reason
    assert verdict(text, WRITE, "shell:run", command="aaaa").rule == ("rules[0]")  # a text it reads in time
    rule = rules_of(text)[0]
    with pytest.raises(RegexTimedOut):  # the reference semantics say so too
        rule.matches(RuleSubject(WRITE, "shell", "run", None, {"command": SLOW_TEXT}), os.path.normpath)


def test_a_regex_that_re_takes_exponential_time_on_is_read_in_time() -> None:
    # Nested repetition that `re` backtracks through in time that grows fourfold every two characters; the regex
    # engine fails it at once.
    pattern = '"^(\\\\w+\\\\s?)*$"'  # TOML for ^(\w+\s?)*$
    text = f'[[rules]]\ntool = "shell:*"\nargs = {{ command = {{ regex = {pattern} }} }}\naction = "deny"\n'
    started = time.perf_counter()
    assert verdict(text, WRITE, "shell:run", command="a" * 26 + "!").rule == "permissions.write"
    assert time.perf_counter() - started < 1  # `re`: some 8 s here
    assert verdict(text, WRITE, "shell:run", command="git status").rule == "rules[0]"


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ('tool = "x:*"\naction = "allow"', "allow_destructive = true"),
        ('tool = "x:*"\nvariant = ["write", "destructive"]\naction = "allow"', "allow_destructive"),
        ('tool = "x"\nargs = { p = { regex = "(" } }\naction = "deny"', "not a regular expression"),
        ('tool = "x"\nargs = { p = { glob = "a", equals = "b" } }\naction = "deny"', "exactly one of"),
        ('tool = "x"\nargs = { p = { } }\naction = "deny"', "exactly one of"),
        ('tool = "x"\naction = "maybe"', "action"),
        ('tool = "x"\nvariant = "sideways"\naction = "deny"', "variant"),
        ('tool = "x"\naction = "deny"\nallow_destructive = "yes"', "allow_destructive"),
        ('tool = "x"\naction = "deny"\ncolour = "red"', "colour"),
        ('tool = "x"', "action"),
    ],
)
def test_a_bad_rule_is_a_config_error_that_names_it(rule: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"[[rules]]\ntool = 'ok'\naction = 'ask'\n\n[[rules]]\n{rule}\n", Path("config.toml"))
    text = str(caught.value)
    assert problem in text and "rules.1" in text, text


def test_a_destructive_allow_with_consent_is_accepted() -> None:
    text = '[[rules]]\ntool = "tmp:delete_*"\naction = "allow"\nallow_destructive = true\n'
    assert verdict(text, DESTRUCTIVE, "tmp:delete_file").action is Action.ALLOW


# ---- the index (policy.RuleLookup): the first rule in file order, whichever bucket each glob is filed in


def rule_keys(text: str, variant: ToolVariant, qualified: str, client: str | None = None, **kw: Any) -> str:
    return verdict(text, variant, qualified, client=client, **kw).rule


def rules_toml(*tables: str) -> str:
    return "\n".join(f"[[rules]]\n{table}\n" for table in tables)


def test_the_first_rule_in_file_order_wins_across_literal_server_and_wildcard_globs() -> None:
    text = rules_toml(
        'tool = "*:write"\nvariant = "write"\naction = "deny"',  # filed last (no literal server), first in the file
        'tool = "files:write"\nvariant = "write"\naction = "ask"',  # filed first (a dict lookup)
        'tool = "files:*"\nvariant = "write"\naction = "confirm"',  # filed by its server
        'tool = "*"\nvariant = "write"\naction = "allow"',
    )
    assert rule_keys(text, WRITE, "files:write") == "rules[0]"
    assert rule_keys(text, WRITE, "files:read") == "rules[2]"
    assert rule_keys(text, WRITE, "git:write") == "rules[0]"
    assert rule_keys(text, WRITE, "git:push") == "rules[3]"
    assert rule_keys(text, READ, "files:write") == "permissions.read"


def test_rules_that_fail_on_arguments_hand_over_to_the_next_in_file_order_whatever_their_glob() -> None:
    text = rules_toml(
        'tool = "files:*"\nvariant = "write"\nargs = { mode = { equals = "a" } }\naction = "deny"',
        'tool = "*"\nvariant = "write"\nargs = { mode = { equals = "b" } }\naction = "ask"',
        'tool = "files:write"\nvariant = "write"\nargs = { mode = { one_of = ["a", "b", "c"] } }\naction = "confirm"',
        'tool = "f?les:w*"\nvariant = "write"\naction = "allow"',
        'tool = "files:write"\nvariant = "write"\naction = "deny"',
    )
    assert rule_keys(text, WRITE, "files:write", mode="a") == "rules[0]"
    assert rule_keys(text, WRITE, "files:write", mode="b") == "rules[1]"
    assert rule_keys(text, WRITE, "files:write", mode="c") == "rules[2]"
    assert rule_keys(text, WRITE, "files:write", mode="d") == "rules[3]"
    assert rule_keys(text, WRITE, "files:write") == "rules[3]"  # no `mode`: only the rules without args
    assert rule_keys(text, WRITE, "fyles:wipe") == "rules[3]"
    assert rule_keys(text, WRITE, "fyles:read", mode="b") == "rules[1]"


def test_client_globs_split_rules_on_the_same_tool_and_keep_their_order() -> None:
    text = rules_toml(
        'tool = "files:*"\nclient = "cursor*"\nvariant = "write"\naction = "deny"',
        'tool = "*"\nclient = "claude-*"\nvariant = "write"\naction = "ask"',
        'tool = "files:*"\nclient = "claude-*"\nvariant = "write"\naction = "confirm"',
        'tool = "files:*"\nvariant = "write"\naction = "allow"',
    )
    assert rule_keys(text, WRITE, "files:write", client="cursor 1.2") == "rules[0]"
    assert rule_keys(text, WRITE, "files:write", client="claude-code 2") == "rules[1]"
    assert rule_keys(text, WRITE, "files:write", client="zed") == "rules[3]"
    assert rule_keys(text, WRITE, "files:write") == "rules[3]"  # an unnamed client matches no client glob
    assert rule_keys(text, WRITE, "git:push", client="claude-code 2") == "rules[1]"
    assert rule_keys(text, WRITE, "git:push", client="cursor") == "permissions.write"


def test_a_server_name_with_a_colon_is_matched_on_the_whole_name() -> None:
    rules = rules_of(rules_toml('tool = "a:*"\naction = "deny"', 'tool = "a:b:c"\naction = "deny"'))
    for server, tool, expected in [("a:b", "c", 0), ("a", "b:c", 0), ("x:a", "b", None), ("ab", "c", None)]:
        rule = first_rule(rules, RuleSubject(WRITE, server, tool), os.path.normpath)
        assert (None if rule is None else rule.index) == expected, (server, tool)


def test_the_rule_set_of_a_config_is_a_tuple_indexed_once() -> None:
    config = parse_config(rules_toml('tool = "x:*"\naction = "deny"'), Path("config.toml"))
    rules = config.compiled_rules
    assert isinstance(rules, RuleSet) and isinstance(rules, tuple) and len(rules) == 1
    assert config.compiled_rules is rules and rules.lookup is config.compiled_rules.lookup
    assert rules == tuple(rules) and rules[0].key == "rules[0]"
    # A plain sequence still works: it is indexed for the one call.
    assert decide(Policy(), RuleSubject(WRITE, "x", "y"), tuple(rules)).rule == "rules[0]"
    assert decide(Policy(), RuleSubject(WRITE, "x", "y"), list(rules)).rule == "rules[0]"


class CountingResolver:
    def __init__(self, workspace: Path) -> None:
        self.resolve = path_resolver(workspace)
        self.asked: list[str] = []

    def __call__(self, path: str) -> str:
        self.asked.append(path)
        return self.resolve(path)


def test_inside_directories_are_resolved_once_per_rule_set_and_the_calls_path_once_per_call(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    text = rules_toml(
        'tool = "files:*"\nvariant = "write"\nargs = { path = { inside = "elsewhere" } }\naction = "deny"',
        'tool = "files:*"\nvariant = "write"\nargs = { path = { inside = "other" } }\naction = "deny"',
        'tool = "*"\nvariant = "write"\nargs = { path = { inside = "project" } }\naction = "allow"',
    )
    rules, resolve = rules_of(text), CountingResolver(tmp_path)
    call = RuleSubject(WRITE, "files", "write", None, {"path": "project/a.py"})
    assert decide(Policy(), call, rules, resolve).rule == "rules[2]"
    assert sorted(resolve.asked) == ["elsewhere", "other", "project", "project/a.py"]
    resolve.asked.clear()
    assert decide(Policy(), call, rules, resolve).rule == "rules[2]"
    assert resolve.asked == ["project/a.py"]


def test_a_symlink_retargeted_after_the_load_counts_from_the_next_load(tmp_path: Path) -> None:
    # The documented trade-off: `inside` directories are resolved once per rule set (per loaded config).
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "one")
    text = rules_toml('tool = "*"\nvariant = "write"\nargs = { path = { inside = "link" } }\naction = "allow"')
    rules, resolve = rules_of(text), path_resolver(tmp_path)

    def rule_for(rules: Any, path: str) -> str:
        return decide(Policy(), RuleSubject(WRITE, "f", "w", None, {"path": path}), rules, resolve).rule

    assert (rule_for(rules, "one/a"), rule_for(rules, "two/a")) == ("rules[0]", "permissions.write")
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to(tmp_path / "two")
    assert (rule_for(rules, "one/a"), rule_for(rules, "two/a")) == ("rules[0]", "permissions.write")
    reloaded = rules_of(text)
    assert (rule_for(reloaded, "one/a"), rule_for(reloaded, "two/a")) == ("permissions.write", "rules[0]")


def test_an_inside_directory_that_cannot_exist_holds_nothing() -> None:
    rule = Rule.of(
        0,
        tool="*",
        variants=None,
        client=None,
        args={"path": ArgCondition.of(ConditionKind.INSIDE, "/tmp/\x00")},
        action=Action.DENY,
        reason=None,
    )
    for path in ("/tmp/\x00/a", "/tmp", "/tmp/a"):
        assert first_rule(RuleSet([rule]), RuleSubject(WRITE, "s", "t", None, {"path": path}), os.path.realpath) is None


# What the index must agree with: each rule's own `matches`, in file order.
GLOBS = ["*", "srv:*", "srv:tool", "srv:t*", "*:tool", "s?v:*", "[st]rv:*", "other:*", "srv:tool*", "srv", "a:*",
         "a:b:c", "*:*", "srv:**", "srv:[!t]*", "", "srv:"]  # fmt: skip
CLIENTS = [None, "*", "claude-*", "cursor*", "claude-code 2"]
CONDITIONS = [
    (ConditionKind.GLOB, "draft:*"),
    (ConditionKind.REGEX, "^x+$"),
    (ConditionKind.EQUALS, "x"),
    (ConditionKind.EQUALS, 1),
    (ConditionKind.EQUALS, 1.0),
    (ConditionKind.EQUALS, True),
    (ConditionKind.EQUALS, [1, "x"]),
    (ConditionKind.EQUALS, {"a": 1}),
    (ConditionKind.ONE_OF, ["x", 1, True, [1, "x"]]),
    (ConditionKind.ONE_OF, ["draft:a", 2.5]),
    (ConditionKind.INSIDE, "in"),
    (ConditionKind.INSIDE, "/"),
    (ConditionKind.INSIDE, "in/deeper"),
]


class Text(str):
    """Not a JSON string: a condition on strings compares exact types, as `_same` does."""


VALUES: list[Any] = ["x", "xx", "draft:a", "in/a", "in", "inner/a", "out/a", "in/deeper/z", "in/\x00", 1, 1.0, 2.5,
                     True, False, 0, None, [1, "x"], {"a": 1}, {"a": True}, Text("x")]  # fmt: skip
SUBJECTS = [("srv", "tool"), ("srv", "tiny"), ("srv", "x"), ("other", "tool"), ("a", "b:c"), ("a:b", "c"), ("sXv", "q")]


def random_rule(index: int, rng: random.Random) -> Rule:
    names = rng.sample(["p", "q", "r"], rng.randint(0, 2))
    return Rule.of(
        index,
        tool=rng.choice(GLOBS),
        variants=rng.sample(list(ToolVariant), rng.randint(1, 3)) if rng.random() < 0.6 else None,
        client=rng.choice(CLIENTS),
        args={name: ArgCondition.of(*rng.choice(CONDITIONS)) for name in names},
        action=Action.DENY,
        reason=None,
    )


def test_the_index_agrees_with_each_rules_own_match_in_file_order(tmp_path: Path) -> None:
    (tmp_path / "in" / "deeper").mkdir(parents=True)
    resolve = path_resolver(tmp_path)
    rng = random.Random(1729)
    for _ in range(150):
        rules = [random_rule(i, rng) for i in range(rng.randint(1, 12))]
        indexed = RuleSet(rules)
        for _ in range(25):
            server, tool = rng.choice(SUBJECTS)
            arguments = {name: rng.choice(VALUES) for name in rng.sample(["p", "q", "r"], rng.randint(0, 3))}
            call = RuleSubject(rng.choice(list(ToolVariant)), server, tool, rng.choice(CLIENTS), arguments)
            expected = next((rule for rule in rules if rule.matches(call, resolve)), None)
            assert first_rule(indexed, call, resolve) is expected, (rules, call)
            assert first_rule(rules, call, resolve) is expected


def test_each_condition_checks_each_value_as_arg_condition_holds_does(tmp_path: Path) -> None:
    (tmp_path / "in" / "deeper").mkdir(parents=True)
    resolve = path_resolver(tmp_path)
    for kind, value in CONDITIONS:
        condition = ArgCondition.of(kind, value)
        rule = Rule.of(0, tool="*", variants=None, client=None, args={"p": condition}, action=Action.DENY, reason=None)
        rules = RuleSet([rule])
        for given in VALUES:
            found = first_rule(rules, RuleSubject(WRITE, "s", "t", None, {"p": given}), resolve)
            assert (found is rule) is condition.holds(given, resolve), (kind, value, given)


def test_each_condition_is_compiled_once_for_the_load_and_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    # A regex takes most of a millisecond to compile: a config of thousands compiled twice took seconds more.
    made: list[Any] = []
    of = ArgCondition.of.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ArgCondition], kind: ConditionKind, value: Any) -> ArgCondition:
        made.append(value)
        return of(cls, kind, value)

    monkeypatch.setattr(ArgCondition, "of", classmethod(counted))
    text = "".join(
        f'[[rules]]\ntool = "s:t"\nargs = {{ x = {{ regex = "^{i}$" }} }}\naction = "deny"\n' for i in range(4)
    )
    rules = rules_of(text)
    assert made == [f"^{i}$" for i in range(4)]
    assert first_rule(rules, RuleSubject(WRITE, "s", "t", None, {"x": "2"}), path_resolver(Path.cwd())) is rules[2]
