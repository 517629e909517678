"""The stdio transport to an upstream server: the SDK's (newline-delimited JSON-RPC over the child's stdin and
stdout), with what a host needs besides.

- The child can never outlive the host (`spawn`: its own process group, and SIGKILL when the host dies).
- A line longer than the limit is counted, not kept, and reaches the session as `MessageTooLarge`.
- Its stderr goes through `stderr.relay`, never straight into the host's.
- Tool calls can skip the SDK session (`RawLane`): a call is the busiest thing a host does, and the session's
  models around each message cost more than the rest of the call's own work in mcphost. The lane's requests carry
  ids of their own (strings; the SDK's are numbers), and their answers are taken off the line before the session
  parses it. Everything else (the handshake, tools/list, notifications, the server's own requests) stays with
  the session.

On close: stdin closes (the spec's shutdown), then SIGTERM to the group after a grace period, then SIGKILL.
A process spawned before the host was up (`spawn.EarlyStarts`) is taken over as it is.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, cast

import anyio
import anyio.lowlevel
import mcp_types as types
import orjson
from mcp.shared.message import SessionMessage
from mcp_types import PARSE_ERROR

from mcphost.activity.reader import NonFinite, loads_exact, nests_deeper
from mcphost.console import safe
from mcphost.pipes import dump_line, holds_lone_surrogate, offered, read_in_chunks
from mcphost.upstream import stderr
from mcphost.upstream.guard import MessageTooLarge, envelope
from mcphost.upstream.spawn import Launch, Spawned, TappedProtocol, spawn, stop_process_group

logger = logging.getLogger(__name__)

_WRITER_FLUSH = 0.5
_STDERR_DRAIN = 0.5
# Once the server's process has exited, how long what it wrote before has to arrive before its output is closed here.
_EXIT_DRAIN = 0.5
# Once its output has ended, how long to wait for the process's exit, to tell the calls under way how it went.
_EXIT_WAIT = 0.2
_CHUNK = 256 * 1024
# Bytes of an oversized line kept at each end: enough for its JSON-RPC envelope.
_ENDS = 512


class LineReader:
    """Splits a byte stream into JSON-RPC lines; a line over `limit` bytes is counted, not kept (only its first and
    last bytes, for its envelope), so memory stays bounded whatever the server writes."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._head = b""
        self._tail = b""
        self._over = False

    @property
    def empty(self) -> bool:
        """Whether no part of a line is held, waiting for its end."""
        return self._size == 0

    def feed(self, chunk: bytes) -> list[bytes | MessageTooLarge]:
        out: list[bytes | MessageTooLarge] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self._add(chunk[start:] if end < 0 else chunk[start:end])
            if end < 0:
                return out
            line = self._take()
            if line is not None:
                out.append(line)
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._size += len(piece)
        if self._over:
            self._tail = (self._tail + piece)[-_ENDS:]
            return
        self._parts.append(piece)
        if self._size > self._limit:
            whole = b"".join(self._parts)
            self._head, self._tail, self._parts, self._over = whole[:_ENDS], whole[-_ENDS:], [], True

    def _take(self) -> bytes | MessageTooLarge | None:
        try:
            if self._over:
                kind, request_id = envelope(self._head, self._tail.rstrip())
                return MessageTooLarge(self._size, self._limit, kind, request_id)
            line = b"".join(self._parts)
            return line if line.strip() else None
        finally:
            self._parts, self._size, self._head, self._tail, self._over = [], 0, b"", b"", False


class NotJsonRpc(ValueError):
    """A line of the server's output that is not a JSON-RPC message (reported here, with the line, as it is read)."""


def parse_line(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        taken = _response_as_read(line)
        if taken is not None:
            return taken
        logger.warning("upstream sent a line that is not JSON-RPC: %s", safe(line[:200].decode("utf-8", "replace")))
        return NotJsonRpc(str(exc))


TOO_DEEP_TO_READ = "the answer nests too deep to read (past Python's limit)"


def non_finite_answer(number: str) -> str:
    """Why an answer holding NaN or an infinity (`number`, as written) is refused: read, each would reach the agent
    as a null the server never sent."""
    return f"the answer holds {number}, a number JSON cannot carry"


# A response nesting this deep or deeper may be one pydantic's parser refused for its depth alone.
_DEEP = 65


def _response_as_read(line: bytes) -> SessionMessage | None:
    """A response that pydantic's parser refuses for what it holds, not for its shape: nested deeper than that
    parser goes (its recursion limit), or holding a lone surrogate (JSON's "\udfff", which it takes for no text).
    It is taken as Python's reader reads it: the guard screens a tools/list page (the tool at fault is dropped, the
    rest served) and the session refuses any other answer it cannot use. One nested past Python's reader too is
    answered as an error to its request. Dropped as not JSON-RPC, any of these left its request waiting for an
    answer that never came (a whole server's tools unusable for one description, and "did not start" said)."""
    try:
        message = loads_exact(line)
    except (ValueError, RecursionError) as exc:
        kind, request_id = envelope(line[:_ENDS], line[-_ENDS:].rstrip())
        if kind != "response" or request_id is None or not isinstance(exc, RecursionError):
            return None
        failed = types.ErrorData(code=PARSE_ERROR, message=TOO_DEEP_TO_READ)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=failed))
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("result"), dict):
        return None
    request_id = message.get("id")
    if not isinstance(request_id, int | str) or isinstance(request_id, bool):
        return None
    if not nests_deeper(message, _DEEP) and not holds_lone_surrogate(message):
        return None  # malformed in some other way
    return SessionMessage(types.JSONRPCResponse.model_construct(jsonrpc="2.0", id=request_id, result=message["result"]))


class LaneClosed(Exception):
    """The server's connection ended with lane requests unanswered."""


class LaneTimeout(TimeoutError):
    """No answer within the time the request was given."""


RAW_ID_PREFIX = "mcphost-raw-"
_RAW_ID_NEEDLE = b'"' + RAW_ID_PREFIX.encode()
# A lane request's id where it stands as a message's id (an id quoted inside a string has its quotes escaped).
_LANE_ID = re.compile(rb'"id"\s*:\s*"(' + re.escape(RAW_ID_PREFIX.encode()) + rb'\d+)"')
_LIST_CHANGED = b"tools/list_changed"
_NOTICE_BYTES = 4096  # a notification of a list change is some 60 bytes; longer lines are not searched for one


class RawLane:
    """Requests written straight to the server's stdin, their answers taken off its stdout as plain dicts."""

    def __init__(self, stdin: asyncio.StreamWriter) -> None:
        self._stdin = stdin
        self._pending: dict[str, asyncio.Future[dict[str, Any] | MessageTooLarge]] = {}
        self._ids = itertools.count()
        self._closed: str | None = None
        # The `_meta` every request carries on a 2026-era connection (set once the connection knows its revision).
        self.envelope: dict[str, Any] | None = None
        # When each request given a time limit runs out, watched by one timer set for the earliest: a timer per
        # call (its handle made, pushed on the loop's heap, cancelled, popped) cost more frames than the rest of
        # the lane's bookkeeping.
        self._deadlines: dict[str, float] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_at = 0.0
        # Told of the server's tools/list_changed as its line is read, before any answer read after it is handed
        # over: the session hears of it loop turns later, and a call the agent makes on that answer must not be
        # judged on the list from before.
        self.on_list_changed: Callable[[], None] | None = None

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        within: float | None = None,
        meanwhile: Callable[[], None] | None = None,
    ) -> dict[str, Any] | MessageTooLarge:
        """The server's JSON-RPC response to `method` (a dict with "result" or "error"), or the MessageTooLarge
        that stood in for it. Cancelled, or unanswered `within` that many seconds (LaneTimeout), it tells the server
        (notifications/cancelled) as the SDK does. The time limit is a deadline on the answer, not a cancel scope:
        a call waits under a scope only for a server that stops reading its input.
        `meanwhile` runs once the request is out, while the server works on it."""
        if self._closed is not None:
            raise LaneClosed(self._closed)
        request_id = f"{RAW_ID_PREFIX}{next(self._ids)}"
        if self.envelope is not None:
            params = {**params, "_meta": self.envelope}
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[str, Any] | MessageTooLarge] = loop.create_future()
        self._pending[request_id] = answer
        deadline = None if within is None else self._watch(request_id, loop.time() + within, loop)
        try:
            # An agent's arguments may hold what orjson refuses to write (an integer past 64 bits).
            self._stdin.write(dump_line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
            transport = self._stdin.transport
            if deadline is not None and transport.get_write_buffer_size() and not transport.is_closing():
                with anyio.fail_after(max(0.0, deadline - loop.time())):
                    await self._stdin.drain()
            else:
                await self._stdin.drain()
            if meanwhile is not None:
                meanwhile()
            return await answer
        except (ConnectionError, BrokenPipeError) as exc:
            raise LaneClosed(f"the server stopped reading its input ({type(exc).__name__})") from None
        except BaseException as exc:
            # Unanswered: still waited for, timed out, or cancelled (a task cancelled while it awaits the future
            # cancels the future too, which is then done): the server is told to stop, as the SDK tells it.
            if self._closed is None and (not answer.done() or answer.cancelled() or isinstance(exc, LaneTimeout)):
                notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
                with suppress(Exception):
                    self._stdin.write(orjson.dumps(notice) + b"\n")
            raise
        finally:
            self._pending.pop(request_id, None)
            if deadline is not None:
                del self._deadlines[request_id]

    def _watch(self, request_id: str, deadline: float, loop: asyncio.AbstractEventLoop) -> float:
        self._deadlines[request_id] = deadline
        if self._sweep is None or deadline < self._sweep_at:
            if self._sweep is not None:
                self._sweep.cancel()
            self._sweep, self._sweep_at = loop.call_at(deadline, self._expire_due, loop), deadline
        return deadline

    def _expire_due(self, loop: asyncio.AbstractEventLoop) -> None:
        """Fail the requests whose time is up with LaneTimeout; set the timer for the next deadline, if any."""
        # Due: every deadline up to the one this timer was set for (the loop may run it a clock tick early).
        due, self._sweep = max(self._sweep_at, loop.time()), None
        after: float | None = None
        for request_id, deadline in self._deadlines.items():
            if deadline > due:
                after = deadline if after is None else min(after, deadline)
                continue
            answer = self._pending.get(request_id)
            if answer is not None and not answer.done():
                answer.set_exception(LaneTimeout())
        if after is not None:
            self._sweep, self._sweep_at = loop.call_at(after, self._expire_due, loop), after

    def take(self, line: bytes) -> bool:
        """Whether `line` answers a lane request (then it is delivered here, not to the session)."""
        if len(line) <= _NOTICE_BYTES and _LIST_CHANGED in line and self.on_list_changed is not None:
            self._sniff(line)
        if not self._pending or _RAW_ID_NEEDLE not in line:
            return False
        try:
            # NaN and the infinities are no JSON: read, each would reach the agent as a null it was never sent.
            message = loads_exact(line, finite=True)
        except NonFinite as exc:
            message = self._unreadable(line, non_finite_answer(str(exc)))
        except RecursionError:
            message = self._unreadable(line, TOO_DEEP_TO_READ)
        except ValueError:
            message = self._unreadable(line, "the answer is not valid JSON")
        if message is None:
            return False
        if not isinstance(message, dict) or "method" in message:
            return False
        request_id = message.get("id")
        answer = self._pending.get(request_id) if isinstance(request_id, str) else None
        if answer is None:
            return False
        if not answer.done():
            answer.set_result(message)
        return True

    def _unreadable(self, line: bytes, why: str) -> dict[str, Any] | None:
        """An error answer, saying `why`, to the lane request an unreadable `line` answers, found by its id: in the
        envelope, or, when something was written before the answer on its line (no newline between), where the id
        stands. None when the line names no single waiting request. Left alone, that request waited out its time."""
        kind, request_id = envelope(line[:_ENDS], line[-_ENDS:].rstrip())
        if kind == "other":
            return None
        if request_id is None:
            named = {m.decode("ascii", "replace") for m in _LANE_ID.findall(line)} & self._pending.keys()
            if len(named) != 1:
                return None
            request_id = named.pop()
        return {"id": request_id, "error": {"code": PARSE_ERROR, "message": why}}

    def _sniff(self, line: bytes) -> None:
        """Tell `on_list_changed` when `line` is the server's tools/list_changed (it goes on to the session too)."""
        try:
            message = loads_exact(line)
        except (ValueError, RecursionError):
            return
        if isinstance(message, dict) and message.get("method") == "notifications/tools/list_changed":
            assert self.on_list_changed is not None
            self.on_list_changed()

    def take_oversized(self, item: MessageTooLarge) -> bool:
        answer = self._pending.get(item.request_id) if isinstance(item.request_id, str) else None
        if answer is None or item.kind == "other":
            return False
        if not answer.done():
            answer.set_result(item)
        return True

    def close(self, reason: str) -> None:
        if self._closed is None:  # the first reason is why: the connection's close after an end of output says less
            self._closed = reason
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(LaneClosed(reason))


class _StdoutPipe(asyncio.Protocol):
    """In front of asyncio's own protocol on the server's stdout pipe. A chunk goes to the tap, else straight into
    the stream: asyncio hands a subprocess's output over a loop turn later (`call_soon`), the turn an answer used
    to wait for. Everything else (the end of the output) still goes asyncio's way, after every chunk."""

    def __init__(
        self, streams: TappedProtocol, inner: asyncio.Protocol, tap: Callable[[bytes], bool], limit: int
    ) -> None:
        self.streams = streams
        self.inner = inner
        self.tap = tap
        self.limit = limit

    def data_received(self, data: bytes) -> None:
        streams = self.streams
        if offered(self.tap, data, self.limit):
            return
        streams.fed += len(data)
        assert streams.stdout is not None
        streams.stdout.feed_data(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


@asynccontextmanager
async def stdio_transport(
    name: str,
    launch: Launch,
    max_message_bytes: int,
    on_lane: Callable[[RawLane], None] | None = None,
    spawned: Spawned | None = None,
    on_end: Callable[[str], None] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn the server (or take `spawned`, its process started as `launch` says) and yield the (read, write)
    streams of `SessionMessage` the SDK's Client speaks over; `on_lane` gets the raw lane beside them, `on_end` how
    the process ended (its exit status and last words on stderr) once the transport has closed."""
    if spawned is None:
        spawned = await spawn(launch)
    pipes, tapped, process = spawned.pipes, spawned.tapped, spawned.process
    # From here on, no await before the try: a cancellation in between would leak the live process.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    stderr_done = anyio.Event()
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdin, stdout, errors = process.stdin, process.stdout, process.stderr
    lane = RawLane(stdin)
    if on_lane is not None:
        on_lane(lane)
    last_words = stderr.LastWords()  # what the server said last that was not the protocol, on stderr or stdout
    output_ended = output_held = False
    exited = anyio.Event()
    loop = asyncio.get_running_loop()

    def close_output() -> None:
        nonlocal output_held
        stdout_pipe = pipes.get_pipe_transport(1)
        if stdout_pipe is not None and not stdout_pipe.is_closing() and not output_ended:
            output_held = True
            stdout_pipe.close()  # the stream then ends as if the server had closed it

    def ended_as(returncode: int) -> str:
        how = last_words.describe(returncode)
        return f"{how}; a process it started kept its output open" if output_held else how

    def on_exit() -> None:
        # Its output may outlive it (a child of its holding the pipe): the session would never end, and calls would
        # wait for their timeout. What it wrote before it went has `_EXIT_DRAIN` to arrive.
        exited.set()
        loop.call_later(_EXIT_DRAIN, close_output)

    tapped.on_exit = on_exit
    if tapped.exited:  # before the connection took it (spawned early)
        on_exit()

    lines = LineReader(max_message_bytes)

    def tap(line: bytes) -> bool:
        """Take `line` here if it answers a lane request and the reader below, waiting, would take it next: the
        call resumes a loop turn sooner than by way of the reader."""
        if tapped.busy or tapped.fed != tapped.taken or not lines.empty:
            return False
        return lane.take(line[:-1])

    # From now on; what the server wrote before went asyncio's way, and `_TappedProtocol` counted it.
    stdout_pipe = pipes.get_pipe_transport(1)
    assert stdout_pipe is not None
    inner = cast(asyncio.Protocol, stdout_pipe.get_protocol())
    stdout_pipe.set_protocol(_StdoutPipe(tapped, inner, tap, max_message_bytes))
    read_in_chunks(stdout_pipe)

    async def read_stdout() -> None:
        nonlocal output_ended
        delivering = True
        closing = "the server closed its output"
        try:
            async with read_writer:
                while True:
                    tapped.busy = False
                    chunk = await stdout.read(_CHUNK)
                    tapped.busy, tapped.taken = True, tapped.taken + len(chunk)
                    if not chunk:
                        output_ended = True
                        # Most often the process went with its output: how it went is what the calls under way are
                        # told (a crash's signal, its last words).
                        with anyio.move_on_after(_EXIT_WAIT):
                            await exited.wait()
                        if process.returncode is not None:
                            closing = ended_as(process.returncode)
                        break
                    for line in lines.feed(chunk):
                        if isinstance(line, MessageTooLarge):
                            if lane.take_oversized(line):
                                continue
                        elif lane.take(line):
                            continue
                        if not delivering:
                            continue
                        if isinstance(line, MessageTooLarge):
                            item: SessionMessage | Exception = line
                        else:
                            item = parse_line(line)
                            if isinstance(item, NotJsonRpc):
                                last_words.note(line)  # a usage message or an error printed where JSON-RPC goes
                        try:
                            await read_writer.send(item)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            # The session is gone; keep reading, so a server busy writing can still see its stdin
                            # close.
                            delivering = False
        finally:
            tapped.busy = True  # nothing is taken past the end of the reading
            lane.close(closing)

    async def write_stdin() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    stdin.write(data.encode() + b"\n")
                    await stdin.drain()
        except (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The server stopped reading (or died): end the session's read side, or a request would wait forever.
            lane.close("the server stopped reading its input")
            await read_writer.aclose()
        finally:
            writer_done.set()

    async def relay_stderr() -> None:
        try:
            await stderr.relay(errors.read, name, last=last_words)
        finally:
            stderr_done.set()

    async def shutdown() -> None:
        # Whether the server ended the connection (its process or its output gone) rather than this side: only then
        # does its exit say why the connection ended (one that exits once its input closes says nothing).
        server_ended = exited.is_set() or output_ended
        lane.close("the connection is closing")
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH):
            await writer_done.wait()
        signalled = await stop_process_group(process)
        # Its last words (a traceback, say) are what explains why it stopped.
        with anyio.move_on_after(_STDERR_DRAIN):
            await stderr_done.wait()
        if on_end is not None and server_ended and process.returncode is not None:
            # A server that closed its output and stayed was stopped here: its signal is ours, not its story.
            on_end("the server closed its output and did not exit" if signalled else ended_as(process.returncode))
        # Else the pipes stay open, and warn at collection, while a survivor holds one.
        pipes.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout, name=f"stdout:{name}")
        tg.start_soon(write_stdin, name=f"stdin:{name}")
        tg.start_soon(relay_stderr, name=f"stderr:{name}")
        try:
            yield read_stream, write_stream
        finally:
            # Shielded and bounded: a cancelled caller must still not leave the server running.
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()
