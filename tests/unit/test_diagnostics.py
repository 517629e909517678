"""Config errors as editor diagnostics: the range covers the offending key's line from the key on."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from mcphost.config import ConfigError
from mcphost.config.loader import parse_config
from mcphost.editor.diagnostics import config_diagnostics, issue_range


def diagnostics_for(text: str) -> list[lsp.Diagnostic]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, Path("config.toml"))
    return config_diagnostics(caught.value, text)


def test_a_bad_value_is_marked_from_its_key_to_the_end_of_the_line() -> None:
    text = '[permissions]\nread = "allow"\n  write = "maybe"   \n'
    [diag] = diagnostics_for(text)
    assert diag.range.start == lsp.Position(line=2, character=2)
    assert diag.range.end == lsp.Position(line=2, character=17)
    assert "permissions.write" in diag.message and "'maybe'" in diag.message
    assert diag.severity is lsp.DiagnosticSeverity.Error
    assert diag.source == "mcphost"


def test_a_toml_syntax_error_points_at_its_line() -> None:
    [diag] = diagnostics_for('[permissions]\nwrite = "ask\n')
    assert diag.range.start.line == 1
    assert "TOML syntax error" in diag.message


def test_every_issue_gets_its_own_diagnostic() -> None:
    text = '[permissions]\nwrite = "maybe"\ndestructive = "sometimes"\n'
    assert [d.range.start.line for d in diagnostics_for(text)] == [1, 2]


def test_positions_count_utf16_code_units() -> None:
    lines = ['name = "😀" # x', 'écrire = "x"']
    # The emoji is two UTF-16 units: the line's content ends at character 15, not 14.
    assert issue_range(lines, 1, 1).end.character == 15
    assert issue_range(lines, 2, 1).end.character == 12


def test_an_issue_without_a_position_marks_the_start_of_the_file() -> None:
    assert issue_range(["x = 1"], None, None) == lsp.Range(
        start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0)
    )
