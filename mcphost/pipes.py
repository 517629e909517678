"""Byte-stream plumbing both channels stand on: the agent's MCP over stdio and the editor channel (over stdio, or
an owner-only Unix socket).

A process that speaks a protocol on fd 0/1 takes them over: it keeps duplicates for the protocol and points 0 and 1
at /dev/null and stderr, so a stray print (ours, a library's, a child's) can never corrupt the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import json
import logging
import math
import os
import socket
import stat
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import orjson

from mcphost.discovery import same_user

logger = logging.getLogger(__name__)

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
    # A message past what a pipe holds (64 KiB unwidened) crossed it in pieces: a wake-up and a read each, both ends.
    widen_pipe(proto_in, STREAM_PIPE)
    widen_pipe(proto_out, STREAM_PIPE)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    return proto_in, proto_out


def offered(tap: Callable[[bytes], bool], chunk: bytes, limit: int) -> bool | None:
    """What `tap` made of `chunk`, a read that has just arrived: True taken, False declined; None when it was not
    offered (it is not one whole line of at most `limit` bytes) or the tap failed. A failure out of the reader's
    hands would lose the line: the reader gets it instead, and fails as it would."""
    if chunk.find(b"\n") != len(chunk) - 1 or len(chunk) > limit:
        return None
    try:
        return tap(chunk)
    except Exception:
        logger.exception("a line offered as it arrived could not be taken")
        return None


class TappedReader(asyncio.StreamReader):
    """A StreamReader whose owner may take a line as it arrives (`tap`) rather than from `readuntil`: only a chunk
    that is one whole line, while a `readuntil` waits with nothing held, so the line is the one it would return
    next (what `readuntil` and `readexactly` take is counted against what was fed: read any other way, it is tapped
    no more). Whoever waited on it then starts a loop turn sooner. A line the tap declines is fed as usual, and
    `declined` says so until the next line is read, so that its reader does not offer it a second time."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit=limit)
        self.tap: Callable[[bytes], bool] | None = None
        self.declined = False
        self._max = limit
        self._fed = 0
        self._taken = 0
        self._waiting = False

    def feed_data(self, data: bytes) -> None:  # type: ignore[override]  # transports feed bytes
        tap = self.tap
        if tap is not None and self._waiting and self._fed == self._taken:
            taken = offered(tap, data, self._max)
            if taken:
                return
            self.declined = taken is False
        self._fed += len(data)
        super().feed_data(data)

    async def readuntil(self, separator: bytes = b"\n") -> bytes:  # type: ignore[override]  # one separator
        self._waiting, self.declined = True, False
        try:
            data = await super().readuntil(separator)
        finally:
            self._waiting = False
        self._taken += len(data)
        return data

    async def readexactly(self, n: int) -> bytes:
        data = await super().readexactly(n)
        self._taken += len(data)
        return data


# What one read takes from a pipe or a socket. asyncio asks for 256 KiB, and a read allocates the buffer it asks for:
# past glibc's mmap threshold (128 KiB until an allocation at start-up raises it, as importing the gateway happens to
# do today) each read of a line costs an mmap, an mremap and a munmap, and the page faults after them. 64 KiB is what
# a pipe holds unwidened; a larger message takes more reads, each far cheaper than its parse.
READ_CHUNK = 64 * 1024


def read_in_chunks(transport: asyncio.BaseTransport) -> None:
    """Have asyncio's `transport` (a pipe's or a socket's reading end) read at most READ_CHUNK at a time."""
    if hasattr(transport, "max_size"):
        transport.max_size = READ_CHUNK


class WatchedPipe(asyncio.streams.FlowControlMixin):
    """A write pipe's protocol that tells when the far end has closed (`closed`). asyncio closes a pipe's (or
    socket's) transport as soon as the reader closes its end, by watching the fd for the error the kernel raises
    then: long before a write would fail, and while the writer has nothing to write."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(loop)
        self.closed = asyncio.Event()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.closed.set()


async def write_pipe(file: Any) -> asyncio.StreamWriter:
    """An asyncio writer over `file` (a pipe, socket or tty), its protocol a WatchedPipe."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(WatchedPipe, file)
    return asyncio.StreamWriter(transport, protocol, None, loop)


def reader_gone(writer: asyncio.StreamWriter) -> asyncio.Event | None:
    """Set once the reader of `writer`'s pipe has closed its end (None: not a watched pipe, never told)."""
    protocol = writer.transport.get_protocol()
    return protocol.closed if isinstance(protocol, WatchedPipe) else None


@asynccontextmanager
async def pipe_streams(
    in_fd: int, out_fd: int, leftover: bytes = b""
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """asyncio streams over two pipe (or socket, or tty) fds, without threads; both closed on exit. `leftover`: the
    start of the input, taken from `in_fd` by someone else, read before anything `in_fd` holds."""
    loop = asyncio.get_running_loop()
    in_file = os.fdopen(in_fd, "rb", buffering=0)
    out_file = os.fdopen(out_fd, "wb", buffering=0)
    reader = TappedReader(limit=MAX_LINE)
    # Before the pipe is connected: its transport reads what the pipe holds as soon as the loop turns, which is
    # before the caller could feed this (a relay whose daemon died mid-line, the rest of the line already written).
    if leftover:
        reader.feed_data(leftover)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), in_file)
    read_in_chunks(read_transport)
    try:
        writer = await write_pipe(out_file)
    except BaseException:
        read_transport.close()
        out_file.close()
        raise
    try:
        yield reader, writer
    finally:
        read_transport.close()
        with contextlib.suppress(Exception):
            writer.close()


# Unix socket paths are limited to 108 bytes; past this a deep runtime dir gets a short private one instead.
MAX_SOCKET_PATH = 100

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
# As Handler, and given the fds its peer passed along with the connection's first bytes (none, one or more); the
# handler owns them.
FdHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, list[int]], Awaitable[None]]

# How much of a connection is read with its passed fd (the rest follows as usual).
_FIRST_READ = 64 * 1024
# The most fds a connection's first bytes may carry (a relay passes the agent's stdout, stdin and its ledger).
_MAX_FDS = 4


def can_pass_fds() -> bool:
    return hasattr(socket, "send_fds") and hasattr(socket, "AF_UNIX")


async def connect_passing_fd(
    path: str, first: bytes, fd: int | list[int]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Streams over a new connection to the Unix socket `path`, whose first bytes, `first`, carry a duplicate of
    `fd` (or of each fd in the list) to the peer (SCM_RIGHTS). Raises OSError."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await loop.sock_connect(sock, path)
        # A new connection's buffer takes a few bytes at once; were it full, this would raise, not block.
        sent = socket.send_fds(sock, [first], fd if isinstance(fd, list) else [fd])
        if sent < len(first):
            await loop.sock_sendall(sock, first[sent:])
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_LINE)
        read_in_chunks(writer.transport)
        return reader, writer
    except BaseException:
        sock.close()
        raise


async def until_ready(
    watch: Callable[[int, Callable[[asyncio.Future[None]], None], asyncio.Future[None]], None],
    unwatch: Callable[[int], object],
    fd: int,
) -> None:
    """Until `fd` is ready, as `watch` (the running loop's add_reader or add_writer) tells."""
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    watch(fd, _settle, ready)
    try:
        await ready
    finally:
        unwatch(fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _first_bytes(sock: socket.socket) -> tuple[bytes, list[int]]:
    """The connection's first bytes, and the fds passed with them (at most `_MAX_FDS`)."""
    loop = asyncio.get_running_loop()
    await until_ready(loop.add_reader, loop.remove_reader, sock.fileno())
    flags = getattr(socket, "MSG_CMSG_CLOEXEC", 0)  # never inherited by an upstream this process starts
    data, fds, _, _ = socket.recv_fds(sock, _FIRST_READ, _MAX_FDS, flags)
    if not flags:
        for fd in fds:
            os.set_inheritable(fd, False)
    return data, list(fds)


def _refused(sock: Any, what: str) -> bool:
    """Whether the peer of `sock` runs as another user (then it is told nothing and the refusal is logged)."""
    if sock is not None and not same_user(sock):
        logger.warning("refused a connection to the %s from another user", what)
        return True
    return False


@asynccontextmanager
async def _socket_path(directory: Path, name: str) -> AsyncIterator[Path]:
    """Where a socket `directory/name` is bound (a short private directory when that path is too long for one),
    removed with that directory when the context ends."""
    path, private = directory / name, None
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        private = Path(tempfile.mkdtemp(prefix="mcphost-"))  # 0700, and short enough
        path = private / name
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a dead daemon whose pid we now have
    try:
        yield path
    finally:
        # Gone, or its directory taken away (renamed, made unwritable): nothing left here to clean, and no traceback
        # on the way out.
        with contextlib.suppress(OSError):
            path.unlink()
        if private is not None:
            with contextlib.suppress(OSError):
                private.rmdir()


class _ReadToTheEnd(asyncio.StreamReaderProtocol):
    """A connection whose peer went away ends as any other, once what it sent is read. When a write to the gone
    peer fails (broken pipe) or it closed with our data unread (reset), asyncio closes the socket with what the peer
    sent still in it, and its reader raises the error ahead of what it holds: an editor's last answer, sent just
    before it closed, was lost. Here the rest is read from the socket, and the stream ends at its end."""

    def __init__(self, reader: asyncio.StreamReader, connected: Handler, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(reader, connected, loop=loop)
        self._reader = reader
        self._fd: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._fd = transport.get_extra_info("socket").fileno()
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, ConnectionError) and self._fd is not None:
            with contextlib.suppress(OSError):  # BlockingIOError: all that was sent is read
                while chunk := os.read(self._fd, 1 << 16):
                    self._reader.feed_data(chunk)
            exc = None
        super().connection_lost(exc)


@asynccontextmanager
async def owner_only_socket(directory: Path, name: str, handler: Handler, what: str) -> AsyncIterator[Path]:
    """Serve `handler` on a Unix socket `directory/name` that only this user can open (0600 from birth, and every
    peer's uid checked) for as long as the context lasts; `what` names it in the log. A path too long for a socket
    gets a short private directory instead."""

    async def checked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if _refused(writer.get_extra_info("socket"), what):
            writer.close()
            return
        try:
            await handler(reader, writer)
        except Exception:
            logger.exception("a connection to the %s failed", what)

    async with _socket_path(directory, name) as path:
        old_umask = os.umask(0o177)  # the socket is born 0600: no window in which others could connect
        loop = asyncio.get_running_loop()

        def connected() -> asyncio.StreamReaderProtocol:
            return _ReadToTheEnd(asyncio.StreamReader(limit=MAX_LINE, loop=loop), checked, loop)

        try:
            server = await loop.create_unix_server(connected, path=str(path))
        finally:
            os.umask(old_umask)
        try:
            yield path
        finally:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)


# How long a listener out of fds waits before it accepts again (asyncio's own servers wait a second).
ACCEPT_RETRY_S = 0.5
# How often "out of fds" is said: asyncio says it once for every connection in the backlog, every retry (2048 per
# second for the HTTP listener), which filled a disk with the daemon's stderr while a local process held its fds.
ACCEPT_COMPLAINT_EVERY_S = 10.0
_complained: dict[str, float] = {}


def out_of_resources(what: str, exc: BaseException | None) -> None:
    """Say, at most once every ACCEPT_COMPLAINT_EVERY_S per listener, that `what` cannot accept connections."""
    now = time.monotonic()
    if now - _complained.get(what, -ACCEPT_COMPLAINT_EVERY_S) < ACCEPT_COMPLAINT_EVERY_S:
        return
    _complained[what] = now
    logger.error(
        "the %s cannot accept connections for now (%s): new connections wait until some close; "
        "`ulimit -n` is this process's limit on open files",
        what,
        exc,
    )


def quiet_accept_failures(loop: asyncio.AbstractEventLoop) -> None:
    """Have `loop` say asyncio's "socket.accept() out of system resource" as `out_of_resources` does."""

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == "socket.accept() out of system resource":
            sock = context.get("socket")
            name = sock.getsockname() if sock is not None else None
            out_of_resources(f"listener on {name}" if name else "a listener", context.get("exception"))
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


def raise_fd_limit(wanted: int = 65536) -> None:
    """Raise this process's soft limit on open files towards its hard limit: a daemon holds a connection per agent
    and editor, and pipes per upstream, and 1024 is soon reached by a local process that opens connections to it."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on this system
        return
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


@asynccontextmanager
async def owner_only_fd_socket(directory: Path, name: str, handler: FdHandler, what: str) -> AsyncIterator[Path]:
    """As owner_only_socket, for a handler that takes the fd its peer passed with the connection's first bytes.
    Connections are accepted here, and their first bytes read with recvmsg: a stream transport reads with recv,
    which drops the fd."""
    loop = asyncio.get_running_loop()
    serving: set[asyncio.Task[None]] = set()  # referenced while they run

    async def serve(conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            if _refused(conn, what):
                conn.close()
                return
            data, fds = await _first_bytes(conn)
            if not data:
                conn.close()
                for fd in fds:
                    os.close(fd)
                return
            reader = asyncio.StreamReader(limit=MAX_LINE)
            reader.feed_data(data)
            transport, protocol = await loop.create_unix_connection(
                lambda: asyncio.StreamReaderProtocol(reader), sock=conn
            )
            read_in_chunks(transport)
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        except BaseException:
            conn.close()
            for fd in fds:
                os.close(fd)
            raise
        try:
            await handler(reader, writer, fds)
        except Exception:
            logger.exception("a connection to the %s failed", what)

    async def accept(listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as exc:
                # Out of fds (EMFILE, ENFILE) or memory, for a while: an error here used to end this task, and the
                # socket stayed bound with nobody accepting, for good. The connections wait in the backlog.
                out_of_resources(what, exc)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            task = loop.create_task(serve(conn))
            serving.add(task)
            task.add_done_callback(serving.discard)

    async with _socket_path(directory, name) as path:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # born 0600, as above
        try:
            listener.bind(str(path))
        except BaseException:
            listener.close()
            raise
        finally:
            os.umask(old_umask)
        listener.listen(128)
        listener.setblocking(False)
        accepting = loop.create_task(accept(listener))
        try:
            yield path
        finally:
            accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await accepting
            listener.close()


# ---- reading what a stream holds before taking it

# The most a peek looks at: what a pipe can hold once widened (Linux's unprivileged maximum). A socket is peeked at
# READ_CHUNK first, and at this only when that comes back full (a receive allocates what it asks for: see READ_CHUNK).
PEEK_MAX = 1024 * 1024
_F_SETPIPE_SZ = 1031
_SPLICE_F_NONBLOCK = 2


# What a pipe a session's messages cross is widened to: room for a call that carries a file, and its answer, in one
# write. Not more: a user's pipes share a budget (fs.pipe-user-pages-soft, 64 MiB), past which every new pipe of
# theirs, mcphost's or not, holds a single page; a daemon with twenty upstreams holds forty of these.
STREAM_PIPE = 256 * 1024


def widen_pipe(fd: int, size: int = PEEK_MAX) -> None:
    """Let the pipe `fd` hold up to `size` bytes, where the system allows (best effort: Linux only)."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETPIPE_SZ, size)


def linux_libc(name: str, argtypes: list[Any], restype: Any) -> Any | None:
    """libc's function `name`, given its C signature, on Linux; None elsewhere, or where this libc has none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = restype
    return function


_TEE = cast(
    Callable[[int, int, int, int], int] | None,
    linux_libc("tee", [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint], ctypes.c_ssize_t),
)
# Whether a pipe can be looked into here (a socket always can).
PIPE_PEEK = _TEE is not None


def can_peek(fd: int) -> bool:
    """Whether `Peeker` can look into `fd` without taking from it: a socket (MSG_PEEK), or a pipe where tee(2) is."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISSOCK(mode) or (stat.S_ISFIFO(mode) and _TEE is not None)


class Peeker:
    """What the pipe or socket `fd` holds, looked at without taking it (`peek`), then taken (`take`): a reader that
    must say what it is about to take, to someone who outlives it, before it takes it. A pipe is looked into with
    tee(2) through a private pipe, a socket with MSG_PEEK. `fd` is not closed here."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._sock: socket.socket | None = None
        self._scratch: tuple[int, int] | None = None
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            self._sock = socket.socket(fileno=os.dup(fd))
        else:
            if _TEE is None:
                raise OSError("tee(2) is not available: a pipe cannot be looked into here")
            self._scratch = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            widen_pipe(self._scratch[1])

    def peek(self) -> bytes | None:
        """What the stream holds now (b"": its end, nothing left), or None when it holds nothing yet."""
        if self._sock is not None:
            try:
                data = self._sock.recv(READ_CHUNK, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                if len(data) == READ_CHUNK:
                    data = self._sock.recv(PEEK_MAX, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                return data
            except (BlockingIOError, InterruptedError):
                return None
        assert self._scratch is not None and _TEE is not None
        n = _TEE(self.fd, self._scratch[1], PEEK_MAX, _SPLICE_F_NONBLOCK)
        if n < 0:
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.EINTR):
                return None
            raise OSError(err, os.strerror(err))
        if n == 0:
            return b""
        parts = []
        while n > 0:
            part = os.read(self._scratch[0], n)
            parts.append(part)
            n -= len(part)
        return b"".join(parts)

    def take(self, n: int) -> bytes:
        """Take the first `n` bytes, which a peek has seen: they are there, so this never waits."""
        parts = []
        while n > 0:
            part = os.read(self.fd, n)
            if not part:
                break
            parts.append(part)
            n -= len(part)
        return b"".join(parts)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        if self._scratch is not None:
            for fd in self._scratch:
                os.close(fd)
        self._sock = self._scratch = None


def dump_line(value: Any) -> bytes:
    """`value` as one line of JSON, UTF-8; what orjson refuses (integers past 64 bits, lone surrogates) goes through
    Python's encoder, escaped to ASCII."""
    try:
        return orjson.dumps(value) + b"\n"
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, separators=(",", ":")).encode("ascii") + b"\n"


def encoded(value: Any) -> bytes | None:
    """`value` as compact JSON, or None for what orjson refuses to write (a lone surrogate, nesting past its limit,
    an integer past 64 bits, a key that is not a string)."""
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return None


def holds_lone_surrogate(value: Any) -> bool:
    """Whether a JSON value (as Python's reader reads it) holds a lone surrogate in a string or a key: text that no
    UTF-8 can carry. orjson's refusal to write it is the quick no; a refusal for another reason (an integer past 64
    bits) is told apart by Python's encoder."""
    if encoded(value) is not None:
        return False
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (ValueError, TypeError, RecursionError):
        return False
    return False


def non_finite_at(value: Any, where: str = "") -> tuple[str, float] | None:
    """Where a value as Python's JSON readers read it holds NaN or an infinity (from `NaN`, `Infinity` or `1e400`,
    which are no JSON), as (path from `where`, the number); None if nowhere. Written again, each is null to orjson
    and `NaN` to Python's encoder: no JSON either way."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if type(item) is float:
            if not math.isfinite(item):
                return path, item
        elif isinstance(item, Mapping):
            stack.extend((child, f"{path}.{key}") for key, child in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
    return None


def json_spelling(number: float) -> str:
    """How JSON-like text writes NaN or an infinity (`NaN`, `Infinity`, `-Infinity`), to name the one found."""
    return "NaN" if number != number else ("Infinity" if number > 0 else "-Infinity")


def holds_non_finite(value: Any) -> bool:
    return non_finite_at(value) is not None


def json_size(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON; what orjson refuses (integers past 64 bits, lone surrogates) measured
    by Python's encoder."""
    written = encoded(value)
    if written is not None:
        return len(written)
    return len(json.dumps(value, separators=(",", ":"), default=str).encode("utf-8", "surrogatepass"))


def valid_id(value: Any) -> bool:
    """Whether `value` can be a JSON-RPC request id: a string or an integer."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def id_key(value: Any) -> str:
    """One key for an id however it was written: "7" and 7 are one id to the SDK's dispatcher."""
    return str(value)
