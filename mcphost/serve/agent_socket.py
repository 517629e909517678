"""The daemon's door for `mcphost mcp` relays: an owner-only Unix socket where each connection is one agent's MCP
session, newline-delimited JSON-RPC exactly as on stdio (so every protocol revision the SDK serves on stdio is
served here too, and tool calls take the same shortcut past the SDK's dispatch).

A relay used to reach the daemon over its HTTP endpoint: a POST, a session header and an event stream per call,
which cost ten times what the call itself costs in process. Here it costs one more pipe hop. The connection is the
session: "allow for this session" means this agent process, and no other process can claim its id (the id is the
daemon's own, never sent anywhere a peer could replay it, and only this user can connect).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from mcphost.gateway.service import Gateway
from mcphost.paths import ensure_private_dir, runtime_dir
from mcphost.pipes import owner_only_fd_socket
from mcphost.serve.handoff import HANDOFF_LINE, HandedOut
from mcphost.serve.mcp_server import DirectCalls, build_server
from mcphost.serve.stdio import session_streams

logger = logging.getLogger(__name__)

# A daemon that stops gives the sessions' calls in flight this long to be recorded as cancelled.
CLOSE_GRACE_S = 3.0


def relay_session_id() -> str:
    return f"relay-{uuid.uuid4().hex[:12]}"


@contextlib.asynccontextmanager
async def agent_socket(gateway: Gateway) -> AsyncIterator[Path]:
    """Serve relayed agent sessions for as long as the context lasts; yields the socket's path."""
    sessions: set[asyncio.Task[None]] = set()

    async def serve_session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fd: int | None) -> None:
        task = asyncio.current_task()
        assert task is not None
        sessions.add(task)
        session_id = relay_session_id()
        out: HandedOut | None = None
        try:
            if fd is not None:
                handed, fd = fd, None
                out = await _handed_out(reader, writer, handed)
            server = build_server(gateway, session_id=session_id)
            shortcut = DirectCalls.factory(gateway, session_id)
            async with session_streams(reader, writer, shortcut=shortcut, out=out) as streams:
                await server.run(*streams, server.create_initialization_options())
        except asyncio.CancelledError:
            logger.debug("relayed session %s ended with the daemon", session_id)
        finally:
            sessions.discard(task)
            # The agent's stdout first: once the socket closes, the relay writes to it.
            if out is not None:
                out.give_up()
            writer.close()

    directory = ensure_private_dir(runtime_dir())
    name = f"daemon-{os.getpid()}.mcp.sock"
    async with owner_only_fd_socket(directory, name, serve_session, "agent socket") as path:
        try:
            yield path
        finally:
            # Each session's calls in flight are cut short and recorded as cancelled; the relays carry their agents
            # on to another daemon or into their own process.
            running = list(sessions)
            for task in running:
                task.cancel()
            if running:
                with anyio.CancelScope(shield=True):
                    await asyncio.wait(running, timeout=CLOSE_GRACE_S)


async def _handed_out(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fd: int) -> HandedOut:
    """The agent's stdout, passed by its relay (`fd`, closed here should anything fail) with the connection's first
    line, as the session's outbox."""
    pipe = os.fdopen(fd, "wb", buffering=0)
    try:
        first = await reader.readuntil(b"\n")
        if first != HANDOFF_LINE:
            raise ConnectionError(f"a relay passed an fd with an unknown first line: {first[:80]!r}")
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    except BaseException:
        pipe.close()
        raise
    return HandedOut(asyncio.StreamWriter(transport, protocol, None, loop), writer)
