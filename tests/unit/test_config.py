from __future__ import annotations

from pathlib import Path

import pytest

from mcphost.config import ConfigError, effective_annotations, parse_config
from mcphost.config.models import ServerConfig
from mcphost.policy import Action

FILE = Path("config.toml")


def test_empty_file_is_a_valid_config_with_the_contract_defaults() -> None:
    config = parse_config("", FILE)
    assert config.intent_declaration.strict_server_validation is True
    p = config.permissions
    assert (p.read, p.write, p.destructive, p.prompt_timeout, p.no_editor) == (
        Action.ALLOW,
        Action.ASK,
        Action.CONFIRM,
        300,
        "deny",
    )
    assert config.servers == {}


def test_design_example_parses() -> None:
    config = parse_config(
        """
[intent_declaration]
strict_server_validation = true
[permissions]
read = "allow"
write = "ask"
destructive = "confirm"
prompt_timeout = 300
no_editor = "deny"
[servers.todo]
command = "python3"
args = ["-m", "mcphost.demo.todo"]
env = { }
enabled = true
[servers.remote]
url = "http://127.0.0.1:9000/mcp"
headers = { Authorization = "Bearer ..." }
""",
        FILE,
    )
    assert config.servers["todo"].transport == "stdio"
    assert config.servers["remote"].transport == "http"


def issues(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, FILE)
    return [str(issue) for issue in info.value.issues]


def test_unknown_key_is_an_error_with_its_position() -> None:
    assert issues("[permissions]\nread = 'allow'\n  wrte = 'ask'\n") == [
        "line 3, column 3: permissions.wrte: unknown key 'wrte'"
    ]


def test_bad_value_lists_the_allowed_ones() -> None:
    (issue,) = issues("[permissions]\nwrite = 'sometimes'\n")
    assert issue.startswith("line 2, column 1: permissions.write:")
    assert "'allow', 'ask', 'confirm' or 'deny'" in issue


def test_toml_syntax_error_has_line_and_column() -> None:
    (issue,) = issues("[permissions\nread = 'allow'\n")
    assert issue.startswith("line 1, column") and "TOML syntax error" in issue


def test_server_needs_exactly_one_transport() -> None:
    assert "exactly one of `command`" in issues("[servers.x]\nargs = []\n")[0]
    assert "exactly one of `command`" in issues("[servers.x]\ncommand = 'a'\nurl = 'http://h'\n")[0]


def test_server_name_cannot_hold_a_colon() -> None:
    assert "no ':'" in issues('[servers."a:b"]\ncommand = "x"\n')[0]


def test_annotation_overrides_and_distrust() -> None:
    trusting = ServerConfig(command="x", tools={"t": {"annotations": {"destructiveHint": True}}})  # type: ignore[dict-item]
    assert effective_annotations(trusting, "t", {"readOnlyHint": True}) == {
        "readOnlyHint": True,
        "destructiveHint": True,
    }
    assert effective_annotations(trusting, "other", {"readOnlyHint": True}) == {"readOnlyHint": True}
    distrusting = ServerConfig(command="x", trust_annotations=False)
    assert effective_annotations(distrusting, "t", {"destructiveHint": True}) == {}


def test_the_starter_file_is_the_defaults_plus_the_todo_server() -> None:
    import tomllib

    import jsonschema

    from mcphost.config.models import Config
    from mcphost.config.starter import starter_config
    from mcphost.schemas import config_schema

    text = starter_config("/usr/bin/python3")
    parsed = parse_config(text, Path("config.toml"))
    assert parsed.model_dump(exclude={"servers"}) == Config().model_dump(exclude={"servers"})
    assert list(parsed.servers) == ["todo"]
    jsonschema.validate(tomllib.loads(text), config_schema())


def test_the_config_schema_rejects_a_typo_as_editors_will_show_it() -> None:
    import jsonschema
    import pytest

    from mcphost.schemas import config_schema

    with pytest.raises(jsonschema.ValidationError, match="strict_server_validaton"):
        jsonschema.validate({"intent_declaration": {"strict_server_validaton": True}}, config_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"permissions": {"write": "sometimes"}}, config_schema())


def test_the_starter_configs_example_rules_load_once_uncommented_and_decide_as_they_say(tmp_path: Path) -> None:
    import os

    from mcphost.config.starter import starter_config
    from mcphost.intent import ToolVariant
    from mcphost.policy import RuleSubject, decide

    text = starter_config("/usr/bin/python3")
    block = text[text.index("# [[rules]]") : text.index("# Other conditions")]
    rules = "\n".join(line.removeprefix("# ").removeprefix("#") for line in block.splitlines())
    config = parse_config(text + "\n" + rules, tmp_path / "config.toml")
    compiled = config.compiled_rules
    assert len(compiled) == 3
    policy = config.permissions.to_policy()
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def resolve(path: str) -> str:
        return os.path.realpath(workspace / Path(path).expanduser())

    def verdict(tool: str, variant: ToolVariant, **arguments: object) -> tuple[Action, str]:
        decided = decide(policy, RuleSubject(variant, *tool.split(":"), None, arguments), compiled, resolve)
        return decided.action, decided.rule

    assert verdict("files:write_file", ToolVariant.WRITE, path="src/app.py") == (Action.ALLOW, "rules[0]")
    assert verdict("files:write_file", ToolVariant.WRITE, path="../elsewhere") == (Action.CONFIRM, "rules[1]")
    assert verdict("git:git_push", ToolVariant.WRITE, branch="main", force=True) == (Action.DENY, "rules[2]")
    assert verdict("git:git_push", ToolVariant.WRITE, branch="main", force=False)[1] == "permissions.write"
