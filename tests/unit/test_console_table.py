"""The one table every listing prints (`log tail`, `activity list`, `tools`, `grants list`, `status`): columns that
line up on screen whatever the characters, cells escaped, and cut at word boundaries to fit a terminal."""

from __future__ import annotations

import pytest

from mcphost.console import Column, Table, cell_width, cut, terminal_width
from tests.helpers import screen_starts

COLUMNS = (
    Column("NAME", flex=True, floor=8),
    Column("KIND"),
    Column("ID", optional=True),
    Column("DESCRIPTION", flex=True, floor=12),
)


def test_columns_line_up_on_screen_with_wide_characters() -> None:
    rows = [("中文:工具", "💥 destructive", "01A", "删除"), ("fs:read", "📖 read", "01B", "plain")]
    lines = Table(COLUMNS).lines(rows)
    at = screen_starts(lines[0], ["NAME", "KIND", "ID", "DESCRIPTION"])
    assert screen_starts(lines[1], list(rows[0])) == screen_starts(lines[2], list(rows[1])) == at


def test_cells_are_escaped() -> None:
    (_, row) = Table(COLUMNS).lines([("x\x1b[2J", "\x07", "\u202e", "fine\r\x1b]8;;http://evil\x07")])
    assert "\x1b" not in row and "\x07" not in row and "\r" not in row and "\u202e" not in row
    assert "x\\x1b[2J" in row


def test_cut_ends_at_a_word_boundary_and_says_so() -> None:
    text = "Create a new todo task for the authenticated user. Returns the created task"
    assert cut(text, 30) == "Create a new todo task for…"
    assert cut(text, 30, ascii_only=True) == "Create a new todo task for..."
    assert cut(text, 200) == text
    # One long word (a tool name) cannot end at a boundary: it is cut where the room ends.
    assert cut("filesystem:write_file_atomically", 16) == "filesystem:writ…"
    # Wide characters count two: the cut never lets a line run past its room.
    assert cell_width(cut("中文中文中文中文", 7)) <= 7


@pytest.mark.parametrize("width", [40, 60, 80])
def test_a_table_fits_the_terminal_by_cutting_flexible_columns_then_leaving_out_optional_ones(width: int) -> None:
    rows = [
        ("todo:add_task", "write", "01KAE4AAAAAAAAAAAAAAAAAAAA", "Create a new todo task for the authenticated user"),
        ("todo:delete_task", "destructive", "01KAE4BBBBBBBBBBBBBBBBBBBB", "Permanently delete one task; no undo"),
    ]
    lines = Table(COLUMNS, width=width).lines(rows)
    assert all(cell_width(line) <= width for line in lines), lines
    assert ("ID" in lines[0]) == (width >= 80)  # the optional id goes before anything is cut past its floor
    whole = Table(COLUMNS).lines(rows)  # no width (a pipe, or --wide): nothing is cut
    assert all(row[3] in line for row, line in zip(rows, whole[1:], strict=True))


def test_an_optional_column_with_nothing_in_it_is_left_out() -> None:
    (header, row) = Table(COLUMNS).lines([("a", "b", "", "d")])
    assert header.split() == ["NAME", "KIND", "DESCRIPTION"] and row.split() == ["a", "b", "d"]


def test_rows_that_follow_keep_the_columns_and_widen_them_when_they_must() -> None:
    table = Table(COLUMNS)
    (first,) = table.lines([("todo:list", "read", "01A", "one")], header=False, at_least=(14, 6, 3, 5))
    later = table.line(("todo:add_task", "write", "01B", "two"))
    assert screen_starts(first, ["todo:list", "read", "01A", "one"]) == screen_starts(
        later, ["todo:add_task", "write", "01B", "two"]
    )
    wider = table.line(("a-much-longer-tool-name", "write", "01C", "three"))
    assert "a-much-longer-tool-name" in wider, "a name is never cut when there is no terminal to fit"
    after = table.line(("x", "read", "01D", "four"))
    assert screen_starts(wider, ["a-much-longer-tool-name", "write"])[1] == screen_starts(after, ["x", "read"])[1]


def test_an_output_that_cannot_take_utf8_gets_ascii() -> None:
    lines = Table(COLUMNS, ascii_only=True).lines([("中文", "read", "01A", "café")])
    assert all(line.isascii() for line in lines)
    assert "\\u4e2d" in lines[1] and "caf\\xe9" in lines[1]


def test_the_width_is_the_terminals_unless_columns_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "77")
    assert terminal_width() == 77
    monkeypatch.delenv("COLUMNS")

    class Pipe:
        def isatty(self) -> bool:
            return False

    assert terminal_width(Pipe()) is None  # type: ignore[arg-type]


def test_counts_align_right() -> None:
    columns = (Column("NAME"), Column("COUNT", right=True))
    assert Table(columns).lines([("📖 read", "7"), ("write", "1234")]) == [
        "NAME     COUNT",
        "📖 read      7",
        "write     1234",
    ]


def test_line_separators_and_direction_marks_are_escaped_in_every_output() -> None:
    from mcphost.activity.display import to_yaml
    from mcphost.console import safe

    marks = "\u2028\u2029\u202e\u2066\u061c\ufeff"
    assert not any(mark in safe(f"a{marks}b") for mark in marks)
    # PyYAML takes them for printable; a reader's terminal does not.
    written = to_yaml({"reason": f"ok{marks}", "name": "naïve"})
    assert not any(mark in written for mark in marks) and "\\u202E" in written
    assert to_yaml({"name": "naïve"}) == "name: naïve\n"


def test_the_marks_escaped_in_json_are_the_same_in_text_and_in_utf_8() -> None:
    from mcphost.console import json_escaped, json_escaped_bytes

    # The first plane whole, the start of the next, and plane 14 (tags, variation selectors), one text each way.
    codes = [*range(0x10100), *range(0xDFF00, 0xE0300)]
    text = "".join(chr(code) for code in codes if not 0xD800 <= code <= 0xDFFF)
    assert json_escaped_bytes(text.encode("utf-8")) == json_escaped(text).encode("utf-8")
    assert json_escaped(text) != text
    assert json_escaped('"\udfff"') == '"\\udfff"'


def test_what_shows_as_nothing_is_escaped_and_stays_the_same_json() -> None:
    import json

    from mcphost.console import json_escaped, safe

    # A tool named with tag characters carries text nobody sees (a model reads it); fillers show as blank names.
    hidden = "rm\U000e0049\U000e0067\u2060\u00ad\u3164\u115f\u180e\U000e0101"
    shown = safe(hidden)
    assert shown.isascii() and shown.startswith("rm\\U000e0049"), shown
    escaped = json_escaped(json.dumps({"tool": hidden}, ensure_ascii=False))
    assert escaped.isascii() and "\\udb40\\udc49" in escaped  # a surrogate pair, as JSON writes it
    assert json.loads(escaped) == {"tool": hidden}
