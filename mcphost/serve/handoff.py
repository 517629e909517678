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

Here: what both ends agree on (the first lines, the notes, the ledger's writing and reading) and the relay's side of
the hand over. The daemon's side (the agent's stdout and stdin as it holds them) is in mcphost.serve.agent_socket.
Nothing here needs the MCP SDK, whose import is most of a Python MCP server's start (0.4 s): `mcphost mcp` hands its
agent over first, and imports the relay proper only if the daemon lets go.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import logging
import os
import stat
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from mcphost.activity.reader import loads_exact
from mcphost.intent import raw_intent
from mcphost.pipes import (
    MAX_LINE,
    STREAM_PIPE,
    Peeker,
    can_pass_fds,
    can_peek,
    connect_passing_fd,
    dump_line,
    id_key,
    until_ready,
    widen_pipe,
)

logger = logging.getLogger(__name__)

# The first line of a connection that hands over stdout (the fd rides on it); any other first line is MCP.
HANDOFF_LINE = b'{"mcphost-relay":"stdout"}\n'
# The first line of a connection that hands over stdout, stdin and the write end of the relay's ledger, in that order.
STDIO_HANDOFF_LINE = b'{"mcphost-relay":"stdio"}\n'
# The ids a relay gives the requests it makes of its own; their answers stay on the socket.
PRIVATE_ID_PREFIX = "mcphost-relay-"
# How long after the daemon notes something a relay whose daemon holds the agent's stdin reads its ledger (the
# daemon asks, should it fill before).
LEDGER_DRAIN_S = 1.0


def is_private(request_id: Any) -> bool:
    return isinstance(request_id, str) and request_id.startswith(PRIVATE_ID_PREFIX)


@dataclass(frozen=True, slots=True)
class Note:
    """What the daemon tells the relay of the agent's stdout: `answered` (a request's answer is in the pipe), or
    `writing` / `written` (a long line is under way, or done); with stdin handed over too, `eof` (the agent closed
    its input and every request was answered) and `drain` (the ledger is full: read it). On any session, `recorded`:
    the daemon ends the session with every call it took on record (a daemon that dies says nothing)."""

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
    if "mcphost-recorded" in body:
        return Note("recorded")
    return None


# A read has no start on record (a write's is written before it is forwarded): should the daemon die with a read in
# flight, the relay puts it on record, from what it kept of the call (never its arguments). As the gateway keeps what
# a refused call declared: text, and each part cut short.
_KEPT = 1000


def owed_read(message: dict[str, Any]) -> dict[str, Any] | None:
    """What of a `call_tool_read` request the relay keeps to put it on record should its daemon die mid-call: the
    tool's name and the declared intent. None for any other message."""
    params = message.get("params")
    if type(params) is not dict or params.get("name") != "call_tool_read":
        return None
    arguments = params.get("arguments")
    kept: dict[str, Any] = {}
    if type(arguments) is dict:
        name = arguments.get("name")
        if isinstance(name, str):
            kept["name"] = name[:_KEPT]
        intent = raw_intent(arguments)
        if isinstance(intent, dict):
            kept["intent"] = {
                key: (value if isinstance(value, str) else str(value))[:_KEPT]
                for key in ("operation_type", "data_sensitivity", "reason")
                if (value := intent.get(key)) is not None
            }
        elif intent is not None:
            kept["intent"] = {"raw": str(intent)[:_KEPT]}
    meta = params.get("_meta")
    info = meta.get(_CLIENT_INFO) if type(meta) is dict else None  # a 2026-era request names its client
    if type(info) is dict:
        kept["client"] = {key: str(info.get(key, ""))[:_KEPT] for key in ("name", "version")}
    return kept


_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"  # mcp_types.CLIENT_INFO_META_KEY, not imported: see the top


# ---- the agent's stdin handed over too: the ledger


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


_Owed = TypeVar("_Owed")


def owe(in_flight: dict[str, _Owed], twins: dict[str, list[_Owed]], key: str, request: _Owed) -> None:
    """`request` in flight under `key`, or in line behind the one there: MCP forbids an agent to send a request under
    an id still in flight, yet one that does has both served (as the SDK serves them), and each is owed its answer."""
    if key in in_flight:
        twins.setdefault(key, []).append(request)
    else:
        in_flight[key] = request


def settle(in_flight: dict[str, _Owed], twins: dict[str, list[_Owed]], key: str) -> _Owed | None:
    """The request an answer under `key` answers, no longer in flight; the next sent under that id takes its place."""
    request = in_flight.pop(key, None)
    waiting = twins.get(key)
    if waiting:
        in_flight[key] = waiting.pop(0)
        if not waiting:
            del twins[key]
    return request


def unowe(in_flight: dict[str, _Owed], twins: dict[str, list[_Owed]], key: str) -> None:
    """Forget the request last owed under `key` (it never reached whoever was to answer it)."""
    waiting = twins.get(key)
    if waiting:
        waiting.pop()
        if not waiting:
            del twins[key]
    else:
        in_flight.pop(key, None)


@dataclass
class LedgerFold:
    """The relay's reading of its ledger: the requests the daemon took and has not answered, the handshake, and the
    start of a line taken in pieces."""

    # By key: the id, the method, and for a read what `owed_read` keeps of it.
    in_flight: dict[str, tuple[Any, str, dict[str, Any] | None]] = field(default_factory=dict)
    # Requests taken under an id still in flight, in line behind the one in `in_flight` (the relay's `twins`).
    twins: dict[str, list[tuple[Any, str, dict[str, Any] | None]]] = field(default_factory=dict)
    initialize: str | None = None  # the agent's initialize, as sent
    initialize_ok: bool = False  # answered with a result
    initialized: str | None = None
    # The pieces of a line taken in pieces, as noted ("text": latin-1, "part": base64), made bytes only when the
    # relay needs the line (`partial`): on most sessions, never. As the daemon does, no more once they hold more than
    # MAX_LINE bytes: such a line is refused whatever follows (the relay, reading on, finds it too long all the same,
    # under the id at its start), and an agent's line that never ends must not fill the relay's memory.
    pieces: list[tuple[str, str]] = field(default_factory=list)
    held: int = 0  # the bytes in `pieces`
    cut: set[Any] = field(default_factory=set)  # long lines the daemon began on the agent's stdout and did not end
    # The last chunk noted, to be undone if it was never taken: (length, crc, its requests' keys, what it replaced:
    # the list of pieces and how many of them there were, the bytes they held, the handshake's two lines).
    last: tuple[int, int, list[str], tuple[list[tuple[str, str]], int, int, str | None, str | None]] | None = None
    _rest: bytes = b""

    @property
    def partial(self) -> bytes:
        """The start of a line taken in pieces, not yet whole (its first MAX_LINE bytes and some, when longer)."""
        return b"".join(
            value.encode("latin-1") if kind == "text" else base64.b64decode(value) for kind, value in self.pieces
        )

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
            taken = settle(self.in_flight, self.twins, id_key(entry["mcphost-answered"]))
            if taken is not None and taken[1] == "initialize":
                self.initialize_ok = entry.get("ok") is not False
            return
        if "mcphost-writing" in entry:
            self.cut.add(entry["mcphost-writing"])
            return
        if "mcphost-written" in entry:
            self.cut.discard(entry["mcphost-written"])
            return
        before = (self.pieces, len(self.pieces), self.held, self.initialize, self.initialized)
        keys: list[str] = []
        for request_id, method, *read in entry.get("take", []):
            key = id_key(request_id)
            keys.append(key)
            owe(self.in_flight, self.twins, key, (request_id, method, read[0] if read else None))
        for text in entry.get("raw", []):
            method = loads_exact(text.encode("utf-8")).get("method")
            if method == "initialize":
                self.initialize, self.initialize_ok = text, False
            else:
                self.initialized = text
        # A piece is added in place (`before` holds how many there were), a line's end starts a new list.
        if "text" in entry or "part" in entry:
            if self.held <= MAX_LINE:
                text = entry.get("text")
                if text is not None:
                    self.pieces.append(("text", text))
                    self.held += len(text)
                else:
                    part = entry["part"]
                    self.pieces.append(("part", part))
                    self.held += len(part) // 4 * 3 - part[-2:].count("=")
        else:
            self.pieces, self.held = [], 0
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
        for key in reversed(keys):
            unowe(self.in_flight, self.twins, key)
        pieces, count, self.held, self.initialize, self.initialized = before
        del pieces[count:]
        self.pieces = pieces
        self.last = None


# ---- the relay's side of the hand over: everything `mcphost mcp` runs before the daemon lets go of the agent. None
# of it needs the MCP SDK, whose import is most of a relay's start: the agent's first message waits for it no more.


@dataclass(frozen=True)
class Target:
    """A daemon to relay to, from its discovery file."""

    pid: int
    url: str
    socket: str | None
    handoff: bool = False  # takes the agent's stdout
    stdin: bool = False  # takes the agent's stdin as well

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> Target:
        relay = info.get("relay")
        socket = relay.get("socket") if isinstance(relay, dict) else None
        handoff = isinstance(relay, dict) and relay.get("handoff") is True
        stdin = handoff and isinstance(relay, dict) and relay.get("stdin") is True
        url = str(info["mcp"]["url"])
        return cls(int(info["pid"]), url, socket if isinstance(socket, str) else None, handoff, stdin)

    @property
    def name(self) -> str:
        return f"the daemon {self.pid} ({self.url})"


@dataclass
class LetGo:
    """What a daemon that held the agent's stdin and stdout left when it let go: `done` when the agent closed its
    input and had every answer; else the ledger (the requests owed, the handshake, a line begun, a line left
    unfinished on stdout)."""

    done: bool
    ledger: LedgerFold = field(default_factory=LedgerFold)
    recorded: bool = False  # the daemon said every call it took is on record


async def cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def hand_over_first(target: Target, stop: anyio.Event | None) -> LetGo | None:
    """When `target` takes the agent's stdin and stdout and they can be handed over: hand them over and sleep until it
    lets go. None when they were not handed over: the relay reads the agent itself."""
    if not (target.stdin and stdio_can_be_handed_over()):
        return None
    return await hand_over_stdio(target, stop)


def stdio_can_be_handed_over() -> bool:
    """The agent's stdin and stdout are pipes or sockets (a Node agent's are sockets), and the daemon can look into
    its stdin; never a tty or a file."""
    try:
        out = os.fstat(1).st_mode
        return can_pass_fds() and (stat.S_ISFIFO(out) or stat.S_ISSOCK(out)) and can_peek(0)
    except OSError:
        return False


async def hand_over_stdio(target: Target, stop: anyio.Event | None) -> LetGo | None:
    """Give the agent's stdin and stdout to `target`, which then serves the agent with no hop through this process;
    sleep until it lets go (the agent is done, the daemon stops or dies, or a signal ends the session). None when
    the daemon takes no connection: the relay reads the agent itself."""
    assert target.socket is not None
    ledger_r, ledger_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    widen_pipe(ledger_w)
    try:
        # As `claim_stdio` does: and a line that reaches the daemon in pieces is noted in the ledger piece by piece.
        widen_pipe(0, STREAM_PIPE)
        widen_pipe(1, STREAM_PIPE)
        reader, writer = await connect_passing_fd(target.socket, STDIO_HANDOFF_LINE, [1, 0, ledger_w])
    except OSError as exc:
        logger.debug("%s took no stdio: %s", target.name, exc)
        os.close(ledger_r)
        return None
    finally:
        os.close(ledger_w)
    let_go = LetGo(done=False)
    try:
        async with anyio.create_task_group() as tg:
            if stop is not None:
                tg.start_soon(cancel_on, stop, tg.cancel_scope)
            tg.start_soon(_drain_every, let_go.ledger, ledger_r)
            async for note in notes(reader):
                if note.kind == "drain":
                    let_go.ledger.drain(ledger_r)
                elif note.kind == "eof":
                    let_go.done = True
                elif note.kind == "recorded":
                    let_go.recorded = True
            tg.cancel_scope.cancel()
        if stop is not None and stop.is_set():
            let_go.done = True  # a signal ends the session at once; the daemon lets go when the socket closes
            return let_go
        let_go.ledger.drain(ledger_r)
        if not let_go.done:
            stdin = Peeker(0)
            try:
                let_go.ledger.untake_last(stdin)
            finally:
                stdin.close()
        return let_go
    finally:
        writer.close()
        os.close(ledger_r)


async def notes(reader: asyncio.StreamReader) -> AsyncIterator[Note]:
    """The daemon's notes on the socket, until it closes its end (what is not a note is skipped)."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return
        note = read_note(line)
        if note is not None:
            yield note


async def _drain_every(ledger: LedgerFold, fd: int) -> None:
    """Read the ledger a while after something was written to it, so that it never fills while the daemon serves (it
    asks when it does), and the relay sleeps while the agent is quiet: at most one read a second."""
    loop = asyncio.get_running_loop()
    while True:
        await until_ready(loop.add_reader, loop.remove_reader, fd)
        await anyio.sleep(LEDGER_DRAIN_S)
        ledger.drain(fd)
