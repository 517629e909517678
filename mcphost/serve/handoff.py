"""A relay hands its agent's stdout to the daemon: what both ends of the agent socket agree on.

Without it, each answer crosses two processes on its way back (the daemon writes it to the relay, the relay to the
agent): a wake-up, a read and a write more per call. A relay whose stdout is a pipe passes a duplicate of it along
with its connection's first line (SCM_RIGHTS); the daemon then writes the agent's answers (and its own requests to
the agent) straight to the agent, and tells the relay on the socket which requests are answered.

One writer at a time: from the handing over until the session ends, only the daemon writes to the agent's stdout.
The relay forwards every line the agent sends, even one it cannot read (the daemon answers that too), and writes
nothing itself. The daemon gives the pipe up before it ends the session; a daemon that dies gives it up with its
life. Only then does the relay write again: the answers still owed (the requests it forwarded whose answer it was
not told of) get the daemon's death as their error, as before.

The daemon reports a line for the agent only once it is wholly in the pipe (its write buffer holds nothing back,
so a drain means written). A line that may reach the pipe in pieces (longer than PIPE_BUF, or joining others
waiting to be written) is announced before it is written: should the daemon die in between, the relay starts its
own lines on a fresh line. The answers to the relay's private requests (a handshake replayed to a new daemon) come
back on the socket, as they always did.

A relay may hand over the agent's stdin as well, with the write end of its ledger (STDIO_HANDOFF_LINE). The daemon
then reads the agent itself and the relay sleeps. Each chunk of the agent's input is looked at first (tee(2) on a
pipe, MSG_PEEK on a socket), noted in the ledger (the requests it holds, its length and checksum, the handshake's
lines, or the bytes of a line that does not fit), and only then taken; answers are noted there too. The ledger is a
pipe: noting wakes nobody, and what is noted outlives the daemon. When the daemon lets go, the relay reads it whole:
a request noted and not answered is owed the daemon's going; a last chunk still at the head of the agent's input was
never taken, and is the relay's to read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import itertools
import os
import select
import stat
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcphost.activity.reader import loads_exact
from mcphost.pipes import MAX_LINE, Peeker, dump_line, until_ready
from mcphost.serve.stdio import NOT_AN_ANSWER, Outbox, id_key, parse_line, rejected_id, valid_id

# The first line of a connection that hands over stdout (the fd rides on it); any other first line is MCP.
HANDOFF_LINE = b'{"mcphost-relay":"stdout"}\n'
# The first line of a connection that hands over stdout, stdin and the write end of the relay's ledger, in that order.
STDIO_HANDOFF_LINE = b'{"mcphost-relay":"stdio"}\n'
# The ids a relay gives the requests it makes of its own; their answers stay on the socket.
PRIVATE_ID_PREFIX = "mcphost-relay-"
# Writes up to this size reach a pipe whole or not at all.
PIPE_BUF = getattr(select, "PIPE_BUF", 512)


def is_private(request_id: Any) -> bool:
    return isinstance(request_id, str) and request_id.startswith(PRIVATE_ID_PREFIX)


@dataclass(frozen=True, slots=True)
class Note:
    """What the daemon tells the relay of the agent's stdout: `answered` (a request's answer is in the pipe), or
    `writing` / `written` (a long line is under way, or done); with stdin handed over too, `eof` (the agent closed
    its input and every request was answered) and `drain` (the ledger is full: read it)."""

    kind: str
    value: Any = None
    ok: bool = True


def read_note(line: bytes) -> Note | None:
    """`line` from the daemon as a Note, or None for a JSON-RPC message."""
    if not line.startswith(b'{"mcphost-'):
        return None
    try:
        body = loads_exact(line)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    if "mcphost-answered" in body:
        return Note("answered", body["mcphost-answered"], body.get("ok") is not False)
    if "mcphost-writing" in body:
        return Note("writing", body["mcphost-writing"])
    if "mcphost-written" in body:
        return Note("written", body["mcphost-written"])
    if "mcphost-eof" in body:
        return Note("eof")
    if "mcphost-drain" in body:
        return Note("drain")
    return None


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
        self.writer.transport.abort()


# ---- the agent's stdin handed over too: the ledger

# The messages whose lines the relay keeps, to open the session again with another backend should the daemon go.
_HANDSHAKE = ("initialize", "notifications/initialized")


class Ledger:
    """The daemon's side of the relay's ledger: a pipe the relay made and reads only when it must (the daemon has let
    go of the agent, or asks it to), so that noting costs a write and wakes nobody. What is noted before it is done
    (a chunk of the agent's input before it is taken) is there for the relay even if the daemon dies right after:
    data in a pipe outlives its writer."""

    def __init__(self, fd: int, ask_to_drain: Callable[[], None]) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self._ask_to_drain = ask_to_drain
        self._backlog = bytearray()

    async def note(self, *entries: dict[str, Any]) -> None:
        """Until `entries` are in the pipe, written together."""
        for entry in entries:
            self._backlog += dump_line(entry)
        await self.flushed()

    def note_now(self, entry: dict[str, Any]) -> None:
        """Write `entry` now, as far as the pipe takes it; the rest is `pending` until `flushed`."""
        self._backlog += dump_line(entry)
        self._write()

    @property
    def pending(self) -> bool:
        return bool(self._backlog)

    async def flushed(self) -> None:
        """Until everything noted is in the pipe."""
        loop: asyncio.AbstractEventLoop | None = None
        while self._write():
            # Full: the relay reads it when asked; the agent's input waits meanwhile.
            self._ask_to_drain()
            loop = loop or asyncio.get_running_loop()
            await until_ready(loop.add_writer, loop.remove_writer, self.fd)

    def _write(self) -> bool:
        """Write what is pending; whether some is left."""
        if self._backlog:
            try:
                written = os.write(self.fd, self._backlog)
            except BlockingIOError:
                written = 0
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    raise ConnectionError("the relay's ledger is closed") from None
                raise
            del self._backlog[:written]
        return bool(self._backlog)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


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
                    take.append([request_id, method])
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
            entry = {"chunk": len(chunk), "crc": zlib.crc32(chunk), "part": base64.b64encode(chunk).decode("ascii")}
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


@dataclass
class LedgerFold:
    """The relay's reading of its ledger: the requests the daemon took and has not answered, the handshake, and the
    start of a line taken in pieces."""

    in_flight: dict[str, tuple[Any, str]] = field(default_factory=dict)
    initialize: str | None = None  # the agent's initialize, as sent
    initialize_ok: bool = False  # answered with a result
    initialized: str | None = None
    partial: bytearray = field(default_factory=bytearray)
    cut: set[Any] = field(default_factory=set)  # long lines the daemon began on the agent's stdout and did not end
    # The last chunk noted, to be undone if it was never taken: (length, crc, its requests' keys, what it replaced).
    last: tuple[int, int, list[str], tuple[bytes, str | None, str | None]] | None = None
    _rest: bytes = b""

    def drain(self, fd: int) -> None:
        """Read what the ledger holds now."""
        while True:
            try:
                data = os.read(fd, 1 << 20)
            except BlockingIOError:
                return
            if not data:
                return
            lines = (self._rest + data).split(b"\n")
            self._rest = lines.pop()
            for line in lines:
                self.apply(loads_exact(line))

    def apply(self, entry: dict[str, Any]) -> None:
        if "mcphost-answered" in entry:
            taken = self.in_flight.pop(id_key(entry["mcphost-answered"]), None)
            if taken is not None and taken[1] == "initialize":
                self.initialize_ok = entry.get("ok") is not False
            return
        if "mcphost-writing" in entry:
            self.cut.add(entry["mcphost-writing"])
            return
        if "mcphost-written" in entry:
            self.cut.discard(entry["mcphost-written"])
            return
        before = (bytes(self.partial), self.initialize, self.initialized)
        keys: list[str] = []
        for request_id, method in entry.get("take", []):
            keys.append(id_key(request_id))
            self.in_flight[keys[-1]] = (request_id, method)
        for text in entry.get("raw", []):
            method = loads_exact(text.encode("utf-8")).get("method")
            if method == "initialize":
                self.initialize, self.initialize_ok = text, False
            else:
                self.initialized = text
        if "part" in entry:
            self.partial += base64.b64decode(entry["part"])
        else:
            self.partial.clear()
        self.last = (entry["chunk"], entry["crc"], keys, before)

    def untake_last(self, stdin: Peeker) -> None:
        """The daemon may have died between noting its last chunk and taking it: if the agent's input still starts
        with that chunk, it was never taken, and the relay reads it as its own."""
        if self.last is None:
            return
        length, crc, keys, before = self.last
        ahead = stdin.peek() or b""
        if len(ahead) < length or zlib.crc32(ahead[:length]) != crc:
            return
        for key in keys:
            self.in_flight.pop(key, None)
        partial, self.initialize, self.initialized = before
        self.partial = bytearray(partial)
        self.last = None
