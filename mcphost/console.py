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

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


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


@dataclass(frozen=True, slots=True)
class Style:
    color: bool = False  # ANSI colours and bold (a terminal that wants them)
    ascii_only: bool = False  # the output cannot carry UTF-8: [W] for 📝, plain rules, agent text escaped to ASCII


def detect_style(stream: TextIO) -> Style:
    """Colour on a terminal (unless NO_COLOR or TERM=dumb); ASCII when the stream's encoding is not UTF-8."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    color = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    return Style(color=color, ascii_only=ascii_only(stream))


def paint(text: str, style: Style, *codes: str) -> str:
    return f"{''.join(codes)}{text}{RESET}" if style.color and codes else text


def cell_width(text: str) -> int:
    """Columns `text` takes in a terminal: wide characters (the intent emoji, CJK) take two, combining marks none."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def columns(headers: Sequence[str], rows: Sequence[Sequence[str]], gap: str = "  ") -> str:
    """A table whose columns line up on screen, by cell width rather than by character count."""
    widths = [max([cell_width(h)] + [cell_width(row[i]) for row in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return gap.join(cell + " " * (widths[i] - cell_width(cell)) for i, cell in enumerate(cells)).rstrip()

    return "\n".join([line(headers), *(line(row) for row in rows)])
