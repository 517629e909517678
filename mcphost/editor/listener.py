"""Where editors reach the daemon: an owner-only Unix socket (every peer's uid checked), and the stdin/stdout of
a daemon an editor spawned. Each connection gets its own `EditorConnection`, all feeding one `EditorHub`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, BinaryIO

from pygls.io_ import StdoutWriter

from mcphost import discovery
from mcphost.editor import wire
from mcphost.editor.connection import EditorConnection, SocketWriter
from mcphost.editor.hub import EditorHub
from mcphost.paths import ensure_private_dir, runtime_dir
from mcphost.pipes import claim_stdio, is_pipe_or_socket, owner_only_socket, pipe_streams

logger = logging.getLogger(__name__)

# The most editor connections served at once (the stdio one among them). Editors, `mcphost approve` and `status`
# make a handful; without a bound, a script connecting in a loop took every fd the daemon may open, and with them
# its upstreams and its agents.
MAX_EDITOR_CONNECTIONS = 64
REFUSED_NOTICE = f"mcphost: this daemon already serves {MAX_EDITOR_CONNECTIONS} editor connections; closing this one"
# How long a socket connection may take to attach (`initialize`, then `initialized`): an editor or a command does
# it at once (`mcphost status` gives a daemon 5 s); a connection that never does held one of the slots for good.
HANDSHAKE_SECONDS = 10.0


@contextlib.asynccontextmanager
async def listening(hub: EditorHub) -> AsyncIterator[Path]:
    """Accept editor connections on an owner-only Unix socket for as long as the context lasts."""

    async def serve_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(hub.connections) >= MAX_EDITOR_CONNECTIONS:
            logger.warning("refused an editor connection: %d are open already", len(hub.connections))
            writer.write(_show_message(REFUSED_NOTICE))
            writer.close()
            return
        connection = EditorConnection(hub, "socket")
        hub.connections[connection.id] = connection
        overdue = asyncio.get_running_loop().call_later(HANDSHAKE_SECONDS, _unless_attached, connection)
        try:
            await connection.serve(reader, SocketWriter(writer))
        finally:
            overdue.cancel()

    directory = ensure_private_dir(runtime_dir())
    name = discovery.editor_socket_name(os.getpid())
    async with owner_only_socket(directory, name, serve_client, "editor channel") as path:
        hub.socket_path = path
        try:
            yield path
        finally:
            hub.socket_path = None
            for connection in list(hub.connections.values()):
                connection.close()


def _unless_attached(connection: EditorConnection) -> None:
    if not connection.attached and not connection.closed:
        logger.warning("editor channel %s: closed: it did not attach within %g s", connection.label, HANDSHAKE_SECONDS)
        connection.close()


async def serve_stdio(hub: EditorHub) -> None:
    """The editor that spawned this daemon, on stdin/stdout; returns when it closes the channel or exits."""
    connection = EditorConnection(hub, "stdio")
    hub.connections[connection.id] = connection
    async with stdio_streams() as (reader, writer):
        await connection.serve(reader, SocketWriter(writer) if isinstance(writer, asyncio.StreamWriter) else writer)


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """Reader and writer for the channel on fd 0/1. The fds are taken over: 0 and 1 then point at /dev/null and
    stderr, so that no stray print (ours, a library's, an upstream's) can ever corrupt the protocol stream."""
    proto_in, proto_out = claim_stdio()
    if not (is_pipe_or_socket(proto_in) and is_pipe_or_socket(proto_out)):
        # A regular file (a recorded session replayed): read in a worker thread.
        yield (
            _FileReader(os.fdopen(proto_in, "rb", buffering=0)),
            StdoutWriter(os.fdopen(proto_out, "wb", buffering=0)),
        )
        return
    async with pipe_streams(proto_in, proto_out) as streams:
        yield streams


class _FileReader:
    """A regular file read in a worker thread, which a file's reads would otherwise block the loop for."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file

    async def read(self, n: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(None, self._file.read, n)


def _show_message(text: str) -> bytes:
    """A window/showMessage notification (an error), framed: what an editor shows of a connection refused."""
    return wire.notification("window/showMessage", json.dumps({"type": 1, "message": text}).encode())
