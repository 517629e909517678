"""`mcphost mcp` with a daemon running: relay the agent's stdio MCP session to the daemon's HTTP endpoint, so
that its prompts reach the person's editor and its calls share the daemon's upstreams, grants and log.

The relay moves JSON-RPC messages both ways without reading them: the agent's `initialize` (its name and
capabilities, elicitation included) reaches the daemon as sent. A header names the relay's session, so that
"allow for this session" means this agent process whatever the protocol version's idea of sessions.
"""

from __future__ import annotations

import logging
import sys
import uuid
from typing import Any

import anyio
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from mcphost.serve.mcp_server import RELAY_SESSION_HEADER
from mcphost.serve.stdio import serve_stdio

logger = logging.getLogger(__name__)


async def relay(url: str, headers: dict[str, str]) -> None:
    session = f"relay-{uuid.uuid4().hex[:12]}"
    http = create_mcp_http_client(headers={**headers, RELAY_SESSION_HEADER: session})
    async with (
        http,
        streamable_http_client(url, http_client=http) as (from_daemon, to_daemon),
        serve_stdio() as (from_agent, to_agent),
        anyio.create_task_group() as tg,
    ):

        async def upstream() -> None:
            # The agent closing stdin ends the session: stop relaying both ways.
            try:
                async for message in from_agent:
                    if isinstance(message, Exception):
                        logger.warning("unreadable message from the agent: %s", message)
                        continue
                    await to_daemon.send(message)
            finally:
                tg.cancel_scope.cancel()

        async def downstream() -> None:
            try:
                async for message in from_daemon:
                    if isinstance(message, Exception):
                        _report(message)
                        continue
                    await to_agent.send(_as_session_message(message))
            finally:
                # The daemon went away: the agent's next request would hang, so end the session visibly.
                print("mcphost: the daemon closed the connection; the relay ends", file=sys.stderr, flush=True)
                tg.cancel_scope.cancel()

        tg.start_soon(upstream)
        tg.start_soon(downstream)


def _as_session_message(message: Any) -> SessionMessage:
    return message if isinstance(message, SessionMessage) else SessionMessage(message)


def _report(error: Exception) -> None:
    print(f"mcphost: relay to the daemon: {error}", file=sys.stderr, flush=True)
