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
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import select
from dataclasses import dataclass
from typing import Any

import orjson

from mcphost.serve.stdio import NOT_AN_ANSWER, Outbox, dump_line

# The first line of a connection that hands over stdout (the fd rides on it); any other first line is MCP.
HANDOFF_LINE = b'{"mcphost-relay":"stdout"}\n'
# The ids a relay gives the requests it makes of its own; their answers stay on the socket.
PRIVATE_ID_PREFIX = "mcphost-relay-"
# Writes up to this size reach a pipe whole or not at all.
PIPE_BUF = getattr(select, "PIPE_BUF", 512)


def is_private(request_id: Any) -> bool:
    return isinstance(request_id, str) and request_id.startswith(PRIVATE_ID_PREFIX)


@dataclass(frozen=True, slots=True)
class Note:
    """What the daemon tells the relay of the agent's stdout: `answered` (a request's answer is in the pipe), or
    `writing` / `written` (a long line is under way, or done)."""

    kind: str
    value: Any = None
    ok: bool = True


def read_note(line: bytes) -> Note | None:
    """`line` from the daemon as a Note, or None for a JSON-RPC message."""
    if not line.startswith(b'{"mcphost-'):
        return None
    try:
        body = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            body = json.loads(line)  # an id holding a lone surrogate, escaped by dump_line
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
    return None


class HandedOut(Outbox):
    """The daemon's side: lines for the agent go to the agent's stdout (`agent`, handed over by the relay, with no
    write buffer to speak of), notes about them and the answers to the relay's own requests to the relay."""

    def __init__(self, agent: asyncio.StreamWriter, relay: asyncio.StreamWriter) -> None:
        super().__init__(agent)
        # A drain then waits until everything is written: "answered" means in the pipe, "writing" reached the relay.
        agent.transport.set_write_buffer_limits(0)
        relay.transport.set_write_buffer_limits(0)
        self.relay = relay
        self._long = itertools.count()

    async def put(self, line: bytes, answers: Any = NOT_AN_ANSWER, ok: bool = True) -> None:
        if is_private(answers):
            await self._tell(line)
            return
        # A line may reach the pipe in pieces when it is long, or when it joins others waiting (the agent reads
        # slowly) and is written with them.
        cut = len(line) > PIPE_BUF or self.writer.transport.get_write_buffer_size() > 0
        long = next(self._long) if cut else None
        if long is not None:
            await self._tell(dump_line({"mcphost-writing": long}))
        await super().put(line)
        if self.broken:
            return
        if long is not None:
            await self._tell(dump_line({"mcphost-written": long}))
        if answers is not NOT_AN_ANSWER:
            await self._tell(dump_line({"mcphost-answered": answers, "ok": ok}))

    async def _tell(self, line: bytes) -> None:
        self.relay.write(line)
        with contextlib.suppress(ConnectionError):
            await self.relay.drain()

    def give_up(self) -> None:
        """Close the agent's stdout here at once, whatever is still unwritten: the relay writes next."""
        self.writer.transport.abort()
