"""`mcphost serve`: the daemon, with the agent's MCP endpoint on 127.0.0.1 behind a bearer token and the editor
channel on an owner-only local socket (and on stdin/stdout with --stdio, when an editor spawned it)."""

from __future__ import annotations

import argparse
import functools
import sys

import anyio

from mcphost.cli.common import load_or_exit
from mcphost.config import Config, ConfigError, LoadedConfig, load_config
from mcphost.demo.default import default_config
from mcphost.editor.hub import EditorHub
from mcphost.editor.listener import listening, serve_stdio
from mcphost.editor.protocol import McpEndpoint
from mcphost.host import Host
from mcphost.paths import UnsafeDirectory, private_runtime_dir
from mcphost.pipes import bind_loopback
from mcphost.serve.agent_socket import agent_socket
from mcphost.serve.http_app import MCP_PATH, Secrets
from mcphost.serve.http_server import serve_http


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: [daemon] port, 0 = any free)")
    p.add_argument(
        "--stdio",
        action="store_true",
        help="also speak the editor channel on stdin/stdout (for an editor that spawns the daemon); "
        "the daemon exits when the editor closes it",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    startup_error: ConfigError | None = None
    if args.stdio:
        # An editor spawned us: exiting would show the person one log line. Stay up with no upstream servers,
        # show the errors in the editor (diagnostics on the file), and pick the file up once it is fixed.
        try:
            loaded = load_config(args.config, default=default_config)
        except ConfigError as exc:
            startup_error = exc
            loaded = LoadedConfig(Config(), exc.file, exists=True)
    else:
        loaded = load_or_exit(args)
    try:
        # Before anything listens: the discovery file and the editor socket go there, and others must not swap them.
        private_runtime_dir()
    except UnsafeDirectory as exc:
        print(f"mcphost: {exc}", file=sys.stderr)
        return 1
    port = args.port if args.port is not None else loaded.config.daemon.port
    try:
        sock = bind_loopback(port)
    except OSError as exc:
        print(f"mcphost: cannot listen on 127.0.0.1:{port}: {exc.strerror}; pick another with --port", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    try:
        secrets_ = Secrets.for_daemon()
    except ValueError as exc:
        print(f"mcphost: {exc}", file=sys.stderr)
        return 1
    url = f"http://127.0.0.1:{port}{MCP_PATH}"

    async def main() -> None:
        async with Host(loaded, watch=True) as host:
            if startup_error is not None:
                host.reject(startup_error)
            hub = EditorHub(
                broker=host.broker,
                grants=host.grants,
                activity=host.activity,
                upstreams=host.upstreams,
                config=lambda: (host.loaded.path, host.config_error),
                endpoint=McpEndpoint(url=url, headers={"Authorization": f"Bearer {secrets_.agent_token}"}),
            )
            host.on_event(hub.host_changed)
            async with listening(hub) as editor_socket, agent_socket(host.gateway) as relay_socket:
                until = functools.partial(serve_stdio, hub) if args.stdio else None
                await serve_http(
                    host, sock, secrets_, url, editor_socket=editor_socket, agent_socket=relay_socket, until=until
                )

    anyio.run(main)
    return 0
