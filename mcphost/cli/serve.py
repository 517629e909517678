"""`mcphost serve`: the daemon, with the agent's MCP endpoint on 127.0.0.1 behind a bearer token."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

import anyio
import uvicorn

from mcphost import discovery
from mcphost.cli.common import load_or_exit
from mcphost.daemon import Host
from mcphost.gateway.http_app import MCP_PATH, build_http_app
from mcphost.gateway.mcp_server import build_server


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT after shutdown, which would skip our cleanup (discovery file, upstreams)."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser("serve", parents=[parent], help="run the daemon: agent MCP endpoint over HTTP on 127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: [daemon] port, 0 = any free)")
    p.set_defaults(func=run)


def bind_loopback(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def run(args: argparse.Namespace) -> int:
    loaded = load_or_exit(args)
    port = args.port if args.port is not None else loaded.config.daemon.port
    try:
        sock = bind_loopback(port)
    except OSError as exc:
        print(f"mcphost: cannot listen on 127.0.0.1:{port}: {exc.strerror}; pick another with --port", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    # A fixed token lets a person pin it in an agent's config; by default every daemon gets a fresh one.
    token = os.environ.get("MCPHOST_TOKEN") or secrets.token_urlsafe(32)
    url = f"http://127.0.0.1:{port}{MCP_PATH}"

    async def main() -> None:
        async with Host(loaded) as host:
            app = build_http_app(build_server(host.gateway), token, port)
            server = _Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
            # A signal that lands before uvicorn installs its own handlers must still end us through cleanup.
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, server.handle_exit)
            announced: list[Path] = []

            async def announce_when_listening() -> None:
                # The discovery file promises a working endpoint, so it appears only once uvicorn has started.
                while not server.started:
                    if server.should_exit:
                        return
                    await anyio.sleep(0.01)
                announced.append(discovery.write(url=url, token=token, config_path=str(loaded.path)))
                print(f"mcphost: agent endpoint {url}", file=sys.stderr)
                print(f"mcphost: bearer token in {announced[0]}", file=sys.stderr, flush=True)

            async with anyio.create_task_group() as tg:
                tg.start_soon(announce_when_listening)
                try:
                    await server.serve(sockets=[sock])
                finally:
                    tg.cancel_scope.cancel()
                    for path in announced:
                        discovery.remove(path)

    anyio.run(main)
    return 0
