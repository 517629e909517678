"""One read call to the same stdio upstream over every path an agent can take, side by side in one run.

The upstream is tests/servers/probe.py (tool `read_notes {"text": "x"}`). The paths:

- direct stdio: the client spawns probe.py itself (the baseline, 1.0x);
- direct stdio, paced: the same, the client idle between calls for as long as `mcphost mcp --in-process` adds to a
  call (its last round's p50 less direct's): the upstream called as often as mcphost calls it, for what an
  upstream that waits between calls loses on this machine (information beside the baseline, not the baseline);
- the floor of mcphost's design: bench/floor_relay.py, a line relay that makes each answer durable (fdatasync)
  before passing it on and does nothing else (what any stdio proxy with a durable record costs on this machine);
- `mcphost mcp --in-process`: mcphost over stdio, the gateway in that process;
- `mcphost mcp` relaying to a running `mcphost serve` (the same config);
- `mcphost serve` over streamable HTTP (URL and token from its discovery file);
- supergateway (npm) in front of probe.py, stdio -> streamable HTTP;
- mcp-proxy (PyPI, in a venv of its own) in front of probe.py, stdio -> streamable HTTP.

Through mcphost the call is `call_tool_read {"name": "probe:read_notes", ...}` with `read = "allow"` and the activity
log on with fsync. The client is a plain JSON-RPC client written here with the standard library alone
(newline-delimited JSON on a subprocess's pipes; HTTP/1.1 on a kept-alive socket, JSON or SSE answers, the
`mcp-session-id` header), so what is timed is the path, not a client SDK. `--sdk` adds the same paths driven by the
official MCP SDK client. The peers are installed on first use into `$MCPHOST_BENCH_CACHE` (default
~/.cache/mcphost-bench), outside the repository; a peer that cannot be installed or started is reported as
unavailable and the rest runs. Run from the repo root:

    python -m bench.bench_paths [--quick] [--paths direct,in-process,...] [--calls 200] [--rounds 7] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any
from urllib.parse import urlsplit

from bench.common import BenchFailure, cpu_ticks, machine, percentile, run_bench, steal_share, terminate

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "tests" / "servers" / "probe.py"
FLOOR = REPO / "bench" / "floor_relay.py"
EDITOR_WATCH = REPO / "bench" / "editor_watch.py"

PROTOCOL_VERSION = "2025-06-18"
DIRECT_TOOL = "read_notes"
DIRECT_ARGS: dict[str, Any] = {"text": "x"}
THROUGH_TOOL = "call_tool_read"
THROUGH_ARGS: dict[str, Any] = {"name": "probe:read_notes", "args": {"text": "x"}, "intent": {"operation_type": "read"}}
EXPECTED_TEXT = "read_notes: x"


PAYLOAD_SHAPES = ("code", "json")


def use_payload(size: int, shape: str = "code") -> str:
    """Make every path's call carry `size` bytes of text (`--payload`): the argument, echoed back in the answer's text
    and its structured content, as a call that reads or writes a file carries one. `shape` "code": numbered lines of
    source; "json": one line of JSON, a page of records as a web API answers (`--payload-shape`). The text is the same
    every run, with no credential in it, so runs compare. Returns the text."""
    global DIRECT_ARGS, THROUGH_ARGS, EXPECTED_TEXT
    text = _json_page(size) if shape == "json" else _source_lines(size)
    DIRECT_ARGS = {"text": text}
    THROUGH_ARGS = {**THROUGH_ARGS, "args": {"text": text}}
    EXPECTED_TEXT = f"read_notes: {text}"
    return text


def _source_lines(size: int) -> str:
    lines, total, n = [], 0, 0
    while total < size:
        line = f"    result_{n} = transform(items[{n}], path=base / 'part_{n}.txt', retries={n % 7})  # step {n}"
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines)[:size]


def _json_page(size: int) -> str:
    """`size` bytes of compact JSON: issues as a code host's API lists them, the last one's body filling it out."""

    def issue(n: int, body: str) -> dict[str, Any]:
        return {
            "id": 4100 + n,
            "number": n,
            "title": f"Sync fails on item {n}: it's been retried {n % 5} times",
            "state": "open" if n % 3 else "closed",
            "user": {"login": f"dev{n % 17}", "html_url": f"https://example.com/dev{n % 17}", "type": "User"},
            "labels": [{"name": "bug", "color": "d73a4a"}],
            "created_at": "2026-11-02T10:00:00Z",
            "author_association": "CONTRIBUTOR",
            "body": body,
        }

    def page(issues: list[dict[str, Any]]) -> str:
        return json.dumps(issues, separators=(",", ":"))

    body = "Steps: run the sync, wait, see the log; expected: done, got: retry. "
    issues: list[dict[str, Any]] = []
    while len(page([*issues, issue(len(issues), body), issue(len(issues) + 1, "")])) <= size:
        issues.append(issue(len(issues), body))
    last = issue(len(issues), "")
    last["body"] = "x" * max(0, size - len(page([*issues, last])))
    return page([*issues, last])


TARGET_RATIO = 2.0  # every mcphost path within 2.0x direct stdio (information only)
SUPERGATEWAY_SPEC = "supergateway@4"
MCP_PROXY_SPEC = "mcp-proxy>=0.13,<0.14"
INSTALL_TIMEOUT_S = 600.0
START_TIMEOUT_S = 60.0
SLOW_CALL_NS = 100_000_000  # --sdk: a path whose warm-up calls take longer gets SLOW_CALLS_PER_ROUND calls per round
SLOW_CALLS_PER_ROUND = 5

PATHS = (
    "direct",
    "direct-paced",
    "floor",
    "in-process",
    "relay",
    "relay-sockets",
    "http",
    "http-2026",
    "supergateway",
    "mcp-proxy",
)
MCPHOST_PATHS = ("in-process", "relay", "relay-sockets", "http", "http-2026")
DAEMON_PATHS = MCPHOST_PATHS[1:]  # the paths a running `mcphost serve` serves
MODERN_VERSION = "2026-07-28"  # the "http-2026" path: one exchange per call, no handshake and no session
PEERS = ("supergateway", "mcp-proxy")
LABELS = {
    "direct": "direct stdio (client spawns probe.py)",
    "direct-paced": "direct stdio, paced: idle between calls as long as in process adds to one",
    "floor": "floor: line relay + fdatasync per answer, nothing else",
    "in-process": "mcphost mcp --in-process (stdio)",
    "relay": "mcphost mcp -> mcphost serve (stdio relay)",
    "relay-sockets": "the same relay, its stdio socket pairs (as Node agents spawn it)",
    "http": "mcphost serve (streamable HTTP)",
    "http-2026": "mcphost serve (streamable HTTP, 2026-07-28: no session)",
    "supergateway": "supergateway{version} (stdio -> streamable HTTP)",
    "mcp-proxy": "mcp-proxy{version} (stdio -> streamable HTTP)",
}

CONFIG = """\
[permissions]
read = "allow"
write = "allow"
destructive = "allow"

[log]
fsync = {fsync}

[servers.probe]
command = {python}
args = [{probe}]
"""

# supergateway has no option for the address it listens on and listens on every interface; this preload, given to
# node with --require, makes a listen() that names only a port listen on 127.0.0.1. The bench checks the result.
LOOPBACK_PRELOAD = """\
'use strict';
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === 'number' || (typeof first === 'string' && /^[0-9]+$/.test(first))) {
    if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  } else if (first && typeof first === 'object' && first.path === undefined && first.host === undefined) {
    args[0] = Object.assign({}, first, { host: '127.0.0.1' });
  }
  return listen.apply(this, args);
};
"""


class PeerUnavailable(Exception):
    """A peer could not be installed or started: its row says why, the rest of the run goes on."""


class OutOfTime(BenchFailure):
    """--timeout passed: never taken for one peer's failure."""


# ---------------------------------------------------------------------------------------------------- the client


class RpcError(Exception):
    pass


class Rpc:
    """A plain JSON-RPC 2.0 client for MCP: requests, notifications, answers to the server's own requests."""

    protocol: str | None = None

    def __init__(self) -> None:
        self._next_id = 0

    def _exchange(self, message: dict[str, Any], wanted: int | None) -> dict[str, Any] | None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        answer = self._exchange(
            {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}, self._next_id
        )
        assert answer is not None
        return answer

    def notify(self, method: str) -> None:
        self._exchange({"jsonrpc": "2.0", "method": method}, None)

    def _route(self, message: dict[str, Any], wanted: int | None) -> dict[str, Any] | None:
        """The result if `message` answers request `wanted`; a request from the server is answered here."""
        if "method" in message:
            if "id" in message:
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
                if message["method"] == "ping":
                    reply["result"] = {}
                else:
                    reply["error"] = {"code": -32601, "message": f"method not supported: {message['method']}"}
                self._reply(reply)
            return None  # a notification: nothing to do
        if wanted is None or message.get("id") != wanted:
            return None
        if "error" in message:
            raise RpcError(json.dumps(message["error"]))
        result: dict[str, Any] = message["result"]
        return result

    def _reply(self, message: dict[str, Any]) -> None:
        self._exchange(message, None)

    def initialize(self) -> dict[str, Any]:
        """The handshake every MCP session opens with: initialize, then notifications/initialized."""
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "bench-paths", "version": "0"},
            },
        )
        self.protocol = str(result.get("protocolVersion") or PROTOCOL_VERSION)
        self.notify("notifications/initialized")
        return result

    def call_tool(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        text = "\n".join(b.get("text", "") for b in result.get("content", []) if b.get("type") == "text")
        return text, bool(result.get("isError"))


def _dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode("utf-8")


class StdioRpc(Rpc):
    """Newline-delimited JSON on a child's stdin and stdout (the MCP stdio transport)."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr: IO[bytes], sockets: bool = False) -> None:
        """`sockets`: the child's stdin and stdout are socket pairs, as Node's libuv spawns every child (Claude Code,
        Cursor and VS Code start their MCP servers so), instead of pipes."""
        super().__init__()
        self.name = Path(argv[0]).name
        self._in: IO[bytes]
        self._out: IO[bytes]
        if sockets:
            stdin_ours, stdin_theirs = socket.socketpair()
            stdout_ours, stdout_theirs = socket.socketpair()
            with stdin_theirs, stdout_theirs:
                self.process = subprocess.Popen(
                    argv, stdin=stdin_theirs.fileno(), stdout=stdout_theirs.fileno(), stderr=stderr, env=env, cwd=REPO
                )
            self._in, self._out = stdin_ours.makefile("wb"), stdout_ours.makefile("rb")
            stdin_ours.close()  # the files keep the sockets open
            stdout_ours.close()
            return
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=REPO
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in, self._out = self.process.stdin, self.process.stdout

    def _exchange(self, message: dict[str, Any], wanted: int | None) -> dict[str, Any] | None:
        self._in.write(_dumps(message) + b"\n")
        self._in.flush()
        while wanted is not None:
            line = self._out.readline()
            if not line:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(5)
                raise BenchFailure(f"{self.name} closed its stdout (exit code {self.process.poll()})")
            if not line.strip():
                continue
            result = self._route(json.loads(line), wanted)
            if result is not None:
                return result
        return None

    def close(self) -> None:
        # Closing stdin is how an agent ends a stdio session; the server then closes its own upstreams.
        with contextlib.suppress(OSError):
            self._in.close()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            terminate(self.process, 5)
        self._out.close()


class HttpResponse:
    """A response on an `HttpConnection`: the status, the headers (names in lower case), then the body, which must
    be read (`read`, or `chunks` as it arrives: an event stream is routed event by event) before the next request."""

    __slots__ = ("_chunks", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], chunks: Iterator[bytes]) -> None:
        self.status, self.headers, self._chunks = status, headers, chunks

    def chunks(self) -> Iterator[bytes]:
        return self._chunks

    def read(self) -> bytes:
        return b"".join(self._chunks)


class HttpConnection:
    """HTTP/1.1 on one kept-alive socket, written for the benchmark: a request is one `sendall`, the answer is
    read through a buffered reader, whole (Content-Length, chunked, or up to the close). `http.client` parses its
    headers with the email package and took 0.19 ms of client CPU a call more than this on the bench machine: the
    HTTP rows would have timed the client. The stdio client is as plain (a line written, a line read)."""

    MAX_LINE = 65536
    _BLANK = (b"\r\n", b"\n", b"")  # the line that ends the headers (or the trailers); b"": the server closed

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._sock: socket.socket | None = None
        self._file: IO[bytes] | None = None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._file = None

    def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> HttpResponse:
        if self._sock is None:
            self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._file = self._sock.makefile("rb")
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        assert self._file is not None
        status_line = self._line()
        if not status_line:
            self.close()
            raise ConnectionResetError("the server closed the connection")
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise BenchFailure(f"not an HTTP status line: {status_line[:200]!r}")
        received: dict[str, str] = {}
        while (line := self._line()) not in self._BLANK:
            name, _, value = line.decode("latin-1").partition(":")
            received[name.strip().lower()] = value.strip()
        return HttpResponse(int(parts[1]), received, self._body(received))

    def _body(self, received: dict[str, str]) -> Iterator[bytes]:
        assert self._file is not None
        if "content-length" in received:
            yield self._file.read(int(received["content-length"]))
        elif received.get("transfer-encoding", "").lower() == "chunked":
            while size := int(self._line().split(b";", 1)[0], 16):
                yield self._file.read(size)
                self._line()
            while self._line() not in self._BLANK:  # trailers
                pass
        else:
            yield self._file.read()
            self.close()
            return
        if received.get("connection", "").lower() == "close":
            self.close()

    def _line(self) -> bytes:
        assert self._file is not None
        line = self._file.readline(self.MAX_LINE + 1)
        if len(line) > self.MAX_LINE:
            raise BenchFailure("an HTTP header line longer than 64 KiB")
        return line


class HttpRpc(Rpc):
    """Streamable HTTP with one keep-alive connection: each message a POST, the answer JSON or an SSE stream."""

    def __init__(self, url: str, headers: dict[str, str], modern: bool = False) -> None:
        """`modern`: speak 2026-07-28, as the SDK's client in auto mode does: no handshake; each request carries the
        protocol version, the client's info and capabilities in `_meta`, and its routing in headers."""
        super().__init__()
        self.modern = modern
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = parts.path or "/"
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        }
        self.session: str | None = None
        self.conn = HttpConnection(self.host, self.port, timeout=120)
        self.reconnects = 0

    def _request_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.session is not None:
            headers["mcp-session-id"] = self.session
        if self.protocol is not None:
            headers["mcp-protocol-version"] = self.protocol
        return headers

    def initialize(self) -> dict[str, Any]:
        if not self.modern:
            return super().initialize()
        self.protocol = MODERN_VERSION
        return self.request("server/discover", {})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.modern:
            meta = {
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientInfo": {"name": "bench-paths", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            params = {**params, "_meta": meta}
        return super().request(method, params)

    def _post(self, message: dict[str, Any]) -> HttpResponse:
        body, headers = _dumps(message), self._request_headers()
        if self.modern and "method" in message:
            headers["mcp-method"] = message["method"]
            name = message.get("params", {}).get("name")
            if isinstance(name, str):
                headers["mcp-name"] = name
        try:
            return self.conn.request("POST", self.path, headers, body)
        except (BrokenPipeError, ConnectionResetError):
            # The server closed the keep-alive connection while it was idle (Node's and uvicorn's idle timeout is
            # 5 s, and a path waits while the others take their turn): a new connection, as an HTTP client's pool
            # would open. The call pays for it, and the count is reported.
            self.conn.close()
            self.reconnects += 1
            return self.conn.request("POST", self.path, headers, body)

    def _exchange(self, message: dict[str, Any], wanted: int | None) -> dict[str, Any] | None:
        response = self._post(message)
        session = response.headers.get("mcp-session-id")
        if session:
            self.session = session
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if response.status >= 400:
            raise BenchFailure(
                f"POST {self.path} {message.get('method', 'reply')}: HTTP {response.status}: "
                f"{response.read()[:500].decode('utf-8', 'replace')}"
            )
        if kind == "text/event-stream":
            return self._events(response, wanted)
        body = response.read()  # read whole, so the connection can carry the next request
        if wanted is None or not body.strip():
            return None
        decoded = json.loads(body)
        found = None
        for item in decoded if isinstance(decoded, list) else [decoded]:
            result = self._route(item, wanted)
            found = result if result is not None else found
        if found is None:
            raise BenchFailure(f"POST {self.path}: no answer to request {wanted} in {body[:300]!r}")
        return found

    def _events(self, response: HttpResponse, wanted: int | None) -> dict[str, Any] | None:
        """Read the SSE stream to its end (the server closes it after the answer), routing each event's data as it
        comes (a request from the server mid-stream is answered before the stream goes on)."""
        found: dict[str, Any] | None = None
        data: list[bytes] = []
        pending = b""
        for chunk in response.chunks():
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                line = raw.rstrip(b"\r")
                if line.startswith(b"data:"):
                    data.append(line[5:].removeprefix(b" "))
                elif not line and data:
                    payload = b"\n".join(data)
                    data = []
                    if payload.strip():
                        result = self._route(json.loads(payload), wanted)
                        found = result if result is not None else found
        if pending.startswith(b"data:"):
            data.append(pending.rstrip(b"\r")[5:].removeprefix(b" "))
        if data and b"".join(data).strip():  # a last event without the blank line that ends it
            result = self._route(json.loads(b"\n".join(data)), wanted)
            found = result if result is not None else found
        if wanted is not None and found is None:
            raise BenchFailure(f"POST {self.path}: the event stream ended without the answer to request {wanted}")
        return found

    def _reply(self, message: dict[str, Any]) -> None:
        # The main connection is in the middle of reading a stream: the answer goes on a connection of its own.
        side = HttpConnection(self.host, self.port, timeout=30)
        try:
            side.request("POST", self.path, self._request_headers(), _dumps(message)).read()
        finally:
            side.close()

    def close(self) -> None:
        if self.session is not None:
            with contextlib.suppress(OSError, BenchFailure, ValueError):
                self.conn.request("DELETE", self.path, self._request_headers()).read()
        self.conn.close()


# ---------------------------------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class Sandbox:
    """Every path mcphost touches lives under `root`, so the run leaves nothing behind and reads no user config."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def runtime(self) -> Path:
        return self.root / "run"

    @property
    def activity_log(self) -> Path:
        return self.data / "activity.jsonl"

    def prepare(self, fsync: bool = True) -> None:
        text = CONFIG.format(
            python=json.dumps(sys.executable), probe=json.dumps(str(PROBE)), fsync="true" if fsync else "false"
        )
        self.config.write_text(text, encoding="utf-8")
        # mcphost refuses a runtime dir that other users could write in.
        self.runtime.mkdir(mode=0o700)
        self.runtime.chmod(0o700)

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "MCPHOST_CONFIG": str(self.config),
            "MCPHOST_DATA_DIR": str(self.data),
            "MCPHOST_RUNTIME_DIR": str(self.runtime),
            "PYTHONPATH": str(REPO),
        }

    def stderr_file(self, name: str) -> IO[bytes]:
        return (self.root / f"{name}.stderr").open("wb")

    def stderr_tail(self, name: str) -> str:
        path = self.root / f"{name}.stderr"
        return path.read_text(encoding="utf-8", errors="replace")[-2000:].strip() if path.exists() else ""


def mcphost_command() -> list[str]:
    script = Path(sys.executable).parent / "mcphost"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcphost"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def listening_addresses(port: int) -> list[str]:
    """The local addresses of the sockets listening on `port` (Linux /proc; empty elsewhere)."""
    found: list[str] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 4 or fields[3] != "0A":  # 0A: LISTEN
                continue
            address_hex, port_hex = fields[1].split(":")
            if int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(address_hex)
            # The kernel prints each 32-bit word in host (little-endian) order.
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.append(str(ipaddress.ip_address(packed)))
    return found


def check_loopback_only(port: int, who: str) -> None:
    for text in listening_addresses(port):
        address = ipaddress.ip_address(text)
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        if not (address.is_loopback or (mapped is not None and mapped.is_loopback)):
            raise PeerUnavailable(f"{who} listens on {text}:{port}, not on loopback only; stopped")


def wait_for_port(process: subprocess.Popen[bytes], port: int, who: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PeerUnavailable(f"{who} exited with code {process.returncode} before listening")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise PeerUnavailable(f"{who} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """End a server started in its own process group (the group is the process's own pid), children included."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    # A child that outlived its parent (a shell, an upstream) is still in the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def start_server(argv: list[str], env: dict[str, str], stderr: IO[bytes], stack: ExitStack) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=env, cwd=REPO, start_new_session=True
    )
    stack.callback(stop_group, process)
    return process


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    url: str
    headers: dict[str, str]


def start_daemon(box: Sandbox, stack: ExitStack, mcphost: list[str] | None = None) -> Daemon:
    """`mcphost serve --port 0`, ready once its discovery file daemon-<pid>.json is in the runtime dir."""
    stderr = stack.enter_context(box.stderr_file("daemon"))
    process = subprocess.Popen(
        [*(mcphost or mcphost_command()), "serve", "--port", "0", "--config", str(box.config)],
        stdin=subprocess.DEVNULL,
        stdout=stderr,
        stderr=stderr,
        env=box.env(),
        cwd=REPO,
    )

    stack.callback(terminate, process)
    discovery = box.runtime / f"daemon-{process.pid}.json"
    deadline = time.monotonic() + START_TIMEOUT_S
    while not discovery.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise BenchFailure(f"mcphost serve did not start: {box.stderr_tail('daemon')}")
        time.sleep(0.02)
    info = json.loads(discovery.read_text(encoding="utf-8"))  # written to a temp name and renamed: whole
    url = str(info["mcp"]["url"])
    port = urlsplit(url).port
    if port is not None:
        try:
            check_loopback_only(port, "mcphost serve")
        except PeerUnavailable as exc:
            raise BenchFailure(str(exc)) from None
    return Daemon(process, url, dict(info["mcp"]["headers"]))


# ---------------------------------------------------------------------------------------------------- peers


def cache_dir() -> Path:
    configured = os.environ.get("MCPHOST_BENCH_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "mcphost-bench"


def progress(message: str) -> None:
    print(f"bench_paths: {message}", file=sys.stderr, flush=True)


def run_install(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"installing {what} failed: {exc}") from None
    if done.returncode != 0:
        lines = [x.strip() for x in (done.stderr or done.stdout).splitlines() if x.strip()]
        # The first error line says why (npm: "npm error code ECONNREFUSED"); the last is often a log's path.
        errors = [x for x in lines if "error" in x.lower() and "complete log" not in x]
        why = errors[0] if errors else lines[-1] if lines else f"exit {done.returncode}"
        raise PeerUnavailable(f"installing {what} failed: {why}")


@dataclass
class Peer:
    key: str
    version: str
    argv: list[str]
    env: dict[str, str]
    path: str  # where it serves streamable HTTP


def supergateway_peer(cache: Path, port: int, preload: Path) -> Peer:
    prefix = cache / "npm"
    binary = prefix / "node_modules" / ".bin" / "supergateway"
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise PeerUnavailable("npm not found on PATH")
        progress(f"installing {SUPERGATEWAY_SPEC} with npm into {prefix} (first run only)...")
        run_install(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error", SUPERGATEWAY_SPEC],
            SUPERGATEWAY_SPEC,
        )
        if not binary.exists():
            raise PeerUnavailable(f"npm installed no {binary.name} executable")
    if shutil.which("node") is None:
        raise PeerUnavailable("node not found on PATH")
    manifest = prefix / "node_modules" / "supergateway" / "package.json"
    version = str(json.loads(manifest.read_text(encoding="utf-8")).get("version", "?"))
    server = f"{shlex.quote(sys.executable)} {shlex.quote(str(PROBE))}"
    # --stateful: without it, supergateway starts a new probe.py for every POST (it says so in its source), which
    # would time process start-up, not relaying.
    argv = [str(binary), "--stdio", server, "--outputTransport", "streamableHttp", "--stateful"]
    argv += ["--port", str(port), "--streamableHttpPath", "/mcp", "--logLevel", "none"]
    options = f"{os.environ.get('NODE_OPTIONS', '')} --require {preload}".strip()
    return Peer("supergateway", version, argv, {**os.environ, "NODE_OPTIONS": options}, "/mcp")


def mcp_proxy_peer(cache: Path, port: int) -> Peer:
    venv = cache / "mcp-proxy-venv"
    binary = venv / "bin" / "mcp-proxy"
    if not binary.exists():
        # Its own venv: mcp-proxy needs the MCP SDK 1.x, this project runs on 2.x.
        progress(f"installing {MCP_PROXY_SPEC} into a venv of its own at {venv} (first run only)...")
        if not (venv / "bin" / "python").exists():
            run_install([sys.executable, "-m", "venv", str(venv)], "a venv for mcp-proxy")
        run_install(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                MCP_PROXY_SPEC,
            ],
            MCP_PROXY_SPEC,
        )
        if not binary.exists():
            raise PeerUnavailable("pip installed no mcp-proxy executable")
    found = sorted(venv.glob("lib/python*/site-packages/mcp_proxy-*.dist-info"))
    version = found[-1].name.removeprefix("mcp_proxy-").removesuffix(".dist-info") if found else "?"
    argv = [str(binary), "--host", "127.0.0.1", "--port", str(port), "--log-level", "WARNING"]
    argv += ["--", sys.executable, str(PROBE)]
    return Peer("mcp-proxy", version, argv, dict(os.environ), "/mcp")


def start_peer(key: str, box: Sandbox, stack: ExitStack) -> tuple[Peer, str, int]:
    """Install if need be, start, wait for the port; returns the peer, its streamable HTTP URL and its process id."""
    port = free_port()
    cache = cache_dir()
    if key == "supergateway":
        preload = box.root / "loopback-preload.cjs"
        preload.write_text(LOOPBACK_PRELOAD, encoding="utf-8")
        peer = supergateway_peer(cache, port, preload)
    else:
        peer = mcp_proxy_peer(cache, port)
    stderr = stack.enter_context(box.stderr_file(key))
    process = start_server(peer.argv, peer.env, stderr, stack)
    try:
        wait_for_port(process, port, key, START_TIMEOUT_S)
        check_loopback_only(port, key)
    except PeerUnavailable as exc:
        stop_group(process)
        tail = box.stderr_tail(key)
        raise PeerUnavailable(f"{exc}" + (f" ({tail.splitlines()[-1]})" if tail else "")) from None
    return peer, f"http://127.0.0.1:{port}{peer.path}", process.pid


# ---------------------------------------------------------------------------------------------------- measuring


class CpuWatch:
    """CPU time of a path's processes, read from /proc (Linux): the upstream (probe.py) apart from the rest, which is
    the path's own cost (mcphost, its relay and daemon, a peer, the floor): the proxies' work side by side, without
    the direct call (which moves with the upstream's speed that hour) in the denominator. Nanoseconds on the CPU,
    every thread (`/proc/<pid>/task/<tid>/schedstat`), so a round of 200 calls reads well below a clock tick."""

    def __init__(self, proxy: list[int], upstream: list[int]) -> None:
        self.proxy, self.upstream = proxy, upstream

    @classmethod
    def of(cls, roots: list[int]) -> CpuWatch | None:
        """The processes under `roots` as they are now, or None where /proc cannot say."""
        if not roots or not Path(f"/proc/{os.getpid()}/task").is_dir():
            return None
        tree: list[int] = []
        todo = list(roots)
        while todo:
            pid = todo.pop()
            if pid in tree or pid == os.getpid():
                continue
            tree.append(pid)
            todo += _children(pid)
        if cls._on_cpu(tree) is None:
            return None
        # probe.py run as a script; a relay or peer that names it in its own arguments is not the upstream.
        probe = str(PROBE).encode()
        upstream = [pid for pid in tree if _cmdline(pid).split(b"\0")[1:2] == [probe]]
        return cls([pid for pid in tree if pid not in upstream], upstream)

    def sample(self) -> tuple[int, int] | None:
        proxy, upstream = self._on_cpu(self.proxy), self._on_cpu(self.upstream)
        return None if proxy is None or upstream is None else (proxy, upstream)

    def switches(self) -> int | None:
        """Context switches of the path's own processes so far, every thread: a thread that wakes and sleeps
        again counts one at least, so an idle process's count says how often it wakes."""
        return _per_thread(self.proxy, "status", _switches)

    @staticmethod
    def _on_cpu(pids: list[int]) -> int | None:
        return _per_thread(pids, "schedstat", lambda data: int(data.split()[0]))


def pin_processes(watch: CpuWatch, cpu: int) -> None:
    """Every thread of the path's own processes on `cpu` alone, the upstream's on every other CPU this process may
    use (threads made later inherit it from the thread that makes them). Which CPU a proxy runs on moves what its
    fdatasync costs where the disk's completions all land on one CPU (the header's figure by CPU says so)."""
    allowed = os.sched_getaffinity(0)
    others = allowed - {cpu}
    for pids, cpus in ((watch.proxy, {cpu}), (watch.upstream, others)):
        for pid in pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(ProcessLookupError):
                    os.sched_setaffinity(int(task.name), cpus)


def _switches(status: bytes) -> int:
    return sum(
        int(line.split()[1])
        for line in status.splitlines()
        if line.startswith((b"voluntary_ctxt_switches:", b"nonvoluntary_ctxt_switches:"))
    )


def _per_thread(pids: list[int], name: str, read: Callable[[bytes], int]) -> int | None:
    """`read` of /proc/<pid>/task/<tid>/`name`, summed over every thread of `pids`; None when a process is gone or
    the file is not there: no figure rather than a wrong one."""
    total = 0
    try:
        for pid in pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                total += read((task / name).read_bytes())
    except (OSError, ValueError, IndexError):
        return None
    return total


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                found += [int(child) for child in (task / "children").read_bytes().split()]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@dataclass
class Target:
    key: str
    label: str
    call: Callable[[], tuple[str, bool]]
    through_mcphost: bool
    setup_ms: float = 0.0
    rpc: Rpc | None = None
    note: str = ""
    calls_made: int = 0
    bad: list[str] = field(default_factory=list)
    rounds_ns: list[list[int]] = field(default_factory=list)
    roots: list[int] = field(default_factory=list)  # the processes the path runs on (their children too)
    warm_ns: list[int] = field(default_factory=list)  # the warm-up calls' latencies
    pause_ns: int = 0  # idle before each call, off the clock ("direct-paced")
    cpu: CpuWatch | None = None
    cpu_rounds: list[tuple[float, float]] = field(default_factory=list)  # (proxy, upstream) ms a call, per round
    idle: tuple[float, float] | None = None  # its own processes, sessions open, no call: (CPU ms, wake-ups) a second

    def checked_call(self) -> int:
        """One call; its latency in ns. The answer is checked after the clock stops."""
        if self.pause_ns:
            time.sleep(self.pause_ns / 1e9)
        start = time.perf_counter_ns()
        text, is_error = self.call()
        elapsed = time.perf_counter_ns() - start
        self.calls_made += 1
        if is_error or text != EXPECTED_TEXT:
            self.bad.append(f"is_error={is_error}, text={text[:200]!r}")
        return elapsed


def interleaved(
    targets: list[Target], warmup: int, rounds: int, calls: int, dropped: dict[str, str], pin: int | None = None
) -> None:
    """Warm-up, then `rounds` rounds of `calls` calls per path. A peer that fails is dropped (its reason in
    `dropped`) and the others go on; a failing mcphost path or the direct baseline ends the run. `pin`: after the
    warm-up, each path's own processes run on that CPU alone and the upstream on the others (`pin_processes`)."""
    live = list(targets)

    def guarded(target: Target, work: Callable[[Target], None]) -> None:
        try:
            work(target)
        except OutOfTime:
            raise
        except (BenchFailure, RpcError, OSError, ValueError) as exc:
            if target.key not in PEERS:
                raise BenchFailure(f"{target.label}: {exc}") from exc
            dropped[target.key] = f"failed during the run: {exc}"
            live.remove(target)

    def first(target: Target) -> None:
        target.checked_call()
        if target.bad:
            raise BenchFailure(f"{target.bad[0]}; expected is_error=False, text={EXPECTED_TEXT!r}")
        target.warm_ns = [target.checked_call() for _ in range(warmup)]
        target.cpu = CpuWatch.of(target.roots)
        if pin is not None:
            if target.cpu is None:
                raise BenchFailure(f"{target.label}: --pin-proxy needs /proc to find the path's processes")
            pin_processes(target.cpu, pin)

    def one_round(target: Target) -> None:
        if target.key == "direct-paced":
            target.pause_ns = pause_ns(by_key["in-process"], by_key["direct"])
        before = target.cpu.sample() if target.cpu is not None else None
        target.rounds_ns.append([target.checked_call() for _ in range(calls)])
        after = target.cpu.sample() if target.cpu is not None else None
        if before is not None and after is not None:
            target.cpu_rounds.append(((after[0] - before[0]) / calls / 1e6, (after[1] - before[1]) / calls / 1e6))

    by_key = {target.key: target for target in targets}
    for target in list(live):
        guarded(target, first)
    for index in range(rounds):
        # Rotating which path goes first spreads slow drift (CPU frequency, other load) over all of them.
        order = list(live)
        shift = index % max(1, len(order))
        for target in order[shift:] + order[:shift]:
            guarded(target, one_round)
    targets[:] = live


def pause_ns(paced_as: Target, direct: Target) -> int:
    """How long "direct-paced" waits before each call: what `paced_as` adds to direct's call, by their latest round
    each (their warm-up before either has one), as the upstream waits between two calls through a proxy."""

    def latest(target: Target) -> float:
        calls = target.rounds_ns[-1] if target.rounds_ns else target.warm_ns
        return statistics.median(calls) if calls else 0.0

    return max(0, round(latest(paced_as) - latest(direct)))


def watch_daemon(box: Sandbox, stack: ExitStack, daemon_pid: int) -> subprocess.Popen[bytes]:
    """`--editor`: bench/editor_watch.py attached to the daemon, taking its activity as the VS Code extension does."""
    info = json.loads((box.runtime / f"daemon-{daemon_pid}.json").read_text(encoding="utf-8"))
    watcher = subprocess.Popen(
        [sys.executable, str(EDITOR_WATCH), str(info["editor_socket"])],
        stdout=subprocess.PIPE,
        stderr=stack.enter_context(box.stderr_file("editor")),
        cwd=REPO,
    )
    stack.callback(terminate, watcher, 5)
    assert watcher.stdout is not None
    if watcher.stdout.readline().strip() != b"attached":
        raise BenchFailure(f"the editor did not attach to the daemon: {box.stderr_tail('editor')}")
    return watcher


def watched(watcher: subprocess.Popen[bytes], box: Sandbox) -> dict[str, int]:
    """What the editor was told, once the last call's record has had time to reach it."""
    time.sleep(EDITOR_SETTLE_S)
    watcher.send_signal(signal.SIGTERM)
    assert watcher.stdout is not None
    out = watcher.stdout.read()
    watcher.wait(10)
    try:
        counts: dict[str, int] = json.loads(out)
    except ValueError:
        raise BenchFailure(f"the editor said {out[:200]!r}: {box.stderr_tail('editor')}") from None
    return counts


# A record is told to the editors on the daemon's next turn after its call is answered: this is ample.
EDITOR_SETTLE_S = 0.5

IDLE_WINDOW_S = 5.0


def idle_cost(targets: list[Target], seconds: float) -> None:
    """What each path's own processes do while its session is open and no call comes: all paths at once, in one
    window after the rounds (a daemon shared by several paths counts in each)."""
    watched = [t for t in targets if t.cpu is not None and t.cpu.proxy]
    before = [(t.cpu.sample(), t.cpu.switches()) for t in watched if t.cpu is not None]
    time.sleep(seconds)
    for target, (cpu0, sw0) in zip(watched, before, strict=True):
        assert target.cpu is not None
        cpu1, sw1 = target.cpu.sample(), target.cpu.switches()
        if cpu0 is not None and cpu1 is not None and sw0 is not None and sw1 is not None:
            target.idle = ((cpu1[0] - cpu0[0]) / seconds / 1e6, (sw1 - sw0) / seconds)


def summary(target: Target) -> dict[str, Any]:
    p50s = [statistics.median(r) / 1e6 for r in target.rounds_ns]
    p95s = [percentile(r, 0.95) / 1e6 for r in target.rounds_ns]
    every = [x for r in target.rounds_ns for x in r]
    return {
        "p50_ms": statistics.median(p50s),
        "p95_ms": statistics.median(p95s),
        "round_p50s_ms": p50s,
        "mean_ms": statistics.fmean(every) / 1e6,
        "timed_calls": len(every),
        "cpu_ms_per_call": {
            # None for a path with no process of its own (direct stdio is the upstream alone).
            "proxy": statistics.median(r[0] for r in target.cpu_rounds) if target.cpu and target.cpu.proxy else None,
            "upstream": statistics.median(r[1] for r in target.cpu_rounds),
        }
        if target.cpu_rounds
        else None,
        "idle": {"cpu_ms_per_s": target.idle[0], "wakeups_per_s": target.idle[1]} if target.idle else None,
    }


def count_tool_calls(path: Path) -> int:
    """The tool_call records in the log and the files it rotated to (a run with `--payload` fills several)."""
    total = 0
    for name in [path.name, *(f"{path.name}.{n}" for n in range(1, 100))]:
        part = path.with_name(name)
        if not part.exists():
            continue
        with part.open(encoding="utf-8") as fh:
            total += sum(1 for line in fh if line.strip() and json.loads(line).get("type") == "tool_call")
    return total


FSYNC_SAMPLES = 300
IDLE_S = 0.001  # about the time a call leaves the disk idle between two records


def fsync_cost(directory: Path) -> dict[str, Any]:
    """What one durable append costs on the file system under `directory`: the p50 of a record-sized append and its
    fdatasync, back to back and after IDLE_S of idle (as sequential calls leave it). On a virtual disk the second can
    be several times the first, and it is the one a sequential agent pays. Then the same after idle from each CPU in
    turn (`after_idle_by_cpu_ms`): a disk whose completions all land on one CPU wakes a process waiting on another
    with one more cross-CPU wake-up, so which CPU a proxy happens to run on moves its fsync."""
    path = directory / "fsync-probe.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        costs: dict[str, Any] = {
            "back_to_back_ms": _durable_append_ms(fd, 0.0),
            "after_idle_ms": _durable_append_ms(fd, IDLE_S),
        }
        allowed = os.sched_getaffinity(0)
        if len(allowed) > 1:
            by_cpu = {}
            try:
                for cpu in sorted(allowed)[:FSYNC_CPUS]:
                    os.sched_setaffinity(0, {cpu})
                    by_cpu[str(cpu)] = _durable_append_ms(fd, IDLE_S)
            finally:
                os.sched_setaffinity(0, allowed)
            costs["after_idle_by_cpu_ms"] = by_cpu
        return costs
    finally:
        os.close(fd)
        path.unlink()


FSYNC_CPUS = 8  # the first so many CPUs this process may run on are timed one by one


def _durable_append_ms(fd: int, idle: float) -> float:
    line = b"x" * 607 + b"\n"
    samples = []
    for _ in range(FSYNC_SAMPLES):
        if idle:
            time.sleep(idle)
        os.write(fd, line)
        start = time.perf_counter_ns()
        os.fdatasync(fd)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1e6


def floor_argv(box: Sandbox, fsync: bool) -> list[str]:
    """The floor relay in front of probe.py, its log beside mcphost's (same file system)."""
    log = box.data / "floor.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    return [sys.executable, str(FLOOR), str(log), *([] if fsync else ["--no-fsync"]), "--", sys.executable, str(PROBE)]


def open_plain(
    key: str,
    box: Sandbox,
    stack: ExitStack,
    urls: dict[str, tuple[str, dict[str, str]]],
    fsync: bool = True,
    mcphost: list[str] | None = None,
) -> tuple[Rpc, bool]:
    """A connected, initialised plain client for path `key`; whether its calls go through mcphost (started as
    `mcphost`, by default the installed command)."""
    rpc: Rpc
    if key in ("direct", "direct-paced"):
        rpc = StdioRpc([sys.executable, str(PROBE)], dict(os.environ), stack.enter_context(box.stderr_file(key)))
    elif key == "floor":
        rpc = StdioRpc(floor_argv(box, fsync), dict(os.environ), stack.enter_context(box.stderr_file("floor")))
    elif key in ("in-process", "relay", "relay-sockets"):
        argv = [*(mcphost or mcphost_command()), "mcp", "--config", str(box.config)]
        if key == "in-process":
            argv.append("--in-process")
        rpc = StdioRpc(argv, box.env(), stack.enter_context(box.stderr_file(key)), sockets=key == "relay-sockets")
    else:
        url, headers = urls[key]
        rpc = HttpRpc(url, headers, modern=key == "http-2026")
    stack.callback(rpc.close)
    rpc.initialize()
    if key in ("relay", "relay-sockets") and "relaying to" not in box.stderr_tail(key):
        # `mcphost mcp` says so on stderr before it speaks; without it the row would time the in-process path.
        raise BenchFailure(f"mcphost mcp did not relay to the daemon: {box.stderr_tail('relay')!r}")
    return rpc, key in MCPHOST_PATHS


def start_servers(
    paths: list[str], box: Sandbox, stack: ExitStack, mcphost: list[str] | None = None
) -> tuple[dict[str, tuple[str, dict[str, str]]], dict[str, str], dict[str, str], dict[str, int]]:
    """The daemon and the peers the chosen paths need: their URLs and headers, peer versions, unavailable peers, and
    the process serving each path that has one ("relay" and "http": the daemon)."""
    urls: dict[str, tuple[str, dict[str, str]]] = {}
    versions: dict[str, str] = {}
    unavailable: dict[str, str] = {}
    pids: dict[str, int] = {}
    if set(DAEMON_PATHS) & set(paths):
        daemon = start_daemon(box, stack, mcphost)
        urls["http"] = urls["http-2026"] = (daemon.url, daemon.headers)
        pids["relay"] = pids["relay-sockets"] = pids["http"] = pids["http-2026"] = daemon.process.pid
    for key in PEERS:
        if key not in paths:
            continue
        try:
            peer, url, pid = start_peer(key, box, stack)
        except PeerUnavailable as exc:
            unavailable[key] = str(exc)
            continue
        urls[key], versions[key], pids[key] = (url, {}), peer.version, pid
    return urls, versions, unavailable, pids


def label(key: str, versions: dict[str, str]) -> str:
    version = versions.get(key)
    return LABELS[key].format(version=f" {version}" if version else "")


def measure_plain(
    opts: argparse.Namespace,
    box: Sandbox,
    stack: ExitStack,
    urls: dict[str, tuple[str, dict[str, str]]],
    versions: dict[str, str],
    unavailable: dict[str, str],
    pids: dict[str, int],
) -> list[Target]:
    targets: list[Target] = []
    for key in opts.paths:
        if key in unavailable:
            continue
        start = time.perf_counter()
        try:
            rpc, through = open_plain(key, box, stack, urls, opts.fsync)
        except (RpcError, BenchFailure, OSError, ValueError) as exc:
            if key in PEERS:
                unavailable[key] = f"could not open a session: {exc}"
                continue
            raise BenchFailure(f"{label(key, versions)}: {exc}\n{box.stderr_tail(key)}") from exc
        tool, args = (THROUGH_TOOL, THROUGH_ARGS) if through else (DIRECT_TOOL, DIRECT_ARGS)

        def call(rpc: Rpc = rpc, tool: str = tool, args: dict[str, Any] = args) -> tuple[str, bool]:
            return rpc.call_tool(tool, args)

        target = Target(key, label(key, versions), call, through, (time.perf_counter() - start) * 1000)
        target.rpc = rpc
        target.roots = [rpc.process.pid] if isinstance(rpc, StdioRpc) else []
        target.roots += [pids[key]] if key in pids else []
        targets.append(target)
    interleaved(targets, opts.warmup, opts.rounds, opts.calls, unavailable, opts.pin_proxy)
    idle_cost(targets, IDLE_WINDOW_S)
    return targets


# ---------------------------------------------------------------------------------------------------- --sdk


def measure_sdk(
    opts: argparse.Namespace,
    box: Sandbox,
    urls: dict[str, tuple[str, dict[str, str]]],
    versions: dict[str, str],
    unavailable: dict[str, str],
    mode: str,
) -> list[Target]:
    """The same paths driven by the official MCP SDK client, `mode` legacy or auto, timed the same way."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    results: list[Target] = []

    async def main() -> None:
        async with contextlib.AsyncExitStack() as astack:
            clients: list[tuple[Target, Any]] = []
            for key in opts.paths:
                # The SDK's stdio client spawns on pipes only; in auto mode its HTTP client is the 2026-07-28 row.
                # The SDK times the paths as they are: nothing paced.
                if key in unavailable or key in ("relay-sockets", "http-2026", "direct-paced"):
                    continue
                start = time.perf_counter()
                errlog = astack.enter_context((box.root / f"sdk-{mode}-{key}.stderr").open("w", encoding="utf-8"))
                if key in ("direct", "floor", "in-process", "relay"):
                    if key == "direct":
                        params = StdioServerParameters(command=sys.executable, args=[str(PROBE)], cwd=str(REPO))
                    elif key == "floor":
                        argv = floor_argv(box, opts.fsync)
                        params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
                    else:
                        argv = [*mcphost_command(), "mcp", "--config", str(box.config)]
                        argv += ["--in-process"] if key == "in-process" else []
                        params = StdioServerParameters(command=argv[0], args=argv[1:], env=box.env(), cwd=str(REPO))
                    transport: Any = stdio_client(params, errlog=errlog)
                else:
                    url, headers = urls[key]
                    http = await astack.enter_async_context(create_mcp_http_client(headers=headers))
                    transport = streamable_http_client(url, http_client=http)
                client = await astack.enter_async_context(Client(transport, mode=mode, cache=None))
                if key == "relay" and "relaying to" not in box.stderr_tail(f"sdk-{mode}-relay"):
                    raise BenchFailure(f"SDK {mode}: mcphost mcp did not relay to the daemon")
                through = key in MCPHOST_PATHS
                target = Target(key, f"SDK {mode}: {label(key, versions)}", lambda: ("", False), through)
                target.setup_ms = (time.perf_counter() - start) * 1000
                clients.append((target, client))
            await timed(clients)

    async def timed(clients: list[tuple[Target, Any]]) -> None:
        async def one(target: Target, client: Any) -> int:
            tool, args = (THROUGH_TOOL, THROUGH_ARGS) if target.through_mcphost else (DIRECT_TOOL, DIRECT_ARGS)
            start = time.perf_counter_ns()
            result = await client.call_tool(tool, args)
            elapsed = time.perf_counter_ns() - start
            target.calls_made += 1
            text = "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")
            if result.is_error or text != EXPECTED_TEXT:
                target.bad.append(f"is_error={result.is_error}, text={text[:200]!r}")
            return elapsed

        per_round: dict[str, int] = {}
        for target, client in clients:
            warm: list[int] = []
            for _ in range(opts.warmup + 1):
                warm.append(await one(target, client))
                if sum(warm) > 2_000_000_000:  # enough warming for a path that is this slow
                    break
            if target.bad:
                raise BenchFailure(f"{target.label}: {target.bad[0]}")
            per_round[target.label] = opts.calls
            if statistics.median(warm) > SLOW_CALL_NS:
                # A combination that starts a process per call (the SDK's auto mode against supergateway does):
                # a few calls per round say as much, in seconds instead of many minutes.
                per_round[target.label] = min(opts.calls, SLOW_CALLS_PER_ROUND)
                target.note = f"{per_round[target.label]} calls per round: a call took over 100 ms"
        for index in range(opts.rounds):
            shift = index % len(clients)
            for target, client in clients[shift:] + clients[:shift]:
                target.rounds_ns.append([await one(target, client) for _ in range(per_round[target.label])])
        results.extend(t for t, _ in clients)

    anyio.run(main)
    return results


# ---------------------------------------------------------------------------------------------------- the run


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """A hung child would block a read forever: SIGALRM turns that into a failure after `seconds`."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise OutOfTime(f"no result within --timeout {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def rows_of(targets: list[Target], direct: Target | None) -> list[dict[str, Any]]:
    rows = []
    base = summary(direct)["p50_ms"] if direct is not None else None
    for target in targets:
        s = summary(target)
        rows.append(
            {
                "path": target.key,
                "label": target.label,
                **s,
                "ratio": s["p50_ms"] / base if base else None,
                "setup_ms": target.setup_ms,
                "calls_made": target.calls_made,
                "reconnects": target.rpc.reconnects if isinstance(target.rpc, HttpRpc) else 0,
                "note": target.note,
            }
        )
    return rows


def run(opts: argparse.Namespace) -> dict[str, Any]:
    if opts.payload:
        use_payload(opts.payload, opts.payload_shape)
    started = time.perf_counter()
    host = machine()
    ticks = cpu_ticks()
    with tempfile.TemporaryDirectory(prefix="mcphost-bench-paths-") as tmp:
        box = Sandbox(Path(tmp))
        box.prepare(opts.fsync)
        fsync = fsync_cost(box.root)
        with deadline(opts.timeout):
            with ExitStack() as stack:
                urls, versions, unavailable, pids = start_servers(opts.paths, box, stack)
                watcher = watch_daemon(box, stack, pids["http"]) if opts.editor and "http" in pids else None
                plain = measure_plain(opts, box, stack, urls, versions, unavailable, pids)
                sdk: list[Target] = []
                if opts.sdk:
                    for mode in ("legacy", "auto"):
                        sdk.extend(measure_sdk(opts, box, urls, versions, unavailable, mode))
                editor = watched(watcher, box) if watcher is not None else None
                # Leaving the stack ends every session and server, so every record is on disk when counted.
            logged = count_tool_calls(box.activity_log)
    for target in plain + sdk:
        # Error answers are cheap to produce; timings that include them would flatter the path.
        if target.bad:
            raise BenchFailure(
                f"{target.label}: {len(target.bad)} of {target.calls_made} answers wrong: {target.bad[0]}"
            )
    made = sum(t.calls_made for t in plain + sdk if t.through_mcphost)
    if logged != made:
        raise BenchFailure(f"{made} calls went through mcphost but activity.jsonl holds {logged} tool_call records")
    if editor is not None:
        editor["calls_through_the_daemon"] = sum(t.calls_made for t in plain + sdk if t.key in DAEMON_PATHS)
        if editor["tool_calls"] < editor["calls_through_the_daemon"]:
            raise BenchFailure(
                f"the editor watching was told {editor['tool_calls']} tool calls' records for "
                f"{editor['calls_through_the_daemon']} calls through the daemon"
            )
    report: dict[str, Any] = {
        "benchmark": "paths",
        "machine": host,
        "settings": {
            "paths": opts.paths,
            "calls_per_round": opts.calls,
            "rounds": opts.rounds,
            "warmup": opts.warmup,
            "policy": "read = allow",
            "activity_log": f"on, fsync = {'true' if opts.fsync else 'false'}",
            "sdk": opts.sdk,
            "pin_proxy": opts.pin_proxy,
            "editor": opts.editor,
            "payload_bytes": opts.payload,
            "payload_shape": opts.payload_shape if opts.payload else None,
        },
        "activity_log_tool_calls": logged,
        "fsync": fsync,
        "rows": rows_of(plain, next((t for t in plain if t.key == "direct"), None)),
        "unavailable": unavailable,
    }
    if sdk:
        report["sdk_rows"] = []
        for mode in ("legacy", "auto"):
            group = [t for t in sdk if t.label.startswith(f"SDK {mode}:")]
            report["sdk_rows"] += rows_of(group, next((t for t in group if t.key == "direct"), None))
    if editor is not None:
        report["editor"] = editor
    report["targets"] = targets(report)
    report["machine"]["load_average_1m_end"] = os.getloadavg()[0]
    report["machine"]["steal"] = steal_share(ticks, cpu_ticks())
    report["wall_s"] = time.perf_counter() - started
    return report


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, judged for information only."""
    rows = {r["path"]: r for r in report["rows"]}
    out: list[dict[str, Any]] = []
    mine = [rows[k] for k in MCPHOST_PATHS if k in rows and rows[k]["ratio"] is not None]
    if mine:
        worst = max(mine, key=lambda r: r["ratio"])
        out.append(
            {
                "target": f"every mcphost path within {TARGET_RATIO:.1f}x direct stdio",
                "met": worst["ratio"] <= TARGET_RATIO,
                "detail": f"worst: {worst['path']} {worst['ratio']:.2f}x",
            }
        )
    peers = [rows[k] for k in PEERS if k in rows and rows[k]["ratio"] is not None]
    if "http" in rows and rows["http"]["ratio"] is not None and not peers:
        out.append(
            {"target": "mcphost serve (HTTP) ratio below every peer's", "met": None, "detail": "no peer measured"}
        )
    if "http" in rows and rows["http"]["ratio"] is not None and peers:
        http_ratio = rows["http"]["ratio"]
        detail = ", ".join(f"{p['path']} {p['ratio']:.2f}x" for p in peers)
        missing = [k for k in PEERS if k not in rows]
        out.append(
            {
                "target": "mcphost serve (HTTP) ratio below every peer's",
                "met": all(http_ratio < p["ratio"] for p in peers),
                "detail": f"HTTP {http_ratio:.2f}x; {detail}"
                + (f"; not measured: {', '.join(missing)}" if missing else ""),
            }
        )
    return out


def by_cpu(fsync: dict[str, Any]) -> str:
    costs = fsync.get("after_idle_by_cpu_ms")
    if not costs:
        return ""
    return "; after idle from each CPU: " + ", ".join(f"cpu{cpu} {ms:.3f}" for cpu, ms in costs.items()) + " ms"


def render(report: dict[str, Any]) -> str:
    m, s = report["machine"], report["settings"]
    lines = [
        f"mcphost paths: {m['cpus']} CPUs, {m['implementation']} {m['python']}, {m['platform']}, "
        f"load average {m['load_average_1m']:.2f} at start",
        (
            f'read call read_notes {{"text": <{s["payload_bytes"]} bytes of '
            f"{'JSON on one line' if s.get('payload_shape') == 'json' else 'source-like text'}>}}, echoed back,"
            if s.get("payload_bytes")
            else 'read call read_notes {"text": "x"}'
        )
        + " to tests/servers/probe.py; plain JSON-RPC client (stdlib), one session per path",
        f"through mcphost: call_tool_read, policy allow, activity log on, {s['activity_log'].split(', ')[1]} "
        f"({report['activity_log_tool_calls']} tool_call records, one per call made: checked)",
        f"a durable append here (608 bytes + fdatasync, p50): {report['fsync']['back_to_back_ms']:.3f} ms back to "
        f"back, {report['fsync']['after_idle_ms']:.3f} ms after {IDLE_S * 1000:.0f} ms idle{by_cpu(report['fsync'])}",
        f"{s['calls_per_round']} sequential calls per path per round, {s['rounds']} rounds (order rotated), after "
        f"{s['warmup']} warm-up calls; p50/p95: the median over the rounds of each round's p50/p95",
        "CPU ms/call (median over the rounds, every thread, from /proc): what the path's own processes spent on the "
        "CPU per call (mcphost's, the relay's and the daemon's, a peer's, the floor's), and what the upstream did",
    ]
    if report.get("editor"):
        e = report["editor"]
        lines.append(
            f"an editor attached to the daemon takes its activity, as the VS Code extension does (--editor): told "
            f"{e['tool_calls']} tool calls' records for {e['calls_through_the_daemon']} calls through the daemon"
        )
    if s.get("pin_proxy") is not None:
        lines.append(
            f"pinned after the warm-up (--pin-proxy): each path's own processes on cpu{s['pin_proxy']} alone, the "
            "upstream on the other CPUs; the client where the scheduler puts it"
        )
    lines.append("")
    lines += table(report["rows"], report["unavailable"], [k for k in s["paths"]])
    reopened = [f"{r['path']} {r['reconnects']}" for r in report["rows"] if r["reconnects"]]
    if reopened:
        lines.append(
            f"(keep-alive connections the server closed while idle, reopened by the client: {', '.join(reopened)})"
        )
    rows = {r["path"]: r for r in report["rows"]}
    floor = rows.get("floor")
    over = [f"{k} {rows[k]['p50_ms'] / floor['p50_ms']:.2f}x" for k in MCPHOST_PATHS if k in rows] if floor else []
    if over:
        lines.append(f"(against the floor, the least a proxy with a durable record costs here: {', '.join(over)})")
    paced = rows.get("direct-paced")
    slower = [f"{k} {rows[k]['p50_ms'] / paced['p50_ms']:.2f}x" for k in MCPHOST_PATHS if k in rows] if paced else []
    if paced and slower and "direct" in rows:
        lines.append(
            f"(the upstream called as seldom as in process calls it answers {paced['ratio']:.2f}x as slowly as called "
            f"back to back; against direct paced so: {', '.join(slower)})"
        )
    idle = [r for r in report["rows"] if r.get("idle")]
    if idle:
        lines += [
            "",
            f"idle, the session open and no call for {IDLE_WINDOW_S:.0f} s (the path's own processes, every thread; "
            "the daemon is shared by relay and HTTP):",
        ]
        lines += [
            f"  {r['label']}: {r['idle']['cpu_ms_per_s']:.2f} ms CPU/s, {r['idle']['wakeups_per_s']:.0f} wake-ups/s"
            for r in idle
        ]
    if report.get("sdk_rows"):
        lines += ["", "the same paths with the MCP SDK client (ratio to the SDK's direct stdio in the same mode)", ""]
        lines += table(report["sdk_rows"], report["unavailable"], [])
    lines += ["", "targets (information only)"]
    for t in report["targets"]:
        verdict = "n/a " if t["met"] is None else "PASS" if t["met"] else "MISS"
        lines.append(f"  {verdict}  {t['target']} ({t['detail']})")
    steal = m.get("steal")
    lines.append(
        f"\nwall time {report['wall_s']:.0f} s; load average {m['load_average_1m_end']:.2f} at end"
        + ("" if steal is None else f"; steal {steal:.1%} of this machine's CPU time (the host's other guests)")
    )
    return "\n".join(lines) + "\n"


def table(rows: list[dict[str, Any]], unavailable: dict[str, str], order: list[str]) -> list[str]:
    cpu = any(r.get("cpu_ms_per_call") for r in rows)
    head = "| path | p50 ms | p95 ms | vs direct stdio |" + (" CPU ms/call: path | upstream |" if cpu else "")
    out = [head, "|---|---:|---:|---:|" + ("---:|---:|" if cpu else "")]
    by_path = {r["path"]: r for r in rows}
    # The plain table follows --paths and names the unavailable peers; the SDK table is in its own row order.
    entries: list[dict[str, Any] | str] = [by_path.get(k) or k for k in order] if order else list(rows)
    for r in entries:
        if isinstance(r, str):
            if r in unavailable:
                out.append(f"| {label(r, {})} | unavailable: {unavailable[r]} | | |" + (" | |" if cpu else ""))
            continue
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "n/a"
        note = f" ({r['note']})" if r.get("note") else ""
        line = f"| {r['label']}{note} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {ratio} |"
        if cpu:
            spent = r.get("cpu_ms_per_call")
            if spent is None:
                line += " | |"
            else:
                own = f"{spent['proxy']:.2f}" if spent["proxy"] is not None else "-"
                line += f" {own} | {spent['upstream']:.2f} |"
        out.append(line)
    return out


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated subset of {','.join(PATHS)}")
    parser.add_argument("--calls", type=int, help="sequential calls per path per round (default 200; --quick 50)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 7; --quick 3)")
    parser.add_argument("--warmup", type=int, help="untimed calls per path before timing (default 50; --quick 10)")
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: a smoke run of ~20 s")
    parser.add_argument("--sdk", action="store_true", help="also time the paths with the MCP SDK client")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after this many seconds")
    parser.add_argument(
        "--no-fsync",
        dest="fsync",
        action="store_false",
        help="[log] fsync = false: what the durable record costs each call (the targets are measured with it on)",
    )
    parser.add_argument(
        "--pin-proxy",
        type=int,
        metavar="CPU",
        help="after the warm-up, run each path's own processes on this CPU alone and the upstream on the others "
        "(Linux): where a proxy runs moves its fsync's cost",
    )
    parser.add_argument(
        "--editor",
        action="store_true",
        help="an editor attached to the daemon takes its activity, as the VS Code extension does: what the relay "
        "and HTTP paths cost while VS Code is open",
    )
    parser.add_argument(
        "--payload",
        type=int,
        default=0,
        metavar="BYTES",
        help="each call carries this many bytes of source-like text as its argument, echoed in its answer (default: "
        'the one-character `{"text": "x"}`): what a call that reads or writes a file costs each path',
    )
    parser.add_argument(
        "--payload-shape",
        choices=PAYLOAD_SHAPES,
        default="code",
        help='with --payload: "code", numbered lines of source (default), or "json", one line of JSON records as a '
        "web API answers",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    opts = parser.parse_args(argv)
    quick = opts.quick
    opts.calls = opts.calls if opts.calls is not None else (50 if quick else 200)
    opts.rounds = opts.rounds if opts.rounds is not None else (3 if quick else 7)
    opts.warmup = opts.warmup if opts.warmup is not None else (10 if quick else 50)
    opts.paths = [p.strip() for p in opts.paths.split(",") if p.strip()]
    unknown = [p for p in opts.paths if p not in PATHS]
    if unknown or not opts.paths:
        parser.error(f"--paths: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(PATHS)}")
    if opts.pin_proxy is not None:
        allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
        if opts.pin_proxy not in allowed or len(allowed) < 2:
            parser.error(f"--pin-proxy: CPU {opts.pin_proxy} is not one of two or more this process may use")
    if opts.calls < 1 or opts.rounds < 1 or opts.warmup < 0:
        parser.error("--calls and --rounds must be at least 1, --warmup at least 0")
    if not 0 <= opts.payload <= 1 << 20:
        parser.error("--payload: from 0 to 1048576 bytes")
    if opts.editor and not set(DAEMON_PATHS) & set(opts.paths):
        parser.error(f"--editor watches the daemon: name one of {', '.join(DAEMON_PATHS)} in --paths")
    if "direct-paced" in opts.paths and not {"direct", "in-process"} <= set(opts.paths):
        parser.error("--paths: direct-paced is paced by direct and in-process: name both")
    # The table's order, whatever order they were named in.
    opts.paths = [p for p in PATHS if p in opts.paths]
    return opts


def main(argv: list[str] | None = None) -> int:
    return run_bench("bench_paths", argv, parse_cli, run, render)


if __name__ == "__main__":
    sys.exit(main())
