"""`mcphost call` and `mcphost tools` through a running daemon, with the standard library only (no MCP SDK, no
httpx): importing those costs most of a second; this module costs a few milliseconds.

The daemon's agents' door is streamable HTTP MCP (`mcp.url` and `mcp.headers` in the discovery file), spoken just
enough for one call. `mcphost call` makes it one exchange of the 2026-07-28 revision (`call_once`): no session, and
the call is withdrawn by closing the connection, which the daemon sees however the command ends, killed included.
`mcphost tools`, and a daemon that does not take that revision, get the legacy handshake (`initialize`,
`notifications/initialized`), one request, and the session deleted; Ctrl-C there sends `notifications/cancelled`.
Answers come as JSON or as an event stream; the daemon's notifications are passed over and its requests refused
(this client declares no capabilities, so it is asked nothing). Loopback only, through no proxy: the token goes
nowhere else. A call may wait on a prompt in an editor for as long as the person takes: only connecting and the
handshake have a time limit, and Ctrl-C (or SIGTERM, SIGHUP: a timeout wrapper, a closed terminal) withdraws the call
before the command ends.

`mcphost status` and `grants` ask on the editor channel instead: mcphost.cli.channel.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from mcphost import __version__
from mcphost.discovery import NOT_LISTED, is_loopback_url, tcp_peer_uid

PROTOCOL_VERSION = "2025-06-18"
# The revision of a call in one exchange, without a session; its client cancels a call by closing the connection.
MODERN_VERSION = "2026-07-28"
# JSON-RPC errors of a daemon that does not take a call in MODERN_VERSION, before anything is called: a handshake
# is made instead (mcp.shared.inbound's UNSUPPORTED_PROTOCOL_VERSION, HEADER_MISMATCH; this module imports no SDK).
NOT_MODERN = frozenset({-32022, -32020})
# What records and prompts call the command that made a call (with mcphost's version): the command a person typed,
# on every route it takes (mcphost.approval.prompt.ONE_SHOT_CLIENT names the first; a test keeps them equal).
CALL_CLIENT = "mcphost call"
TOOLS_CLIENT = "mcphost tools"
# Mirrors mcphost.serve.mcp_server.WARNING_PREFIX (a test keeps them equal): importing that module imports the SDK.
WARNING_PREFIX = "mcphost warning: "
# Reaching the daemon on loopback takes well under a millisecond; one that does not accept in this long is gone.
CONNECT_TIMEOUT = 5.0
# The handshake and the session's end do no work in the daemon; the call itself has no limit (a prompt may wait).
HANDSHAKE_TIMEOUT = 30.0
CANCEL_TIMEOUT = 2.0
METHOD_NOT_FOUND = -32601


class Ended(BaseException):
    """The command was told to end (SIGTERM, SIGHUP) while its call waited: the call was withdrawn."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# Signals that end the command, as Ctrl-C does: a prompt left up after it would run the call, for nobody, once allowed.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _ended_by_signals() -> Iterator[None]:
    """Within: SIGTERM and SIGHUP raise Ended, so the call is withdrawn as on Ctrl-C (only the main thread can
    take signals; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def end(signum: int, _frame: object) -> None:
        raise Ended(signum)

    previous = {signum: signal.signal(signum, end) for signum in ENDING_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class DaemonError(Exception):
    """The daemon could not be asked, or did not answer as MCP says.

    `sent` tells whether the request may have reached the daemon: when it is False the daemon never saw the call,
    and the command may make it some other way.
    """

    def __init__(self, message: str, *, sent: bool, code: int | None = None) -> None:
        super().__init__(message)
        self.sent = sent
        self.code = code  # the JSON-RPC error's code, when the daemon answered with one


class McpSession:
    """One MCP session with the daemon's streamable HTTP endpoint.

    with McpSession(info["mcp"]["url"], info["mcp"]["headers"], CALL_CLIENT) as session:
        result = session.call_tool("call_tool_read", {...})   # the CallToolResult, as JSON
    """

    def __init__(self, url: str, headers: dict[str, str] | None = None, client_name: str = CALL_CLIENT) -> None:
        if not is_loopback_url(url):
            raise DaemonError(f"refusing to send the agents' token to {url!r}: not a loopback address", sent=False)
        parts = urlsplit(url)
        self.url = url
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {str(k): str(v) for k, v in (headers or {}).items()}
        self.client_name = client_name
        self._conn: http.client.HTTPConnection | None = None
        self._session_id: str | None = None
        self._protocol_version = PROTOCOL_VERSION
        self.withdrawn: bool | None = None  # a call cut short here: whether the daemon took its withdrawal
        self._ids = itertools.count(1)

    def __enter__(self) -> McpSession:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the session

    def open(self) -> None:
        """The legacy handshake. Raises DaemonError(sent=False) when the daemon cannot be reached or refuses."""
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": self.client_name, "version": __version__},
        }
        try:
            response, headers = self._request("initialize", params, HANDSHAKE_TIMEOUT)
        except DaemonError as exc:
            exc.sent = False  # initialize changes nothing in the daemon: nothing was called yet
            raise
        self._session_id = headers.get("mcp-session-id")
        result = response.get("result")
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            self._protocol_version = result["protocolVersion"]
        try:
            self._notify("notifications/initialized", None, HANDSHAKE_TIMEOUT)
        except DaemonError as exc:
            exc.sent = False
            raise

    def call_once(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """`tools/call` as one exchange of the 2026-07-28 revision: no session to open and delete (three round
        trips fewer), and the call is withdrawn by closing its connection, which the daemon takes as its client's
        leaving however this command ends (killed too: the kernel closes it). A daemon that does not take the
        revision gets the handshake and `call_tool`. As `call_tool`, otherwise."""
        request_id = next(self._ids)
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": self.client_name, "version": __version__},
        }
        routing = {"mcp-protocol-version": MODERN_VERSION, "mcp-method": "tools/call", "mcp-name": name}
        params = {"name": name, "arguments": arguments, "_meta": meta}
        try:
            with _ended_by_signals():
                response, _ = self._request("tools/call", params, None, request_id, routing)
        except (KeyboardInterrupt, Ended):
            self._drop()
            self.withdrawn = True
            raise
        except DaemonError as exc:
            if exc.code not in NOT_MODERN:
                raise
            self.open()
            try:
                return self.call_tool(name, arguments)
            finally:
                self.close()
        result = response.get("result")
        if not isinstance(result, dict):
            raise DaemonError(f"the daemon answered tools/call without a result: {_brief(response)}", sent=True)
        self._drop()
        return _without_envelope(result)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """`tools/call`, waiting as long as the daemon takes (a prompt may be waiting for a person). The result
        as JSON; DaemonError when there is none (the daemon went away, or answered with a JSON-RPC error)."""
        request_id = next(self._ids)
        try:
            with _ended_by_signals():
                response, _ = self._request("tools/call", {"name": name, "arguments": arguments}, None, request_id)
        except KeyboardInterrupt:
            self._withdraw(request_id, "interrupted in the terminal (Ctrl-C)")
            raise
        except Ended as ended:
            self._withdraw(request_id, f"the command was ended ({ended})")
            raise
        result = response.get("result")
        if not isinstance(result, dict):
            raise DaemonError(f"the daemon answered tools/call without a result: {_brief(response)}", sent=True)
        return result

    def close(self) -> bool:
        """Delete the session (the daemon forgets it at once, instead of when it times out), and disconnect. True
        when the daemon answered the delete."""
        deleted = False
        if self._session_id is not None:
            with contextlib.suppress(OSError, http.client.HTTPException, DaemonError):
                conn = self._connection(CANCEL_TIMEOUT, fresh=True)
                conn.request("DELETE", self._path, headers=self._session_headers())
                conn.getresponse().read()
                deleted = True
            self._session_id = None
        self._drop()
        return deleted

    # ---- HTTP

    def _session_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self._session_id is not None:
            headers["mcp-session-id"] = self._session_id
            headers["mcp-protocol-version"] = self._protocol_version
        return headers

    def _connection(self, timeout: float | None, *, fresh: bool = False) -> http.client.HTTPConnection:
        if fresh:
            self._drop()
        if self._conn is None:
            # http.client never consults proxy settings (urllib would): the token goes to loopback and nowhere else.
            conn = http.client.HTTPConnection(self._host, self._port, timeout=CONNECT_TIMEOUT)
            try:
                conn.connect()
            except OSError as exc:
                conn.close()
                raise DaemonError(f"cannot reach the daemon at {self.url}: {_reason(exc)}", sent=False) from None
            assert conn.sock is not None
            owner = tcp_peer_uid(conn.sock)
            if owner is not None and owner != os.getuid():
                conn.close()
                whose = "no process this user can see" if owner == NOT_LISTED else f"uid {owner}"
                raise DaemonError(
                    f"refusing to send the agents' token to {self.url}: that port is held by {whose}, not by you "
                    "(the daemon that announced it has stopped, and another user's program took its port); "
                    "`mcphost status` shows the daemons running",
                    sent=False,
                )
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._conn = conn
        assert self._conn.sock is not None
        self._conn.sock.settimeout(timeout)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _post(
        self, message: dict[str, Any], timeout: float | None, routing: dict[str, str] | None = None
    ) -> http.client.HTTPResponse:
        # ASCII: an argument from a command line that is not UTF-8 holds lone surrogates, which only escapes carry
        # (the daemon then refuses the call, saying which argument).
        body = json.dumps(message, separators=(",", ":")).encode("ascii")
        headers = {
            **self._session_headers(),
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(routing or {}),
        }
        conn = self._connection(timeout)
        try:
            conn.request("POST", self._path, body=body, headers=headers)
            return conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            raise DaemonError(f"the daemon went away: {_reason(exc)}", sent=True) from None

    def _notify(self, method: str, params: dict[str, Any] | None, timeout: float | None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        response = self._post(message, timeout)
        body = _read_all(response, self)
        if response.status >= 300:
            raise DaemonError(_http_error(response.status, body), sent=True)

    def _request(
        self,
        method: str,
        params: dict[str, Any],
        timeout: float | None,
        request_id: int | None = None,
        routing: dict[str, str] | None = None,
    ) -> tuple[dict[str, Any], http.client.HTTPMessage]:
        """Send one request and read its answer, from a JSON body or an SSE stream."""
        if request_id is None:
            request_id = next(self._ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = self._post(message, timeout, routing)
        if response.status != 200:
            body = _read_all(response, self)
            raise DaemonError(_http_error(response.status, body), sent=True, code=_error_code(body))
        content_type = (response.getheader("content-type") or "").split(";")[0].strip().lower()
        if content_type == "text/event-stream":
            messages: Iterator[Any] = _sse_messages(response, self)
        else:
            body = _read_all(response, self)
            try:
                decoded = json.loads(body)
            except ValueError:
                raise DaemonError(f"the daemon answered {method} with something not JSON", sent=True) from None
            messages = iter(decoded if isinstance(decoded, list) else [decoded])
        for message in messages:
            if not isinstance(message, dict):
                continue
            if "method" in message:
                if "id" in message:
                    self._refuse(message)  # a request of the daemon's (this client declared no capabilities)
                continue  # a notification: progress, a log message
            if message.get("id") != request_id:
                continue
            if content_type == "text/event-stream":
                self._drop()  # the rest of the stream is not read: this connection is not reused
            error = message.get("error")
            if isinstance(error, dict):
                code = error.get("code")
                raise DaemonError(
                    f"the daemon answered {method} with error {code}: {error.get('message')}",
                    sent=True,
                    code=code if isinstance(code, int) else None,
                )
            return message, response.headers
        self._drop()
        raise DaemonError(f"the daemon went away before answering {method}", sent=True)

    def _refuse(self, request: dict[str, Any]) -> None:
        """Answer a request from the daemon on a connection of its own (this one is busy reading the stream)."""
        if request.get("method") == "ping":
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"], "result": {}}
        else:
            error = {"code": METHOD_NOT_FOUND, "message": f"{self.client_name} does not handle {request.get('method')}"}
            answer = {"jsonrpc": "2.0", "id": request["id"], "error": error}
        side = McpSession(self.url, self._headers, self.client_name)
        side._session_id, side._protocol_version = self._session_id, self._protocol_version
        with contextlib.suppress(DaemonError):
            side._notify_raw(answer)
        side._drop()

    def _notify_raw(self, message: dict[str, Any]) -> None:
        response = self._post(message, HANDSHAKE_TIMEOUT)
        _read_all(response, self)

    def _withdraw(self, request_id: int, reason: str) -> None:
        """Ctrl-C during a call: tell the daemon to cancel it, then delete the session (which also ends it).
        `withdrawn` says whether the daemon took either."""
        self._drop()
        self.withdrawn = False
        with _ended_by_signals(), contextlib.suppress(DaemonError, KeyboardInterrupt, Ended):
            params = {"requestId": request_id, "reason": reason}
            self._notify("notifications/cancelled", params, CANCEL_TIMEOUT)
            self.withdrawn = True
        with _ended_by_signals(), contextlib.suppress(KeyboardInterrupt, Ended):
            self.withdrawn = self.close() or self.withdrawn


def _read_all(response: http.client.HTTPResponse, session: McpSession) -> bytes:
    try:
        return response.read()
    except (OSError, http.client.HTTPException) as exc:
        session._drop()
        raise DaemonError(f"the daemon went away: {_reason(exc)}", sent=True) from None


def _sse_messages(response: http.client.HTTPResponse, session: McpSession) -> Iterator[Any]:
    """The JSON messages of an SSE stream: `data:` lines joined per event; comments, ids and retries skipped."""
    data: list[bytes] = []
    while True:
        try:
            line = response.readline()
        except (OSError, http.client.HTTPException) as exc:
            session._drop()
            raise DaemonError(f"the daemon went away during the call: {_reason(exc)}", sent=True) from None
        if not line:
            return  # end of the stream
        line = line.rstrip(b"\r\n")
        if not line:
            if data:
                payload = b"\n".join(data)
                data = []
                try:
                    yield json.loads(payload)
                except ValueError:
                    continue
            continue
        if line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if field == b"data":
            data.append(value[1:] if value.startswith(b" ") else value)


def _http_error(status: int, body: bytes) -> str:
    message = ""
    with contextlib.suppress(ValueError):
        decoded = json.loads(body)
        if isinstance(decoded, dict):
            error = decoded.get("error")
            if isinstance(error, dict):  # a JSON-RPC error in an HTTP error response
                message = str(error.get("message") or "")
            elif decoded.get("message"):
                message = str(decoded["message"])
    return f"the daemon refused the request (HTTP {status}{': ' + message if message else ''})"


def _without_envelope(result: dict[str, Any]) -> dict[str, Any]:
    """The tool's result without what the revision puts in every answer's `_meta` (the server's info): the same
    result as a handshake-era call gets."""
    meta = result.get("_meta")
    if not isinstance(meta, dict) or not any(key.startswith(_ENVELOPE) for key in meta):
        return result
    kept = {key: value for key, value in meta.items() if not key.startswith(_ENVELOPE)}
    return {key: value for key, value in result.items() if key != "_meta"} | ({"_meta": kept} if kept else {})


_ENVELOPE = "io.modelcontextprotocol/"


def _error_code(body: bytes) -> int | None:
    with contextlib.suppress(ValueError):
        decoded = json.loads(body)
        error = decoded.get("error") if isinstance(decoded, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, int) else None
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__


def _brief(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:199] + "…"
