"""`mcphost mcp` with a daemon running: relay the agent's stdio MCP session to the daemon's agent socket, so that
its prompts reach the person's editor and its calls share the daemon's upstreams, grants and log.

The relay moves JSON-RPC messages both ways without reading their params, one line for one line: the agent's
`initialize` (its name and capabilities, elicitation included) reaches the daemon as sent, and a 2026-era client's
requests too. The connection is the session, so "allow for this session" means this agent process.

The agent's session outlives the daemon. When the daemon goes away, the calls it had in flight get a JSON-RPC error
that says so (they may or may not have reached the upstream; nothing is retried on its own), and the relay carries
on: with another daemon for the same config if one is running, else with the gateway built in this process (as
`--in-process` does), and back to a daemon once one runs again and no call is waiting. Each new backend gets the
agent's handshake replayed, so the agent does not have to know.

Where it can (Linux, the agent's stdin and stdout pipes or sockets), the relay hands the daemon the agent's
stdin too, and sleeps until the daemon lets go: no hop through this process on any call. The daemon notes in the
relay's ledger what it takes before it takes it (mcphost.serve.handoff), so that when it lets go, however it goes,
the relay knows which requests are owed an answer, which handshake to replay, and what start of a line to put back;
from then on it reads the agent itself, as above.

An agent that closes its input has not given up on its answers (it may close right after its last request, then
read): the session ends once every request it sent is answered. A signal ends it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import Server
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR
from pydantic import ValidationError

from mcphost import discovery
from mcphost.activity.reader import loads_exact
from mcphost.pipes import MAX_LINE, can_pass_fds, connect_passing_fd, id_key, read_in_chunks, valid_id
from mcphost.serve.handoff import (
    HANDOFF_LINE,
    PRIVATE_ID_PREFIX,
    LedgerFold,
    LetGo,
    Note,
    Target,
    cancel_on,
    is_private,
    notes,
    owe,
    owed_read,
    read_note,
    settle,
    unowe,
)
from mcphost.serve.mcp_server import client_name
from mcphost.serve.stdio import STOPPED, STOPPED_UNANSWERED, Outbox, Send, parse_line, rejected_id, serve_stdio

logger = logging.getLogger(__name__)

LocalServer = Callable[[], AbstractAsyncContextManager[tuple[Server[Any], Any]]]
Message = types.JSONRPCRequest | types.JSONRPCNotification | types.JSONRPCResponse | types.JSONRPCError

# How often a relay serving in process looks for a daemon to go back to (a directory listing: cheap).
DAEMON_POLL_S = 1.0
# How long a relay that leaves a daemon waits for it to let go of the agent's stdout before writing there itself.
RELEASE_S = 5.0


def _say(text: str) -> None:
    print(f"mcphost: {text}", file=sys.stderr, flush=True)


class _Lost(Exception):
    """The backend can no longer serve the session; `gone` when its daemon is gone for good (not to be retried)."""

    def __init__(self, reason: str, *, gone: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.gone = gone


@dataclass(frozen=True, slots=True)
class _CallInFlight:
    """A tool call forwarded as the agent wrote it: all the relay needs of it until its answer is its id (to answer
    it, should the daemon go away), so no model is made for it on the busiest path."""

    id: Any
    method: str = "tools/call"
    read: dict[str, Any] | None = None  # a read: what the relay keeps to put it on record (handoff.owed_read)


@dataclass
class _Relay:
    """The agent's side of the session, which outlives any one backend: what waits to be sent, what is in flight,
    and the handshake to replay."""

    to_agent: Any
    config_path: Path
    stop: anyio.Event | None = None  # a signal: the session ends without waiting for answers
    queue: deque[Message] = field(default_factory=deque)
    in_flight: dict[str, types.JSONRPCRequest | _CallInFlight] = field(default_factory=dict)
    # Requests the agent sent under an id still in flight (MCP forbids it; the daemon serves both, as mcphost does in
    # process), each in line behind the one in `in_flight` and owed its own answer and, a read, its record should
    # the daemon go away.
    twins: dict[str, list[types.JSONRPCRequest | _CallInFlight]] = field(default_factory=dict)
    handshake: types.JSONRPCRequest | None = None
    initialized: types.JSONRPCNotification | None = None
    agent_done: bool = False
    _arrived: anyio.Event = field(default_factory=anyio.Event)
    _private: dict[str, list[Message]] = field(default_factory=dict)
    _private_done: dict[str, anyio.Event] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    raw: dict[str, bytes] = field(default_factory=dict)  # tool calls' JSON as the agent sent them, by request id
    _drained: anyio.Event | None = None  # while the agent, done, waits for its answers: set once none is left
    # The agent's stdout, written in order by whoever puts to it (stdio's own writer for pipes; None for a file or a
    # tty, where the SDK's transport serves and everything goes through `to_agent`).
    outbox: Outbox | None = None
    # While a daemon holds the agent's stdout: what the relay cannot read goes to it as well, to be answered there.
    forward_unread: Callable[[bytes], bool] | None = None
    # The answers a daemon holding stdout was to give to lines the relay could not read, owed should it go away.
    unread_owed: dict[str, list[bytes]] = field(default_factory=dict)
    # Long lines the daemon started writing to the agent's stdout and has not reported done.
    cut: set[Any] = field(default_factory=set)
    # A daemon held the agent's stdout: an answer it wrote may have reached the agent without a word to the relay
    # (it died between the two).
    answers_unseen: bool = False
    # The daemon serving the session said it ended it with every call on record: no read it owes is the relay's to
    # record (`fail_in_flight`).
    recorded: bool = False
    # The daemon's socket, while a backend serves: a tool call that finds nothing queued before it is written there
    # at once, without waking the backend's task (one task switch per call less on the busiest path).
    forward: Callable[[bytes], bool] | None = None
    # Requests answered here because a signal stopped the session: the backend's own late answer to one is dropped
    # (a second answer to one id would break JSON-RPC).
    answered_stopped: set[str] = field(default_factory=set)

    # ---- from the agent

    async def read_agent(self, from_agent: Any) -> None:
        """What reaches the relay past its shortcut (`take_line`): only what that could not read, which stdio has
        answered already; then the end of the agent's input."""
        async for item in from_agent:
            if not isinstance(item, Exception):
                self.arrive(item.message)
        self.agent_done = True
        self._arrived.set()

    def take_line(self, line: dict[str, Any], data: bytes) -> bool:
        """Every message the agent sends, parsed (`line`, read from `data`), in the order sent. A tool call, the
        busiest message, keeps its JSON as the agent wrote it and is not validated here (the daemon does that);
        anything else is validated as the SDK would, and what is not valid goes on to stdio's own answers."""
        method, request_id = line.get("method"), line.get("id")
        if "id" in line and not valid_id(request_id):
            return False  # stdio answers it (a notification model would take it and drop the id)
        if method == "tools/call" and "id" in line:
            raw = data if data.endswith(b"\n") else data + b"\n"
            # Straight to the daemon only when nothing is queued: what the agent sent earlier goes first.
            if not self.queue and self.forward is not None and self.forward(raw):
                self.owe(id_key(request_id), _CallInFlight(request_id, read=owed_read(line)))
                return True
            message: Message = types.JSONRPCRequest.model_construct(
                jsonrpc="2.0", id=request_id, method=method, params=line.get("params")
            )
            self.raw[id_key(request_id)] = raw
        else:
            try:
                message = types.jsonrpc_message_adapter.validate_python(line, by_name=False)
            except ValidationError:
                return False
        self.arrive(message)
        return True

    @property
    def send(self) -> Send | None:
        return self.outbox.put if self.outbox is not None else None

    def take_unread(self, line: bytes, too_long: bool) -> bool:
        """A line the relay could not read: passed on while a daemon holds the agent's stdout (it answers it),
        else left to stdio's own answer."""
        forward = self.forward_unread
        if forward is None or not forward(line if line.endswith(b"\n") else line + b"\n"):
            return False
        owed = parse_line(line, too_long, quiet=True)  # the daemon says what is wrong with it
        if isinstance(owed, bytes):
            self.unread_owed.setdefault(id_key(rejected_id(owed)), []).append(owed)
        elif owed is not None and isinstance(owed.message, types.JSONRPCRequest):
            self.owe(id_key(owed.message.id), owed.message)
        return True

    def noted(self, note: Note) -> None:
        """What the daemon holding the agent's stdout reports: an answer written there, or a long line under way."""
        if note.kind == "writing":
            self.cut.add(note.value)
        elif note.kind == "written":
            self.cut.discard(note.value)
        elif note.kind == "recorded":
            self.recorded = True
        elif note.kind == "answered":
            key = id_key(note.value)
            request = self._answered(key)
            self.raw.pop(key, None)
            owed = self.unread_owed.get(key)
            if request is None and owed:
                owed.pop()
                if not owed:
                    del self.unread_owed[key]
            if isinstance(request, types.JSONRPCRequest) and request.method == "initialize" and note.ok:
                self.handshake = request
            self._settle()

    def arrive(self, message: Message) -> None:
        if isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/initialized":
                self.initialized = message
            elif message.method == "notifications/cancelled":
                # The agent waits no more: nor does the relay (a cancelled request may never be answered).
                key = id_key((message.params or {}).get("requestId"))
                self.in_flight.pop(key, None)
                self.twins.pop(key, None)
                self.raw.pop(key, None)
                self._settle()
        self.queue.append(message)
        self._arrived.set()

    async def take(self) -> Message | None:
        """The next message for the backend (a request is in flight from here on); None once the agent is done.
        Cancelling a wait loses nothing: a message leaves the queue only when it is returned."""
        while not self.queue:
            if self.agent_done:
                return None
            self._arrived = anyio.Event()
            await self._arrived.wait()
        message = self.queue.popleft()
        if isinstance(message, types.JSONRPCRequest) and not is_private(message.id):
            self.owe(id_key(message.id), message)
        return message

    def requeue(self, message: Message) -> None:
        """Back to the front of the queue: it never reached the backend that took it."""
        if isinstance(message, types.JSONRPCRequest):
            unowe(self.in_flight, self.twins, id_key(message.id))
        self.queue.appendleft(message)
        self._arrived.set()

    def owe(self, key: str, request: types.JSONRPCRequest | _CallInFlight) -> None:
        owe(self.in_flight, self.twins, key, request)

    def _answered(self, key: str) -> types.JSONRPCRequest | _CallInFlight | None:
        return settle(self.in_flight, self.twins, key)

    def _owed(self) -> list[types.JSONRPCRequest | _CallInFlight]:
        """Every request in flight, twins too, now answered here: none is left owed."""
        owed = [*self.in_flight.values(), *(twin for twins in self.twins.values() for twin in twins)]
        self.in_flight.clear()
        self.twins.clear()
        return owed

    def idle(self) -> bool:
        return not self.queue and not self.in_flight

    async def answered(self) -> None:
        """Once the agent is done: until each request it sent has its answer, or a signal ends the session."""
        if not self.in_flight or (self.stop is not None and self.stop.is_set()):
            return
        self._drained = anyio.Event()
        async with anyio.create_task_group() as tg:
            if self.stop is not None:
                tg.start_soon(cancel_on, self.stop, tg.cancel_scope)
            await self._drained.wait()
            tg.cancel_scope.cancel()

    def _settle(self) -> None:
        if self._drained is not None and not self.in_flight:
            self._drained.set()

    # ---- to the agent

    async def deliver(self, message: Message) -> None:
        """A message from the backend: the answer to a replayed handshake stays here, everything else goes on."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            key = id_key(message.id)
            if key in self.answered_stopped:
                self.answered_stopped.discard(key)
                return
            if key in self._private:
                self._private[key].append(message)
                self._private_done[key].set()
                return
            request = self._answered(key)
            self.raw.pop(key, None)
            if (
                isinstance(request, types.JSONRPCRequest)
                and request.method == "initialize"
                and isinstance(message, types.JSONRPCResponse)
            ):
                self.handshake = request
        try:
            if self.send is not None:
                await self.send(message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n")
            else:
                await self.to_agent.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("the agent is gone; dropped %s", type(message).__name__)
        # After the send: a session waiting for its last answer ends as soon as this is set.
        self._settle()

    async def pass_answer(self, line: bytes) -> bool:
        """Pass the daemon's answer to a tool call on to the agent as it came, if `line` is one."""
        try:
            message = loads_exact(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict) or "method" in message:
            return False
        key = id_key(message.get("id"))
        request = self.in_flight.get(key)
        if request is None or request.method != "tools/call" or not valid_id(message.get("id")):
            return False
        self._answered(key)
        self.raw.pop(key, None)
        try:
            if self.send is not None:
                await self.send(line)
            else:
                await self.to_agent.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("the agent is gone; dropped an answer")
        self._settle()
        return True

    async def answer(self, request_id: Any, code: int, message: str) -> None:
        """Answer `request_id` with an error (`deliver` takes it out of flight)."""
        error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
        await self.deliver(error)

    async def answer_stopped(self) -> None:
        """Answer every request in flight as `mcphost mcp` answers one a signal cut short (the gateway here records
        each call it cuts as cancelled), before the backend's shutdown answers them with a bare "Connection closed"."""
        for request in self._owed():
            why = STOPPED if request.method == "tools/call" else STOPPED_UNANSWERED
            await self.answer(request.id, INTERNAL_ERROR, f"{request.method}: {why}")
            self.answered_stopped.add(id_key(request.id))

    async def fail_in_flight(self, reason: str, *, died: bool = False) -> None:
        """Answer every request in flight with `reason`. `died`: they were the daemon's, which went away without
        saying their calls are on record, so the reads among them are recorded here (a write's start is on record
        before it is forwarded)."""
        cut_short = self._owed()
        if died and not self.recorded:
            reads = [read for request in cut_short if (read := _owed_read_of(request)) is not None]
            if reads:
                await record_lost_reads(self.config_path, reads, reason, self.client)
        self.recorded = False
        if self.cut and self.send is not None:
            # The daemon died in the middle of a line: ours start on a line of their own.
            self.cut.clear()
            await self.send(b"\n")
        for owed in list(self.unread_owed.values()):
            for line in owed:
                if self.send is not None:
                    await self.send(line)
        self.unread_owed.clear()
        for request in cut_short:
            if self.answers_unseen and isinstance(request, types.JSONRPCRequest) and request.method == "initialize":
                # The agent may well hold a result: its session, replayed to the next backend, must go on (were it
                # refused, the agent would initialize again, and that handshake would be the one replayed).
                self.handshake = request
            await self.answer(request.id, INTERNAL_ERROR, f"{request.method}: {reason}")
        self.answers_unseen = False

    @property
    def client(self) -> str | None:
        """The agent's client, as the daemon names it in its records."""
        params = self.handshake.params if self.handshake is not None else None
        return client_name(params.get("clientInfo")) if isinstance(params, dict) else None

    # ---- the handshake, replayed to a new backend

    def private(self, request: types.JSONRPCRequest) -> tuple[types.JSONRPCRequest, anyio.Event, list[Message]]:
        """`request` under an id of the relay's own, whose answer stays with the relay."""
        key = f"{PRIVATE_ID_PREFIX}{next(self._ids)}"
        self._private[key], self._private_done[key] = [], anyio.Event()
        return request.model_copy(update={"id": key}), self._private_done[key], self._private[key]

    def forget(self, request_id: Any) -> None:
        self._private.pop(id_key(request_id), None)
        self._private_done.pop(id_key(request_id), None)


def _owed_read_of(request: types.JSONRPCRequest | _CallInFlight) -> dict[str, Any] | None:
    if isinstance(request, _CallInFlight):
        return request.read
    return owed_read({"params": request.params}) if request.method == "tools/call" else None


async def record_lost_reads(config_path: Path, reads: list[dict[str, Any]], reason: str, client: str | None) -> None:
    """Put on record the reads a daemon died with (`reads` as `owed_read` keeps them): an error whose message says
    the call may or may not have reached the upstream. Where the config cannot be read, with the default [log]."""
    from mcphost.activity.record import CallRecord, new_record_id, utc_now
    from mcphost.activity.writer import ActivityLog, LogSettings
    from mcphost.config import ConfigError, load_config
    from mcphost.config.starter import embedded_default
    from mcphost.paths import activity_log_path

    try:
        settings = LogSettings.of(load_config(config_path, default=embedded_default).config.log)
    except ConfigError:
        settings = LogSettings()
    log = ActivityLog(activity_log_path(), settings)
    try:
        for read in reads:
            record = CallRecord("call_tool_read", None, client_name(read.get("client")) or client)
            name = read.get("name")
            if name:
                server, _, tool = name.partition(":")
                record.server, record.tool = server, tool or None
            record.intent = read.get("intent")
            record.status = "error"
            record.error = {"code": "UPSTREAM_ERROR", "message": reason}
            record.id, record.timestamp = new_record_id(), utc_now()
            with anyio.CancelScope(shield=True):
                await log.write(record)
    except Exception:  # the agent still gets its answer; the log says why it has no record
        logger.exception("the reads in flight when the daemon went away could not be recorded")
    finally:
        log.close()


def death(target: Target, cause: str) -> str:
    """What a call in flight is told when its daemon went away."""
    return (
        f"{target.name} went away during this call ({cause}). The call may or may not have reached the upstream "
        "server: check before repeating a write. The session carries on: the next call goes to another mcphost "
        "daemon for this config if one is running, else to a gateway inside this `mcphost mcp`."
    )


def _replay_failed(answer: list[Message]) -> str | None:
    if answer and isinstance(answer[0], types.JSONRPCResponse):
        return None
    if answer and isinstance(answer[0], types.JSONRPCError):
        return answer[0].error.message
    return "no answer"


# ---- the daemon


class _DaemonBackend:
    """One MCP session with a daemon over its agent socket: each message a line, as on stdio; whatever the daemon
    sends (answers, and its own requests such as a question through the agent's client) goes on to the agent."""

    def __init__(self, target: Target, relay: _Relay) -> None:
        self.target = target
        self.relay = relay
        self.lost: _Lost | None = None
        self.answered = 0  # answers passed on: a session that served before may well serve again
        self.handed_over = False  # the daemon writes to the agent's stdout
        self._tg: anyio.abc.TaskGroup | None = None

    async def serve(self) -> None:
        """Relay until the agent is done; raises _Lost when the daemon can no longer serve the session."""
        if self.target.socket is None:
            raise _Lost(f"{self.target.name} announces no agent socket (is it an older mcphost?)")
        stdout = self._stdout_to_hand_over()
        self.relay.recorded = False  # this daemon's word, not an earlier one's
        try:
            if stdout is not None:
                assert self.relay.outbox is not None
                await self.relay.outbox.flushed()  # nothing of the relay's own is left to write once the daemon does
                reader, writer = await connect_passing_fd(self.target.socket, HANDOFF_LINE, stdout)
                self.handed_over = self.relay.answers_unseen = True
            else:
                reader, writer = await asyncio.open_unix_connection(self.target.socket, limit=MAX_LINE)
                read_in_chunks(writer.transport)
        except OSError as exc:
            raise _Lost(f"{self.target.name} takes no connections ({exc.strerror or exc})") from None
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._read, reader)
                if self.handed_over:
                    self.relay.forward_unread = lambda line: self._forward_now(writer, line)
                if self.relay.handshake is not None:
                    await self._replay(writer, self.relay.handshake)
                # Only after the replay: a call must not reach the daemon before the session's handshake.
                self.relay.forward = lambda line: self._forward_now(writer, line)
                try:
                    while self.lost is None and (message := await self.relay.take()) is not None:
                        if not await self._write(writer, message):
                            self.relay.requeue(message)
                            break
                finally:
                    self.relay.forward = None
                if self.lost is None:
                    await self.relay.answered()
                # The agent is done and answered (or the daemon is lost): nobody is left to read what still comes.
                tg.cancel_scope.cancel()
        finally:
            self.relay.forward_unread = None
            if self.handed_over:
                with anyio.CancelScope(shield=True):
                    await self._released(reader, writer)
            writer.close()
        if self.lost is not None:
            raise self.lost

    def _stdout_to_hand_over(self) -> int | None:
        outbox = self.relay.outbox
        if not self.target.handoff or outbox is None or not can_pass_fds():
            return None
        return outbox.pipe_fd()

    async def _released(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Until the daemon has let go of the agent's stdout (it closes its end of the socket after that, or dies),
        taking in what it reported meanwhile; only then may the relay write there."""
        with contextlib.suppress(OSError, RuntimeError):
            if not writer.transport.is_closing():
                writer.write_eof()
        with anyio.move_on_after(RELEASE_S):
            async for note in notes(reader):
                self.relay.noted(note)
            return
        logger.warning("%s kept the agent's stdout after its session: writing there anyway", self.target.name)

    def _lose(self, lost: _Lost) -> None:
        if self.lost is None:
            self.lost = lost
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    async def _write(self, writer: asyncio.StreamWriter, message: Message) -> bool:
        """Whether `message` went to the daemon; a refused write loses the daemon."""
        line = self.relay.raw.get(id_key(message.id)) if isinstance(message, types.JSONRPCRequest) else None
        writer.write(line or message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n")
        try:
            await writer.drain()
        except ConnectionError as exc:
            self._lose(await _ended(self.target, f"the connection broke ({type(exc).__name__})"))
            return False
        return True

    def _forward_now(self, writer: asyncio.StreamWriter, line: bytes) -> bool:
        """Write `line` to the daemon now, if this backend still serves. A connection that breaks after this is
        seen by the reader; the call is then in flight and answered with the daemon's death, as one written by
        the loop would be."""
        if self.lost is not None or writer.transport.is_closing():
            return False
        writer.write(line)
        return True

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            except asyncio.LimitOverrunError:
                self._lose(_Lost(f"{self.target.name} sent a message longer than {MAX_LINE} bytes", gone=False))
                return
            if (note := read_note(line)) is not None:
                self.relay.noted(note)
                if note.kind == "answered":
                    self.answered += 1
                continue
            if await self.relay.pass_answer(line):
                self.answered += 1
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValidationError as exc:
                logger.warning("the daemon sent an unreadable message, dropped: %s", exc.errors()[:1])
                continue
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and not is_private(message.id):
                self.answered += 1
            await self.relay.deliver(message)
        if self.relay.agent_done and self.relay.idle():
            return  # the session is over at both ends: the agent's doing, nothing the daemon did
        # The daemon ended the session: its calls in flight may or may not have run, and will not be answered.
        lost = await _ended(self.target, "it closed the session")
        await self.relay.fail_in_flight(death(self.target, lost.reason), died=True)
        self._lose(lost)

    async def _replay(self, writer: asyncio.StreamWriter, handshake: types.JSONRPCRequest) -> None:
        request, done, answer = self.relay.private(handshake)
        try:
            if not await self._write(writer, request):
                return
            with anyio.fail_after(30):
                await done.wait()
        except TimeoutError:
            self._lose(_Lost(f"{self.target.name} did not answer the session's handshake"))
            return
        finally:
            self.relay.forget(request.id)
        problem = _replay_failed(answer)
        if problem is not None:
            self._lose(_Lost(f"{self.target.name} refused the session's handshake: {problem}"))
            return
        if self.relay.initialized is not None:
            await self._write(writer, self.relay.initialized)


async def _ended(target: Target, cause: str) -> _Lost:
    """Why the session ended: the daemon's process ended (gone), or it closed the session and lives on."""
    for _ in range(10):
        if not discovery.process_alive(target.pid):
            return _Lost(f"its process ended ({cause})")
        await anyio.sleep(0.1)
    return _Lost(f"{target.name} ended the relay's session ({cause})", gone=False)


# ---- in this process


class _LocalBackend:
    """The gateway in this process, as `mcphost mcp --in-process` runs it, while no daemon serves the config."""

    def __init__(self, relay: _Relay, open_local: LocalServer, find: Callable[[], Target | None]) -> None:
        self.relay = relay
        self.open_local = open_local
        self.find = find

    async def serve(self) -> Target | None:
        """Serve until the agent is done (None), or until a daemon runs and no call waits (that daemon)."""
        back_to: list[Target] = []
        async with self.open_local() as (server, _shortcut):
            to_server, from_relay = anyio.create_memory_object_stream[SessionMessage | Exception](16)
            to_relay, from_server = anyio.create_memory_object_stream[SessionMessage](16)
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.run, from_relay, to_relay, server.create_initialization_options())
                tg.start_soon(self._answers, from_server)
                # Closing the server's input ends its loop; the Host closes its upstreams on the way out.
                async with to_server:
                    if self.relay.handshake is not None:
                        await self._replay(to_server, self.relay.handshake)
                    async with anyio.create_task_group() as pumping:
                        pumping.start_soon(self._watch_for_daemon, pumping.cancel_scope, back_to)
                        while (message := await self.relay.take()) is not None:
                            if self._daemon_is_back(message, back_to):
                                self.relay.requeue(message)
                                break
                            try:
                                await to_server.send(SessionMessage(message))
                            except anyio.get_cancelled_exc_class():
                                self.relay.requeue(message)
                                raise
                        pumping.cancel_scope.cancel()
                    if self.relay.stop is not None and self.relay.stop.is_set():
                        await self.relay.answer_stopped()
                    if not back_to:
                        # The agent is done: the server's input closes (cutting its handlers short) once answered.
                        await self.relay.answered()
        return back_to[0] if back_to else None

    def _daemon_is_back(self, message: Message, back_to: list[Target]) -> bool:
        """Whether a daemon serves the config again and `message` is the only call: then it goes there, so that its
        prompt reaches the person's editor (a directory listing per call, only while serving in process)."""
        if not isinstance(message, types.JSONRPCRequest) or len(self.relay.in_flight) != 1:
            return False
        target = self.find()
        if target is None:
            return False
        back_to.append(target)
        return True

    async def _answers(self, from_server: Any) -> None:
        async with from_server:
            async for item in from_server:
                await self.relay.deliver(item.message)

    async def _replay(self, to_server: Any, handshake: types.JSONRPCRequest) -> None:
        request, done, answer = self.relay.private(handshake)
        try:
            await to_server.send(SessionMessage(request))
            with anyio.fail_after(30):
                await done.wait()
        finally:
            self.relay.forget(request.id)
        problem = _replay_failed(answer)
        if problem is not None:
            logger.warning("the in-process gateway refused the session's handshake: %s", problem)
        if self.relay.initialized is not None:
            await to_server.send(SessionMessage(self.relay.initialized))

    async def _watch_for_daemon(self, pumping: anyio.CancelScope, back_to: list[Target]) -> None:
        while True:
            await anyio.sleep(DAEMON_POLL_S)
            if not self.relay.idle():
                continue
            target = self.find()
            if target is not None and self.relay.idle():
                back_to.append(target)
                pumping.cancel()
                return


class _NoBackend:
    """Neither a daemon nor the gateway in this process (the config does not load): answer each call with why,
    until a daemon runs."""

    def __init__(self, relay: _Relay, why: str, find: Callable[[], Target | None]) -> None:
        self.relay, self.why, self.find = relay, why, find

    async def serve(self) -> Target | None:
        while True:
            taken: list[Message | None] = []
            with anyio.move_on_after(DAEMON_POLL_S):
                taken.append(await self.relay.take())
            if taken and taken[0] is None:
                return None
            if taken and isinstance(taken[0], types.JSONRPCRequest):
                await self.relay.answer(taken[0].id, INTERNAL_ERROR, self.why)
            elif not taken and (target := self.find()) is not None:
                return target


# ---- the session


async def relay(
    first: Target,
    config_path: Path,
    open_local: LocalServer,
    stop: anyio.Event | None = None,
    taken: LetGo | None = None,
) -> None:
    """Serve the agent on stdio through `first`, then whatever serves `config_path` when it goes away; `stop` ends
    the session as the agent closing its input does. `taken`: what `first` left when it let go of the agent's stdio,
    handed over to it before this module was imported (`handoff.hand_over_first`)."""
    session: _Relay | None = None
    outboxes: list[Outbox] = []

    def shortcut(out: Outbox) -> Any:
        outboxes.append(out)
        return _Taker(
            lambda message, line: session is not None and session.take_line(message, line),
            lambda line, too_long: session is not None and session.take_unread(line, too_long),
        )

    leftover = taken.ledger.partial if taken is not None else b""
    async with (
        serve_stdio(stop, shortcut, leftover=leftover) as (from_agent, to_agent),
        to_agent,
        anyio.create_task_group() as tg,
    ):
        session = _Relay(to_agent, config_path, stop, outbox=outboxes[0] if outboxes else None)
        tg.start_soon(session.read_agent, from_agent)
        gone: set[tuple[int, str]] = set()
        target: Target | None = first
        if taken is not None:
            # The daemon has let go of the agent: what it took and did not answer is owed the reason.
            lost = await _ended(first, "it let go of the agent's session")
            _seed(session, taken.ledger)
            if lost.gone:
                gone.add((first.pid, first.url))
                target = None
            _say(f"{first.name} let go of the session: {lost.reason}")
            await session.fail_in_flight(death(first, lost.reason), died=not taken.recorded)
        await _run(session, target, open_local, gone)
        tg.cancel_scope.cancel()


def _message(line: str) -> Message | None:
    """A handshake line from the ledger as the SDK reads it; None when it does not."""
    try:
        return types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError:
        return None


def _seed(session: _Relay, ledger: LedgerFold) -> None:
    """The session as the daemon left it: the requests owed an answer, the handshake, the lines it left unfinished."""
    twins = (twin for waiting in ledger.twins.values() for twin in waiting)
    for request_id, method, read in [*ledger.in_flight.values(), *twins]:
        session.owe(id_key(request_id), _CallInFlight(request_id, method, read))
    if ledger.initialize is not None:
        handshake = _message(ledger.initialize)
        if isinstance(handshake, types.JSONRPCRequest):
            if ledger.initialize_ok:
                session.handshake = handshake
            elif id_key(handshake.id) in session.in_flight:
                session.in_flight[id_key(handshake.id)] = handshake
    if ledger.initialized is not None:
        initialized = _message(ledger.initialized)
        if isinstance(initialized, types.JSONRPCNotification):
            session.initialized = initialized
    session.cut |= ledger.cut
    session.answers_unseen = True  # the daemon wrote to the agent: an answer may be out without a word


@dataclass(frozen=True)
class _Taker:
    take_line: Callable[[dict[str, Any], bytes], bool]
    take_unread: Callable[[bytes, bool], bool]

    def take(self, message: dict[str, Any], line: bytes) -> bool:
        return self.take_line(message, line)


async def _run(
    session: _Relay, first: Target | None, open_local: LocalServer, gone: set[tuple[int, str]] | None = None
) -> None:
    gone = set() if gone is None else gone

    def find() -> Target | None:
        daemons = [d for d in discovery.running() if (int(d["pid"]), str(d["mcp"]["url"])) not in gone]
        info = discovery.newest(daemons, session.config_path)
        return None if info is None else Target.from_info(info)

    target: Target | None = first
    retries = 0
    while not (session.agent_done and not session.queue):
        if target is not None:
            if target is not first or retries or target.stdin:
                _say(f"relaying to {target.name}")
            backend = _DaemonBackend(target, session)
            try:
                await backend.serve()
                return
            except _Lost as lost:
                # A session the daemon ended is started again; one that keeps ending before any answer is not.
                retries = 0 if backend.answered else retries + 1
                if lost.gone or retries > 2:
                    gone.add((target.pid, target.url))
                    _say(f"{target.name} is gone: {lost.reason}")
                    await session.fail_in_flight(death(target, lost.reason), died=True)
                    target, retries = find(), 0
                continue
        _say(f"no daemon serves {session.config_path}: serving this agent in process until one does")
        try:
            target = await _LocalBackend(session, open_local, find).serve()
        except Exception as exc:
            why = (
                f"no mcphost daemon is running for {session.config_path}, and the gateway cannot start in "
                f"this process: {exc}. Start `mcphost serve`, or fix the config"
            )
            _say(why)
            await session.fail_in_flight(why)
            target = await _NoBackend(session, why, find).serve()
        if target is None:
            return
