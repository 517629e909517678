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
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from mcphost.gateway.service import Gateway
from mcphost.paths import ensure_private_dir, runtime_dir
from mcphost.pipes import MAX_LINE, Peeker, TappedReader, dump_line, owner_only_fd_socket
from mcphost.serve.handoff import HANDOFF_LINE, STDIO_HANDOFF_LINE, HandedOut, Ledger, StdinPump
from mcphost.serve.mcp_server import DirectCalls, build_server
from mcphost.serve.stdio import session_streams

logger = logging.getLogger(__name__)

# A daemon that stops gives the sessions' calls in flight this long to be recorded as cancelled.
CLOSE_GRACE_S = 3.0


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
            writer.close()

    directory = ensure_private_dir(runtime_dir())
    name = f"daemon-{os.getpid()}.mcp.sock"
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
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    except BaseException:
        pipe.close()
        raise
    return HandedOut(asyncio.StreamWriter(transport, protocol, None, loop), relay)


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
        try:
            async with anyio.create_task_group() as tg:

                async def relay_gone() -> None:
                    # The relay writes nothing more after its first line: anything else is its end (or a signal).
                    await relay.read()
                    tg.cancel_scope.cancel()

                tg.start_soon(relay_gone)
                async with session_streams(agent, out.writer, shortcut=shortcut, out=out, answer_after_eof=True) as (
                    read,
                    write,
                ):
                    await server.run(read, write, server.create_initialization_options())
                agent_done = True
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
