"""`mcphost mcp`: serve one agent over stdio, for agents that spawn their MCP servers themselves.

With a daemon running for the same config, the session is relayed to it, so prompts reach the person's
editor; with none (or with --in-process), the gateway runs in this process.
"""

from __future__ import annotations

import argparse
import sys

import anyio

from mcphost import discovery
from mcphost.cli.common import load_or_exit
from mcphost.paths import config_path


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run the gateway in this process even when a daemon is running (its prompts then reach no editor)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.in_process:
        target = discovery.for_config(config_path(args.config))
        if target is not None:
            # Only the path taken is imported: a relay needs none of the host, the in-process gateway no relay.
            from mcphost.serve.relay import relay

            mcp = target["mcp"]
            print(f"mcphost: relaying to the daemon {target['pid']} at {mcp['url']}", file=sys.stderr, flush=True)
            anyio.run(relay, mcp["url"], dict(mcp.get("headers") or {}))
            return 0
    return _in_process(args)


def _in_process(args: argparse.Namespace) -> int:
    from mcphost.host import Host
    from mcphost.serve.mcp_server import build_server
    from mcphost.serve.stdio import serve_stdio

    loaded = load_or_exit(args)

    async def main() -> None:
        async with Host(loaded, watch=True) as host:
            server = build_server(host.gateway, stdio=True)
            async with serve_stdio() as (read, write):
                await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return 0
