"""MCP over this process's stdin/stdout on asyncio pipes, for `mcphost mcp` (in process, and the relay's agent side).

The SDK's `stdio_server` reads and writes through worker threads; a profile of `mcphost mcp` put about a
third of its time in those hand-offs. Pipes on the event loop (`mcphost.pipes`) do the same job without threads.

A session may take a shortcut past the SDK's dispatch (`Shortcut`, see `mcphost.serve.mcp_server.DirectCalls`):
each line is offered to it first, as parsed JSON, and what it does not take goes to the SDK session as before.

Every request gets an answer, even one that cannot be read: a line the JSON parser refuses (nested deeper than it
goes, a lone UTF-16 surrogate, not UTF-8, not JSON, not JSON-RPC) is answered here with the JSON-RPC error that
names the problem, under the request's id when one can be found in it, so that the agent never waits forever.
Lines that parse cost nothing more than before: the slow path runs only when the parser has already refused.

An agent may close its input right after its last request and then read the answers (as `printf ... | mcphost
mcp` does). With `answer_after_eof`, the end of the input ends the session only once every request read before it
has been answered: the shortcut's calls are waited for as the tasks they are, and the requests that went to the SDK
session by their ids, counted on that path only (a tool call through the shortcut costs nothing more).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import mcp_types as types
import orjson
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

from mcphost.activity.reader import LOOK_OVER_FROM, looked_over, may_hold_wide_int, nests_deeper, opening_brackets
from mcphost.pipes import (
    MAX_LINE,
    TappedReader,
    claim_stdio,
    id_key,
    is_pipe_or_socket,
    pipe_streams,
    reader_gone,
    valid_id,
)

logger = logging.getLogger(__name__)

# How deep pydantic-core's JSON parser goes (brackets in the whole message, JSON-RPC envelope included).
PARSER_DEPTH = 200
# What a call cut short by a shutdown signal is answered (the agent's own cancellation is answered with nothing).
STOPPED = (
    "mcphost was stopped (a shutdown signal) during this call, which is on record as cancelled. It may or may not "
    "have reached the upstream server: check before repeating a write."
)
# What the session's end says in the log when the agent closed its end of the output.
AGENT_GONE = "the agent closed its end of the session's output: the session ends, its calls are cut short"
# What another request a shutdown signal left unanswered is answered.
STOPPED_UNANSWERED = "mcphost was stopped (a shutdown signal) before it answered this request"

# What `Outbox.put` is told of a line that answers no request of the agent's.
NOT_AN_ANSWER: Any = object()


class Send(Protocol):
    """Writes one line for the agent; `answers` names the request it answers (its id), and `ok` whether it is a
    result rather than an error, for a writer that reports answers (a relay's handed-over stdout)."""

    def __call__(self, line: bytes, answers: Any = NOT_AN_ANSWER, ok: bool = True) -> Awaitable[None]: ...


class Outbox:
    """Where a session's lines for the agent go: `writer`, in the order written."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.broken = False  # the agent's end closed under a write: nothing more reaches the agent
        # Set once the agent has closed its end, written to or not (None: a writer that cannot tell).
        self.gone = reader_gone(writer)

    async def put(self, line: bytes, answers: Any = NOT_AN_ANSWER, ok: bool = True) -> None:
        self.writer.write(line)
        try:
            await self.writer.drain()
        except ConnectionError:
            self.broken = True

    def pipe_fd(self) -> int | None:
        """The fd of the agent's end when it is a pipe, which another process may then write to as well (a write
        of up to PIPE_BUF bytes is never interleaved with another), else None."""
        pipe = self.writer.get_extra_info("pipe")
        fd = pipe.fileno() if pipe is not None else -1
        return fd if fd >= 0 and stat.S_ISFIFO(os.fstat(fd).st_mode) else None

    async def flushed(self) -> None:
        """Until nothing written is left in this process."""
        transport = self.writer.transport
        if transport.get_write_buffer_size():
            transport.set_write_buffer_limits(0)
            with contextlib.suppress(ConnectionError):
                await self.writer.drain()


class Shortcut(Protocol):
    """Takes some messages of a session before the SDK session sees them."""

    def take(self, message: dict[str, Any], line: bytes) -> CallCut | bool:
        """A call that answers the message (its job, and what cuts it short from the moment it is taken), True for
        a message consumed with nothing to run, False for one the SDK session gets. `line` is the message as it was
        read."""
        ...


# Run as a task of the session, given what cuts it short: the session does at its end, and the job may too (the
# agent cancelling its request).
Job = Callable[["CallCut"], Coroutine[Any, Any, None]]
ShortcutFactory = Callable[[Outbox], Shortcut]


def shortcut_message(data: bytes) -> dict[str, Any] | None:
    """`data` parsed for a shortcut, if it is a JSON object the SDK's parser would read too: what nests as deep as that
    parser goes gets the SDK's answer (-32602), whatever orjson would make of it; what orjson refuses
    (lone surrogates, say) gets the SDK's answer as well, and so does what it would read rounded (an integer past 64
    bits): the SDK's parser keeps every digit. Its brackets bound how deep a message can nest; only one with that many
    (source code in an argument has them in every line) has its containers walked, not its strings. A long message
    with few values (a file in an argument) is read first and those values looked over (`looked_over`) instead."""
    # A message that carries a file is read first, its few values looked over instead of its every byte scanned.
    long = len(data) >= LOOK_OVER_FROM
    if not long and may_hold_wide_int(data):
        return None
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(message) is not dict:
        return None
    if long:
        seen = looked_over(message)
        if seen is not None:
            rounded, depth = seen
            return None if rounded or depth >= PARSER_DEPTH else message
        if may_hold_wide_int(data):
            return None
    if opening_brackets(data) >= PARSER_DEPTH and nests_deeper(message, PARSER_DEPTH):
        return None
    return message


class Unanswered:
    """The agent's requests that went to the SDK session and have had no answer yet, so that the end of the agent's
    input can wait for them."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._ended = False
        self._none_left = anyio.Event()

    def read(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._ids.add(id_key(message.id))
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            # The SDK never answers a request the agent cancelled: nothing to wait for.
            self._ids.discard(id_key((message.params or {}).get("requestId")))
            self._check()

    def written(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._ids.discard(id_key(message.id))
            self._check()

    def _check(self) -> None:
        if self._ended and not self._ids:
            self._none_left.set()

    async def wait(self) -> None:
        """Until every request read so far is answered (the input has ended: no more will come)."""
        self._ended = True
        if self._ids:
            await self._none_left.wait()


@asynccontextmanager
async def serve_stdio(
    stop: anyio.Event | None = None,
    shortcut: ShortcutFactory | None = None,
    *,
    answer_after_eof: bool = False,
    leftover: bytes = b"",
) -> AsyncIterator[tuple[Any, Any]]:
    """(read_stream, write_stream) for `Server.run`; falls back to the SDK's transport (and no shortcut) for files
    and ttys.

    Setting `stop` ends the input as if the agent had closed it: whoever reads the stream winds down the way it does
    at the end of a session (a server returns from `run`), not by being cancelled; the requests in flight are not
    waited for. With `answer_after_eof`, the agent closing its input ends the read stream only once the requests
    read before have been answered. `leftover`: the start of the agent's input, taken from it by someone else.
    """
    if not (is_pipe_or_socket(0) and is_pipe_or_socket(1)) or os.isatty(0):
        async with stdio_server() as (read, write):
            if stop is None and not answer_after_eof:
                yield read, write
                return
            async with _watched(read, write, stop, Unanswered() if answer_after_eof else None) as streams:
                yield streams
        return

    async with (
        pipe_streams(*claim_stdio(), leftover) as (reader, writer),
        session_streams(reader, writer, stop, shortcut, answer_after_eof=answer_after_eof) as streams,
    ):
        yield streams


@asynccontextmanager
async def _watched(
    read: Any, write: Any, stop: anyio.Event | None, unanswered: Unanswered | None
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK transport's streams, copied: the read stream ends when `stop` is set, or at the end of the input once
    `unanswered` (when given) has no request left; the copy of the write stream tells it what was answered."""
    to_reader, from_copy = anyio.create_memory_object_stream[SessionMessage | Exception](16)

    async def copy_in() -> None:
        async with to_reader:
            with anyio.CancelScope() as reading:

                async def on_stop() -> None:
                    assert stop is not None
                    await stop.wait()
                    reading.cancel()

                async with anyio.create_task_group() as tg:
                    if stop is not None:
                        tg.start_soon(on_stop)
                    async for item in read:
                        if unanswered is not None and isinstance(item, SessionMessage):
                            unanswered.read(item.message)
                        await to_reader.send(item)
                    if unanswered is not None:
                        await unanswered.wait()
                    tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(copy_in)
        if unanswered is None:
            yield from_copy, write
        else:
            to_copy, from_server = anyio.create_memory_object_stream[SessionMessage](16)
            copied = anyio.Event()

            async def copy_out() -> None:
                try:
                    async with write, from_server:
                        async for item in from_server:
                            unanswered.written(item.message)
                            await write.send(item)
                finally:
                    copied.set()

            tg.start_soon(copy_out)
            yield from_copy, to_copy
            # The server closes its write stream as it returns: what it wrote goes out before the transport closes.
            with anyio.move_on_after(5):
                await copied.wait()
        tg.cancel_scope.cancel()


@asynccontextmanager
async def session_streams(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    stop: anyio.Event | None = None,
    shortcut: ShortcutFactory | None = None,
    *,
    answer_after_eof: bool = False,
    out: Outbox | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The MCP session's message streams over newline-delimited JSON-RPC on `reader` and `writer` (the lines for
    the agent go to `out` instead, when given). At the end of the input, the calls the shortcut runs are cut short,
    unless `answer_after_eof`: then the read stream ends once they and the SDK session's requests are answered."""
    to_server, from_stdin = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_stdout, from_server = anyio.create_memory_object_stream[SessionMessage | bytes](16)
    unanswered = Unanswered() if answer_after_eof else None

    writer_done = anyio.Event()
    outbox = out if out is not None else Outbox(writer)
    taker = shortcut(outbox) if shortcut is not None else None
    # A relay that has handed the agent's stdout over passes on even what it cannot read: the daemon answers it.
    unread: Callable[[bytes, bool], bool] | None = getattr(taker, "take_unread", None)

    async def stdin_reader() -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError), anyio.CancelScope() as reading:
            if stop is not None:
                tg.start_soon(_end_reading_at, stop, reading)
            if outbox.gone is not None:
                # An agent that no longer reads its answers has nobody left to act for: a call it sent afterwards must
                # not run (a destructive one least of all), nor one it sent before and that has not yet finished;
                # those are cut short, on record as cancelled. (One that only closes its input is still answered.)
                tg.start_soon(_end_reading_at, outbox.gone, reading, AGENT_GONE)
            # Reading ends at the end of input, at `stop` or with the agent gone; each way `to_server` closes: the
            # session's end.
            await _pump_stdin()

    async def _end_reading_at(
        event: anyio.Event | asyncio.Event, reading: anyio.CancelScope, said: str | None = None
    ) -> None:
        await event.wait()
        if said is not None and not reading.cancel_called:
            logger.warning(said)
        reading.cancel()

    async def _pump_stdin() -> None:
        # The shortcut's calls end (cut short, or answered with `answer_after_eof`) before `to_server` closes: the
        # session's end.
        calls = _Calls(stop)

        def offer(line: bytes) -> bool:
            """Whether `line` is done with here: blank, or taken by the shortcut (its call started)."""
            if not line.strip():
                return True
            if taker is None or (message := shortcut_message(line)) is None:
                return False
            taken = taker.take(message, line)
            if taken is False:
                return False
            if taken is not True:
                calls.start(taken)
            return True

        tapped = reader if isinstance(reader, TappedReader) else None
        async with to_server, calls:
            if tapped is not None:
                # A line that arrives while the loop below waits for it is offered as it arrives.
                tapped.tap = offer
            try:
                while True:
                    read = await _read_line(reader)
                    if read is None:
                        break
                    line, too_long = read
                    if tapped is not None and tapped.declined:
                        pass  # offered as it arrived, and not taken
                    elif too_long:
                        pass  # the shortcut takes no line it cannot read whole
                    elif offer(line):
                        continue
                    await _unshortcut(line, too_long)
            finally:
                if tapped is not None:
                    tapped.tap = None
            if unanswered is None:
                calls.cancel()
            else:
                await unanswered.wait()

    async def _unshortcut(line: bytes, too_long: bool) -> None:
        """A line the shortcut did not take: the relay's, the SDK session's, or answered here as unreadable."""
        if unread is not None and unread(line, too_long):
            return
        parsed = parse_line(line, too_long)
        if isinstance(parsed, SessionMessage):
            if unanswered is not None:
                unanswered.read(parsed.message)
            await to_server.send(parsed)
        elif parsed is not None:
            await outbox.put(parsed, answers=rejected_id(parsed), ok=False)

    async def stdout_writer() -> None:
        try:
            async with from_server:
                async for session_message in from_server:
                    if outbox.broken:
                        break
                    if isinstance(session_message, bytes):
                        await outbox.put(session_message)  # a line passed on as it came (the relay's answers)
                        continue
                    message = session_message.message
                    if unanswered is not None:
                        unanswered.written(message)
                    data = message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
                    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                        await outbox.put(data, answers=message.id, ok=isinstance(message, types.JSONRPCResponse))
                    else:
                        await outbox.put(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            logger.debug("stdout closed under the writer")
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdin_reader)
        tg.start_soon(stdout_writer)
        try:
            yield from_stdin, to_stdout
        finally:
            # Let the last responses reach the agent (the server closes its write stream when it stops),
            # but never hang on an agent that stopped reading.
            with anyio.move_on_after(5):
                await writer_done.wait()
            tg.cancel_scope.cancel()


class _Calls:
    """The shortcut's calls, each an asyncio task of its own. Leaving waits for every call; leaving by an exception, or
    cancelled while waiting, cuts them short first. A call is cut short by cancelling its task, once (`CallCut`): no
    anyio cancel scope per call, whose enter and exit (the task's state made, looked up and dropped) cost the busiest
    path more than the rest of its bookkeeping."""

    def __init__(self, stop: anyio.Event | None = None) -> None:
        self._running: dict[asyncio.Task[None], CallCut] = {}
        self._stop = stop

    def start(self, call: CallCut) -> None:
        task = call.task = asyncio.get_running_loop().create_task(self._run(call))
        self._running[task] = call

    async def _run(self, call: CallCut) -> None:
        # The call's bookkeeping at its end is done in its task: a done callback costs every call a turn of the loop.
        call.started = True
        try:
            if call.cut and call.task is not None:
                call.task.cancel()  # cut before it started: cut at its first wait, and recorded as cut short
            if call.job is not None:
                await call.job(call)
        except Exception:
            logger.exception("a call failed outside its own handling")
        finally:
            if call.task is not None:
                del self._running[call.task]

    def cancel(self) -> None:
        # A signal stops the host under an agent that is still there: each call it cuts is answered with why. The agent
        # gone (its input ended), there is no one to answer.
        why = STOPPED if self._stop is not None and self._stop.is_set() else None
        for call in self._running.values():
            call.cancel(why)

    async def __aenter__(self) -> _Calls:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if exc_info[0] is not None:
            self.cancel()
        try:
            await self._all_ended()
        except BaseException:
            # Cancelled while waiting (a signal, the host stopping): cut the calls short, and let them finish,
            # records and all, before the cancellation goes on.
            self.cancel()
            with anyio.CancelScope(shield=True):
                await self._all_ended()
            raise

    async def _all_ended(self) -> None:
        while self._running:
            await asyncio.wait(list(self._running))


class CallCut:
    """One call's task, cut short at most once. Once, because asyncio's cancellation, unlike anyio's, is not held
    off by a shield: a second one would break into the shielded write of the record of a call the first one ended.
    Made with the call's job when the call is taken; cut before its task has started (the agent's cancellation in
    the same read as its request), it is cut as it starts, at its first wait: the gateway records it as cancelled,
    as it does any call cut short."""

    __slots__ = ("cut", "job", "started", "task", "why")

    def __init__(self, job: Job | None = None) -> None:
        self.job = job
        self.task: asyncio.Task[Any] | None = None
        self.started = False
        self.cut = False
        # Why the host cut it, when not the agent: the agent, still there, is owed an answer that says so.
        self.why: str | None = None

    @classmethod
    def of_current(cls) -> CallCut:
        """For the call the running task is making."""
        return cls.of(asyncio.current_task())

    @classmethod
    def of(cls, task: asyncio.Task[Any] | None) -> CallCut:
        """For the call `task`, already running, is making."""
        cut = cls()
        cut.task, cut.started = task, True
        return cut

    def cancel(self, why: str | None = None) -> None:
        if self.cut:
            return
        self.cut, self.why = True, why
        if self.started and self.task is not None:
            self.task.cancel()


async def _read_line(reader: asyncio.StreamReader) -> tuple[bytes, bool] | None:
    """The next line, and whether it was longer than MAX_LINE (then only its start is kept, the rest is skipped);
    None at the end of input."""
    try:
        return await reader.readuntil(b"\n"), False
    except asyncio.IncompleteReadError as exc:
        return (exc.partial, False) if exc.partial else None
    except asyncio.LimitOverrunError as exc:
        head = await reader.readexactly(exc.consumed)
        while True:
            try:
                await reader.readuntil(b"\n")
                break
            except asyncio.LimitOverrunError as more:
                await reader.readexactly(more.consumed)
            except asyncio.IncompleteReadError:
                break
        return head, True


# ---- answering what cannot be read


def parse_line(line: bytes, too_long: bool = False, *, quiet: bool = False) -> SessionMessage | bytes | None:
    """The message on `line`; else the error line that answers it; else None (nothing to answer). `quiet`: what
    is wrong with it is not logged (someone else answers it)."""
    if too_long:
        return rejection(line, None, too_long=True, quiet=quiet)
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        return rejection(line, exc, quiet=quiet)
    if isinstance(message, types.JSONRPCNotification) and b'"id"' in line:
        # The notification model ignores unknown keys: a request whose id is neither a string nor a number would
        # pass for a notification and never be answered.
        answer = unusable_id(line, quiet)
        if answer is not None:
            return answer
    return SessionMessage(message)


def rejection(line: bytes, exc: ValidationError | None, *, too_long: bool = False, quiet: bool = False) -> bytes | None:
    """The JSON-RPC error line answering `line`, or None when it needs no answer (a notification, or a response to
    a request of ours)."""
    warn = logger.debug if quiet else logger.warning
    text = line.decode("utf-8", "replace")
    members = top_level_members(text)
    if "method" not in members and ("result" in members or "error" in members):
        warn("unreadable response from the agent, dropped: %s", _describe(exc) if exc else "too long")
        return None
    if "method" in members and "id" not in members:
        warn("unreadable notification from the agent, dropped: %s", _describe(exc) if exc else "too long")
        return None
    request_id = members.get("id")
    if not valid_id(request_id):
        request_id = None
    if too_long:
        code, message = INVALID_REQUEST, f"Invalid request: the message is longer than {MAX_LINE} bytes"
    else:
        assert exc is not None
        code, message = _classify(line, exc)
    warn("answered an unreadable request from the agent (id %r): %s", request_id, message)
    return _error_line(request_id, code, message)


def rejected_id(answer: bytes) -> Any:
    """The id that an error line made by `rejection` answers (None: the request's id could not be read)."""
    return json.loads(answer).get("id")


def unusable_id(line: bytes, quiet: bool = False) -> bytes | None:
    """The error line answering a request whose id is no string or integer (null, 1.5, true, an object, NaN), or
    None. Such a request reads as a notification to the SDK, which neither runs nor answers it."""
    warn = logger.debug if quiet else logger.warning
    members = top_level_members(line.decode("utf-8", "replace"))
    if "method" not in members or "id" not in members or valid_id(members["id"]):
        return None
    message = "Invalid request: the id must be a string or a number"
    warn("answered a request from the agent with an unusable id: %r", members["id"])
    return _error_line(None, INVALID_REQUEST, message)


def _classify(line: bytes, exc: ValidationError) -> tuple[int, str]:
    errors = exc.errors(include_url=False)
    first: dict[str, Any] = dict(errors[0]) if errors else {"type": "", "msg": str(exc)}
    if first["type"] == "json_invalid":
        detail = str((first.get("ctx") or {}).get("error") or first["msg"])
        if "recursion limit" in detail:
            return INVALID_PARAMS, (
                f"Invalid params: the message nests deeper than {PARSER_DEPTH} levels of brackets, more than "
                f"mcphost reads ({detail}); flatten the arguments"
            )
        if "surrogate" in detail or _holds_lone_surrogate(line):
            return INVALID_PARAMS, (
                f"Invalid params: a string holds a lone UTF-16 surrogate, which is not Unicode text ({detail}); "
                "send the text as UTF-8, or a character outside the BMP as an escaped surrogate pair"
            )
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            return PARSE_ERROR, f"Parse error: the line is not UTF-8 (a byte at offset {bad.start} is not valid)"
        return PARSE_ERROR, f"Parse error: {detail}"
    return _shape_error(errors)


def _holds_lone_surrogate(line: bytes) -> bool:
    """Whether `line` is JSON that Python reads but that holds text no UTF-8 can carry (the parser names that
    case only for some escapes: "\\ud800 then text" reads to it as a broken escape)."""
    try:
        value = json.loads(line)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (ValueError, RecursionError):
        return False
    return False


def _shape_error(errors: list[Any]) -> tuple[int, str]:
    """JSON that is no JSON-RPC message: -32602 when only the params of a request are wrong, else -32600."""
    as_request = [e for e in errors if e.get("loc")[:1] == ("JSONRPCRequest",)] or errors
    problems = "; ".join(
        f"{'.'.join(str(part) for part in e['loc'][1:]) or 'message'}: {e['msg']}" for e in as_request[:3]
    )
    if all(len(e["loc"]) > 1 and e["loc"][1] == "params" for e in as_request):
        return INVALID_PARAMS, f"Invalid params: {problems}"
    return INVALID_REQUEST, f"Invalid request: not a JSON-RPC 2.0 request ({problems})"


def _describe(exc: ValidationError) -> str:
    return "; ".join(str(e["msg"]) for e in exc.errors(include_url=False)[:3])


def _error_line(request_id: Any, code: int, message: str) -> bytes:
    # json.dumps escapes to ASCII: an id holding a lone surrogate goes back exactly as it came.
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(body).encode("ascii") + b"\n"


_WS = re.compile(r"[ \t\n\r]*")
# NaN and the infinities are no JSON, but Python's readers (the SDK's among them) take them: an id of one must be
# found, to be answered as unusable rather than pass for a notification.
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null|NaN|-?Infinity")
_BRACKET_OR_QUOTE = re.compile(r'["\[\]{}]')
_NESTED = object()  # a member whose value is an object or array: present, not read
# Control characters in strings are read too: the point is to find the id, not to judge the line.
_DECODER = json.JSONDecoder(strict=False)


def _string(text: str, quote: int) -> tuple[str, int]:
    """The JSON string whose opening quote is at `quote`, and the index past it (ValueError if it is not one)."""
    value, end = _DECODER.raw_decode(text, quote)
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value, end


def top_level_members(text: str) -> dict[str, Any]:
    """The members of the JSON object in `text` that hold scalars (and which others are present), read without
    recursion however deep the other values nest; stops quietly at the first thing it cannot read."""
    found: dict[str, Any] = {}
    n = len(text)
    i = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if i >= n or text[i] != "{":
        return found
    i += 1
    try:
        while True:
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if i >= n or text[i] != '"':
                return found
            key, i = _string(text, i)
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if i >= n or text[i] != ":":
                return found
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            if i >= n:
                return found
            if text[i] in "[{":
                i = _skip_nested(text, i)
                if i < 0:
                    found.setdefault(key, _NESTED)
                    return found
                found[key] = _NESTED
            elif text[i] == '"':
                found[key], i = _string(text, i)
            else:
                scalar = _SCALAR.match(text, i)
                if scalar is None:
                    return found
                found[key] = json.loads(scalar.group())
                i = scalar.end()
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if i >= n or text[i] != ",":
                return found
            i += 1
    except ValueError:
        return found


def _skip_nested(text: str, i: int) -> int:
    """The index just past the object or array that starts at `i`, or -1 if it does not end."""
    depth = 0
    while True:
        found = _BRACKET_OR_QUOTE.search(text, i)
        if found is None:
            return -1
        char, i = found.group(), found.end()
        if char == '"':
            _, i = _string(text, i - 1)
        elif char in "[{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i
