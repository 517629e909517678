"""Byte-stream plumbing both channels stand on: the agent's MCP over stdio and the editor channel (over stdio, or
an owner-only Unix socket).

A process that speaks a protocol on fd 0/1 takes them over: it keeps duplicates for the protocol and points 0 and 1
at /dev/null and stderr, so a stray print (ours, a library's, a child's) can never corrupt the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
import struct
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

MAX_LINE = 64 * 1024 * 1024


def bind_loopback(port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:`port` (0: any free port, known before anyone must connect)."""
    # IPPROTO_TCP, not the default 0: asyncio turns Nagle off only on sockets whose proto says TCP, and with Nagle
    # on, every answer written in pieces (headers, then body) waited for the peer's delayed ACK: a flat 40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if sys.platform != "win32":
        # Lets a fixed port be reused right after a restart; on Windows the option would allow port stealing.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def is_pipe_or_socket(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def claim_stdio() -> tuple[int, int]:
    """Take fd 0 and 1 for a protocol: returns duplicates of them, and points 0 at /dev/null and 1 at stderr."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    return proto_in, proto_out


@asynccontextmanager
async def pipe_streams(in_fd: int, out_fd: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """asyncio streams over two pipe (or socket, or tty) fds, without threads; both closed on exit."""
    loop = asyncio.get_running_loop()
    in_file = os.fdopen(in_fd, "rb", buffering=0)
    out_file = os.fdopen(out_fd, "wb", buffering=0)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), in_file)
    write_transport, write_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out_file)
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    try:
        yield reader, writer
    finally:
        read_transport.close()
        with contextlib.suppress(Exception):
            writer.close()


def same_user(sock: socket.socket) -> bool:
    """The peer of a connected Unix socket runs as this user (SO_PEERCRED)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the socket file's 0600 mode is the guard where peer credentials are not available
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", creds)[1]
    return uid == os.getuid()


def socket_is_ours(path: Path) -> bool:
    """A socket file owned by this user and closed to others: the only kind mcphost's own commands connect to."""
    try:
        st = path.stat()
    except OSError:
        return False
    return bool(stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077)
