"""`mcphost` with time stamps at the points of a tool call's way through it, for bench/bench_segments.py.

    python bench/segment_probes.py OUT_DIR mcp|serve ...   # any mcphost command line after OUT_DIR

Wraps the functions a call passes through (nothing else of mcphost changes), notes CLOCK_MONOTONIC nanoseconds (one
clock for every process on the machine, so the client's, the relay's and the daemon's stamps line up) with a name,
and writes them to OUT_DIR/stamps-<pid>.txt as "ns name" lines, in batches and at exit. Each stamp costs about a
microsecond: the bench reports the p50 with probes beside the one without.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_out: str = ""
_stamps: list[tuple[int, str]] = []


def stamp(name: str) -> None:
    _stamps.append((time.monotonic_ns(), name))
    if len(_stamps) >= 512:
        flush()


def flush() -> None:
    if not _stamps:
        return
    with (Path(_out) / f"stamps-{os.getpid()}.txt").open("a", encoding="ascii") as f:
        f.write("".join(f"{ns} {name}\n" for ns, name in _stamps))
    _stamps.clear()


def at_entry(owner: Any, attr: str, name: str) -> None:
    original: Callable[..., Any] = getattr(owner, attr)

    @functools.wraps(original)
    def entered(*args: Any, **kwargs: Any) -> Any:
        stamp(name)
        return original(*args, **kwargs)

    setattr(owner, attr, entered)


def after_return(owner: Any, attr: str, name: str) -> None:
    original: Callable[..., Any] = getattr(owner, attr)

    @functools.wraps(original)
    def returned(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        stamp(name)
        return result

    setattr(owner, attr, returned)


def after_await(owner: Any, attr: str, name: str) -> None:
    original: Callable[..., Any] = getattr(owner, attr)

    @functools.wraps(original)
    async def awaited(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        stamp(name)
        return result

    setattr(owner, attr, awaited)


def install() -> None:
    from mcphost import pipes
    from mcphost.activity.writer import ActivityLog
    from mcphost.approval.approvals import Approvals
    from mcphost.gateway import service
    from mcphost.gateway.service import Gateway
    from mcphost.serve import http_app, relay, stdio
    from mcphost.upstream.stdio import RawLane

    # The agent's line in hand: over stdio (and on the daemon's relay socket), or as an HTTP request. A session's
    # stdin reader may hand a line to the shortcut as it arrives, never to be read: it is in hand once fed.
    after_await(stdio, "_read_line", "line")
    at_entry(pipes.TappedReader, "feed_data", "line")
    # Over HTTP, the request's bytes reach uvicorn ("recv"), which parses them; the agents' door claims the call
    # ("claimed") and uvicorn starts the request's task, which answers it ("line"): "reply" once the answer is made,
    # "body" as its response leaves in one write.
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from mcphost.serve import http_server

    at_entry(HttpToolsProtocol, "data_received", "recv")
    after_return(http_app.AgentsDoor, "claim", "claimed")
    at_entry(http_server._AgentsHttp, "_answer", "line")
    after_await(http_app.CallShortcut, "answer", "reply")
    at_entry(http_server._OneWrite, "write_whole", "body")

    # The relay writes the line to the daemon (stamped before the write: the daemon may read it at once).
    at_entry(relay._DaemonBackend, "_forward_now", "passed")

    at_entry(Gateway, "call", "call")
    # The gateway's steps before the upstream sees the call (the names as the gateway's module holds them).
    after_return(service, "check_input", "checked")
    at_entry(Gateway, "_resolve", "resolving")
    after_await(Gateway, "_resolve", "resolved")
    at_entry(Approvals, "authorize", "authorizing")
    after_await(Approvals, "authorize", "authorized")
    at_entry(RawLane, "request", "forward")  # checked and decided: the call goes to the upstream
    after_await(RawLane, "request", "resumed")
    lane_take = RawLane.take

    def answered(self: Any, line: bytes) -> bool:
        taken = lane_take(self, line)
        if taken:
            stamp("answer")
        return taken

    RawLane.take = answered  # type: ignore[method-assign]
    at_entry(ActivityLog, "write", "record")
    sync_through = ActivityLog.sync_through

    def synced(self: Any, seq: int) -> bool:
        stamp("fsync")
        try:
            return sync_through(self, seq)
        finally:
            stamp("synced")

    ActivityLog.sync_through = synced  # type: ignore[method-assign]
    at_entry(stdio.Outbox, "put", "reply")


def main() -> None:
    global _out
    _out = sys.argv[1]
    sys.argv = ["mcphost", *sys.argv[2:]]
    install()
    atexit.register(flush)
    from mcphost.cli import main as mcphost_main

    sys.exit(mcphost_main())


if __name__ == "__main__":
    main()
