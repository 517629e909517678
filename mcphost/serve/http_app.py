"""The daemon's HTTP endpoint on loopback: MCP for agents and the REST API for scripts, each behind its own bearer
token, every route behind Host and Origin checks."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
)
from mcp_types import INTERNAL_ERROR
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcphost.pipes import dump_line, valid_id
from mcphost.serve.activity_api import API_PATH, activity_endpoint
from mcphost.serve.mcp_server import HttpCalls, modern_call, response_line, shortcut_call
from mcphost.serve.stdio import STOPPED, shortcut_message, unusable_id
from mcphost.serve.tokens import Secrets

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


def _refuse(status: int, error: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status, headers=headers)


class BearerTokenGuard:
    """Rejects any request without `Authorization: Bearer <token>`: other local users and web pages get 401.

    `wrong_door` names the daemon's other token and where this route's is, so that a script holding the agents'
    token (or the reverse) is told which one to use instead of only "wrong".
    """

    def __init__(self, app: ASGIApp, token: str, wrong_door: tuple[str, str] | None = None) -> None:
        self.app = app
        self._expected = token.encode()
        self._other = wrong_door[0].encode() if wrong_door else None
        self._hint = wrong_door[1] if wrong_door else ""

    def admits(self, supplied: bytes | None) -> bool:
        return bool(self._expected) and hmac.compare_digest(_bearer(supplied), self._expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            (supplied,) = headers_of(scope, b"authorization")
            if not self.admits(supplied):
                message = "missing or wrong bearer token: see `mcphost status`"
                if self._other is not None and hmac.compare_digest(_bearer(supplied), self._other):
                    message = self._hint
                response = _refuse(401, "unauthorized", message, {"WWW-Authenticate": 'Bearer realm="mcphost"'})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _bearer(authorization: bytes | None) -> bytes:
    """The token of an `Authorization: Bearer <token>` header; b"" for any other. The scheme's name is
    case-insensitive (RFC 9110, 11.1): `bearer <token>` is the same credential."""
    if authorization is None or authorization[:7].lower() != b"bearer ":
        return b""
    return authorization[7:].strip(b" ")


class LoopbackOnly:
    """DNS-rebinding defence for every route, unknown ones included: a Host header that is not this daemon's
    loopback address gets 421, a browser Origin other than a loopback page of this port gets 403, before any
    routing or token check (a page that rebinds a name to 127.0.0.1 must learn nothing, not even a 404)."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self.app = app
        settings = security_settings(port)
        self._hosts = frozenset(h.encode("latin-1") for h in settings.allowed_hosts)
        self._origins = frozenset(o.encode("latin-1") for o in settings.allowed_origins)

    def admits(self, host: bytes | None, origin: bytes | None) -> bool:
        return host in self._hosts and (origin is None or origin in self._origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host, origin = headers_of(scope, b"host", b"origin")
            if host not in self._hosts:
                await _refuse(421, "misdirected", "this daemon answers only at its loopback address")(
                    scope, receive, send
                )
                return
            if origin is not None and origin not in self._origins:
                await _refuse(403, "forbidden_origin", "requests from web pages of other origins are refused")(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


def headers_of(scope: Scope, *names: bytes) -> list[bytes | None]:
    """The first value of each header in `names` (lower case), as Starlette's `Headers.get` gives it, in one pass
    over the request's own list: every request to the daemon passes three layers that look headers up, and a
    `Headers` object per look-up cost more than the look-up."""
    return first_values(scope["headers"], *names)


def first_values(headers: Iterable[tuple[bytes, bytes]], *names: bytes) -> list[bytes | None]:
    """`headers_of` over a list of (lower-case name, value) pairs."""
    found: list[bytes | None] = [None] * len(names)
    for key, value in headers:
        if key in names:
            at = names.index(key)
            if found[at] is None:
                found[at] = bytes(value)
    return found


def security_settings(port: int) -> TransportSecuritySettings:
    # Only loopback Host headers, and browser Origins of loopback pages only.
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"],
    )


_JSON, _STREAM = b"application/json", b"text/event-stream"
_SESSION = SESSION_HEADER.encode()
_VERSION = VERSION_HEADER.encode()
_PARAM_HEADER = MCP_PARAM_HEADER_PREFIX.lower().encode()


@dataclass(frozen=True, slots=True)
class Claim:
    """A tool call the shortcut answers itself: the call (request id, tool name, arguments) and either the session's id
    and the SDK's transport of that session, which counts the call as a request in flight (the handshake era), or
    the protocol version and the client's name of a 2026-era single exchange (`modern`), which has no session."""

    session: str | None
    call: tuple[Any, str, dict[str, Any]]
    transport: Any
    modern: tuple[str, str | None] | None = None


# What a claimed call's answer is: a whole body with its HTTP status, or None when it went out as an event stream.
Answer = tuple[int, bytes] | None

# Seconds a 2026-era call may run before its answer commits to an event stream, and between the stream's keep-alive
# pings after that: the SDK's (`_SSE_PING_INTERVAL`), so a call waiting on a person looks the same on either way.
SSE_DEFER_S = 15.0
# The largest body the agents' endpoint takes (the SDK's manager is made with it and answers a larger one 413): the
# shortcut claims no call in a larger body, so that one gets the SDK's refusal.
MAX_REQUEST_BODY = DEFAULT_MAX_REQUEST_BODY_SIZE
_SSE_HEAD = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
_PING = b": ping\r\n\r\n"


def stopped_answer(request_id: Any) -> tuple[int, bytes]:
    """The HTTP status and JSON-RPC error body that answer a tool call cut short by the daemon stopping (uvicorn's
    wait for requests in flight ran out), as `mcphost mcp` answers one, in either era and whichever way the call came:
    the agents' door (`_AgentsHttp`) or the ASGI way (`CallShortcut`)."""
    error = {"code": INTERNAL_ERROR, "message": f"tools/call: {STOPPED}"}
    return 200, response_line(request_id, "error", error).rstrip(b"\n")


def stopped_event(body: bytes) -> bytes:
    """`stopped_answer`'s body as the last event of an event stream its answer had begun."""
    return b"event: message\r\ndata: " + body + b"\r\n\r\n"


# A key of the request's scope: set once the call it carries was answered `stopped_answer` on the ASGI way, so that
# the cancellation which cut it short ends with its task (`_AgentsFirst`), not as an app's failure (uvicorn's 500,
# which it could no longer send, and a traceback).
_TOLD_STOPPED = "mcphost.told_stopped"


def _stopping() -> bool:
    """Whether the request's own task is being cancelled: on the ASGI way only uvicorn does that, once its wait for
    the requests in flight of a stopping daemon has run out (a client gone is a message, not a cancellation)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class _Sent:
    """`send` for a call that a stopping daemon may cut short on the ASGI way, noting what of its answer went out:
    whether the answer can still be `stopped_answer`, whole or as the last event of its stream."""

    __slots__ = ("_send", "complete", "started", "stream")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = self.stream = self.complete = False

    async def __call__(self, message: Message) -> None:
        await self._send(message)
        if message["type"] == "http.response.start":
            self.started = True
            (kind,) = first_values(message.get("headers") or [], b"content-type")
            self.stream = kind is not None and kind.lower().startswith(_STREAM)
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True

    async def tell_stopped(self, scope: Scope, request_id: Any) -> None:
        """Answer the call `stopped_answer`, if its answer can still be given: none of it out yet, or an event stream
        under way. Called as the call's cancellation goes by, which goes on up (the server is going: no wait but
        uvicorn's own for a client that reads slowly, as its `send` waits)."""
        if self.complete or (self.started and not self.stream):
            return
        status, body = stopped_answer(request_id)
        if self.started:
            await self._send({"type": "http.response.body", "body": stopped_event(body), "more_body": False})
        else:
            headers = [(b"content-type", _JSON), (b"content-length", str(len(body)).encode())]
            await self._send({"type": "http.response.start", "status": status, "headers": headers})
            await self._send({"type": "http.response.body", "body": body})
        self.complete = True
        scope[_TOLD_STOPPED] = True


def accepts_both(raw: bytes | None) -> bool:
    """Whether an Accept header takes JSON and an event stream, read as the SDK reads it (`check_accept_headers`,
    wildcards included): a substring test would claim `application/jsonx` and turn away `*/*`."""
    kinds = [part.split(b";", 1)[0].strip().lower() for part in (raw or b"").split(b",")]
    every = b"*/*" in kinds
    return (every or _JSON in kinds or b"application/*" in kinds) and (every or _STREAM in kinds or b"text/*" in kinds)


def json_content(raw: bytes | None) -> bool:
    """Whether a POST's Content-Type passes both of the SDK's checks: its security middleware's (starts with
    `application/json`, any case) and its transport's (`application/json` exactly, before any parameter). What fails
    either is the SDK's to refuse (400 or 415): a browser's form post, say, which needs no preflight."""
    if raw is None or not raw.lower().startswith(_JSON):
        return False
    return any(part.strip() == _JSON for part in raw.split(b";", 1)[0].split(b","))


_ROUTING_NAMES = {name.encode(): name for name in (MCP_PROTOCOL_VERSION_HEADER, MCP_METHOD_HEADER, MCP_NAME_HEADER)}


def _routing(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str] | None:
    """A 2026-era request's routing headers by name, as the SDK's classifier reads them; None when one comes twice
    (the SDK refuses it) or any `Mcp-Param-*` header comes (mcphost's tools never ask for one): the SDK's to answer.
    One pass over headers whose names are in lower case, as the HTTP server gives them."""
    routing: dict[str, str] = {}
    for key, value in headers:
        name = _ROUTING_NAMES.get(key)
        if name is not None:
            if name in routing:
                return None
            routing[name] = value.decode("latin-1")
        elif key.startswith(_PARAM_HEADER):
            return None
    return routing


class CallShortcut:
    """In front of the SDK's streamable HTTP app: a tool call in a handshake-era session the SDK's manager knows is
    answered here (`HttpCalls`), as plain JSON, or as an event stream only when it must put a question to the
    agent's client first; so is a 2026-era call that the agents' door claims (`claim_modern`), whose stream waits
    for `SSE_DEFER_S`. What this does not take (the handshake, listings, anything malformed or refused, and 2026-era
    requests that come the ASGI way) reaches the SDK as it came. The SDK's way costs a session task, an in-memory
    stream and an event stream per call; on loopback that was most of a call's time.

    A call of either era that came the ASGI way (not the agents' door: it asked for no keep-alive, say) and that the
    daemon's stopping cuts short is answered `stopped_answer`, as the door answers it, whoever was answering it."""

    def __init__(self, app: ASGIApp, manager: StreamableHTTPSessionManager, calls: HttpCalls) -> None:
        self.app = app
        self.manager = manager
        self.calls = calls

    def claim(
        self,
        session: str,
        raw_version: bytes | None,
        raw_accept: bytes | None,
        message: dict[str, Any] | None,
        raw_type: bytes | None,
    ) -> Claim | None:
        """The call this answers itself, or None: a `tools/call` it can read, in a handshake-era session that the
        SDK's manager holds and whose `initialize` this saw, sent as JSON by a client that takes both kinds of
        answer."""
        if message is None or message.get("method") != "tools/call":
            return None
        if raw_version is not None and raw_version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        if not accepts_both(raw_accept) or not json_content(raw_type):
            return None
        transport = self.manager._server_instances.get(session)
        version = self.calls.version_of(session)
        if transport is None or transport.is_terminated or version is None:
            return None
        if isinstance(self.manager, SessionManager):
            self.manager.used(session)
        call = shortcut_call(message, version)
        return None if call is None else Claim(session, call, transport)

    def claim_modern(
        self, headers: list[tuple[bytes, bytes]], raw_accept: bytes | None, raw_type: bytes | None, body: bytes
    ) -> Claim | None:
        """A 2026-era single exchange this answers itself, or None: a `tools/call` request (`modern_call`) that the
        SDK's `handle_modern_request` would serve as it is, its routing headers each once and agreeing with its
        envelope, from a client that takes both kinds of answer. Anything it would refuse is the SDK's to refuse, in
        its words; so is a call with `Mcp-Param-*` headers, which mcphost's tools never ask for."""
        if not accepts_both(raw_accept) or not json_content(raw_type):
            return None
        message = shortcut_message(body)
        if message is None or message.get("method") != "tools/call":
            return None
        routing = _routing(headers)
        if routing is None:
            return None
        modern = modern_call(message, routing, clients_asked=self.calls.asks_agents_clients())
        if modern is None:
            return None
        request_id, name, arguments, version, client = modern
        return Claim(None, (request_id, name, arguments), None, (version, client))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "DELETE"):
            await self.app(scope, receive, send)
            return
        raw_session, raw_version, raw_accept, raw_type = headers_of(
            scope, _SESSION, _VERSION, b"accept", b"content-type"
        )
        session = raw_session.decode("latin-1") if raw_session is not None else None
        if scope["method"] == "DELETE":
            transport = self.manager._server_instances.get(session) if session is not None else None
            await self.app(scope, receive, send)
            if session is not None:
                # The SDK cancels what it runs for a session it ends; the calls answered here end with it too.
                self.calls.closed(session, ended=transport is not None and transport.is_terminated)
            return
        modern = raw_version is not None and raw_version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
        limit = self.manager.max_request_body_size
        body, complete = await _body(receive, limit)
        replay = _replaying(body, receive, complete)
        if len(body) > limit:
            await self.app(scope, replay, send)  # too large: the SDK says so
            return
        message = shortcut_message(body)
        if modern:
            # A 2026-era request that came the ASGI way (one that asks for no keep-alive, say): the SDK's to answer,
            # but a call of it that the daemon's stopping cuts short is told so, as the agents' door tells it.
            if message is not None and message.get("method") == "tools/call" and valid_id(message.get("id")):
                sent = _Sent(send)
                try:
                    await self.app(scope, replay, sent)
                except asyncio.CancelledError:
                    if _stopping():
                        await sent.tell_stopped(scope, message["id"])
                    raise
            else:
                await self.app(scope, replay, send)
            return
        if (message is None or not valid_id(message.get("id", ""))) and b'"id"' in body:
            refused = unusable_id(body)
            if refused is not None:  # the SDK takes it for a notification: 202, never run, never answered
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(refused)).encode())]
                await send({"type": "http.response.start", "status": 400, "headers": headers})
                await send({"type": "http.response.body", "body": refused})
                return
        if session is None:
            if message is not None and message.get("method") == "initialize":
                await self.app(scope, replay, self._opening(send, message))
            else:
                await self.app(scope, replay, send)
            return
        claim = self.claim(session, raw_version, raw_accept, message, raw_type)
        if claim is not None:
            # A call that came the ASGI way (it asked for no keep-alive, say), which the daemon's stopping cuts short:
            # told so, as the agents' door tells it (`_AgentsHttp._answer`).
            sent = _Sent(send)
            try:
                answer = await self.answer(claim, sent)
            except asyncio.CancelledError:
                if _stopping():
                    await sent.tell_stopped(scope, claim.call[0])
                raise
            if answer is not None:
                status, whole = answer
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(whole)).encode())]
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": whole})
            return
        transport = self.manager._server_instances.get(session)
        if transport is None:
            self.calls.closed(session)  # ended without a DELETE (it idled out): forget its client too
        if message is None or transport is None or transport.is_terminated or self.calls.version_of(session) is None:
            await self.app(scope, replay, send)
            return
        method = message.get("method")
        if method is None and self.calls.answered(message):
            await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if method == "notifications/cancelled":
            self.calls.cancel(session, message)
        await self.app(scope, replay, send)

    def _opening(self, send: Send, initialize: dict[str, Any]) -> Send:
        """`send`, noting the session the SDK opens for this `initialize` (its id is in the response's headers)."""

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 200:
                for key, value in message.get("headers") or []:
                    if key.lower() == SESSION_HEADER.encode():
                        self.calls.opened(value.decode("latin-1"), initialize)
                        # A session the SDK ended on its own (idle, crashed) sends no DELETE: forgotten here, so
                        # what is kept per session never outgrows the SDK's own sessions.
                        self.calls.keep_only(self.manager._server_instances)
            await send(message)

        return noting

    async def answer(self, claim: Claim, send: Send) -> Answer:
        """Answer the claimed call. Returns its JSON-RPC response as a plain JSON body to send with its status (an
        empty 202 when the client cancelled it), or None when the answer went out on an event stream through `send`,
        whole: a call that puts a question to the agent's client first must stream, and so must a 2026-era call
        still running after `SSE_DEFER_S`."""
        if claim.modern is not None:
            return await self._answer_modern(claim, claim.modern, send)
        streaming = False

        async def emit_line(line: bytes) -> None:
            nonlocal streaming
            if not streaming:
                streaming = True
                stream_headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
                await send({"type": "http.response.start", "status": 200, "headers": stream_headers})
            event = b"event: message\ndata: " + line.rstrip(b"\n") + b"\n\n"
            await send({"type": "http.response.body", "body": event, "more_body": True})

        async def emit(message: dict[str, Any]) -> None:
            await emit_line(dump_line(message))

        request_id, name, arguments = claim.call
        session = claim.session
        assert session is not None  # a handshake-era claim names its session
        held = _hold(claim.transport)
        try:
            response = await self.calls.answer(session, request_id, name, arguments, emit)
            if streaming:
                if response is not None:
                    await emit_line(response)
                await send({"type": "http.response.body", "body": b""})
                return None
        finally:
            if held:
                _release(claim.transport)
        return (202, b"") if response is None else (200, response.rstrip(b"\n"))

    async def _answer_modern(self, claim: Claim, modern: tuple[str, str | None], send: Send) -> Answer:
        """As `handle_modern_request` answers a call in its event-stream mode: plain JSON with the status its table
        gives an error, unless the call runs past `SSE_DEFER_S`; then the answer commits to an event stream, which
        a ping keeps open every `SSE_DEFER_S` until the response goes out on it. A client gone cancels the call (the
        HTTP server cuts it): at this revision that is how a client cancels."""
        request_id, name, arguments = claim.call
        stream = _KeptOpen(send)
        timer = asyncio.get_running_loop().call_later(SSE_DEFER_S, stream.commit)
        try:
            response, error_code = await self.calls.answer_modern(request_id, name, arguments, *modern)
        finally:
            timer.cancel()
            await stream.settle()
        body = response.rstrip(b"\n")
        if stream.committed:
            event = b"event: message\r\ndata: " + body + b"\r\n\r\n"
            await send({"type": "http.response.body", "body": event, "more_body": False})
            return None
        return (ERROR_CODE_HTTP_STATUS.get(error_code, 200) if error_code is not None else 200), body


class _KeptOpen:
    """The event stream a 2026-era answer commits to once its call has run `SSE_DEFER_S`: its head and a ping then,
    and a ping every `SSE_DEFER_S` after, until `settle` (the call's end) stops them; the response follows on it."""

    __slots__ = ("_send", "_task", "committed")

    def __init__(self, send: Send) -> None:
        self._send = send
        self._task: asyncio.Task[None] | None = None
        self.committed = False

    def commit(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._keep())

    async def _keep(self) -> None:
        await self._send({"type": "http.response.start", "status": 200, "headers": _SSE_HEAD})
        # Committed once the head is out, not when the timer fired: a call that ends before this task first runs
        # (or while the head waits on a slow reader) still has its answer to give as plain JSON.
        self.committed = True
        while True:
            await self._send({"type": "http.response.body", "body": _PING, "more_body": True})
            await asyncio.sleep(SSE_DEFER_S)

    async def settle(self) -> None:
        """Stop the pings, once the head has gone out (the response follows it)."""
        task = self._task
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            raise failure


class AgentsDoor:
    """Every check in front of /mcp, in one pass over the request's headers, for an HTTP server that answers a tool
    call before any ASGI layer runs: the Host and Origin (`LoopbackOnly`), the agents' token (`BearerTokenGuard`), and
    what the call shortcut asks. A request it does not claim goes the ASGI way, where each layer answers it as before:
    a refusal comes from there, never from here."""

    def __init__(self, loopback: LoopbackOnly, guard: BearerTokenGuard, shortcut: CallShortcut) -> None:
        self._loopback = loopback
        self._guard = guard
        self._shortcut = shortcut
        # What answers a claimed call: the shortcut's own, with no coroutine of this class's in between.
        self.answer: Callable[[Claim, Send], Awaitable[Answer]] = shortcut.answer

    def admits(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """Whether a request with these headers passes the Host, Origin and token checks: known from the head alone,
        before any of the body is read (a request that fails them has none of it held for it)."""
        host, origin, authorization = first_values(headers, b"host", b"origin", b"authorization")
        return self._loopback.admits(host, origin) and self._guard.admits(authorization)

    def claim(self, headers: list[tuple[bytes, bytes]], body: bytes) -> Claim | None:
        """The tool call in a POST to /mcp with these headers (names in lower case) and this body, if the shortcut
        would answer it; the caller has checked the method and the path, and that `admits(headers)`."""
        session, version, accept, content_type = first_values(headers, _SESSION, _VERSION, b"accept", b"content-type")
        if version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
            # The SDK's manager sends every other version to its 2026-era entry, a session header or not.
            return self._shortcut.claim_modern(headers, accept, content_type, body)
        if session is None:
            return None
        return self._shortcut.claim(session.decode("latin-1"), version, accept, shortcut_message(body), content_type)


async def _body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The request's body, and whether it is whole: reading stops once it is past `limit` bytes (whole or not, a
    body longer than that is no call of the shortcut's)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts), True
        chunk = message.get("body", b"")
        parts.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(parts), True
        if size > limit:
            return b"".join(parts), False


def _replaying(body: bytes, receive: Receive, whole: bool = True) -> Receive:
    """`receive` for an app that must read the body this has already read (its start, when it is not `whole`)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not whole}
        return await receive()

    return replay


def _hold(transport: Any) -> bool:
    """Count a call as a request in flight in its session, as the SDK's transport counts its own (a session used only
    for tool calls must not idle out under its agent); whether it was counted, for `_release`. Two plain calls, not a
    context manager: a generator's frames on every call.

    The SDK stops its idle clock for a request (the session's cancel scope's deadline set to infinity) and starts it
    again at the request's end: a timer cancelled and another made and pushed on the loop's heap, on every call (7 µs
    a call, warm). For the calls answered here, the deadline stays at infinity and an `IdleTimer` keeps the time
    instead: one timer per session per idle period, which ends the session as the SDK's own deadline would have."""
    idle = transport.idle_scope
    if idle is None or getattr(transport, "_idle_timeout", None) is None:
        return False
    transport._requests_in_flight += 1
    if idle.deadline != math.inf:  # the SDK's own clock runs (its request was the last to end): stopped, as it would
        idle.deadline = math.inf
    return True


def _release(transport: Any) -> None:
    transport._requests_in_flight -= 1
    if not transport._requests_in_flight:
        clock: IdleTimer | None = getattr(transport, "_mcphost_idle_clock", None)
        if clock is None:
            loop = asyncio.get_running_loop()
            clock = IdleTimer(loop, transport._idle_timeout, functools.partial(_session_idle, transport))
            try:
                transport._mcphost_idle_clock = clock
            except (AttributeError, TypeError):  # a transport that takes no attribute of ours: the SDK's own way
                transport.idle_scope.deadline = loop.time() + transport._idle_timeout
                return
        clock.idle()


def _session_idle(transport: Any, due: float) -> None:
    """The session's idle time is up since `due`: end it as the SDK would, by giving its cancel scope the deadline the
    SDK would have set (already past: anyio cancels it), unless a request is in flight (its end starts the clock
    again) or the SDK's own clock has taken over meanwhile (its request ended last), or the session is ending."""
    idle = transport.idle_scope
    if transport._requests_in_flight or idle.deadline != math.inf or idle.cancel_called:
        return
    idle.deadline = due


class IdleTimer:
    """`expire(due)` once something has been idle for `timeout` seconds since its last `idle()`, unless `busy()` came
    after it. Used on every request (an HTTP connection's keep-alive, a session's idle clock), it keeps one timer per
    idle period instead of one per use: the timer looks when the time could be up and, if `idle()` came again
    meanwhile, looks again then. A timer made, pushed on the loop's heap and cancelled on every request costs more
    than the request's own bookkeeping."""

    __slots__ = ("_at", "_expire", "_loop", "_since", "_timeout", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float, expire: Callable[[float], None]) -> None:
        self._loop = loop
        self._timeout = timeout
        self._expire = expire
        self._since: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self._at = 0.0

    def idle(self) -> None:
        self._since = now = self._loop.time()
        if self.timer is None:
            self._check_at(now + self._timeout)

    def busy(self) -> None:
        self._since = None

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _check_at(self, when: float) -> None:
        self.timer, self._at = self._loop.call_at(when, self._check), when

    def _check(self) -> None:
        self.timer = None
        since = self._since
        if since is None:
            return  # busy: the next `idle()` sets the timer again
        due = since + self._timeout
        # Due if it was the time this timer was set for (the loop may run it a clock tick early), as a lane's deadlines.
        if due <= max(self._at, self._loop.time()):
            self._expire(due)
        else:
            self._check_at(due)


# Handshake-era sessions a daemon keeps at once (each some 40 KB). Past it, opening one ends the session idle the
# longest instead of refusing the new one: the SDK's refusal at its 10 000 locked every handshake-era agent out for
# half an hour, for anyone who opened that many and let them be. A client whose session was ended is answered 404
# and opens another, as the protocol has it.
MAX_SESSIONS = 1000


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's manager, with the least recently used idle session ended when a new one would pass `max_sessions`.
    Sessions are kept in the order they were last used (the call shortcut moves a session it serves to the end)."""

    def _admit_session(self, requestor: Any) -> Any:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            self._end_idlest()
        return super()._admit_session(requestor)

    def used(self, session_id: str) -> None:
        instances = self._server_instances
        transport = instances.pop(session_id, None)
        if transport is not None:
            instances[session_id] = transport

    def _end_idlest(self) -> None:
        for session_id, transport in self._server_instances.items():
            idle = transport.idle_scope
            if transport._requests_in_flight or transport.is_terminated or idle is None:
                continue  # a request in flight, or a GET stream open: in use
            # Forgotten at once (its id answers 404 from now on), then ended as its idle timeout would end it.
            self._server_instances.pop(session_id, None)
            self._session_owners.pop(session_id, None)
            idle.cancel()
            logger.warning("%d sessions open: ended the one idle the longest to open another", self.max_sessions)
            return


def build_http_app(
    server: Server[Any],
    secrets_: Secrets,
    port: int,
    activity_path: Path | None = None,
    calls: HttpCalls | None = None,
) -> tuple[ASGIApp, AgentsDoor | None]:
    """The daemon's ASGI app, and with `calls` the door through which its HTTP server may answer a tool call itself."""
    manager = SessionManager(
        app=server,
        security_settings=security_settings(port),
        max_request_body_size=MAX_REQUEST_BODY,
        max_sessions=MAX_SESSIONS,
    )
    mcp_app: ASGIApp = StreamableHTTPASGIApp(manager)
    shortcut = None
    if calls is not None:
        mcp_app = shortcut = CallShortcut(mcp_app, manager, calls)
    mcp_endpoint = BearerTokenGuard(
        mcp_app,
        secrets_.agent_token,
        (
            secrets_.api_token,
            f"this is the REST API's token; {MCP_PATH} takes the agents' (`mcp.headers` in the discovery file)",
        ),
    )
    routes = [Route(MCP_PATH, endpoint=mcp_endpoint)]
    if activity_path is not None:
        api = BearerTokenGuard(
            request_response(activity_endpoint(activity_path)),
            secrets_.api_token,
            (
                secrets_.agent_token,
                "this is the agents' token, which opens /mcp only; the REST API takes its own: "
                "`api.token` in the discovery file, also in `mcphost status -o json`",
            ),
        )
        routes.append(Route(API_PATH, endpoint=api, methods=["GET"]))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = LoopbackOnly(_AgentsFirst(mcp_endpoint, Starlette(routes=routes, lifespan=lifespan)), port)
    return app, AgentsDoor(app, mcp_endpoint, shortcut) if shortcut is not None else None


class _AgentsFirst:
    """/mcp straight to its endpoint, past Starlette's router and middleware (the path every agent request takes);
    everything else, the lifespan that runs the session manager included, through Starlette."""

    def __init__(self, mcp: ASGIApp, rest: ASGIApp) -> None:
        self.mcp = mcp
        self.rest = rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == MCP_PATH:
            try:
                await self.mcp(scope, receive, send)
            except asyncio.CancelledError:
                if not scope.get(_TOLD_STOPPED):
                    raise
                # A call cut short by the daemon stopping, its agent told why (`_Sent.tell_stopped`): the cancellation
                # ends here with the request's task, as the agents' door ends it (`_AgentsHttp._answer`). Past here
                # is only uvicorn's `run_asgi`, which would end it too, but as an app's failure, with a traceback.
                return
        else:
            await self.rest(scope, receive, send)
