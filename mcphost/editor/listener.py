"""Where editors reach the daemon: an owner-only Unix socket (every peer's uid checked), and the stdin/stdout of
a daemon an editor spawned. Each connection gets its own `EditorConnection`, all feeding one `EditorHub`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pygls.io_ import StdinAsyncReader, StdoutWriter

from mcphost import discovery
from mcphost.editor.connection import EditorConnection, SocketWriter
from mcphost.editor.hub import EditorHub
from mcphost.paths import ensure_private_dir, runtime_dir
from mcphost.pipes import claim_stdio, is_pipe_or_socket, owner_only_socket, pipe_streams

logger = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def listening(hub: EditorHub) -> AsyncIterator[Path]:
    """Accept editor connections on an owner-only Unix socket for as long as the context lasts."""

    async def serve_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = EditorConnection(hub, "socket")
        hub.connections[connection.id] = connection
        await connection.serve(reader, SocketWriter(writer))

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


async def serve_stdio(hub: EditorHub) -> None:
    """The editor that spawned this daemon, on stdin/stdout; returns when it closes the channel or exits."""
    connection = EditorConnection(hub, "stdio")
    hub.connections[connection.id] = connection
    async with stdio_streams() as (reader, writer):
        await connection.serve(reader, writer)


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """Reader and writer for the channel on fd 0/1. The fds are taken over: 0 and 1 then point at /dev/null and
    stderr, so that no stray print (ours, a library's, an upstream's) can ever corrupt the protocol stream."""
    proto_in, proto_out = claim_stdio()
    if not (is_pipe_or_socket(proto_in) and is_pipe_or_socket(proto_out)):
        # A regular file (a recorded session replayed): pygls' thread-backed reader.
        yield (
            StdinAsyncReader(os.fdopen(proto_in, "rb", buffering=0)),
            StdoutWriter(os.fdopen(proto_out, "wb", buffering=0)),
        )
        return
    async with pipe_streams(proto_in, proto_out) as streams:
        yield streams
