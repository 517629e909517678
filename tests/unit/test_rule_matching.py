"""[[rules]]: the pure matcher (policy.decide over compiled rules) and the config that builds the rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcphost.approval.approvals import path_resolver
from mcphost.config import ConfigError
from mcphost.config.loader import parse_config
from mcphost.intent import ToolVariant
from mcphost.policy import Action, Policy, RuleSubject, decide

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
