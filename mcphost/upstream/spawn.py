"""Starting a stdio upstream's process, and stopping it with everything it started. Nothing here imports the MCP
SDK, so that `mcphost mcp` can spawn its upstreams before it imports the SDK (`EarlyStarts`): most of either start
is importing, and on two CPUs the two then overlap instead of adding up.

- The child can never outlive the host. It leads its own process group (the host's terminal signals do not reach
  it; closing stops the whole group) and, on Linux, gets SIGKILL when the host dies (PR_SET_PDEATHSIG), even by
  kill -9, when no cleanup of ours runs. The SDK's stdio_client cannot set that up: it spawns through
  anyio.open_process, which takes no preexec_fn.
- On close: stdin closes (the spec's shutdown), then SIGTERM to the group after a grace period, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from mcphost.pipes import STREAM_PIPE, linux_libc, widen_pipe

if TYPE_CHECKING:
    from mcphost.config.models import Config, ServerConfig

logger = logging.getLogger(__name__)

# Grace for the server to exit on its own once its stdin closes, then after SIGTERM (the SDK's timings).
EXIT_GRACE = 2.0
TERM_GRACE = 2.0
KILL_REAP = 2.0
_EXIT_POLL = 0.01
# The stream's buffer limit, as asyncio.create_subprocess_exec sets it.
_LIMIT = 2**16

# What a server inherits of the host's environment, besides its own `env`: the SDK's list for POSIX
# (`mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS`, which a test holds this to), here without importing the SDK.
INHERITED_ENV_VARS = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")

_PR_SET_PDEATHSIG = 1

# Looked up once, here: the child between fork and exec should do as little as it can.
_PRCTL: Callable[..., int] | None = linux_libc(
    "prctl", [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong], ctypes.c_int
)


def _die_with_parent() -> Callable[[], None] | None:
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The host may have died between fork and prctl: then no signal will ever come.
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def default_environment() -> dict[str, str]:
    """The host's variables a server inherits, as the SDK's `get_default_environment` picks them: a value that is a
    shell function (`() {...`) is left out."""
    picked = ((key, os.environ.get(key)) for key in INHERITED_ENV_VARS)
    return {key: value for key, value in picked if value is not None and not value.startswith("()")}


def own_env(config: ServerConfig) -> dict[str, str]:
    """The variables mcphost sets for a server: its `env`, and the data dir mcphost runs with, unless it names one
    (mcphost's own servers, the demo todo server, keep their data where the host keeps its own)."""
    env = dict(config.env)
    if "MCPHOST_DATA_DIR" in os.environ:
        env.setdefault("MCPHOST_DATA_DIR", os.environ["MCPHOST_DATA_DIR"])
    return env


@dataclass(frozen=True, slots=True)
class Launch:
    """How a stdio server's process is started: two equal launches start the same process."""

    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]  # the whole environment it gets
    cwd: str | None

    @classmethod
    def of(cls, config: ServerConfig) -> Launch | None:
        """`config`'s launch, None for a server that is not started as a process (streamable HTTP)."""
        if config.command is None:
            return None
        return cls(config.command, tuple(config.args), default_environment() | own_env(config), config.cwd)


class TappedProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a subprocess's pipes, keeping the count a tap on stdout (`stdio._StdoutPipe`) goes
    by: `fed`, the bytes that reached the stream the reader reads, `taken`, those its reader took; `busy`, the reader
    is at work on what it took (then a line that arrives now waits its turn behind those)."""

    fed = 0
    taken = 0
    busy = True
    exited = False  # the process has exited; its pipes may stay open (a child of its holding them)
    on_exit: Callable[[], None] | None = None

    def process_exited(self) -> None:
        self.exited = True
        super().process_exited()
        if self.on_exit is not None:
            self.on_exit()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        # What came before the stdout pipe had `_StdoutPipe` in front of it, and any other pipe's output.
        if fd == 1:
            self.fed += len(data)
        super().pipe_data_received(fd, data)


@dataclass(frozen=True, slots=True)
class Spawned:
    """A server's live process, its pipes as asyncio holds them, and their protocol."""

    pipes: asyncio.SubprocessTransport
    tapped: TappedProtocol
    process: asyncio.subprocess.Process


async def spawn(launch: Launch) -> Spawned:
    """Start the server's process: what asyncio.create_subprocess_exec does, with a protocol that can take a lane's
    answer as it arrives, in a group of its own, and with wider pipes."""
    loop = asyncio.get_running_loop()
    pipes, tapped = await loop.subprocess_exec(
        lambda: TappedProtocol(limit=_LIMIT, loop=loop),
        launch.command,
        *launch.args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(launch.env),
        cwd=launch.cwd,
        start_new_session=True,
        preexec_fn=_die_with_parent(),
    )
    process = asyncio.subprocess.Process(pipes, tapped, loop)
    # A call or an answer past what a pipe holds (64 KiB unwidened) crossed it in pieces: a wake-up and a read each.
    for fd in (0, 1):
        transport = pipes.get_pipe_transport(fd)
        pipe = transport.get_extra_info("pipe") if transport is not None else None
        # A server that exits at once (a wrong argument, a missing variable) may have had its pipes closed by now.
        if pipe is not None and not pipe.closed:
            widen_pipe(pipe.fileno(), STREAM_PIPE)
    return Spawned(pipes, tapped, process)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _wait(done: Callable[[], bool], limit_s: float) -> bool:
    """Poll `done` for at most `limit_s` seconds: the end of a process group has no event to wait on (and
    asyncio's Process.wait() also waits for the pipes, which a surviving grandchild may hold)."""
    with anyio.move_on_after(limit_s):
        while not done():  # noqa: ASYNC110
            await anyio.sleep(_EXIT_POLL)
    return done()


async def stop_process_group(process: asyncio.subprocess.Process) -> bool:
    """Stop the server and every process of its group: stdin closed, then SIGTERM, then SIGKILL. Bounded. Whether
    the server itself had to be signalled (it did not exit once its input closed)."""
    pgid = process.pid  # it leads its own group (start_new_session)
    if process.stdin is not None:
        process.stdin.close()

    def exited() -> bool:
        return process.returncode is not None

    def all_gone() -> bool:
        return exited() and not _group_alive(pgid)

    signalled = not await _wait(exited, EXIT_GRACE)
    if signalled or _group_alive(pgid):
        # Also when the server itself left: what it started in its group goes with it.
        _signal_group(pgid, signal.SIGTERM)
        if not await _wait(all_gone, TERM_GRACE):
            _signal_group(pgid, signal.SIGKILL)
            if not await _wait(exited, KILL_REAP):
                logger.warning("upstream process %d is still alive after SIGKILL; abandoning it", process.pid)
    return signalled


async def stop(spawned: Spawned) -> None:
    """`stop_process_group`, then the pipes closed (else they stay open, and warn at collection, while a survivor
    holds one)."""
    await stop_process_group(spawned.process)
    spawned.pipes.close()


class EarlyStarts:
    """Upstream processes spawned before the host that talks to them is up. Each is handed once, to the first
    connection that would start the very same process (`take`); one that no connection took (a reload changed its
    server before its connection began) is stopped with the host (`stop_left`).

    A server that cannot be spawned here is left to its connection, which spawns it again and reports why not."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[Launch, Spawned]] = {}

    async def start(self, servers: Mapping[str, ServerConfig]) -> None:
        """Spawn the stdio servers of `servers` (name -> the config each is launched with), one after the other:
        a spawn returns once the child is exec'd, and what takes time is the child's own start."""
        for name, config in servers.items():
            launch = Launch.of(config)
            if launch is None:
                continue
            try:
                self._waiting[name] = (launch, await spawn(launch))
            except Exception as exc:  # whatever it is, the connection's own spawn meets it again and reports it
                logger.debug("upstream %s not started early: %s", name, exc)

    def take(self, name: str, launch: Launch) -> Spawned | None:
        """The process spawned early for server `name`, if it was spawned as `launch` says; once."""
        waiting = self._waiting.get(name)
        if waiting is None or waiting[0] != launch:
            return None
        del self._waiting[name]
        return waiting[1]

    @property
    def waiting(self) -> list[str]:
        return list(self._waiting)

    async def stop_left(self) -> None:
        """Stop every process no connection took."""
        left = [spawned for _, spawned in self._waiting.values()]
        self._waiting.clear()
        with anyio.CancelScope(shield=True):
            for spawned in left:
                await stop(spawned)


@asynccontextmanager
async def early_starts(config: Config, only: list[str] | None = None) -> AsyncIterator[EarlyStarts]:
    """Every enabled stdio server of `config` (of those named in `only`, when given) spawned now, as a host started
    on it launches them, for that host's connections to take (`Host(..., early=)`); what none took is stopped on the
    way out."""
    from mcphost.config.models import launch_spec

    early = EarlyStarts()
    servers = config.enabled_servers()
    try:
        await early.start({name: launch_spec(server) for name, server in servers.items() if not only or name in only})
        yield early
    finally:
        await early.stop_left()
