"""What a server said last on its stderr, as the reason its connection gives when the server exits (`LastWords`)."""

from __future__ import annotations

import signal

from mcphost.upstream.stderr import LastWords

# As Node.js 20 prints an entry point it cannot find.
NODE = b"""node:internal/modules/cjs/loader:1210
  throw err;
  ^

Error: Cannot find module '/srv/index.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2
"""

PYTHON = b"""Traceback (most recent call last):
  File "/srv/server.py", line 3, in <module>
    import fastmcp
ModuleNotFoundError: No module named 'fastmcp'
"""


def said(text: bytes) -> LastWords:
    words = LastWords()
    for line in text.split(b"\n"):
        words.note(line)
    return words


def test_the_last_line_of_a_traceback_is_what_explains_it() -> None:
    assert said(PYTHON).describe(1) == "the server exited with status 1: ModuleNotFoundError: No module named 'fastmcp'"


def test_a_node_error_is_its_message_not_its_stack_its_brace_or_the_node_version() -> None:
    assert said(NODE).describe(1) == "the server exited with status 1: Error: Cannot find module '/srv/index.js'"


def test_an_exit_with_nothing_said_gives_the_status_or_the_signal() -> None:
    assert said(b"\n   \n").describe(0) == "the server exited with status 0"
    assert said(b"").describe(-signal.SIGSEGV) == "the server was ended by SIGSEGV"
    assert said(b"").describe(-200) == "the server was ended by signal 200"


def test_the_words_are_redacted_escaped_and_cut_for_the_agent_and_status() -> None:
    token = "ghp_" + "a1B2" * 10
    line = f"error: bad credentials {token} \x1b]0;pwned\x07 \u202e{'x' * 2000}".encode()
    shown = said(line).describe(2)
    assert token not in shown and "[REDACTED:github]" in shown
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert len(shown) < 400
    # Bytes that are not UTF-8 do not stop it.
    assert said(b"fatal: \xff\xfe broken").describe(1).startswith("the server exited with status 1: fatal: ")
