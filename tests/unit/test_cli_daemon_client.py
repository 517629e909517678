"""The commands' own MCP client (`mcphost call` and `mcphost tools` through a daemon), against a scripted HTTP server:
the handshake, JSON and SSE answers, requests from the server, a daemon that goes away. And the light editor-channel
client of `status` and `grants`, against a scripted Unix socket."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mcphost.cli import channel as editor_channel
from mcphost.cli import daemon_client
from mcphost.cli.daemon_client import DaemonError, McpSession
from mcphost.discovery import NoDaemon, tcp_peer_uid
from tests.helpers import NOBODY

Reply = Callable[["Handler", dict[str, Any]], None]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Scripted

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        message = json.loads(body)
        self.server.seen.append((dict(self.headers.items()), message))
        self.server.script(self, message)

    def do_DELETE(self) -> None:
        self.server.seen.append((dict(self.headers.items()), {"DELETE": True}))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    # ---- answers

    def json(self, message: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(message).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def accepted(self) -> None:
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def sse(self, events: list[bytes], headers: dict[str, str] | None = None) -> None:
        """An SSE stream, chunked, as sse-starlette sends it (CRLF line ends)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        for event in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


class Scripted(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: Reply) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = script
        self.seen: list[tuple[dict[str, str], dict[str, Any]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"


@contextmanager
def scripted(script: Reply) -> Iterator[Scripted]:
    server = Scripted(script)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def event(message: Any) -> bytes:
    return b"event: message\r\ndata: " + json.dumps(message).encode() + b"\r\n\r\n"


RESULT = {"content": [{"type": "text", "text": "hi"}], "isError": False}


def daemon_like(answer: Callable[[Handler, dict[str, Any]], None]) -> Reply:
    """Answers the handshake as the daemon does (SSE, a session id), and hands the rest to `answer`."""

    def script(handler: Handler, message: dict[str, Any]) -> None:
        if message.get("method") == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}
            handler.sse([event({"jsonrpc": "2.0", "id": message["id"], "result": result})], {"mcp-session-id": "s1"})
        elif "id" not in message or "method" not in message:
            handler.accepted()  # notifications, and answers to the server's requests
        else:
            answer(handler, message)

    return script


def test_the_handshake_call_and_end_of_a_session() -> None:
    def answer(handler: Handler, message: dict[str, Any]) -> None:
        handler.sse([b": ping\r\n\r\n", event({"jsonrpc": "2.0", "id": message["id"], "result": RESULT})])

    with scripted(daemon_like(answer)) as server, McpSession(server.url, {"Authorization": "Bearer t0k"}) as session:
        assert session.call_tool("call_tool_read", {"name": "a:b"}) == RESULT
    methods = [m.get("method", "DELETE" if m.get("DELETE") else None) for _, m in server.seen]
    assert methods == ["initialize", "notifications/initialized", "tools/call", "DELETE"]
    initialize = server.seen[0][1]["params"]
    assert initialize["protocolVersion"] == "2025-06-18"
    # Records and prompts name the command a person typed, not a library's name.
    assert initialize["clientInfo"]["name"] == "mcphost call"
    assert initialize["capabilities"] == {}, "no elicitation: the daemon must not ask this client anything"
    for headers, _ in server.seen:
        assert headers["Authorization"] == "Bearer t0k"
    for headers, _ in server.seen[1:]:
        assert headers["mcp-session-id"] == "s1" and headers["mcp-protocol-version"] == "2025-06-18"
    assert server.seen[2][1]["params"] == {"name": "call_tool_read", "arguments": {"name": "a:b"}}


def test_one_call_is_one_modern_exchange_without_a_session() -> None:
    def script(handler: Handler, message: dict[str, Any]) -> None:
        meta = {"io.modelcontextprotocol/serverInfo": {"name": "mcphost"}, "mine": 1}
        handler.json({"jsonrpc": "2.0", "id": message["id"], "result": {**RESULT, "_meta": meta}})

    with scripted(script) as server:
        session = McpSession(server.url, {"Authorization": "Bearer t0k"})
        assert session.call_once("call_tool_read", {"name": "a:b"}) == {**RESULT, "_meta": {"mine": 1}}
    [(headers, message)] = server.seen
    assert message["method"] == "tools/call"
    assert (headers["mcp-protocol-version"], headers["mcp-method"], headers["mcp-name"]) == (
        "2026-07-28",
        "tools/call",
        "call_tool_read",
    )
    assert "mcp-session-id" not in headers and headers["Authorization"] == "Bearer t0k"
    meta = message["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}, "no elicitation: nothing to ask this client"
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcphost call"


@pytest.mark.parametrize("code", [-32022, -32020])
def test_a_daemon_that_does_not_take_the_modern_revision_gets_the_handshake(code: int) -> None:
    def answer(handler: Handler, message: dict[str, Any]) -> None:
        handler.json({"jsonrpc": "2.0", "id": message["id"], "result": RESULT})

    legacy = daemon_like(answer)

    def script(handler: Handler, message: dict[str, Any]) -> None:
        if handler.headers.get("mcp-protocol-version") == "2026-07-28":
            handler.json({"jsonrpc": "2.0", "id": message["id"], "error": {"code": code, "message": "no"}}, 400)
        else:
            legacy(handler, message)

    with scripted(script) as server:
        assert McpSession(server.url).call_once("call_tool_read", {"name": "a:b"}) == RESULT
    methods = [m.get("method", "DELETE" if m.get("DELETE") else None) for _, m in server.seen]
    assert methods == ["tools/call", "initialize", "notifications/initialized", "tools/call", "DELETE"]


def test_a_modern_call_refused_for_another_reason_is_not_made_again() -> None:
    def script(handler: Handler, message: dict[str, Any]) -> None:
        handler.json({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": "bad"}}, 400)

    with scripted(script) as server, pytest.raises(DaemonError) as refused:
        McpSession(server.url).call_once("call_tool_read", {"name": "a:b"})
    assert refused.value.sent and refused.value.code == -32602 and len(server.seen) == 1


def test_a_json_answer_is_read_as_well_as_a_stream() -> None:
    def answer(handler: Handler, message: dict[str, Any]) -> None:
        handler.json({"jsonrpc": "2.0", "id": message["id"], "result": RESULT})

    with scripted(daemon_like(answer)) as server, McpSession(server.url) as session:
        assert session.call_tool("retrieve_tools", {"query": "x"}) == RESULT
        assert session.call_tool("retrieve_tools", {"query": "y"}) == RESULT  # the kept-alive connection


def test_notifications_and_requests_of_the_server_are_passed_over_or_refused() -> None:
    def answer(handler: Handler, message: dict[str, Any]) -> None:
        elicit = {"message": "ok?", "requestedSchema": {"type": "object", "properties": {}}}
        handler.sse(
            [
                event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}),
                event({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": elicit}),
                event({"jsonrpc": "2.0", "id": 8, "method": "ping"}),
                b"id: 3\r\nretry: 10\r\n\r\n",
                event({"jsonrpc": "2.0", "id": "other", "result": {}}),
                b'data: {"jsonrpc": "2.0", "id": ' + str(message["id"]).encode() + b",\r\n",
                b'data:  "result": ' + json.dumps(RESULT).encode() + b"}\r\n\r\n",
            ]
        )

    with scripted(daemon_like(answer)) as server, McpSession(server.url) as session:
        assert session.call_tool("call_tool_write", {}) == RESULT, "a message may span several data lines"
    answers = {m["id"]: m for _, m in server.seen if "id" in m and "method" not in m}
    assert answers[7]["error"]["code"] == -32601
    assert answers[8] == {"jsonrpc": "2.0", "id": 8, "result": {}}


def test_a_daemon_that_cannot_be_reached_never_saw_the_call() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nobody listens there now
    with pytest.raises(DaemonError) as caught:
        McpSession(f"http://127.0.0.1:{port}/mcp").open()
    assert caught.value.sent is False
    assert "cannot reach the daemon" in str(caught.value)


def test_a_refused_handshake_never_sent_the_call() -> None:
    def script(handler: Handler, message: dict[str, Any]) -> None:
        handler.json({"error": "unauthorized", "message": "missing or wrong bearer token"}, status=401)

    with scripted(script) as server, pytest.raises(DaemonError) as caught:
        McpSession(server.url).open()
    assert caught.value.sent is False
    assert "HTTP 401: missing or wrong bearer token" in str(caught.value)


def test_a_daemon_that_goes_away_during_the_call_may_have_made_it() -> None:
    def answer(handler: Handler, message: dict[str, Any]) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.wfile.write(b"5\r\n: hi\n\r\n")
        handler.wfile.flush()
        handler.close_connection = True  # and no answer: the stream just ends

    with (
        scripted(daemon_like(answer)) as server,
        McpSession(server.url) as session,
        pytest.raises(DaemonError) as caught,
    ):
        session.call_tool("call_tool_write", {})
    assert caught.value.sent is True


def test_an_error_answer_is_an_error() -> None:
    def answer(handler: Handler, message: dict[str, Any]) -> None:
        handler.json({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": "bad params"}})

    with (
        scripted(daemon_like(answer)) as server,
        McpSession(server.url) as session,
        pytest.raises(DaemonError, match="error -32602: bad params"),
    ):
        session.call_tool("call_tool_write", {})


def test_the_token_goes_to_loopback_only() -> None:
    with pytest.raises(DaemonError, match="not a loopback address"):
        McpSession("http://example.com:80/mcp", {"Authorization": "Bearer secret"})


def test_the_client_names_what_the_daemon_uses() -> None:
    from mcphost.approval.prompt import ONE_SHOT_CLIENT
    from mcphost.editor import protocol
    from mcphost.serve.mcp_server import WARNING_PREFIX

    assert daemon_client.WARNING_PREFIX == WARNING_PREFIX
    assert daemon_client.CALL_CLIENT == ONE_SHOT_CLIENT  # the prompt knows a one-shot `mcphost call` by it
    assert (editor_channel.STATUS, editor_channel.GRANTS_LIST, editor_channel.GRANTS_REVOKE, editor_channel.CONFIG) == (
        protocol.STATUS,
        protocol.GRANTS_LIST,
        protocol.GRANTS_REVOKE,
        protocol.CONFIG,
    )
    from mcphost.editor.wire import MAX_MESSAGE

    assert editor_channel.MAX_SENT_BYTES == MAX_MESSAGE  # what the daemon reads is what a command sends at most


def test_grants_reads_the_state_file_where_the_daemon_keeps_it(sandbox: Any) -> None:
    from mcphost.cli.grants import state_path
    from mcphost.config.state import state_path as daemons_state_path

    assert state_path() == daemons_state_path()


# ---------------------------------------------------------------------------------------------- the editor channel


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n%s" % (
        len(body),
        body,
    )


def read_frames(conn: socket.socket) -> Iterator[dict[str, Any]]:
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            chunk = conn.recv(4096)
            if not chunk:
                return
            buffer += chunk
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        length = int(head.split(b":")[1])
        while len(buffer) < length:
            buffer += conn.recv(4096)
        body, buffer = buffer[:length], buffer[length:]
        yield json.loads(body)


@contextmanager
def channel(tmp_path: Path, answer: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> Iterator[Any]:
    """A Unix socket speaking LSP framing: each message read is handed to `answer`, whose messages are sent back."""
    path = tmp_path / "editor.sock"
    server = socket.socket(socket.AF_UNIX)
    old = os.umask(0o177)
    try:
        server.bind(str(path))
    finally:
        os.umask(old)
    server.listen(1)
    seen: list[dict[str, Any]] = []

    accepted = threading.Event()

    def serve() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return  # closed without a client: the test refused to connect
        accepted.set()
        with conn:
            for message in read_frames(conn):
                seen.append(message)
                for reply in answer(message):
                    conn.sendall(frame(reply))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield {"pid": 1, "editor_socket": str(path)}, seen
        if accepted.is_set():
            thread.join(5)  # everything the client sent has been read once it has hung up
    finally:
        server.close()


def lsp_like(method: str, result: Any) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    def answer(message: dict[str, Any]) -> list[dict[str, Any]]:
        if message.get("method") == "initialize":
            return [{"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {}}}]
        if message.get("method") == method:
            return [
                {"jsonrpc": "2.0", "method": "mcphost/status", "params": {"pending": 0}},
                {"jsonrpc": "2.0", "id": "x1", "method": "mcphost/permissionRequest", "params": {}},
                {"jsonrpc": "2.0", "id": message["id"], "result": result},
            ]
        if message.get("method") == "shutdown":
            return [{"jsonrpc": "2.0", "id": message["id"], "result": None}]
        return []

    return answer


def test_ask_attaches_as_a_watcher_asks_once_and_detaches(tmp_path: Path) -> None:
    with channel(tmp_path, lsp_like("mcphost/grants", {"grants": []})) as (info, seen):
        assert editor_channel.ask(info, "mcphost grants", "mcphost/grants", {}) == {"grants": []}
    methods = [m.get("method") for m in seen]
    assert methods[:3] == ["initialize", "initialized", "mcphost/grants"]
    assert "shutdown" in methods and methods[-1] == "exit"
    options = seen[0]["params"]["initializationOptions"]
    assert options == {"approver": False, "activity": False}
    assert seen[0]["params"]["clientInfo"]["name"] == "mcphost grants"
    refused = next(m for m in seen if m.get("id") == "x1")
    assert refused["error"]["code"] == -32601, "a request it cannot answer is refused, not left waiting"


def test_ask_reports_an_error_answer_and_silence_as_no_daemon(tmp_path: Path, monkeypatch: Any) -> None:
    def failing(message: dict[str, Any]) -> list[dict[str, Any]]:
        if message.get("method") == "initialize":
            return [{"jsonrpc": "2.0", "id": message["id"], "result": {}}]
        if "id" in message:
            return [{"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}}]
        return []

    with channel(tmp_path, failing) as (info, _), pytest.raises(NoDaemon, match="no such method"):
        editor_channel.ask(info, "mcphost status", "mcphost/status")

    monkeypatch.setattr(editor_channel, "ASK_TIMEOUT", 0.3)
    (tmp_path / "quiet").mkdir()
    with channel(tmp_path / "quiet", lambda _m: []) as (info, _), pytest.raises(NoDaemon, match="timed out"):
        editor_channel.ask(info, "mcphost status", "mcphost/status")


def test_ask_refuses_a_socket_others_could_open(tmp_path: Path) -> None:
    with channel(tmp_path, lambda _m: []) as (info, _):
        Path(info["editor_socket"]).chmod(0o666)
        with pytest.raises(NoDaemon, match="refusing to attach"):
            editor_channel.ask(info, "mcphost status", "mcphost/status")


@pytest.mark.parametrize(
    ("on_disk", "daemon_read", "used"),
    [
        (b"[permissions]\n", b"[permissions]\n", True),  # the daemon runs on the file as it is
        (b'[permissions]\nwrite = "deny"\n', b"[permissions]\n", False),  # saved since: the daemon is behind
        (None, None, True),  # no file on either side: the same built-in default
        (b"[permissions]\n", None, False),  # a file appeared since the daemon started on the default
        (None, b"[permissions]\n", False),  # the file was removed: the command says so itself
    ],
)
def test_config_show_takes_the_daemons_config_only_when_it_read_the_file_as_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_disk: bytes | None, daemon_read: bytes | None, used: bool
) -> None:
    import hashlib

    from mcphost import discovery
    from mcphost.cli import config as config_command

    path = tmp_path / "config.toml"
    if on_disk is not None:
        path.write_bytes(on_disk)
    answer = {
        "path": "/elsewhere/spelled/config.toml",
        "exists": daemon_read is not None,
        "sha256": None if daemon_read is None else hashlib.sha256(daemon_read).hexdigest(),
        "config": {"permissions": {"write": "from the daemon"}},
    }
    monkeypatch.setattr(discovery, "for_config", lambda wanted: {"pid": 1, "editor_socket": str(tmp_path / "s")})
    monkeypatch.setattr(editor_channel, "ask", lambda info, name, method, params=None: answer)
    shown = config_command._from_daemon(path)
    if used:
        assert shown == {**answer, "path": str(path)}, "the file named as this command names it"
    else:
        assert shown is None


# ---- whose the listener is


def test_the_uid_behind_a_loopback_connection_is_read_from_the_kernels_table() -> None:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            listener = socket.socket(family)
            listener.bind((host, 0))
        except OSError:
            continue  # no IPv6 loopback here
        listener.listen()
        with listener, socket.create_connection((host, listener.getsockname()[1])) as conn:
            assert tcp_peer_uid(conn) in (os.getuid(), None)  # None: no /proc/net/tcp to ask (not Linux)


@pytest.mark.skipif(not hasattr(os, "seteuid") or os.geteuid() != 0, reason="a socket of another user takes root")
def test_a_port_another_user_holds_gets_no_token_and_no_call() -> None:
    # As when a daemon has stopped and another user's program bound its port before the discovery file was gone.
    os.seteuid(NOBODY)
    try:
        listener = socket.socket()  # the socket's owner is who made it
    finally:
        os.seteuid(0)
    with listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        # Not accepted until the command is done: an accept takes the accepting process's user (root's, here).
        with pytest.raises(DaemonError) as info:
            McpSession(url, {"Authorization": "Bearer secret-agents-token"}).open()
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            received = conn.recv(65536)
    assert info.value.sent is False
    assert f"that port is held by uid {NOBODY}, not by you" in str(info.value)
    assert received == b"", received  # the connection, closed: not a byte of the request
