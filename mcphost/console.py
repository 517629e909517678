"""What a terminal is shown: untrusted text made harmless, the intent icons, colours, and one table layout.

Everything mcphost prints can hold an agent's or an upstream server's text (a tool name it made up, its reason),
so it passes through `safe()`: control characters, which could move the cursor, recolour the terminal or set its
title, and bidi overrides, which could reorder what a person reads, are shown escaped instead of acted on.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

# One icon per intent, used for nothing else, so a destructive call stands out in a scrolling tail.
INTENT_ICONS = {"read": "📖", "write": "📝", "destructive": "💥"}
ASCII_ICONS = {"read": "[R]", "write": "[W]", "destructive": "[D]"}
EVENT_ICON = "··"
ASCII_EVENT_ICON = " - "

RESET = "\x1b[0m"
BOLD = "\x1b[1m"
DIM = "\x1b[2m"
REVERSE = "\x1b[7m"
RED = "\x1b[31m"
YELLOW = "\x1b[33m"
GREEN = "\x1b[32m"

# Past ASCII: C1, separators, bidi, and what shows as nothing: zero-width characters, the soft hyphen, the word
# joiner and invisible operators, Hangul fillers, and the tag characters (text no one sees that a model reads).
_MARKS = (
    r"\x7f-\x9f\xad\u061c\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\u3164"
    r"\ufeff\uffa0\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
_CONTROL = re.compile(f"[\\x00-\\x1f{_MARKS}]")
_UNSEEN = re.compile(f"[{_MARKS}]")


def unseen_marks(text: str) -> bool:
    """Whether `text` holds what a writer that escapes only ASCII's control characters lets through to a terminal:
    a C1 control, a line or paragraph separator, a zero-width or bidirectional mark."""
    return _UNSEEN.search(text) is not None


# The marks as JSON written by `ensure_ascii=False` keeps them inside its strings (lone surrogates too, which no
# stream can encode), and as their UTF-8 in a line of the log (a test holds the two forms together).
_UNSEEN_IN_JSON = re.compile(f"[{_MARKS}\\ud800-\\udfff]")
_UNSEEN_IN_JSON_BYTES = re.compile(
    rb"\x7f|\xc2[\x80-\x9f\xad]|\xd8\x9c|\xe1\x85[\x9f\xa0]|\xe1\xa0\x8e|\xe2\x80[\x8b-\x8f\xa8-\xae]"
    rb"|\xe2\x81[\xa0-\xa4\xa6-\xa9]|\xe3\x85\xa4|\xef\xbb\xbf|\xef\xbe\xa0|\xf3\xa0[\x80\x81\x84-\x86][\x80-\xbf]"
    rb"|\xf3\xa0\x87[\x80-\xaf]"
)


_MARK_LEADS = (b"\xc2", b"\xd8", b"\xe1", b"\xe2", b"\xe3", b"\xef", b"\xf3")  # one byte each: memchr


def _escape(code: int) -> str:
    """A character as JSON escapes it: past the first plane, as its UTF-16 surrogate pair."""
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_escaped(text: str) -> str:
    """JSON text with the marks a terminal acts on or a reader is misled by written as their escapes: the same JSON."""
    return _UNSEEN_IN_JSON.sub(lambda found: _escape(ord(found.group())), text)


def json_escaped_bytes(data: bytes) -> bytes:
    """`json_escaped` for UTF-8 JSON text (lines of the log as they are)."""
    # Each mark's first bytes looked for first (C-speed scans; the pattern reads some 5 ns a byte): a log's JSON of
    # a million records holds none in most of its chunks.
    if data.isascii():
        if b"\x7f" not in data:
            return data
    elif not any(lead in data for lead in _MARK_LEADS):
        return data
    if _UNSEEN_IN_JSON_BYTES.search(data) is None:
        return data
    return _UNSEEN_IN_JSON_BYTES.sub(lambda found: _escape(ord(found.group().decode("utf-8"))).encode("ascii"), data)


def safe(value: Any, limit: int | None = None) -> str:
    text = "" if value is None else str(value)
    text = _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)
    if limit is not None and len(text) > limit:
        text = text[: max(1, limit - 1)] + "…"
    return text


def safe_lines(text: str) -> str:
    """Like `safe`, for text shown over several lines (an upstream's answer or error): its line breaks and tabs are
    kept, every other control character is escaped."""
    return "\n".join("\t".join(safe(part) for part in line.removesuffix("\r").split("\t")) for line in text.split("\n"))


def ascii_only(stream: TextIO | None = None) -> bool:
    """True when the stream (stdout by default) cannot take the icons: its encoding is not UTF-8."""
    encoding = (getattr(stream or sys.stdout, "encoding", None) or "").lower().replace("-", "")
    return encoding != "utf8"


# The widest a block of output lays itself out (a prompt), and the narrowest terminal it still fits itself to.
WIDEST = 100
NARROWEST = 40


@dataclass(frozen=True, slots=True)
class Style:
    color: bool = False  # ANSI colours and bold (a terminal that wants them)
    ascii_only: bool = False  # the output cannot carry UTF-8: [W] for 📝, plain rules, agent text escaped to ASCII
    # Columns a line may take: a line the terminal wraps starts again at its first column, where text an agent
    # wrote would pass for the program's own.
    width: int = WIDEST


def detect_style(stream: TextIO) -> Style:
    """Colour on a terminal (unless NO_COLOR or TERM=dumb); ASCII when the stream's encoding is not UTF-8; as wide
    as the terminal, up to WIDEST."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    color = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    columns = terminal_width(stream) if tty else None
    width = WIDEST if not columns else max(NARROWEST, min(WIDEST, columns))  # 0: a terminal that gives no size
    return Style(color=color, ascii_only=ascii_only(stream), width=width)


def fit_cells(text: str, width: int) -> list[str]:
    """`text` cut into pieces of at most `width` terminal columns each (a wide character takes two)."""
    if text.isascii():
        return [text[i : i + width] for i in range(0, len(text), width)] or [""]
    pieces: list[str] = []
    start, used = 0, 0
    for at, ch in enumerate(text):
        cells = 0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        if used + cells > width and at > start:
            pieces.append(text[start:at])
            start, used = at, 0
        used += cells
    pieces.append(text[start:])
    return pieces


def paint(text: str, style: Style, *codes: str) -> str:
    return f"{''.join(codes)}{text}{RESET}" if style.color and codes else text


def cell_width(text: str) -> int:
    """Columns `text` takes in a terminal: wide characters (the intent emoji, CJK) take two, combining marks none."""
    if text.isascii():
        return len(text)
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def terminal_width(stream: TextIO | None = None) -> int | None:
    """How wide a table may be: $COLUMNS when set, else the terminal's width; None for a pipe or a file, whose
    reader (grep, a script) wants every cell whole."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    target = stream or sys.stdout
    try:
        if target.isatty():
            return os.get_terminal_size(target.fileno()).columns
    except (AttributeError, ValueError, OSError):
        pass
    return None


# The most room a cut at a word boundary may leave unused; past it, the word is cut instead.
WORD_SLACK = 12


def cut(text: str, width: int, ascii_only: bool = False) -> str:
    """`text` in at most `width` columns: whole when it fits, else cut after its last whole word (mid-word only
    when that would waste much of the room: a long word, such as a tool name), marked with an ellipsis."""
    if cell_width(text) <= width:
        return text
    mark = "..." if ascii_only else "…"
    room = width - len(mark)
    if room <= 0:
        return mark[: max(width, 0)]
    used = end = 0
    for ch in text:
        step = 0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        if used + step > room:
            break
        used += step
        end += 1
    head = text[:end]
    if not text[end].isspace():
        boundary = head.rfind(" ")
        if boundary >= max(room // 2, room - WORD_SLACK):
            head = head[:boundary]
    return head.rstrip(" ,;:-") + mark


# Per column of some rows: the widest cell on screen, and whether any cell holds anything (Table.measure).
Measures = tuple[tuple[int, bool], ...]


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    flex: bool = False  # may be cut (at a word boundary) when the table is wider than the terminal
    limit: int | None = None  # never wider than this, whatever the room
    floor: int = 0  # a flexible column is never cut narrower than this (nor than its header)
    optional: bool = False  # left out when empty, or when the table cannot fit the terminal otherwise (last first)
    right: bool = False  # aligned right (counts, scores)


class Table:
    """The one table layout of every listing (`log tail`, `activity list`, `tools`, `grants list`, `status`).

    Cells are escaped here (they hold agents' and upstream servers' text), measured by what they take on screen
    (wide characters count two), and laid out column by column, so a listing of a million rows costs a few passes
    over its columns. With a `width` (the terminal's), flexible columns give up room, widest first, and their
    cells are cut at word boundaries, and if that is not enough, optional columns are left out; without one (a
    pipe), nothing is cut but a column's own `limit`.
    """

    def __init__(
        self, columns: Sequence[Column], *, width: int | None = None, ascii_only: bool = False, gap: str = "  "
    ) -> None:
        self.columns = tuple(columns)
        self.width = width
        self.ascii_only = ascii_only
        self.gap = gap
        self.widths: list[int] = [cell_width(c.header) for c in self.columns]
        self.shown: list[bool] = [True] * len(self.columns)
        self._fixed: list[bool] = [False] * len(self.columns)  # cut to fit the terminal: stays that wide
        # By the id of the rows `measure` saw: the rows (holding the id), their columns cleaned (None: as they are)
        # and joined, and their measures; `render` of the same rows takes them instead of cleaning again.
        self._measured: dict[
            int, tuple[Sequence[Sequence[str]], list[tuple[list[str] | None, str]], list[tuple[int, bool]]]
        ] = {}

    def _clean(self, column: Sequence[str]) -> tuple[list[str] | None, str]:
        """The cells escaped (and made ASCII for an output that cannot take more), and all of them joined: one
        pass over a long column answers whether any cell needs escaping, is wide, or holds anything at all. The
        cells are None when they are shown as they are."""
        joined = "".join(column)
        cells = None
        if not joined.isprintable():
            cells = [safe(cell) for cell in column]
            joined = "".join(cells)
        if self.ascii_only and not joined.isascii():
            cells = [cell.encode("ascii", "backslashreplace").decode("ascii") for cell in cells or column]
            joined = "".join(cells)
        return cells, joined

    def _fit(self, natural: list[int], empty: list[bool]) -> tuple[list[int], list[bool]]:
        """Each column's width, and whether it is shown at all."""
        widths = [min(n, c.limit) if c.limit else n for n, c in zip(natural, self.columns, strict=True)]
        shown = [not (c.optional and blank) for c, blank in zip(self.columns, empty, strict=True)]
        room = self.width
        if room is None:
            return widths, shown
        floors = [min(max(c.floor, cell_width(c.header)), w) for c, w in zip(self.columns, widths, strict=True)]

        def over(kept: list[int]) -> int:
            return sum(kept) + len(self.gap) * (len(kept) - 1) - room

        for i in reversed(range(len(widths))):
            at_floors = [
                f if c.flex else w for f, w, c, s in zip(floors, widths, self.columns, shown, strict=True) if s
            ]
            if over(at_floors) <= 0:
                break
            if self.columns[i].optional:
                shown[i] = False
        excess = over([w for w, s in zip(widths, shown, strict=True) if s])
        while excess > 0:
            shrinkable = [i for i, c in enumerate(self.columns) if shown[i] and c.flex and widths[i] > floors[i]]
            if not shrinkable:
                break  # as narrow as it goes: the terminal wraps what is left over
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
        return widths, shown

    def lines(self, rows: Sequence[Sequence[str]], *, header: bool = True, at_least: Sequence[int] = ()) -> list[str]:
        """The table's lines (the header first), its column widths settled by these rows (and `at_least`, the
        widths to keep room for, for rows that follow with `line`)."""
        self.fit([self.measure(rows)], at_least)
        body = self.render(rows)
        return [self.header(), *body] if header else body

    def measure(self, rows: Sequence[Sequence[str]]) -> Measures:
        """What the layout needs to know of these rows: each column's widest cell, on screen and escaped, and
        whether any cell holds anything. Parts of one listing measured apart (in other processes: mcphost.cli.scan)
        are laid out as one by `fit` over all their measures, then `render` of each part."""
        columns: list[tuple[list[str] | None, str]] = []
        measures: list[tuple[int, bool]] = []
        for column in zip(*rows, strict=True) if rows else [()] * len(self.columns):
            cells, joined = self._clean(column)
            shown = column if cells is None else cells
            if not shown:
                size = 0
            elif joined.isascii():
                size = max(map(len, shown))
            else:
                size = max(map(cell_width, set(shown)))
            columns.append((cells, joined))
            measures.append((size, bool(joined)))
        self._measured[id(rows)] = (rows, columns, measures)
        return tuple(measures)

    def fit(self, parts: Sequence[Measures], at_least: Sequence[int] = ()) -> None:
        """Settle each column's width, and whether it is shown, for rows of which these are the measures (and
        `at_least`: widths to keep room for, for rows that follow with `line`)."""
        natural = [cell_width(c.header) for c in self.columns]
        filled = [bool(at_least)] * len(self.columns)
        for measures in parts:
            for i, (size, any_cell) in enumerate(measures):
                natural[i] = max(natural[i], size)
                filled[i] = filled[i] or any_cell
        for i, size in enumerate(at_least[: len(natural)]):
            natural[i] = max(natural[i], size)
        widths, shown = self._fit(natural, [not f for f in filled])
        self.widths, self.shown = widths, shown
        self._fixed = [w < min(n, c.limit or n) for w, n, c in zip(widths, natural, self.columns, strict=True)]

    def plan(self) -> tuple[list[int], list[bool], list[bool]]:
        """What `fit` settled, for `follow` in another process laying out another part of the same listing."""
        return list(self.widths), list(self.shown), list(self._fixed)

    def follow(self, plan: tuple[list[int], list[bool], list[bool]]) -> None:
        """Lay out rows to what `fit` settled in another process (`plan` there)."""
        widths, shown, fixed = plan
        if not len(widths) == len(shown) == len(fixed) == len(self.columns):
            raise ValueError("a plan for another table")
        self.widths, self.shown, self._fixed = (
            [int(w) for w in widths],
            [bool(s) for s in shown],
            [bool(f) for f in fixed],
        )

    def header(self) -> str:
        headers = [tuple(c.header for c in self.columns)]
        return self._render(
            headers, [self._clean(h) for h in zip(*headers, strict=True)], [cell_width(h) for h in headers[0]]
        )[0]

    def render(self, rows: Sequence[Sequence[str]]) -> list[str]:
        """The lines of these rows, laid out to the widths `fit` settled (none of the header)."""
        if id(rows) not in self._measured:
            self.measure(rows)
        _rows, cleaned, measures = self._measured.pop(id(rows))
        return self._render(rows, cleaned, [size for size, _filled in measures])

    def _render(
        self, rows: Sequence[Sequence[str]], cleaned: list[tuple[list[str] | None, str]], longest: list[int]
    ) -> list[str]:
        if not any(self.shown):
            return [""] * len(rows)
        first = self.shown.index(True)
        last = max(i for i, s in enumerate(self.shown) if s)
        gap = self.gap.replace("%", "%%")
        # Each line is one `%` of a format that pads every column (and drops a hidden one with `%.0s`): a fifth
        # of the time of padding every cell and joining them. A column's cells are changed first only where they
        # must be: escaped, cut, or of wide characters in different numbers.
        formats: list[str] = []
        changed: dict[int, list[str]] = {}
        for i, ((cells, joined), size) in enumerate(zip(cleaned, self.widths, strict=True)):
            if not self.shown[i]:
                formats.append("%.0s")
                continue
            sep = "" if i == first else gap
            right = self.columns[i].right
            shown = cells if cells is not None else [row[i] for row in rows] if not joined.isascii() else None
            if shown is None:  # ASCII: a character takes a column
                if longest[i] > size:
                    changed[i] = [
                        cell if len(cell) <= size else cut(cell, size, self.ascii_only)
                        for row in rows
                        for cell in (row[i],)
                    ]
                formats.append(sep + (f"%{size}s" if right else "%s" if i == last else f"%-{size}s"))
                continue
            on_screen = {cell: cell_width(cell) for cell in set(shown)}
            extra = {width - len(cell) for cell, width in on_screen.items()}
            if cells is None and len(extra) == 1 and max(on_screen.values()) <= size:
                # Wide characters, as many in every cell (the intent column: one icon each): padded by `%` too.
                wide = extra.pop()
                formats.append(sep + (f"%{size - wide}s" if right else "%s" if i == last else f"%-{size - wide}s"))
                continue
            # Few distinct cells in most such columns: each is measured, cut and padded once.
            shaped: dict[str, str] = {}
            for cell, width in on_screen.items():
                fitted = cell if width <= size else cut(cell, size, self.ascii_only)
                pad = " " * (size - cell_width(fitted))
                shaped[cell] = pad + fitted if right else fitted if i == last else fitted + pad
            changed[i] = [shaped[cell] for cell in shown]
            formats.append(sep + "%s")
        layout = "".join(formats)
        if not changed:
            return [(layout % row).rstrip() for row in map(tuple, rows)]
        columns = [changed.get(i) or [row[i] for row in rows] for i in range(len(self.columns))]
        return [(layout % cells).rstrip() for cells in zip(*columns, strict=True)]

    def line(self, row: Sequence[str]) -> str:
        """One more row under the table `lines` made (`log tail -f`): laid out to its widths. A cell wider than its
        column widens it for the rows after, unless the column was cut to fit the terminal (then the cell is cut)."""
        cells: list[str] = []
        last = max((i for i, s in enumerate(self.shown) if s), default=-1)
        for i, column in enumerate(self.columns):
            if not self.shown[i]:
                continue
            cleaned, _joined = self._clean([row[i]])
            cell = row[i] if cleaned is None else cleaned[0]
            size = cell_width(cell)
            if size > self.widths[i]:
                room = self.widths[i] if self._fixed[i] else column.limit
                if room is not None and size > room:
                    cell = cut(cell, room, self.ascii_only)
                    size = cell_width(cell)
                self.widths[i] = max(self.widths[i], size)
            pad = " " * (self.widths[i] - size)
            cells.append(pad + cell if column.right else cell if i == last else cell + pad)
        return self.gap.join(cells).rstrip()
