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
import base64
import contextlib
import itertools
import logging
import os
import select
import stat
import uuid
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from mcphost import discovery
from mcphost.activity.reader import loads_exact
from mcphost.gateway.service import Gateway
from mcphost.paths import ensure_private_dir, runtime_dir
from mcphost.pipes import MAX_LINE, Peeker, TappedReader, dump_line, owner_only_fd_socket, valid_id, write_pipe
from mcphost.serve.handoff import HANDOFF_LINE, STDIO_HANDOFF_LINE, Ledger, is_private, owed_read
from mcphost.serve.mcp_server import DirectCalls, build_server
from mcphost.serve.stdio import NOT_AN_ANSWER, Outbox, parse_line, rejected_id, session_streams

logger = logging.getLogger(__name__)

# A daemon that stops gives the sessions' calls in flight this long to be recorded as cancelled.
CLOSE_GRACE_S = 3.0
# Writes up to this size reach a pipe whole or not at all.
PIPE_BUF = getattr(select, "PIPE_BUF", 512)


def relay_session_id() -> str:
    return f"relay-{uuid.uuid4().hex[:12]}"


@contextlib.asynccontextmanager
async def agent_socket(gateway: Gateway) -> AsyncIterator[Path]:
    """Serve relayed agent sessions for as long as the context lasts; yields the socket's path."""
    sessions: set[asyncio.Task[None]] = set()

    async def serve_session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fds: list[int]) -> None:
        task = asyncio.current_task()
        assert task is not None
        sessions.add(task)
        session_id = relay_session_id()
        out: HandedOut | None = None
        stdin: _HandedIn | None = None
        agent_done = False
        try:
            first = await reader.readuntil(b"\n") if fds else None
            if first == STDIO_HANDOFF_LINE and len(fds) == 3:
                stdout_fd = fds.pop(0)  # whatever is left in `fds` is closed on the way out
                out = await _handed_out(writer, stdout_fd)
                stdin_fd, ledger_fd = fds
                fds = []
                stdin = _HandedIn(stdin_fd, ledger_fd, writer)
                out.ledger = stdin.ledger
            elif first == HANDOFF_LINE and len(fds) == 1:
                (stdout_fd,), fds = fds, []
                out = await _handed_out(writer, stdout_fd)
            elif fds:
                raise ConnectionError(f"a relay passed {len(fds)} fds with an unknown first line: {first!r:.80}")
            server = build_server(gateway, session_id=session_id)
            shortcut = DirectCalls.factory(gateway, session_id, server)
            if stdin is None:
                async with session_streams(reader, writer, shortcut=shortcut, out=out) as streams:
                    await server.run(*streams, server.create_initialization_options())
            else:
                assert out is not None
                agent_done = await stdin.serve(server, shortcut, out, reader)
        except asyncio.CancelledError:
            logger.debug("relayed session %s ended with the daemon", session_id)
        finally:
            sessions.discard(task)
            for fd in fds:
                os.close(fd)
            # The agent's stdin and stdout first: once the socket closes, the relay reads and writes them.
            if stdin is not None:
                stdin.close()
            if out is not None:
                out.give_up()
            if agent_done:
                _tell_relay(writer, {"mcphost-eof": True})
            # Here, every call the session took has ended, and is on record (cut short: as cancelled); a daemon that
            # dies never gets here, and the relay then records the reads it was owed.
            _tell_relay(writer, {"mcphost-recorded": True})
            writer.close()

    directory = ensure_private_dir(runtime_dir())
    name = discovery.agent_socket_name(os.getpid())
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


async def _handed_out(relay: asyncio.StreamWriter, fd: int) -> HandedOut:
    """The agent's stdout, passed by its relay (`fd`, closed here should anything fail), as the session's outbox."""
    pipe = os.fdopen(fd, "wb", buffering=0)
    try:
        agent = await write_pipe(pipe)
    except BaseException:
        pipe.close()
        raise
    return HandedOut(agent, relay)


class _HandedIn:
    """The agent's stdin, passed by its relay with its stdout and its ledger: the session reads the agent itself, and
    the relay sleeps until the daemon lets go (mcphost.serve.handoff)."""

    def __init__(self, stdin_fd: int, ledger_fd: int, relay: asyncio.StreamWriter) -> None:
        self.fd = stdin_fd
        self.ledger = Ledger(ledger_fd, lambda: _tell_relay(relay, {"mcphost-drain": True}))
        self.peeker: Peeker | None = None
        try:
            self.peeker = Peeker(stdin_fd)
        except OSError:
            self.close()
            raise

    async def serve(self, server: Any, shortcut: Any, out: HandedOut, relay: asyncio.StreamReader) -> bool:
        """Serve the agent until it closes its input and has every answer (True), or until the relay goes (False)."""
        assert self.peeker is not None
        agent = TappedReader(limit=MAX_LINE)
        pumping = asyncio.ensure_future(StdinPump(self.peeker, self.ledger, agent).run())
        agent_done = False
        # The relay writes nothing more after its first line: anything else is its end, a signal's doing (or a kill).
        # The session then ends as `mcphost mcp` ends at a signal: its calls cut short, and the agent, which still
        # reads the stdout held here, told why.
        relay_gone = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:

                async def watch_relay() -> None:
                    await relay.read()
                    relay_gone.set()

                tg.start_soon(watch_relay)
                async with session_streams(
                    agent, out.writer, relay_gone, shortcut=shortcut, out=out, answer_after_eof=True
                ) as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                agent_done = not relay_gone.is_set()
                tg.cancel_scope.cancel()
            return agent_done
        finally:
            # Never two readers on the agent's input: this one stops before the relay hears of it.
            pumping.cancel()
            with contextlib.suppress(BaseException):
                await pumping

    def close(self) -> None:
        if self.peeker is not None:
            self.peeker.close()
            self.peeker = None
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.ledger.close()


def _tell_relay(relay: asyncio.StreamWriter, note: dict[str, Any]) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        relay.write(dump_line(note))


# ---- the agent's stdout and stdin, handed over by its relay (mcphost.serve.handoff)

# The messages whose lines the relay keeps, to open the session again with another backend should the daemon go.
_HANDSHAKE = ("initialize", "notifications/initialized")


class HandedOut(Outbox):
    """The daemon's side: lines for the agent go to the agent's stdout (`agent`, handed over by the relay, with no
    write buffer to speak of), notes about them and the answers to the relay's own requests to the relay."""

    def __init__(self, agent: asyncio.StreamWriter, relay: asyncio.StreamWriter) -> None:
        super().__init__(agent)
        # With the agent's stdin handed over too: where answers are noted, waking nobody.
        self.ledger: Ledger | None = None
        # A drain then waits until everything is written: "answered" means in the pipe, "writing" reached the relay.
        agent.transport.set_write_buffer_limits(0)
        relay.transport.set_write_buffer_limits(0)
        self.relay = relay
        self._long = itertools.count()
        # Only a pipe takes a short line whole or not at all.
        pipe = agent.get_extra_info("pipe")
        self._whole = pipe is not None and stat.S_ISFIFO(os.fstat(pipe.fileno()).st_mode)

    async def put(self, line: bytes, answers: Any = NOT_AN_ANSWER, ok: bool = True) -> None:
        if is_private(answers):
            await self._tell(line)
            return
        # A line may reach the pipe in pieces when it is long, or when it joins others waiting (the agent reads
        # slowly) and is written with them; on a socket (a Node agent's stdio), whenever it does not fit.
        cut = not self._whole or len(line) > PIPE_BUF or self.writer.transport.get_write_buffer_size() > 0
        long = next(self._long) if cut else None
        if long is not None:
            await self._note({"mcphost-writing": long})
        await super().put(line)
        if self.broken:
            return
        # What is noted once the line is out goes in one write: on a socket (a Node agent's stdio) every answer is
        # a line that may be cut, and two notes in two writes cost a call a system call more.
        after = [{"mcphost-written": long}] if long is not None else []
        if answers is not NOT_AN_ANSWER:
            after.append({"mcphost-answered": answers, "ok": ok})
        if after:
            await self._note(*after)

    async def _note(self, *notes: dict[str, Any]) -> None:
        """To the ledger, when there is one (it wakes nobody), else on the socket; in one write."""
        if self.ledger is not None:
            await self.ledger.note(*notes)
        else:
            await self._tell(b"".join(dump_line(note) for note in notes))

    async def _tell(self, line: bytes) -> None:
        self.relay.write(line)
        with contextlib.suppress(ConnectionError):
            await self.relay.drain()

    def give_up(self) -> None:
        """Close the agent's stdout here at once, whatever is still unwritten: the relay writes next."""
        transport = self.writer.transport
        # Closed already (the agent stopped reading): asyncio's abort of a closed pipe raises, which cut short the
        # session's cleanup after it.
        if not transport.is_closing():
            transport.abort()


def _taken(lines: list[bytes]) -> tuple[list[list[Any]], list[str]]:
    """The requests among `lines` ([id, method] each: the answers the agent will wait for) and the handshake's lines
    as text. A line the daemon cannot read is a request too when it will be answered with an error under an id."""
    take: list[list[Any]] = []
    raw: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        too_long = len(line) > MAX_LINE
        message: Any = None
        if not too_long:
            try:
                message = loads_exact(line)
            except (ValueError, RecursionError):
                message = None
        if isinstance(message, dict):
            method, request_id = message.get("method"), message.get("id")
            if isinstance(method, str) and ("id" not in message or valid_id(request_id)):
                if "id" in message:
                    read = owed_read(message) if method == "tools/call" else None
                    take.append([request_id, method] if read is None else [request_id, method, read])
                if method in _HANDSHAKE:
                    raw.append(line.decode("utf-8"))
                continue
            if method is None and ("result" in message or "error" in message):
                continue  # a response of the agent's, answered by nobody
        # What the daemon answers with an error, under the id it finds (as its own reading of the line does).
        answer = parse_line(line[:MAX_LINE] if too_long else line, too_long, quiet=True)
        if isinstance(answer, bytes):
            take.append([rejected_id(answer), "request"])
    return take, raw


# How much of a piece is looked at to choose its encoding.
_PIECE_SAMPLE = 4096
_ESCAPED = bytes(range(0x20)) + b'"\\'  # what a JSON string holds escaped: control characters, quotes, backslashes
_HIGH = bytes(range(0x80, 0x100))


def _piece(chunk: bytes) -> dict[str, str]:
    """A piece's bytes for its note, exact either way: as latin-1 text (each byte the code point of the same number),
    or in base64, whichever orjson writes sooner going by the piece's first 4 KiB. Measured over 256 KiB pieces:
    base64 costs 0.7 ns a byte whatever they are; latin-1 0.1 ns a byte, plus about 5 ns for each byte JSON escapes
    (a quote, a backslash, a control character) and 8 ns for each one past ASCII among ASCII ones. So source code
    and prose go as text (a piece of code: 25-55 against 185-245 µs to note, and less for the relay to read); JSON
    text inside JSON, escapes every few bytes (23%: 325 against 183 µs), or text with one accented letter in ten, in
    base64."""
    sample = chunk[:_PIECE_SAMPLE]
    escaped = len(sample) - len(sample.translate(None, _ESCAPED))
    high = len(sample) - len(sample.translate(None, _HIGH))
    if escaped * 5 + high * 8 < len(sample) * 0.6:
        return {"text": chunk.decode("latin-1")}
    return {"part": base64.b64encode(chunk).decode("ascii")}


class StdinPump:
    """The agent's input into `reader`, each chunk noted in the ledger before it is taken: should the daemon die
    anywhere in between, the relay knows every request it took (and, from the chunk's checksum, whether the last one
    noted was taken at all). Whole lines are taken as they come; a line that does not fit in what the stream holds
    is taken in pieces, each piece noted with its bytes (the relay puts them back in front of what it reads next).

    A chunk is looked at, noted and taken in the loop's own callback for the input being readable, as a transport
    reads: no task wakes for it. Only the end of the input, or a ledger too full to take the note, wakes `run`."""

    def __init__(self, peeker: Peeker, ledger: Ledger, reader: asyncio.StreamReader) -> None:
        self.peeker, self.ledger, self.reader = peeker, ledger, reader
        self._tail = bytearray()  # taken, the start of a line not yet whole: its request's id is read once it is

    def note_next(self) -> int | None:
        """Look at the input and note the chunk the next take takes: its length (-1: the input has ended), or None
        when there is nothing yet. The note may still be pending in the ledger (it is full)."""
        data = self.peeker.peek()
        if data is None:
            return None
        if not data:
            return -1
        end = data.rfind(b"\n")
        entry: dict[str, Any]
        if end >= 0:
            chunk = data[: end + 1]
            lines = chunk.split(b"\n")[:-1]
            if self._tail:
                lines[0] = bytes(self._tail) + lines[0]
                self._tail.clear()
            take, raw = _taken(lines)
            entry = {"chunk": len(chunk), "crc": zlib.crc32(chunk), "take": take}
            if raw:
                entry["raw"] = raw
        else:
            chunk = data
            entry = {"chunk": len(chunk), "crc": zlib.crc32(chunk), **_piece(chunk)}
            if len(self._tail) <= MAX_LINE:
                self._tail += chunk
        self.ledger.note_now(entry)
        return len(chunk)

    def take(self, length: int) -> None:
        self.reader.feed_data(self.peeker.take(length))

    async def run(self) -> None:
        """Until the input ends (then `reader` ends too)."""
        loop = asyncio.get_running_loop()
        while True:
            woken: asyncio.Future[int] = loop.create_future()

            def readable(woken: asyncio.Future[int] = woken) -> None:
                if woken.done():
                    return
                try:
                    length = self.note_next()
                    if length is not None and length >= 0 and not self.ledger.pending:
                        self.take(length)
                        return
                except Exception as exc:  # the relay's ledger gone, say: the session ends, not the loop's log
                    woken.set_exception(exc)
                    return
                if length is not None:
                    woken.set_result(length)

            loop.add_reader(self.peeker.fd, readable)
            try:
                readable()  # what the input holds already
                length = await woken
            finally:
                loop.remove_reader(self.peeker.fd)
            if length < 0:
                self.reader.feed_eof()
                return
            await self.ledger.flushed()
            self.take(length)
