"""The `mcphost` command: one module per command group; each parses, calls the core, and prints."""

from __future__ import annotations

import argparse
import os
import sys

from mcphost import __version__
from mcphost.cli import activity, approve, call, config, demo, grants, log, mcp, serve, status, tools
from mcphost.cli.common import setup_logging


def build_parser() -> argparse.ArgumentParser:
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
    parser.add_argument("--version", action="version", version=f"mcphost {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (serve, mcp, status, call, tools, log, activity, config, grants, approve, demo):
        module.register(sub, parent)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "config"):
        args.config = None
    setup_logging(getattr(args, "verbose", 0))
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
