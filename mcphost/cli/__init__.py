"""The `mcphost` command: one table of commands, and the one place where the command that runs is imported.

Each command lives in its own module with a `register(parser, parent)` that adds its arguments (and its
actions, for command groups) and sets `func`. Only the module of the command being run is imported, so `mcphost
log tail` never pays for the daemon, the MCP SDK or pygls; `mcphost --help` lists every command from the table
alone.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import sys
from dataclasses import dataclass

from mcphost import __version__
from mcphost.cli.common import setup_logging


@dataclass(frozen=True, slots=True)
class Command:
    module: str  # under mcphost.cli
    summary: str


COMMANDS: dict[str, Command] = {
    "serve": Command(
        "serve", "run the daemon: agent MCP endpoint over HTTP on 127.0.0.1, editor channel on a local socket"
    ),
    "mcp": Command("mcp", "serve an agent over MCP on stdio (relayed to a running daemon, if any)"),
    "status": Command("status", "running daemons: upstreams, editors, pending prompts"),
    "call": Command("call", "call an upstream tool with a declared intent"),
    "tools": Command("tools", "search the upstream tools, as retrieve_tools does"),
    "log": Command("log", "read the activity log"),
    "activity": Command("activity", "list, show and count activity records"),
    "config": Command("config", "where the config is, what is in force, whether it is valid"),
    "grants": Command("grants", "list and revoke remembered approvals"),
    "rules": Command("rules", "test what the [[rules]] decide for a call, without calling anything"),
    "approve": Command(
        "approve", "answer permission prompts in this terminal (attaches to the running daemon like an editor)"
    ),
    "hook": Command(
        "hook", "answer an agent's hook (Claude Code, VS Code, Codex) about its own tool calls; install it"
    ),
    "permission-server": Command(
        "permission_server", "an MCP server with one tool for Claude Code's --permission-prompt-tool"
    ),
    "demo": Command(
        "demo",
        "a guided run: an agent reads, writes and deletes todo tasks through mcphost (nothing of yours touched)",
    ),
}

# Options taken before the command name; the value of --config is not the command.
_OPTIONS_WITH_VALUE = ("--config",)


def command_name(argv: list[str]) -> str | None:
    """The command `argv` runs, if it names one of the table's: the first word that is not an option."""
    words = iter(argv)
    for word in words:
        if word in _OPTIONS_WITH_VALUE:
            next(words, None)
            continue
        if word == "--":
            word = next(words, "")
            return word if word in COMMANDS else None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(run: str | None) -> argparse.ArgumentParser:
    """The parser for `run` (its module imported and its arguments registered); every other command is a name and
    a summary, enough for `--help` and for argparse to name a mistyped command."""
    # --config and -v work before and after the command: `mcphost --config X tools`, `mcphost tools --config X`.
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--config", default=argparse.SUPPRESS, metavar="PATH", help="config file (wins over $MCPHOST_CONFIG)"
    )
    parent.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more log output on stderr")
    parser = argparse.ArgumentParser(
        prog="mcphost",
        description="A local agent host between AI agents and their MCP servers.",
        parents=[parent],
    )
    parser.add_argument(
        "--version",
        action="version",
        # Other projects are called mcphost too: the VS Code extension runs `--version` and trusts an executable only
        # when this signature follows the version (editor-extension/src/identity.ts). Keep the two in step, and the
        # line short and unhyphenated: argparse wraps it to the terminal's width.
        version=f"mcphost {__version__} (local MCP agent host with intent checks)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        if name != run:
            sub.add_parser(name, help=command.summary)
            continue
        module = importlib.import_module(f"mcphost.cli.{command.module}")
        module.register(
            sub.add_parser(name, parents=[parent], help=command.summary, description=command.summary), parent
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(command_name(argv)).parse_args(argv)
    if not hasattr(args, "config"):
        args.config = None
    setup_logging(getattr(args, "verbose", 0))
    # Text from a log line or an upstream can hold a lone surrogate (JSON's "\udfff" decodes to one): shown as that
    # escape, which is also valid JSON, rather than a UnicodeEncodeError half-way through a listing.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `mcphost tools | head`: the reader left; say nothing more, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return result


if __name__ == "__main__":
    sys.exit(main())
