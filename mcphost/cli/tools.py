"""`mcphost tools [QUERY]`: what retrieve_tools finds, for a person."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mcphost import discovery
from mcphost.cli.common import add_listing_flags, for_terminal, load_or_exit, print_json, require_utf8, table_width
from mcphost.console import Column, Table, ascii_only, safe, safe_lines
from mcphost.gateway.tools import DEFAULT_LIMIT, RETRIEVE_TOOLS
from mcphost.paths import config_path

ICONS = {"call_tool_read": "R", "call_tool_write": "W", "call_tool_destructive": "D"}


class _Refused(Exception):
    """retrieve_tools answered with an error (GatewayError in this process, an error result from a daemon)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.add_argument("query", nargs="?", default="", help="what you want to do, in words (empty: all tools)")
    p.add_argument("-n", "--limit", type=int, default=DEFAULT_LIMIT, help=f"most results (default {DEFAULT_LIMIT})")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="start the upstream servers in this process even when a daemon is running",
    )
    add_listing_flags(p, default="text")
    p.set_defaults(func=run)


COLUMNS = (
    Column("SCORE", right=True),
    Column("TOOL", flex=True, floor=16),
    Column("CALL WITH", optional=True),
    Column("DESCRIPTION", flex=True, floor=20),
)


def run(args: argparse.Namespace) -> int:

    require_utf8(QUERY=args.query)
    arguments = {"query": args.query, "limit": args.limit}
    try:
        answer = None if args.in_process else _via_daemon(args, arguments)
        if answer is None:
            answer = _in_process(args, arguments)
    except _Refused as err:
        print(f"mcphost: {safe(err.code)}: {safe_lines(for_terminal(err.message))}", file=sys.stderr)
        return 2
    if args.output == "json":
        print_json(answer)
        return 0
    # Names, descriptions and errors are the upstream servers' text: the table escapes them, so that none of it
    # can drive the terminal (set its title, plant a link, erase a line). `-o json` above is exact, for programs.
    for server in answer.get("diagnostics", {}).get("servers", []):
        print(
            f"mcphost: server '{safe(server['name'])}' is {safe(server['state'])}: {safe(server.get('error', ''))}",
            file=sys.stderr,
        )
    tools = answer["tools"]
    if not tools:
        print("no tools found" + (f" for '{safe(args.query)}'" if args.query else ""), file=sys.stderr)
        return 0
    rows = [
        (
            f"{tool['score']:.2f}",
            str(tool["name"]),
            _call_with(tool.get("call_with")),
            _summary(tool.get("description")),
        )
        for tool in tools
    ]
    table = Table(COLUMNS, width=table_width(args), ascii_only=ascii_only())
    print("\n".join(table.lines(rows)))
    return 0


def _call_with(variant: object) -> str:
    """The variant a tool is called with, as the command a person types: `mcphost call tool-write`."""
    text = str(variant or "")
    return "tool-" + text.removeprefix("call_tool_") if text.startswith("call_tool_") else text


def _summary(description: object) -> str:
    """A description's first paragraph, on one line: a table's cell."""
    text = str(description or "").strip()
    return " ".join(text.split("\n\n", 1)[0].split())


def _via_daemon(args: argparse.Namespace, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The running daemon's retrieve_tools (its upstreams are up already): None when no daemon serves this config,
    or when it cannot be reached (then this process asks the upstreams itself)."""
    target = discovery.for_config(config_path(args.config))
    if target is None:
        return None
    from mcphost.cli.daemon_client import TOOLS_CLIENT, DaemonError, McpSession

    try:
        with McpSession(target["mcp"]["url"], dict(target["mcp"].get("headers") or {}), TOOLS_CLIENT) as session:
            result = session.call_tool(RETRIEVE_TOOLS, arguments)
    except DaemonError as exc:
        print(f"mcphost: {safe(str(exc))}; asking the upstream servers from this process", file=sys.stderr)
        return None
    structured = result.get("structuredContent")
    error = structured.get("error") if result.get("isError") is True and isinstance(structured, dict) else None
    if isinstance(error, dict) and "code" in error:
        raise _Refused(str(error["code"]), str(error.get("message", "")))
    texts = [b.get("text") for b in result.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"]
    try:
        answer = json.loads(texts[0]) if texts and isinstance(texts[0], str) else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("tools"), list):
        raise _Refused("UPSTREAM_ERROR", f"the daemon's retrieve_tools answer is not the expected JSON: {texts[:1]}")
    return answer


def _in_process(args: argparse.Namespace, arguments: dict[str, Any]) -> dict[str, Any]:
    # Only the path taken is imported: with a daemon running, this process starts no upstream of its own.
    import anyio

    from mcphost.errors import GatewayError
    from mcphost.upstream.spawn import early_starts

    loaded = load_or_exit(args)

    async def main() -> dict[str, Any]:
        # The upstreams are spawned before the host's modules are imported: their starts and that import overlap.
        async with early_starts(loaded.config) as early:
            from mcphost.host import Host

            async with Host(loaded, early=early) as host:
                return await host.gateway.retrieve_tools(arguments)

    try:
        return anyio.run(main)
    except GatewayError as err:
        raise _Refused(err.code.value, err.message) from None
