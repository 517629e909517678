"""Test plumbing: an isolated user (data, config and runtime dirs) and helpers to start real processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client, StdioServerParameters

from mcphost.config.models import ServerConfig
from mcphost.upstream.connection import UpstreamServer

TESTS = Path(__file__).resolve().parent
PROBE = TESTS / "servers" / "probe.py"


@dataclass
class Sandbox:
    """One pretend user of mcphost: every path the host touches lives under `root`."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.data / "activity.jsonl"

    @property
    def probe_state(self) -> Path:
        return self.root / "probe-state.json"

    def env(self) -> dict[str, str]:
        return {
            "MCPHOST_CONFIG": str(self.config),
            "MCPHOST_DATA_DIR": str(self.data),
            "MCPHOST_RUNTIME_DIR": str(self.root / "run"),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }

    def write_config(self, text: str) -> Path:
        self.config.write_text(text, encoding="utf-8")
        return self.config

    def probe_server(self, name: str = "probe", extra: str = "", flags: tuple[str, ...] = ()) -> str:
        """A [servers.NAME] table running the probe upstream over stdio (with `flags`, e.g. --modern-only)."""
        args = json.dumps([str(PROBE), *flags])
        return (
            f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
            f"env = {{ PROBE_STATE = {json.dumps(str(self.probe_state))} }}\n{extra}\n"
        )

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        # Split at line feeds only, as JSON Lines are: a record may hold U+2028 as it is, where splitlines() cuts.
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").split("\n") if line.strip()]

    def tool_calls(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["type"] == "tool_call"]


def mcphost(box: Sandbox, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the `mcphost` command as a person would, as this sandbox's user."""
    return subprocess.run(
        [sys.executable, "-m", "mcphost", *args],
        env={**os.environ, **box.env()},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@asynccontextmanager
async def agent(
    box: Sandbox, *extra_args: str, mode: str = "auto", errlog: TextIO | None = None
) -> AsyncIterator[Client]:
    """An agent: the official SDK client driving `mcphost mcp` as a subprocess over stdio (its stderr to `errlog`,
    when given, else to the test's)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcphost", "mcp", "--config", str(box.config), *extra_args], env=box.env()
    )
    if errlog is None:
        async with Client(params, mode=mode, cache=None) as client:
            yield client
        return
    from mcp.client.stdio import stdio_client

    async with Client(stdio_client(params, errlog=errlog), mode=mode, cache=None) as client:
        yield client


def initialize_request(client: str) -> dict[str, Any]:
    """A handshake-era `initialize` (request id "init") from a client called `client`."""
    return {
        "jsonrpc": "2.0",
        "id": "init",
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }


def with_sitecustomize(directory: Path, text: str, **variables: str) -> dict[str, str]:
    """The environment for a child Python that runs `text` at start-up (as its sitecustomize, written under
    `directory`) with `variables` set: how a test counts what a child's code did."""
    (directory / "site").mkdir(exist_ok=True)
    (directory / "site" / "sitecustomize.py").write_text(text, encoding="utf-8")
    return {"PYTHONPATH": os.pathsep.join([str(directory / "site"), os.environ.get("PYTHONPATH", "")]), **variables}


# What a streamable HTTP client says of every POST: JSON in, either kind of answer out.
JSON_BOTH = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def http_session(d: Daemon, client: str = "raw-http") -> dict[str, str]:
    """A handshake-era session opened on the daemon over plain HTTP (`initialize`, then `notifications/initialized`):
    the headers every later request of it carries, the agents' token included."""
    import httpx2

    base = {**d.headers, **JSON_BOTH}
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(d.url, json=initialize_request(client), headers=base)
        session = {**base, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        await http.post(d.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return session


def message_of(response: Any) -> dict[str, Any]:
    """The JSON-RPC message an HTTP POST was answered with, as plain JSON or as the one event of a stream."""
    text: str = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        text = next(line for line in text.splitlines() if line.startswith("data: ")).removeprefix("data: ")
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def tools_call(request_id: str | int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A raw JSON-RPC `tools/call` request."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def screen_starts(line: str, cells: list[str]) -> list[int]:
    """The screen column where each cell begins in `line` (wide characters take two)."""
    from mcphost.console import cell_width

    out, at = [], 0
    for cell in cells:
        found = line.index(cell, at)
        out.append(cell_width(line[:found]))
        at = found + len(cell)
    return out


def slow_read(started: Path, gate: Path) -> dict[str, Any]:
    """call_tool_read's arguments for the probe's `slow` tool: it touches `started`, then answers once `gate`
    exists."""
    args = {"started": str(started), "gate": str(gate)}
    return {"name": "probe:slow", "args": args, "intent": {"operation_type": "read"}}


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")


def error_of(result: Any) -> dict[str, Any]:
    assert result.is_error, f"expected an error, got: {text_of(result)}"
    error: dict[str, Any] = result.structured_content["error"]
    assert text_of(result).startswith(error["message"])
    return error


class Daemon:
    """`mcphost serve` as a real process: its URL and token come from its discovery file, as any tool finds them."""

    def __init__(self, box: Sandbox, process: Any, info: dict[str, Any], stderr: list[str]) -> None:
        self.box, self.process, self.info = box, process, info
        self.url: str = info["mcp"]["url"]
        self.token: str = info["mcp"]["headers"]["Authorization"].removeprefix("Bearer ")
        self._stderr = stderr

    @property
    def editor_socket(self) -> str:
        return str(self.info["editor_socket"])

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def stderr(self) -> str:
        """Everything the daemon wrote to stderr so far (read continuously, so the pipe never fills)."""
        return "".join(self._stderr)

    @property
    def api_url(self) -> str:
        return str(self.info["api"]["url"])

    @property
    def api_headers(self) -> dict[str, str]:
        """What a script sends to the REST API: its own token, not the agent's."""
        return {"Authorization": f"Bearer {self.info['api']['token']}"}


@asynccontextmanager
async def daemon(box: Sandbox, *extra_args: str, env: dict[str, str] | None = None) -> AsyncIterator[Daemon]:
    """Start `mcphost serve` (with `env` besides the sandbox's); a thread drains its stderr, so the context may be
    entered and left by different tasks (a module-scoped fixture does that) and the pipe never fills."""
    import threading

    import anyio
    import anyio.to_thread

    env = {**os.environ, **box.env(), **(env or {})}
    # Popen only forks; it does not block the loop. The thread below does the blocking reads.
    process = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-m", "mcphost", "serve", "--port", "0", "--config", str(box.config), *extra_args],
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    stderr: list[str] = []
    announced = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in iter(process.stderr.readline, b""):
            stderr.append(line.decode("utf-8", "replace"))
            if b"bearer token in" in line:
                announced.set()
        announced.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        ready = await anyio.to_thread.run_sync(announced.wait, 30)
        if not ready or "bearer token in" not in "".join(stderr):
            raise AssertionError(f"mcphost serve did not start: {''.join(stderr)}")
        files = list((box.root / "run").glob("daemon-*.json"))
        assert len(files) == 1, files
        yield Daemon(box, process, json.loads(files[0].read_text(encoding="utf-8")), stderr)
    finally:
        await stop_process(process)


@dataclass
class Hosted:
    """A daemon the tests of a module share, and the records of the calls the test at hand made (`tool_calls`)."""

    box: Sandbox
    daemon: Daemon
    seen: int  # the records already there when the test began: earlier tests'

    @classmethod
    def now(cls, box: Sandbox, daemon: Daemon) -> Hosted:
        return cls(box, daemon, len(box.tool_calls()))

    def tool_calls(self) -> list[dict[str, Any]]:
        return self.box.tool_calls()[self.seen :]


async def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s: a test's own child never outlives it."""
    import anyio.to_thread

    if process.poll() is None:
        process.terminate()
        try:
            await anyio.to_thread.run_sync(process.wait, 10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@asynccontextmanager
async def http_agent(url: str, headers: dict[str, str], mode: str = "auto") -> AsyncIterator[Client]:
    """An agent over streamable HTTP, with the headers a person would paste into its config."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
        yield client


class _SocketEnd:
    """Our end of a child's stdin or stdout socket pair, with the calls RawAgent makes of anyio's pipe streams."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock

    async def send(self, data: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def receive(self) -> bytes:
        import anyio

        data = await asyncio.get_running_loop().sock_recv(self.sock, 65536)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self.sock.close()


class _SocketStdioProcess:
    """An anyio Process whose stdin and stdout are socket pairs."""

    def __init__(self, process: Any, stdin: socket.socket, stdout: socket.socket) -> None:
        self._process = process
        self.stdin, self.stdout = _SocketEnd(stdin), _SocketEnd(stdout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._process, name)


async def _socket_stdio_process(argv: list[str], env: dict[str, str]) -> _SocketStdioProcess:
    import anyio

    stdin_ours, stdin_theirs = socket.socketpair()
    stdout_ours, stdout_theirs = socket.socketpair()
    try:
        process = await anyio.open_process(argv, stdin=stdin_theirs, stdout=stdout_theirs, env=env)
    finally:
        stdin_theirs.close()
        stdout_theirs.close()
    return _SocketStdioProcess(process, stdin_ours, stdout_ours)


class RawAgent:
    """`mcphost mcp` spoken to line by line: for what an SDK client never sends (broken JSON, odd ids)."""

    def __init__(self, process: Any, stderr: list[str]) -> None:
        self.process = process
        self._stderr = stderr
        self._buffer = b""

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    async def send_line(self, line: str | bytes) -> None:
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        await self.process.stdin.send(data.rstrip(b"\n") + b"\n")

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_line(json.dumps(message))

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        """The next line on stdout, as JSON; fails after `timeout` seconds of silence."""
        import anyio

        with anyio.fail_after(timeout):
            while b"\n" not in self._buffer:
                self._buffer += await self.process.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def answer_to(self, request_id: Any, timeout: float = 10) -> dict[str, Any]:
        """The response carrying `request_id` (notifications and other answers are skipped)."""
        while True:
            message = await self.receive(timeout)
            if "method" not in message and message.get("id") == request_id:
                return message

    async def stop_reading(self) -> None:
        """Close this end of `mcphost mcp`'s stdout, as an agent that exits or crashes does. (anyio's `aclose` of a
        child's stdout pipe only stops its own reading: the pipe stays open.)"""
        if isinstance(self.process, _SocketStdioProcess):
            await self.process.stdout.aclose()  # a socket pair's end: closing it closes the socket
            return
        self.process._transport.get_pipe_transport(1).close()  # anyio's asyncio process: its subprocess transport

    async def initialize(self) -> dict[str, Any]:
        await self.send(initialize_request("raw-agent"))
        answer = await self.answer_to("init", timeout=30)
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer


@asynccontextmanager
async def raw_agent(
    box: Sandbox, *extra_args: str, env: dict[str, str] | None = None, sockets: bool = False
) -> AsyncIterator[RawAgent]:
    """Start `mcphost mcp` with pipes on stdin and stdout (with `sockets`, a socket pair on each, as Node's libuv
    gives a child: Claude Code, Cursor and VS Code spawn their servers so); stderr is collected as it comes."""
    import anyio

    argv = [sys.executable, "-m", "mcphost", "mcp", "--config", str(box.config), *extra_args]
    if sockets:
        process: Any = await _socket_stdio_process(argv, {**os.environ, **box.env(), **(env or {})})
    else:
        process = await anyio.open_process(argv, env={**os.environ, **box.env(), **(env or {})})
    stderr: list[str] = []
    drained = anyio.Event()

    async def drain() -> None:
        assert process.stderr is not None
        try:
            async for chunk in process.stderr:
                stderr.append(chunk.decode("utf-8", "replace"))
        finally:
            drained.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        try:
            yield RawAgent(process, stderr)
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await process.stdin.aclose()
                    with anyio.move_on_after(10):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
                if sockets:
                    await process.stdout.aclose()
                with anyio.move_on_after(5):
                    await drained.wait()
            tg.cancel_scope.cancel()


# Long enough for linear work on a few megabytes on a slow machine, far too short for work that grows with their square.
HANG_LIMIT_S = 120


def runs_in_linear_time(script: str) -> None:
    """Run `script` in a child process from the repo's root, stopped past HANG_LIMIT_S: a hang detector for hostile
    input, not a timing (a hang in the test's own process could not be stopped)."""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=HANG_LIMIT_S, cwd=Path(__file__).parents[1])


async def poll(predicate: Callable[[], Any], what: str, limit: float = 10) -> Any:
    """Poll a condition with a deadline, for what happens in another process (a reload, a file an upstream
    creates) with no event to wait on from here. Returns the first truthy value."""
    import anyio

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await anyio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def records_of(box: Sandbox, kind: str) -> list[dict[str, Any]]:
    return [r for r in box.records() if r["type"] == kind]


HOSTILE = TESTS / "servers" / "hostile.py"
NOBODY = 65534  # the uid of another user, for files and sockets planted by one


def give_to_another_user(path: Path) -> None:
    """Make `path` another user's; the test is skipped where that takes a root this process is not."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("giving a file to another user takes root")
    os.chown(path, NOBODY, NOBODY)


class Hostile:
    """The hostile server's state file and request trace, in a test's tmp_path."""

    def __init__(self, root: Path) -> None:
        self.state_path = root / "hostile-state.json"
        self.trace_path = root / "hostile-trace.txt"
        self.root = root

    def set(self, **state: Any) -> None:
        current = json.loads(self.state_path.read_text()) if self.state_path.exists() else {}
        self.state_path.write_text(json.dumps({**current, **state}))

    def config(self, **extra: Any) -> ServerConfig:
        env = {"HOSTILE_STATE": str(self.state_path), "HOSTILE_TRACE": str(self.trace_path)}
        return ServerConfig(command=sys.executable, args=[str(HOSTILE)], env=env, **extra)

    def toml(self) -> str:
        return (
            f"[servers.hostile]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(HOSTILE))}]\n"
            f"env = {{ HOSTILE_STATE = {json.dumps(str(self.state_path))} }}\n"
        )

    def requests(self, method: str) -> int:
        if not self.trace_path.exists():
            return 0
        return self.trace_path.read_text().splitlines().count(method)


Events = list[tuple[str, dict[str, Any]]]


@asynccontextmanager
async def running(config: ServerConfig, events: Events | None = None) -> AsyncIterator[UpstreamServer]:
    def sink(kind: str, details: dict[str, Any]) -> None:
        if events is not None:
            events.append((kind, details))

    server = UpstreamServer("hostile", config, on_event=sink)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run)
        await server.wait_first_attempt(20)
        try:
            yield server
        finally:
            server.close()


@asynccontextmanager
async def http_probe(*flags: str) -> AsyncIterator[str]:
    """The probe upstream served over streamable HTTP on a free port (with `flags`); yields its URL."""
    process = await anyio.open_process([sys.executable, str(PROBE), "--http", "0", *flags], env={**os.environ})
    try:
        assert process.stderr is not None
        seen = ""
        with anyio.fail_after(30):
            async for chunk in process.stderr:
                seen += chunk.decode()
                if "listening on" in seen:
                    break
        yield seen.split("listening on ")[1].split()[0]
    finally:
        process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
        await process.aclose()


def timers_due_within(seconds: float) -> list[asyncio.TimerHandle]:
    """The running loop's live timers due within `seconds`: what would wake a process that should sleep (a test's
    own longer deadline is not among them)."""
    loop = asyncio.get_running_loop()
    scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
    return [t for t in scheduled if not t.cancelled() and t.when() - loop.time() < seconds]


@contextlib.contextmanager
def lock_held_by_another_process(path: Path) -> Iterator[subprocess.Popen[str]]:
    """A process that takes the flock on `path` and keeps it until told to let go (a stopped `mcphost mcp` caught
    mid-write would do the same)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)


class FakeHub:
    """What an editor connection (and the listener) use of the daemon's hub, and no more: an attached connection is
    marked so, a detached one forgotten."""

    def __init__(self) -> None:
        self.connections: dict[str, Any] = {}
        self.socket_path: Path | None = None

    def attach(self, connection: Any) -> None:
        connection.attached = True

    def detach(self, connection: Any) -> None:
        self.connections.pop(connection.id, None)

    def status_changed(self) -> None:
        pass
