"""Where editors reach the daemon: an owner-only Unix socket (every peer's uid checked), and the stdin/stdout of
a daemon an editor spawned. Each connection gets its own `EditorConnection`, all feeding one `EditorHub`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pygls.io_ import StdinAsyncReader, StdoutWriter

from mcphost.editor.connection import EditorConnection, SocketWriter
from mcphost.editor.hub import EditorHub
from mcphost.paths import ensure_private_dir, runtime_dir
from mcphost.pipes import claim_stdio, is_pipe_or_socket, pipe_streams, same_user

logger = logging.getLogger(__name__)

# Unix socket paths are limited to 108 bytes; past this a deep runtime dir gets a short private one instead.
MAX_SOCKET_PATH = 100


@contextlib.asynccontextmanager
async def listening(hub: EditorHub) -> AsyncIterator[Path]:
    """Accept editor connections on an owner-only Unix socket for as long as the context lasts."""
    path, private_dir = _socket_path()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a dead daemon whose pid we now have

    async def serve_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None and not same_user(sock):
            logger.warning("refused an editor-channel connection from another user")
            writer.close()
            return
        connection = EditorConnection(hub, "socket")
        hub.connections[connection.id] = connection
        try:
            await connection.serve(reader, SocketWriter(writer))
        except Exception:
            logger.exception("editor connection %s failed", connection.id)

    old_umask = os.umask(0o177)  # the socket is born 0600: no window in which others could connect
    try:
        server = await asyncio.start_unix_server(serve_client, path=str(path))
    finally:
        os.umask(old_umask)
    hub.socket_path = path
    try:
        yield path
    finally:
        hub.socket_path = None
        server.close()
        for connection in list(hub.connections.values()):
            connection.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if private_dir is not None:
            with contextlib.suppress(OSError):
                private_dir.rmdir()


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


def _socket_path() -> tuple[Path, Path | None]:
    directory = ensure_private_dir(runtime_dir())
    path = directory / f"daemon-{os.getpid()}.sock"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path, None
    private = Path(tempfile.mkdtemp(prefix="mcphost-"))  # 0700, and short enough
    return private / "editor.sock", private
