"""What every command shares: loading the config with a readable error, logging to stderr, output helpers."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from mcphost import console

if TYPE_CHECKING:
    from mcphost.config import LoadedConfig


def setup_logging(verbose: int) -> None:
    # stderr only: stdout of `mcphost mcp` carries the protocol and nothing else.
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="mcphost: %(levelname)s %(name)s: %(message)s")
    # pygls logs every message it sends at INFO, tokens in `mcphost/status` included: keep it quiet.
    logging.getLogger("pygls").setLevel(max(level, logging.WARNING))


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"mcphost: {message}", file=sys.stderr)
    raise SystemExit(code)


def require_utf8(**given: str | None) -> None:
    """Exit 2 naming the first of `given` (flag or argument name: its value) that is not UTF-8 text: Python reads
    bytes of another encoding from the command line (a Latin-1 terminal, a file's bytes) as lone surrogates, which no
    call can carry. Said here, before anything is asked or called."""
    for name, value in given.items():
        if value is None:
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            fail(f"{name} is not UTF-8 text ({ascii(value)[:80]}): write it in UTF-8", 2)


def load_or_exit(args: argparse.Namespace) -> LoadedConfig:
    from mcphost.config import ConfigError, load_config
    from mcphost.demo.default import default_config

    try:
        return load_config(getattr(args, "config", None), default=default_config)
    except ConfigError as exc:
        fail(f"{exc}\nFix the file, or check it with `mcphost config validate`.")


# The gateway's messages are written for the agent (its tools, its parameters, its user); they are a contract, and
# stay as they are in records and in `-o json`. A person who typed `mcphost call tool-read` is shown the same
# message in the words of the command line.
_AGENT_WORDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?<![\w:'\"./-])call_tool_(read|write|destructive)(?![\w'\"])"), r"`mcphost call tool-\1`"),
    (re.compile(r"(?<![\w:'\"./-])retrieve_tools(?![\w'\"])"), "`mcphost tools`"),
    (re.compile(r"(?<![\w.-])args_json(?!\w)"), "--args"),
    (re.compile(r"(?<![\w.-])intent\.reason(?!\w)"), "--reason"),
    (re.compile(r"(?<![\w.-])intent\.data_sensitivity(?!\w)"), "--sensitivity"),
    # Advice to the agent about its user, who is the person reading this.
    (re.compile(r" Do not retry it as is; ask the user how to proceed\."), ""),
    (
        re.compile(r"Retry when the user is at their editor, or ask them to raise prompt_timeout\."),
        "Answer the prompt in time (in your editor or `mcphost approve`), or raise prompt_timeout.",
    ),
]


def for_terminal(message: str) -> str:
    """A gateway message (an error, a warning) as the person at the command line is shown it: the agent's tool and
    parameter names become the commands and flags they type."""
    for pattern, replacement in _AGENT_WORDS:
        message = pattern.sub(replacement, message)
    return message


# What `mcphost config init` does where no config file is: the starter it writes runs what the default runs.
INIT_HINT = "`mcphost config init` writes a commented starter there"


def config_in_force(path: str | Path, where: str | None = None) -> str:
    """The config a daemon runs on, as a person should read it, by where it comes from: "present" (its file),
    "removed" (the file is gone, and the config the daemon last read from it stays in force), "none" (no file: the
    built-in default), "unknown" (no file, and the daemon did not say which). None: "present" or "none", by whether
    the file is there."""
    if where is None:
        where = "present" if Path(path).exists() else "none"
    if where == "removed":
        return f"{path} is gone; the config last read from it stays in force until the file is back"
    if where == "none":
        return f"none at {path}; using the built-in default ({INIT_HINT})"
    if where == "unknown":
        return f"none at {path} (the daemon did not say whether it keeps the config it last read, or the default)"
    return str(path)


def config_file_said(shown: object) -> str:
    """Where a daemon's config comes from when its file is gone (see `config_in_force`), by its answer to
    `mcphost/config`: "removed" when it still runs on the file it read, "none" when on the built-in default."""
    exists = shown.get("exists") if isinstance(shown, dict) else None
    return "unknown" if not isinstance(exists, bool) else "removed" if exists else "none"


def print_json(value: Any) -> None:
    # What JSON leaves as it is inside a string, yet a terminal acts on (C1 controls, such as CSI) or a reader is
    # misled by (bidi overrides, zero-width marks), and lone surrogates: written as their escapes.
    print(console.json_escaped(json.dumps(value, indent=2, ensure_ascii=False)))


def add_output_flag(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument("-o", "--output", choices=choices, default=choices[0], help="output format")


# Every listing takes the same flags: `-o table` (also `text`), `-o json` for programs, and `--wide`.
TABLE_FORMATS = ("table", "text")


def add_listing_flags(
    parser: argparse.ArgumentParser, formats: tuple[str, ...] = ("json",), default: str = "table"
) -> None:
    """`-o FORMAT` and `--wide` for a command that lists records, tools or grants as a table."""
    choices = (default, *(f for f in (*TABLE_FORMATS, *formats) if f != default))
    parser.add_argument(
        "-o", "--output", choices=choices, default=default, help="output format (table and text: the same)"
    )
    parser.add_argument(
        "--wide", action="store_true", help="cut no cell to fit the terminal (a pipe or a file is never cut)"
    )


def table_width(args: argparse.Namespace) -> int | None:
    """The width a table must fit: the terminal's, unless --wide."""
    from mcphost.console import terminal_width

    return None if getattr(args, "wide", False) else terminal_width()


def freeze_startup_heap() -> None:
    """Keep what the process made to start (modules, models, schemas: about 120k objects) out of the collector's
    way: none of it is garbage, and every full collection walked all of it (about 50 ms, in the middle of a call),
    and every middle one a good part. Called once a server is up, before its first request."""
    gc.freeze()
