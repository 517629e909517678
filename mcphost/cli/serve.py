"""`mcphost serve`: the daemon, with the agent's MCP endpoint on 127.0.0.1 behind a bearer token and the editor
channel on an owner-only local socket (and on stdin/stdout with --stdio, when an editor spawned it).

One daemon per config file: a second `mcphost serve` for the same file says which daemon serves it and exits with
EXIT_ANOTHER_DAEMON, unless started with --allow-second. Two daemons would split the agents: `mcphost approve`,
`call` and `mcp` go to the newer one, so agents relayed to the other get NO_APPROVER with a terminal attached.
An editor that spawns `serve --stdio` per window gets the same refusal in its second window: it is to attach that
window to the running daemon's editor socket (named in the message, and in the daemon's discovery file).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio

from mcphost import discovery
from mcphost.cli.common import fail, freeze_startup_heap
from mcphost.config import Config, ConfigError, LoadedConfig, load_config
from mcphost.config.starter import embedded_default
from mcphost.paths import UnsafeDirectory, private_runtime_dir
from mcphost.pipes import bind_loopback, quiet_accept_failures, raise_fd_limit
from mcphost.serve.tokens import Secrets
from mcphost.upstream.spawn import early_starts

# Another daemon serves the same config file: not a failure of this one, so not 1 (an editor can tell it apart).
EXIT_ANOTHER_DAEMON = 3


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: [daemon] port, 0 = any free)")
    p.add_argument(
        "--stdio",
        action="store_true",
        help="also speak the editor channel on stdin/stdout (for an editor that spawns the daemon); "
        "the daemon exits when the editor closes it",
    )
    p.add_argument(
        "--allow-second",
        action="store_true",
        help="start even when another daemon serves the same config file. Without it, a second daemon says which "
        f"one runs and exits with status {EXIT_ANOTHER_DAEMON}: `mcphost approve`, `call` and `mcp` go to the "
        "newer of two, so agents of the other would find no approver",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    startup_error: ConfigError | None = None
    try:
        loaded = load_config(args.config, default=embedded_default)
    except ConfigError as exc:
        if not args.stdio:
            fail(f"{exc}\nFix the file, or check it with `mcphost config validate`.")
        # An editor spawned us: exiting would show the person one log line. Stay up with no upstream servers,
        # show the errors in the editor (diagnostics on the file), and pick the file up once it is fixed.
        startup_error = exc
        loaded = LoadedConfig(Config(), exc.file, exists=True)
    try:
        # Before anything listens: the discovery file and the editor socket go there, and others must not swap them.
        private_runtime_dir()
        # Held until this process ends; the kernel lets go of it however it ends.
        claim = discovery.claim(loaded.path)
    except UnsafeDirectory as exc:
        print(f"mcphost: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mcphost: cannot claim {loaded.path} in the runtime dir: {exc.strerror or exc}", file=sys.stderr)
        return 1
    others = discovery.serving(discovery.running(), loaded.path)
    if claim is None or others:
        other, pid = _describe_other(loaded.path, others)
        if not args.allow_second:
            print(_refusal(other, pid), file=sys.stderr, flush=True)
            return EXIT_ANOTHER_DAEMON
        print(
            f"mcphost: {other}; starting a second daemon anyway (--allow-second): `mcphost approve`, `call` and "
            "`mcp` go to the newest",
            file=sys.stderr,
            flush=True,
        )
    print(f"mcphost: {config_line(loaded, args.config)}", file=sys.stderr, flush=True)
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

    raise_fd_limit()

    async def main() -> None:
        quiet_accept_failures(asyncio.get_running_loop())
        # The upstreams first: their start and the import of everything below (the MCP SDK, the web stack, the
        # editor's protocol) are both mostly imports, and on two CPUs they overlap instead of adding up.
        async with early_starts(loaded.config) as early:
            from mcphost.config.show import shown_config
            from mcphost.editor.hub import EditorHub
            from mcphost.editor.listener import listening, serve_stdio
            from mcphost.editor.protocol import McpEndpoint
            from mcphost.host import Host
            from mcphost.serve.agent_socket import agent_socket
            from mcphost.serve.http_app import MCP_PATH
            from mcphost.serve.http_server import serve_http

            url = f"http://127.0.0.1:{port}{MCP_PATH}"
            # Compiled before anything listens (thousands of rules take seconds), not at the first call.
            loaded.config.compiled_rules  # noqa: B018
            async with Host(loaded, watch=True, early=early) as host:
                if startup_error is not None:
                    host.reject(startup_error)
                hub = EditorHub(
                    broker=host.broker,
                    grants=host.grants,
                    activity=host.activity,
                    upstreams=host.upstreams,
                    config=lambda: (host.loaded.path, host.config_error),
                    endpoint=McpEndpoint(url=url, headers={"Authorization": f"Bearer {secrets_.agent_token}"}),
                    hooks=host.hooks,
                    export=host.export_status,
                    shown_config=lambda: shown_config(host.loaded),
                )
                host.on_event(hub.host_changed)
                async with listening(hub) as editor_socket, agent_socket(host.gateway) as relay_socket:
                    until = functools.partial(serve_stdio, hub) if args.stdio else None
                    freeze_startup_heap()
                    await serve_http(
                        host, sock, secrets_, url, editor_socket=editor_socket, agent_socket=relay_socket, until=until
                    )

    anyio.run(main)
    return 0


def config_line(loaded: LoadedConfig, given: str | None) -> str:
    """Which config is in force, for the banner: a path names a file only when there is one."""
    if loaded.exists:
        return f"config {loaded.path}"
    init = "mcphost config init" + (f" {shlex.quote(str(loaded.path))}" if given else "")
    return f"no config file at {loaded.path}; the built-in default is in force; `{init}` writes it"


def _describe_other(path: Path, others: list[dict[str, Any]]) -> tuple[str, int | None]:
    """The daemon that has `path` already, in a sentence, and its pid when known."""
    holder = discovery.claimant(path)
    if not others:
        # It holds the claim but has not announced itself: it is starting (or stuck before its endpoint listens).
        who = f"`mcphost serve` (pid {holder})" if holder is not None else "`mcphost serve`"
        return f"another {who} is starting for {path}", holder
    info = next((d for d in others if d.get("pid") == holder), others[-1])
    described = f"pid {info['pid']}, since {info.get('started_at', '?')}, agents at {info['mcp']['url']}"
    if info.get("editor_socket"):
        described += f", editors attach at {info['editor_socket']}"
    return f"another daemon already serves {path}: {described}", int(info["pid"])


def _refusal(other: str, pid: int | None) -> str:
    stop = f"`kill {pid}`, " if pid is not None else ""
    return (
        f"mcphost: {other}\n"
        "mcphost: not starting a second one: `mcphost approve`, `call` and `mcp` go to the newer of two daemons, so "
        "agents of the other would find no approver. Use the running one (`mcphost status` describes it), stop it "
        f"({stop}Ctrl-C in its terminal, or close the editor window that started it), or start a second one anyway "
        "with `mcphost serve --allow-second`"
    )
