"""`mcphost tools [QUERY]`: what retrieve_tools finds, for a person."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from mcphost.cli.common import add_output_flag, load_or_exit, print_json
from mcphost.console import safe
from mcphost.errors import GatewayError
from mcphost.gateway.tools import DEFAULT_LIMIT
from mcphost.host import Host

ICONS = {"call_tool_read": "R", "call_tool_write": "W", "call_tool_destructive": "D"}


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.add_argument("query", nargs="?", default="", help="what you want to do, in words (empty: all tools)")
    p.add_argument("-n", "--limit", type=int, default=DEFAULT_LIMIT, help=f"most results (default {DEFAULT_LIMIT})")
    add_output_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    loaded = load_or_exit(args)

    async def main() -> dict[str, Any]:
        async with Host(loaded) as host:
            return await host.gateway.retrieve_tools({"query": args.query, "limit": args.limit})

    try:
        answer = anyio.run(main)
    except GatewayError as err:
        print(f"mcphost: {err.code.value}: {safe(err.message)}", file=sys.stderr)
        return 2
    if args.output == "json":
        print_json(answer)
        return 0
    # Names, descriptions and errors are the upstream servers' text: escaped, so that none of it can drive the
    # terminal (set its title, plant a link, erase a line). `-o json` above is exact, for programs.
    for server in answer.get("diagnostics", {}).get("servers", []):
        print(
            f"mcphost: server '{safe(server['name'])}' is {safe(server['state'])}: {safe(server.get('error', ''))}",
            file=sys.stderr,
        )
    tools = answer["tools"]
    if not tools:
        print("no tools found" + (f" for '{safe(args.query)}'" if args.query else ""), file=sys.stderr)
        return 0
    names = [safe(t["name"]) for t in tools]
    width = max(len(name) for name in names)
    for name, tool in zip(names, tools, strict=True):
        summary = (tool["description"] or "").strip().splitlines()
        line = safe(summary[0][:80]) if summary else ""
        print(f"{tool['score']:.2f}  {name:<{width}}  {safe(tool['call_with']):<21}  {line}")
    return 0
