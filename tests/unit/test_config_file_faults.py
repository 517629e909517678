"""Config files as people break them: every rejection says where (line and column), and values keep their type."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from mcphost.config import ConfigError, ConfigIssue, load_config, parse_config
from mcphost.config import models as config_models
from mcphost.config.loader import MAX_NESTING, locate
from mcphost.config.starter import starter_config
from mcphost.config.state import read_state
from mcphost.config.watcher import Rejected, read_config_file
from mcphost.policy import Action

FILE = Path("config.toml")


def rejected(text: str) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, FILE)
    return info.value.issues


def end_of(text: str) -> tuple[int, int]:
    lines = text.splitlines()
    return len(lines), len(lines[-1]) + 1


def assert_inside(text: str, issue: ConfigIssue) -> None:
    """The position is one a person (or an editor) can go to in this text."""
    lines = text.splitlines() or [""]
    assert issue.line is not None and issue.column is not None, (text, issue)
    assert 1 <= issue.line <= len(lines), (text, issue)
    assert 1 <= issue.column <= len(lines[issue.line - 1]) + 1, (text, issue)


@pytest.mark.parametrize(
    "text",
    [
        "[permissions",
        '[permissions]\nwrite = "as',
        "[servers.todo]\nargs = [1,",
        "[servers.todo]\nenv = { A = 1",
        '[intent_declaration]\nstrict_server_validation = """tr',
        "[permissions]\nread =",
        "[permissions]\nread",
    ],
)
def test_a_file_cut_short_is_reported_at_the_end_of_its_text(text: str) -> None:
    (issue,) = rejected(text)
    assert "TOML syntax error" in issue.message
    assert (issue.line, issue.column) == end_of(text)
    assert "end of document" not in str(issue)
    assert str(issue).startswith(f"line {issue.line}, column {issue.column}: ")


def test_every_truncation_of_the_starter_file_that_is_rejected_says_where() -> None:
    text = starter_config("/usr/bin/python3")
    failures = 0
    for cut in range(1, len(text), 7):
        part = text[:cut]
        try:
            parse_config(part, FILE)
        except ConfigError as exc:
            failures += 1
            for issue in exc.issues:
                assert_inside(part, issue)
    assert failures > 20, "the sample must include many broken files"


@pytest.mark.parametrize(
    ("data", "line", "column"),
    [
        (b"\xff\xfe[permissions]\n", 1, 1),
        (b'[permissions]\nwrite = "\xe9"\n', 2, 10),
        ('# caf\u00e9 \u2014 ok\n[log]\nredact_keys = ["'.encode() + b'\xc3("]\n', 3, 17),
        ("# d\u00e9j\u00e0 ".encode() + b"\x80", 1, 8),
    ],
)
def test_a_file_that_is_not_utf8_names_the_line_and_column_of_the_first_bad_byte(
    tmp_path: Path, data: bytes, line: int, column: int
) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (issue,) = info.value.issues
    assert (issue.line, issue.column) == (line, column)
    assert "not UTF-8" in issue.message and "0x" in issue.message
    _, event = read_config_file(path)
    assert isinstance(event, Rejected)
    assert [(i.line, i.column) for i in event.error.issues] == [(line, column)]


# What comes before the deep value: brackets and braces in a comment and in strings of every kind, which do not nest.
_DECOYS = (
    "# [[[[ {{{{\n" + 'a = "[[ \\" {{"\n' + "b = '[[[['\n" + 'c = """\n]]]] [[[[ \\""" {{\n"""\n' + "d = '''[[[['''\n"
)


@pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ("{a = ", "}")], ids=["arrays", "inline tables"])
def test_a_file_nested_past_what_tomllib_can_read_is_refused_where_it_nests_too_deep(
    tmp_path: Path, opener: str, closer: str
) -> None:
    # Some 490 levels take tomllib past Python's recursion limit: this came out of `config validate` as a traceback
    # thousands of lines long, and a daemon's reload failed with one instead of rejecting the save.
    text = _DECOYS + "x = " + opener * 1000 + "1" + closer * 1000 + "\n"
    (issue,) = rejected(text)
    assert issue.message == f"arrays and tables nested more than {MAX_NESTING} levels deep; a config needs far fewer"
    # At the opener that passes the limit, the decoys not counted.
    assert (issue.line, issue.column) == (_DECOYS.count("\n") + 1, len("x = ") + len(opener) * MAX_NESTING + 1)
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    _, event = read_config_file(path)
    assert isinstance(event, Rejected) and event.error.issues == [issue]


def _rule_matching(value: str) -> str:
    return '[[rules]]\ntool = "git:push"\naction = "deny"\nargs = { branch = { equals = ' + value + " } }\n"


def test_a_value_nested_past_the_limit_is_refused_at_its_key_and_one_level_less_is_a_value_like_any() -> None:
    # rules[0].args.branch.equals: the rule's array of tables, its table, args and branch are four levels.
    levels = MAX_NESTING - 4
    allowed = parse_config(_rule_matching("[" * levels + '"main"' + "]" * levels), FILE)
    assert allowed.rules[0].args["branch"].equals is not None
    for too_deep in ("[" * (levels + 1) + "]" * (levels + 1), "{ " + ".".join(["k"] * (levels + 1)) + " = 1 }"):
        (issue,) = rejected(_rule_matching(too_deep))
        assert issue.message.startswith(f"arrays and tables nested more than {MAX_NESTING} levels deep")
        assert (issue.line, issue.column) == (4, 1)
        assert issue.path.startswith("rules.0.args.branch.") and issue.path.endswith(".…")


def test_a_state_file_too_deep_to_read_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.toml"
    path.write_text("grants = " + "[" * 1000 + "]" * 1000 + "\n", encoding="utf-8")
    path.chmod(0o600)
    assert read_state(path) == {}
    assert "ignoring the unreadable state file" in caplog.text


def test_a_value_error_on_a_whole_table_points_at_the_table() -> None:
    text = '[permissions]\nread = "allow"\n\n[servers."a:b"]\ncommand = "x"\n'
    (issue,) = rejected(text)
    assert "no ':'" in issue.message
    assert (issue.line, issue.column) == (4, 1)


def test_a_value_error_in_an_inline_table_points_at_its_key() -> None:
    text = '# servers inline\nservers = { "a:b" = { command = "x" } }\n'
    (issue,) = rejected(text)
    assert (issue.line, issue.column) == (2, 1)


def test_a_quoted_key_holding_a_dot_is_found() -> None:
    text = '[servers."my.server"]\ncommand = "x"\n[servers."my.server".tools.t]\nannotations = { readOnlyHint = 1 }\n'
    (issue,) = rejected(text)
    assert issue.path == "servers.my.server.tools.t.annotations.readOnlyHint"
    assert (issue.line, issue.column) == (4, 1)


def test_an_error_on_a_table_made_only_of_dotted_keys_points_at_the_first_of_them() -> None:
    text = '[permissions]\nread = "allow"\n[servers]\nx.args = ["a"]\nx.env = {}\n'
    (issue,) = rejected(text)
    assert "exactly one of `command`" in issue.message
    assert (issue.path, issue.line, issue.column) == ("servers.x", 4, 1)


def test_a_key_path_that_is_nowhere_in_the_text_falls_back_to_the_first_line() -> None:
    assert locate("[permissions]\nread = 'allow'\n", ()) == (1, 1)
    assert locate("[permissions]\nread = 'allow'\n", ("rules", "0", "action")) == (1, 1)
    assert locate("", ("log", "keep")) == (1, 1)


# ---- strict types (booleans are booleans, numbers are numbers)


@pytest.mark.parametrize("value", ['"no"', '"off"', '"false"', '"true"', "0", "1", "0.0"])
def test_a_boolean_given_as_a_string_or_number_is_an_error_naming_the_key_and_the_type(value: str) -> None:
    text = f"# comment\n[intent_declaration]\n  strict_server_validation = {value}\n"
    (issue,) = rejected(text)
    assert issue.path == "intent_declaration.strict_server_validation"
    assert (issue.line, issue.column) == (3, 3)
    assert "true or false" in issue.message and value.strip('"') in issue.message


@pytest.mark.parametrize(
    ("text", "path", "expected"),
    [
        ('[servers.s]\ncommand = "x"\nenabled = "yes"\n', "servers.s.enabled", "true or false"),
        ('[servers.s]\ncommand = "x"\ntrust_annotations = 1\n', "servers.s.trust_annotations", "true or false"),
        ('[servers.s]\ncommand = "x"\ncall_timeout = "30"\n', "servers.s.call_timeout", "a number"),
        ('[servers.s]\ncommand = "x"\nconnect_timeout = true\n', "servers.s.connect_timeout", "a number"),
        ('[servers.s]\ncommand = "x"\nmax_result_bytes = 1.5\n', "servers.s.max_result_bytes", "an integer"),
        (
            '[servers.s]\ncommand = "x"\n[servers.s.tools.t]\nannotations = { destructiveHint = "true" }\n',
            "servers.s.tools.t.annotations.destructiveHint",
            "true or false",
        ),
        ('[permissions]\nprompt_timeout = "300"\n', "permissions.prompt_timeout", "a number"),
        ("[permissions]\nprompt_timeout = false\n", "permissions.prompt_timeout", "a number"),
        ('[log]\nfsync = "off"\n', "log.fsync", "true or false"),
        ("[log]\nkeep = 5.0\n", "log.keep", "an integer"),
        ("[log]\nmax_bytes = true\n", "log.max_bytes", "an integer"),
        ('[log]\narguments_max_bytes = "4096"\n', "log.arguments_max_bytes", "an integer"),
        ('[daemon]\nport = "8080"\n', "daemon.port", "an integer"),
    ],
)
def test_numbers_and_booleans_are_not_coerced(text: str, path: str, expected: str) -> None:
    (issue,) = rejected(text)
    assert issue.path == path
    assert issue.line == len(text.splitlines()) and issue.column == 1
    assert expected in issue.message


def test_an_integer_is_a_number_and_choices_are_still_written_as_strings() -> None:
    config = parse_config(
        '[permissions]\nprompt_timeout = 5\nwrite = "deny"\nno_editor = "elicit"\nremember_write = "session"\n'
        '[servers.s]\ncommand = "x"\ncall_timeout = 10\n[log]\non_failure = "continue"\n',
        FILE,
    )
    assert config.permissions.prompt_timeout == 5.0
    assert config.permissions.write is Action.DENY
    assert config.servers["s"].call_timeout == 10.0


def _scalar_kinds(annotation: Any) -> set[type]:
    kinds = {annotation} if annotation in (bool, int, float) else set()
    for arg in get_args(annotation):
        kinds |= _scalar_kinds(arg)
    return kinds


def _config_models() -> list[type[BaseModel]]:
    return [
        value
        for value in vars(config_models).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == config_models.__name__
    ]


def test_every_boolean_and_number_key_of_the_config_is_strict() -> None:
    # A key added later without strict=True would accept "no" as true: this names it.
    loose = [
        f"{model.__name__}.{name}"
        for model in _config_models()
        for name, field in model.model_fields.items()
        if _scalar_kinds(field.annotation) and not any(getattr(m, "strict", None) is True for m in field.metadata)
    ]
    assert loose == []
