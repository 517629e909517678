"""An upstream's stderr, relayed into the host's own: each line named after its server, escaped, cut, rate-limited.

The host's stderr is the agent's log in `mcphost mcp` and the person's terminal under `mcphost serve`; a server
that floods it, or writes escape sequences into it, must not drown or repaint either.
"""

from __future__ import annotations

import math
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

import anyio

from mcphost.activity.capture import cut_utf8
from mcphost.activity.redact import redact_text
from mcphost.console import safe

LINE_BYTES = 2048  # of one line shown; the rest is counted
# Read of a line past what is shown, for its redaction: a credential the cut goes through is known by its whole.
REDACT_MARGIN = 1024
LINES_PER_SECOND = 50  # per server, then lines are counted until the second is over
_CHUNK = 64 * 1024


class LineCutter:
    """Splits a byte stream into lines, keeping at most `limit` bytes of each (memory stays bounded whatever
    the server writes, a gigabyte without a newline included)."""

    def __init__(self, limit: int = LINE_BYTES) -> None:
        self._limit = limit
        self._kept = bytearray()
        self._cut = 0

    def feed(self, chunk: bytes) -> list[tuple[bytes, int]]:
        """The lines `chunk` completes, each as (its first `limit` bytes, how many more it had)."""
        lines: list[tuple[bytes, int]] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            room = self._limit - len(self._kept)
            self._kept += piece[: max(room, 0)]
            self._cut += max(len(piece) - max(room, 0), 0)
            if end < 0:
                return lines
            lines.append(self._take())
            start = end + 1

    def finish(self) -> list[tuple[bytes, int]]:
        """The last line, when the stream ended without a newline."""
        return [self._take()] if self._kept or self._cut else []

    def _take(self) -> tuple[bytes, int]:
        line = (bytes(self._kept), self._cut)
        self._kept.clear()
        self._cut = 0
        return line


class StderrLimiter:
    """At most `per_second` lines per one-second window; the lines over it are counted, and the count is written
    once the window is over ("... K lines dropped"). Pure: the caller passes the time."""

    def __init__(self, server: str, per_second: int = LINES_PER_SECOND) -> None:
        self.prefix = f"mcphost: [{safe(server, 80)}] "
        self._per_second = per_second
        self._window_start = -math.inf
        self._shown = 0
        self._dropped = 0

    def line(self, kept: bytes, cut: int, now: float) -> list[str]:
        """What to write for one line of the server's stderr (nothing, when the window is full)."""
        out = self.tick(now)
        if now - self._window_start >= 1.0:
            self._window_start, self._shown = now, 0
        if self._shown >= self._per_second:
            self._dropped += 1
            return out
        self._shown += 1
        # Redacted as the record's text is: the daemon's stderr ends up on disk too (an editor's output channel).
        text = redact_text(kept.decode("utf-8", "replace").removesuffix("\r"))
        shown = cut_utf8(text, LINE_BYTES).removesuffix("…")
        cut += max(len(kept) - LINE_BYTES, 0) if len(shown) < len(text) else 0
        text = safe(shown)
        if cut:
            text += f" ... [{cut} more bytes]"
        out.append(self.prefix + text)
        return out

    def due(self) -> float:
        """When the count of dropped lines is to be written (infinity when there is none)."""
        return self._window_start + 1.0 if self._dropped else math.inf

    def tick(self, now: float) -> list[str]:
        """The count of dropped lines, once their window is over."""
        return self.flush() if now >= self.due() else []

    def flush(self) -> list[str]:
        if not self._dropped:
            return []
        out = [f"{self.prefix}... {self._dropped} lines dropped"]
        self._dropped = 0
        return out


class LastWords:
    """What a server said last on its stderr, for the reason its connection gives when it exits: a line that starts
    a line of its own and holds a letter (a traceback's last line, a Node.js error's first; not an indented stack
    frame, a closing brace or the Node.js version that Node prints after an error)."""

    __slots__ = ("line",)

    def __init__(self) -> None:
        self.line: str | None = None

    def note(self, kept: bytes) -> None:
        # Every line a server writes passes here, shown or not (a flood past the rate limit too): only its start is
        # read, which is all that is shown.
        text = kept[:_WORDS_READ].decode("utf-8", "replace").rstrip()
        if not text or text[0].isspace() or _LETTER.search(text) is None or _NODE_VERSION.match(text):
            return
        self.line = text

    def describe(self, returncode: int) -> str:
        """How the server ended, and its last words, escaped and redacted: this goes to the agent and to status."""
        if returncode >= 0:
            how = f"the server exited with status {returncode}"
        else:
            try:
                how = f"the server was ended by {signal.Signals(-returncode).name}"
            except ValueError:
                how = f"the server was ended by signal {-returncode}"
        if self.line is None:
            return how
        return f"{how}: {safe(redact_text(self.line), _WORDS_SHOWN)}"


_LETTER = re.compile(r"[^\W\d_]")
_NODE_VERSION = re.compile(r"Node\.js v\d")
_WORDS_SHOWN = 300
_WORDS_READ = 4 * _WORDS_SHOWN  # bytes: a character is at most four


def write_lines(lines: list[str], stream: TextIO | None = None) -> None:
    if not lines:
        return
    target = stream or sys.stderr
    try:
        target.write("".join(line + "\n" for line in lines))
        target.flush()
    except (OSError, ValueError):
        pass  # the host's own stderr is gone (closed by the agent): nothing to tell anyone


async def relay(
    read: Callable[[int], Awaitable[bytes]],
    server: str,
    write: Callable[[list[str]], None] = write_lines,
    last: LastWords | None = None,
) -> None:
    """Copy a server's stderr (`read(n)` returns b"" at its end) into the host's stderr until it ends; `last` notes
    each line, shown or not."""
    cutter = LineCutter(LINE_BYTES + REDACT_MARGIN)
    limiter = StderrLimiter(server)
    try:
        while True:
            chunk: bytes | None = None
            # Wake up when a window with dropped lines is over, even if the server went quiet after its flood.
            with anyio.move_on_after(max(limiter.due() - anyio.current_time(), 0)):
                try:
                    chunk = await read(_CHUNK)
                except OSError:
                    chunk = b""  # a broken pipe ends the server's stderr like its end does
            now = anyio.current_time()
            if chunk is None:
                write(limiter.tick(now))
                continue
            lines = cutter.feed(chunk) if chunk else cutter.finish()
            for kept, cut in lines:
                if last is not None:
                    last.note(kept)
                write(limiter.line(kept, cut, now))
            if not chunk:
                return
    finally:
        write(limiter.flush())
