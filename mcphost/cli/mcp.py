"""`mcphost mcp`: serve one agent over stdio, for agents that spawn their MCP servers themselves.

With a daemon running for the same config, the session is relayed to it, so prompts reach the person's
editor; with none (or with --in-process), the gateway runs in this process.

The agent closing stdin is the normal end of a session, and nothing is said about it: the requests it sent before
are answered first (an agent may close its end right after its last request and then read), then the process
exits. SIGTERM, SIGINT and SIGHUP end it sooner: the session ends, the calls in flight are cancelled, and the Host
closes its upstream servers (one blocked in a call included) before the process exits, so none is left behind. A
second signal, or a shutdown that takes longer than SHUTDOWN_GRACE_S, exits at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from mcphost import discovery
from mcphost.cli.common import fail, freeze_startup_heap
from mcphost.paths import config_path

if TYPE_CHECKING:
    from pathlib import Path

    from mcp.server import Server

    from mcphost.config import LoadedConfig
    from mcphost.serve.handoff import Target
    from mcphost.serve.stdio import ShortcutFactory

SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Closing an upstream takes up to 6 s (stdin closed, 2 s; SIGTERM, 2 s; SIGKILL, 2 s): past this, something hangs.
SHUTDOWN_GRACE_S = 15.0


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run the gateway in this process even when a daemon is running (its prompts then reach no editor)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.in_process:
        path = config_path(getattr(args, "config", None))
        target = discovery.unless_stopped(
            discovery.for_config(path), "serving this agent in this process (its prompts reach no editor)"
        )
        if target is not None:
            from mcphost.serve.handoff import Target

            first = Target.from_info(target)
            print(f"mcphost: relaying to {first.name}", file=sys.stderr, flush=True)
            anyio.run(until_signalled, lambda stop: _relay(first, path, args, stop), "ending the session")
            return 0
    return _in_process(args)


async def _relay(first: Target, path: Path, args: argparse.Namespace, stop: anyio.Event) -> None:
    """Hand the agent's stdio to the daemon before anything else is imported: the agent's first message waits for
    that, not for the MCP SDK (most of a start). The relay proper, and the host behind it, only once the daemon lets
    go of the session, or when it cannot take it."""
    from mcphost.serve.handoff import hand_over_first

    taken = await hand_over_first(first, stop)
    if taken is not None and taken.done:
        return
    from mcphost.serve.relay import relay

    await relay(first, path, lambda: _local_server(args), stop, taken)


def _in_process(args: argparse.Namespace) -> int:
    from mcphost.config import ConfigError

    try:
        loaded = _load(args)
    except ConfigError as exc:
        fail(f"{exc}\nFix the file, or check it with `mcphost config validate`.")

    async def main(stop: anyio.Event) -> None:
        async with _local_server(args, loaded) as (server, shortcut):
            from mcphost.serve.stdio import serve_stdio

            async with serve_stdio(stop, shortcut, answer_after_eof=True) as (read, write):
                freeze_startup_heap()
                await server.run(read, write, server.create_initialization_options())

    anyio.run(until_signalled, main)
    return 0


def _load(args: argparse.Namespace) -> LoadedConfig:
    """The config in force; raises ConfigError. With no file, what `mcphost config init` writes, as for the
    daemon."""
    from mcphost.config import load_config
    from mcphost.config.starter import embedded_default

    return load_config(getattr(args, "config", None), default=embedded_default)


@asynccontextmanager
async def _local_server(
    args: argparse.Namespace, loaded: Any = None
) -> AsyncIterator[tuple[Server[Any], ShortcutFactory]]:
    """The gateway in this process: its Host (upstreams started, config followed), the agent's MCP server, and the
    shortcut its tool calls take past the server's dispatch.

    The upstreams' processes are spawned first, before the MCP SDK is imported: both starts are mostly imports,
    and on two CPUs they then overlap instead of adding up (the agent's first call comes some 0.3 s sooner)."""
    from mcphost.upstream.spawn import early_starts

    # A relay falling back here reports a config that does not load (ConfigError) instead of exiting.
    if loaded is None:
        loaded = _load(args)
    async with early_starts(loaded.config) as early:
        from mcphost.host import Host
        from mcphost.serve.mcp_server import DirectCalls, build_server, stdio_session_id

        session_id = stdio_session_id()
        async with Host(loaded, watch=True, early=early) as host:
            server = build_server(host.gateway, session_id=session_id)
            yield server, DirectCalls.factory(host.gateway, session_id, server)


async def until_signalled(
    main: Callable[[anyio.Event], Awaitable[None]], doing: str = "closing the upstream servers"
) -> None:
    """Run `main(stop)`; a shutdown signal sets `stop`, which ends the agent's input, so `main` returns through its
    own exits. Not by cancelling it: the Host must close its upstreams as it does at the end of any session.
    `doing` says what happens before the exit."""
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def on_signals() -> None:
            with anyio.open_signal_receiver(*SHUTDOWN_SIGNALS) as signals:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if stop.is_set():
                        _exit_now(f"{name} again: exiting at once", signum)
                    print(f"mcphost: {name}: {doing}, then exiting", file=sys.stderr, flush=True)
                    stop.set()
                    tg.start_soon(_deadline, signum)

        tg.start_soon(on_signals)
        await main(stop)
        tg.cancel_scope.cancel()


async def _deadline(signum: int) -> None:
    await anyio.sleep(SHUTDOWN_GRACE_S)
    _exit_now(f"still shutting down after {SHUTDOWN_GRACE_S:.0f} s: exiting at once", signum)


def _exit_now(why: str, signum: int) -> None:
    # The upstreams' own parent-death signal takes them down with us.
    print(f"mcphost: {why}", file=sys.stderr, flush=True)
    os._exit(128 + signum)
