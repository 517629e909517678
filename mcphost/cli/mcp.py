"""`mcphost mcp`: serve the agent over stdio, for agents that spawn their MCP servers themselves."""

from __future__ import annotations

import argparse

from mcphost.cli.common import load_or_exit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser("mcp", parents=[parent], help="serve agents over MCP on stdio (in-process gateway)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import anyio

    from mcphost.daemon import Host
    from mcphost.gateway.mcp_server import build_server
    from mcphost.gateway.stdio import serve_stdio

    loaded = load_or_exit(args)

    async def main() -> None:
        async with Host(loaded, watch=True) as host:
            server = build_server(host.gateway, stdio=True)
            async with serve_stdio() as (read, write):
                await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return 0
