"""`mcphost permission-server`: the MCP server behind Claude Code's `--permission-prompt-tool` (see
mcphost.serve.permission_server). Decides like `mcphost hook`: through the running daemon, else here."""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import anyio.to_thread

from mcphost.cli.hook import in_process, through_daemon
from mcphost.intent import AgentToolUse


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.description = (
        "A stdio MCP server with one tool, `approve`, for Claude Code's headless permission prompt: "
        "claude mcp add mcphost-permissions -- mcphost permission-server; then "
        "claude -p --permission-prompt-tool mcp__mcphost-permissions__approve ..."
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcphost.serve.permission_server import build
    from mcphost.serve.stdio import serve_stdio

    async def decide(use: AgentToolUse) -> dict[str, Any]:
        # The daemon's channel is a blocking client; a worker thread keeps this server answering meanwhile.
        verdict = await anyio.to_thread.run_sync(through_daemon, use, args.config, abandon_on_cancel=True)
        if verdict is None:
            verdict = await in_process(use, args.config)
        return verdict

    server = build(decide)

    async def main() -> None:
        # mcphost's own stdio transport, as `mcphost mcp` serves: a request the SDK's cannot read (nested past its
        # parser, a lone surrogate) is answered with an error naming it, not dropped with Claude Code left waiting.
        async with serve_stdio() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return 0
