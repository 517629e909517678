"""An upstream's stderr in the host's: named, escaped, cut, rate-limited, and the dropped lines counted."""

from __future__ import annotations

import anyio

from mcphost.upstream.stderr import LINE_BYTES, LineCutter, StderrLimiter, relay


def test_lines_are_split_across_chunks_and_long_ones_are_cut_with_their_length_counted() -> None:
    cutter = LineCutter(limit=8)
    assert cutter.feed(b"one\ntw") == [(b"one", 0)]
    assert cutter.feed(b"o\n") == [(b"two", 0)]
    assert cutter.feed(b"0123456789" * 3) == []
    assert cutter.feed(b"abc\nlast") == [(b"01234567", 25)]
    assert cutter.finish() == [(b"last", 0)]
    assert cutter.finish() == []


def test_a_line_is_prefixed_with_its_server_and_its_control_characters_escaped() -> None:
    limiter = StderrLimiter("todo")
    assert limiter.line(b"\x1b]0;pwned\x07 hello\r", 0, now=0.0) == ["mcphost: [todo] \\x1b]0;pwned\\x07 hello"]
    cut = limiter.line(b"x" * LINE_BYTES, 5000, now=0.1)
    assert cut == [f"mcphost: [todo] {'x' * LINE_BYTES} ... [5000 more bytes]"]


def test_invalid_utf8_does_not_stop_the_relay() -> None:
    [line] = StderrLimiter("s").line(b"caf\xe9", 0, now=0.0)
    assert line == "mcphost: [s] caf\ufffd"


def test_past_the_rate_lines_are_counted_and_the_count_written_once_the_second_is_over() -> None:
    limiter = StderrLimiter("s", per_second=3)
    shown = [limiter.line(b"l%d" % i, 0, now=0.01 * i) for i in range(10)]
    assert [len(out) for out in shown] == [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    assert limiter.due() == 1.0
    assert limiter.tick(0.99) == []
    assert limiter.tick(1.0) == ["mcphost: [s] ... 7 lines dropped"]
    assert limiter.tick(5.0) == []
    assert limiter.line(b"again", 0, now=5.0) == ["mcphost: [s] again"]


def test_the_count_comes_before_the_next_line_shown() -> None:
    limiter = StderrLimiter("s", per_second=1)
    limiter.line(b"a", 0, now=0.0)
    limiter.line(b"b", 0, now=0.5)
    assert limiter.line(b"c", 0, now=1.5) == ["mcphost: [s] ... 1 lines dropped", "mcphost: [s] c"]


async def test_the_relay_writes_the_count_of_a_flood_that_stopped_without_waiting_for_more_output() -> None:
    flood = b"".join(b"line %d\n" % i for i in range(200))
    chunks = [flood]
    quiet = anyio.Event()
    written: list[str] = []

    async def read(_n: int) -> bytes:
        if chunks:
            return chunks.pop()
        await quiet.wait()  # the server is alive and silent
        return b""

    def write(lines: list[str]) -> None:
        written.extend(lines)
        if any(line.endswith("lines dropped") for line in lines):
            quiet.set()

    with anyio.fail_after(5):
        await relay(read, "s", write)
    shown = [line for line in written if "line " in line]
    assert len(shown) == 50
    assert written[-1] == "mcphost: [s] ... 150 lines dropped"


async def test_a_credential_on_a_line_is_redacted_also_where_the_lines_cut_goes_through_it() -> None:
    # The daemon's stderr reaches the disk too (the editor's output channel): an upstream that logs a token, or an
    # agent's argument it echoes, showed it whole there while the record had it redacted.
    token = "ghp_" + "Q7" * 18
    crossing = b"x" * (LINE_BYTES - 10) + token.encode() + b" and more\n"
    chunks = [b"auth with " + token.encode() + b"\n" + crossing]
    written: list[str] = []

    async def read(_n: int) -> bytes:
        return chunks.pop() if chunks else b""

    await relay(read, "s", written.extend)
    assert len(written) == 2 and not any("Q7Q7" in line for line in written), written
    assert written[0] == "mcphost: [s] auth with [REDACTED:github]"
    assert written[1].endswith("more bytes]")
