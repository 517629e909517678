"""`mcphost mcp` with a daemon running: relay the agent's stdio MCP session to the daemon's HTTP endpoint, so
that its prompts reach the person's editor and its calls share the daemon's upstreams, grants and log.

The relay moves JSON-RPC messages both ways without reading their params: the agent's `initialize` (its name and
capabilities, elicitation included) reaches the daemon as sent. A header carries the relay's session and its
proof (an HMAC under the daemon's relay key, from the discovery file), so that "allow for this session" means this
agent process whatever the protocol version's idea of sessions, and no other agent can claim it.

The agent's session outlives the daemon. When the daemon goes away, the calls it had in flight get a JSON-RPC error
that says so (they may or may not have reached the upstream; nothing is retried on its own), and the relay carries
on: with another daemon for the same config if one is running, else with the gateway built in this process (as
`--in-process` does), and back to a daemon once one runs again and no call is waiting. Each new backend gets the
agent's handshake replayed, so the agent does not have to know.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import sys
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp.server import Server
from mcp.shared.inbound import MCP_METHOD_HEADER, MCP_NAME_HEADER, NAME_BEARING_METHODS, encode_header_value
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, METHOD_NOT_FOUND, PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcphost import discovery
from mcphost.serve.mcp_server import RELAY_SESSION_HEADER, new_relay_session, relay_proof
from mcphost.serve.stdio import serve_stdio

logger = logging.getLogger(__name__)

LocalServer = Callable[[], AbstractAsyncContextManager[tuple[Server[Any], Any]]]
Message = types.JSONRPCRequest | types.JSONRPCNotification | types.JSONRPCResponse | types.JSONRPCError

SESSION_ID_HEADER = "mcp-session-id"
PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
# How often a relay serving in process looks for a daemon to go back to (a directory listing: cheap).
DAEMON_POLL_S = 1.0
PRIVATE_ID_PREFIX = "mcphost-relay-"


def _say(text: str) -> None:
    print(f"mcphost: {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Target:
    """A daemon to relay to, from its discovery file."""

    pid: int
    url: str
    headers: dict[str, str]
    relay_key: str | None

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> Target:
        mcp = info["mcp"]
        relay = info.get("relay") if isinstance(info.get("relay"), dict) else {}
        key = relay.get("key") if relay else None
        return cls(int(info["pid"]), str(mcp["url"]), dict(mcp.get("headers") or {}), key if key else None)

    @property
    def name(self) -> str:
        return f"the daemon {self.pid} ({self.url})"


class _Lost(Exception):
    """The backend can no longer serve the session; `gone` when its daemon is gone for good (not to be retried)."""

    def __init__(self, reason: str, *, gone: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.gone = gone


class _Undelivered(Exception):
    """The message never reached the daemon: it can go to the next backend as it is."""


class _Broken(Exception):
    """The connection broke after the message was sent: it may or may not have been acted on."""


def _key(request_id: Any) -> str:
    # "7" and 7 are one id to the SDK's dispatcher; they must be one here too.
    return str(request_id)


@dataclass
class _Relay:
    """The agent's side of the session, which outlives any one backend: what waits to be sent, what is in flight,
    and the handshake to replay."""

    to_agent: Any
    config_path: Path
    session: str = field(default_factory=new_relay_session)
    queue: deque[Message] = field(default_factory=deque)
    in_flight: dict[str, types.JSONRPCRequest] = field(default_factory=dict)
    handshake: types.JSONRPCRequest | None = None
    initialized: types.JSONRPCNotification | None = None
    agent_done: bool = False
    _arrived: anyio.Event = field(default_factory=anyio.Event)
    _private: dict[str, list[Message]] = field(default_factory=dict)
    _private_done: dict[str, anyio.Event] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    # ---- from the agent

    async def read_agent(self, from_agent: Any) -> None:
        async for item in from_agent:
            if isinstance(item, Exception):
                continue  # stdio has answered what it could not read
            message = item.message
            if isinstance(message, types.JSONRPCRequest) and message.method == "server/discover":
                # The handshake era keeps a back channel (a prompt through the agent's own client needs one), and
                # it is what can be replayed to a new backend: answer the probe so the agent falls back to it.
                await self.answer(
                    message.id, METHOD_NOT_FOUND, "server/discover: the mcphost relay speaks the initialize handshake"
                )
                continue
            if isinstance(message, types.JSONRPCNotification):
                if message.method == "notifications/initialized":
                    self.initialized = message
                elif message.method == "notifications/cancelled":
                    # The agent waits no more: nor does the relay (a cancelled request may never be answered).
                    self.in_flight.pop(_key((message.params or {}).get("requestId")), None)
            self.queue.append(message)
            self._arrived.set()
        self.agent_done = True
        self._arrived.set()

    async def take(self) -> Message | None:
        """The next message for the backend (a request is in flight from here on); None once the agent is done.
        Cancelling a wait loses nothing: a message leaves the queue only when it is returned."""
        while not self.queue:
            if self.agent_done:
                return None
            self._arrived = anyio.Event()
            await self._arrived.wait()
        message = self.queue.popleft()
        if isinstance(message, types.JSONRPCRequest) and not _is_private(message.id):
            self.in_flight[_key(message.id)] = message
        return message

    def requeue(self, message: Message) -> None:
        """Back to the front of the queue: it never reached the backend that took it."""
        if isinstance(message, types.JSONRPCRequest):
            self.in_flight.pop(_key(message.id), None)
        self.queue.appendleft(message)
        self._arrived.set()

    def idle(self) -> bool:
        return not self.queue and not self.in_flight

    # ---- to the agent

    async def deliver(self, message: Message) -> None:
        """A message from the backend: the answer to a replayed handshake stays here, everything else goes on."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            key = _key(message.id)
            if key in self._private:
                self._private[key].append(message)
                self._private_done[key].set()
                return
            request = self.in_flight.pop(key, None)
            if request is not None and request.method == "initialize" and isinstance(message, types.JSONRPCResponse):
                self.handshake = request
        try:
            await self.to_agent.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("the agent is gone; dropped %s", type(message).__name__)

    async def answer(self, request_id: Any, code: int, message: str) -> None:
        self.in_flight.pop(_key(request_id), None)
        error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
        await self.deliver(error)

    async def fail_in_flight(self, reason: str) -> None:
        for key, request in list(self.in_flight.items()):
            del self.in_flight[key]
            await self.answer(request.id, INTERNAL_ERROR, f"{request.method}: {reason}")

    # ---- the handshake, replayed to a new backend

    def private(self, request: types.JSONRPCRequest) -> tuple[types.JSONRPCRequest, anyio.Event, list[Message]]:
        """`request` under an id of the relay's own, whose answer stays with the relay."""
        key = f"{PRIVATE_ID_PREFIX}{next(self._ids)}"
        self._private[key], self._private_done[key] = [], anyio.Event()
        return request.model_copy(update={"id": key}), self._private_done[key], self._private[key]

    def forget(self, request_id: Any) -> None:
        self._private.pop(_key(request_id), None)
        self._private_done.pop(_key(request_id), None)


def _is_private(request_id: Any) -> bool:
    return isinstance(request_id, str) and request_id.startswith(PRIVATE_ID_PREFIX)


def death(target: Target, cause: str) -> str:
    """What a call in flight is told when its daemon went away."""
    return (
        f"{target.name} went away during this call ({cause}). The call may or may not have reached the upstream "
        "server: check before repeating a write. The session carries on: the next call goes to another mcphost "
        "daemon for this config if one is running, else to a gateway inside this `mcphost mcp`."
    )


def _replay_failed(answer: list[Message]) -> str | None:
    if answer and isinstance(answer[0], types.JSONRPCResponse):
        return None
    if answer and isinstance(answer[0], types.JSONRPCError):
        return answer[0].error.message
    return "no answer"


# ---- the daemon


class _DaemonBackend:
    """One MCP session with a daemon over its HTTP endpoint: a POST per message, the answer (and whatever the daemon
    sends about the request meanwhile, such as a prompt through the agent's client) on its response stream."""

    def __init__(self, target: Target, relay: _Relay) -> None:
        self.target = target
        self.relay = relay
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.lost: _Lost | None = None
        self.answered = 0  # answers passed on: a session that served before may well serve again
        self._http: httpx2.AsyncClient | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._modern_posts: dict[str, anyio.CancelScope] = {}

    async def serve(self) -> None:
        """Relay until the agent is done; raises _Lost when the daemon can no longer serve the session."""
        headers = {
            **self.target.headers,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self.target.relay_key:
            headers[RELAY_SESSION_HEADER] = relay_proof(self.target.relay_key, self.relay.session)
        # No proxy from the environment: the daemon is on loopback, and the token must not go anywhere else.
        timeout = httpx2.Timeout(10.0, read=None)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout, trust_env=False) as http:
            self._http = http
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    if self.relay.handshake is not None:
                        try:
                            await self._replay(self.relay.handshake)
                        except _Lost as lost:
                            self._lose(lost)
                    while self.lost is None and (message := await self.relay.take()) is not None:
                        if self.lost is not None:
                            self.relay.requeue(message)
                            break
                        if isinstance(message, types.JSONRPCRequest):
                            tg.start_soon(self._request, message)
                        else:
                            await self._other(message)
                    # The agent closed its end: nobody is left to read answers still coming.
                    tg.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await self._end_session()
        if self.lost is not None:
            raise self.lost

    def _lose(self, lost: _Lost) -> None:
        if self.lost is None:
            self.lost = lost
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    async def _replay(self, handshake: types.JSONRPCRequest) -> None:
        request, done, answer = self.relay.private(handshake)
        try:
            await self._send(request)
            with anyio.fail_after(30):
                await done.wait()
        except _Undelivered as exc:
            raise _Lost(str(exc)) from None
        except (_Broken, TimeoutError) as exc:
            raise _Lost(f"{self.target.name} did not take the session's handshake: {exc or 'timed out'}") from None
        finally:
            self.relay.forget(request.id)
        problem = _replay_failed(answer)
        if problem is not None:
            raise _Lost(f"{self.target.name} refused the session's handshake: {problem}")
        if self.relay.initialized is not None:
            await self._other(self.relay.initialized)

    async def _request(self, request: types.JSONRPCRequest) -> None:
        if self.lost is not None:
            self.relay.requeue(request)  # taken just as another call found the daemon gone: not sent
            return
        scope = anyio.CancelScope()
        if _modern_version(request) is not None:
            self._modern_posts[_key(request.id)] = scope
        try:
            with scope:
                await self._send(request)
        except _Undelivered as exc:
            self.relay.requeue(request)
            self._lose(_Lost(str(exc), gone=not isinstance(exc, _SessionEnded)))
        except _Broken as exc:
            if await self._gone():
                self._lose(_Lost("its process ended and took the call's connection with it"))
            else:
                await self.relay.answer(request.id, INTERNAL_ERROR, f"{request.method}: {exc}")
        finally:
            self._modern_posts.pop(_key(request.id), None)

    async def _other(self, message: Message) -> None:
        """A notification or an answer to the daemon's own request: a POST the daemon acknowledges with 202."""
        if isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            scope = self._modern_posts.get(_key((message.params or {}).get("requestId")))
            if scope is not None:
                # A 2026-era request is cancelled by closing its stream; the daemon has no use for the notice.
                scope.cancel()
                return
        try:
            await self._send(message)
        except (_Undelivered, _Broken) as exc:
            # A notice lost with its daemon needs no answer; the requests it concerned are answered on their own.
            logger.debug("dropped %s: %s", type(message).__name__, exc)

    async def _gone(self) -> bool:
        """Whether the daemon is gone, after a call's stream broke: a stream can also break on its own while the
        daemon serves on. Its process is checked first (a killed daemon's port may take new connections for a
        moment while its last threads die), then whether it still takes connections, for up to a second."""
        for _ in range(10):
            if not discovery.process_alive(self.target.pid) or not await self._accepts():
                return True
            await anyio.sleep(0.1)
        return False

    async def _accepts(self) -> bool:
        parts = urlsplit(self.target.url)
        try:
            with anyio.fail_after(2):
                stream = await anyio.connect_tcp(parts.hostname or "127.0.0.1", parts.port or 80)
        except (OSError, TimeoutError):
            return False
        await stream.aclose()
        return True

    def _headers_for(self, message: Message) -> dict[str, str]:
        headers: dict[str, str] = {}
        modern = _modern_version(message)
        if modern is not None:
            assert isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification)
            headers[PROTOCOL_VERSION_HEADER] = modern
            headers[MCP_METHOD_HEADER] = message.method
            name_key = NAME_BEARING_METHODS.get(message.method)
            name = (message.params or {}).get(name_key) if name_key else None
            if isinstance(name, str):
                headers[MCP_NAME_HEADER] = encode_header_value(name)
            return headers
        if self.session_id is not None:
            headers[SESSION_ID_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[PROTOCOL_VERSION_HEADER] = self.protocol_version
        return headers

    async def _send(self, message: Message) -> None:
        body = message.model_dump_json(by_alias=True, exclude_unset=True)
        try:
            assert self._http is not None
            async with self._http.stream(
                "POST", self.target.url, content=body, headers=self._headers_for(message)
            ) as response:
                await self._answer_from(message, response)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            raise _Undelivered(f"{self.target.name} takes no connections ({exc or type(exc).__name__})") from None
        except httpx2.TransportError as exc:
            raise _Broken(f"the connection to {self.target.name} broke ({exc or type(exc).__name__})") from None

    async def _answer_from(self, message: Message, response: httpx2.Response) -> None:
        status = response.status_code
        if status == 401:
            raise _Undelivered(f"{self.target.name} no longer takes the token in its discovery file")
        if status == 404 and self.session_id is not None and _modern_version(message) is None:
            # The daemon forgot the session (it idled out): nothing was done; a new handshake and a resend fix it.
            raise _SessionEnded(f"{self.target.name} ended the relay's session")
        if not isinstance(message, types.JSONRPCRequest):
            if status >= 400:
                logger.warning("the daemon refused a %s: HTTP %s", type(message).__name__, status)
            return
        if status >= 400 or status == 202:
            await self.relay.deliver(_error_answer(message.id, status, await response.aread()))
            return
        if message.method == "initialize":
            self.session_id = response.headers.get(SESSION_ID_HEADER)
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("application/json"):
            await self._forward(message, await response.aread())
            return
        if not content_type.startswith("text/event-stream"):
            await self.relay.answer(message.id, INTERNAL_ERROR, f"the daemon answered with {content_type!r}")
            return
        async for event in httpx2.EventSource(response, max_event_size=None):
            if event.data and await self._forward(message, event.data):
                return
        raise _Broken(f"{self.target.name} closed this call's stream before answering it")

    async def _forward(self, request: types.JSONRPCRequest, data: str | bytes) -> bool:
        """Pass one message from the daemon on; True when it is the answer to `request`."""
        try:
            message = types.jsonrpc_message_adapter.validate_json(data, by_name=False)
        except ValidationError as exc:
            await self.relay.answer(request.id, INTERNAL_ERROR, f"the daemon sent an unreadable answer: {exc}")
            return True
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            await self.relay.deliver(message)
            return False
        message.id = request.id
        if not _is_private(request.id):
            self.answered += 1
        if request.method == "initialize" and isinstance(message, types.JSONRPCResponse):
            version = message.result.get("protocolVersion")
            self.protocol_version = version if isinstance(version, str) else None
        await self.relay.deliver(message)
        return True

    async def _end_session(self) -> None:
        """Tell the daemon the session is over, so it frees it now rather than when it idles out."""
        if self.session_id is None or self._http is None:
            return
        headers = {SESSION_ID_HEADER: self.session_id}
        if self.protocol_version is not None:
            headers[PROTOCOL_VERSION_HEADER] = self.protocol_version
        with contextlib.suppress(httpx2.TransportError):
            await self._http.delete(self.target.url, headers=headers)


class _SessionEnded(_Undelivered):
    """The daemon no longer knows the session: the message was not acted on."""


def _error_answer(request_id: Any, status: int, body: bytes) -> types.JSONRPCError:
    """The daemon's JSON-RPC error for a refused request, under the request's id; else one that names the status."""
    try:
        parsed = types.jsonrpc_message_adapter.validate_json(body, by_name=False)
    except ValidationError:
        parsed = None
    if isinstance(parsed, types.JSONRPCError):
        return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=parsed.error)
    text = body.decode("utf-8", "replace")[:300]
    error = types.ErrorData(code=INTERNAL_ERROR, message=f"the daemon answered HTTP {status}: {text}")
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def _modern_version(message: Message) -> str | None:
    """The 2026-era protocol version a request or notification carries in its `_meta`, if any."""
    if not isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification):
        return None
    meta = (message.params or {}).get("_meta")
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    return version if isinstance(version, str) and version in MODERN_PROTOCOL_VERSIONS else None


# ---- in this process


class _LocalBackend:
    """The gateway in this process, as `mcphost mcp --in-process` runs it, while no daemon serves the config."""

    def __init__(self, relay: _Relay, open_local: LocalServer, find: Callable[[], Target | None]) -> None:
        self.relay = relay
        self.open_local = open_local
        self.find = find

    async def serve(self) -> Target | None:
        """Serve until the agent is done (None), or until a daemon runs and no call waits (that daemon)."""
        back_to: list[Target] = []
        async with self.open_local() as (server, _shortcut):
            to_server, from_relay = anyio.create_memory_object_stream[SessionMessage | Exception](16)
            to_relay, from_server = anyio.create_memory_object_stream[SessionMessage](16)
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.run, from_relay, to_relay, server.create_initialization_options())
                tg.start_soon(self._answers, from_server)
                # Closing the server's input ends its loop; the Host closes its upstreams on the way out.
                async with to_server:
                    if self.relay.handshake is not None:
                        await self._replay(to_server, self.relay.handshake)
                    async with anyio.create_task_group() as pumping:
                        pumping.start_soon(self._watch_for_daemon, pumping.cancel_scope, back_to)
                        while (message := await self.relay.take()) is not None:
                            try:
                                await to_server.send(SessionMessage(message))
                            except anyio.get_cancelled_exc_class():
                                self.relay.requeue(message)
                                raise
                        pumping.cancel_scope.cancel()
        return back_to[0] if back_to else None

    async def _answers(self, from_server: Any) -> None:
        async with from_server:
            async for item in from_server:
                await self.relay.deliver(item.message)

    async def _replay(self, to_server: Any, handshake: types.JSONRPCRequest) -> None:
        request, done, answer = self.relay.private(handshake)
        try:
            await to_server.send(SessionMessage(request))
            with anyio.fail_after(30):
                await done.wait()
        finally:
            self.relay.forget(request.id)
        problem = _replay_failed(answer)
        if problem is not None:
            logger.warning("the in-process gateway refused the session's handshake: %s", problem)
        if self.relay.initialized is not None:
            await to_server.send(SessionMessage(self.relay.initialized))

    async def _watch_for_daemon(self, pumping: anyio.CancelScope, back_to: list[Target]) -> None:
        while True:
            await anyio.sleep(DAEMON_POLL_S)
            if not self.relay.idle():
                continue
            target = self.find()
            if target is not None and self.relay.idle():
                back_to.append(target)
                pumping.cancel()
                return


class _NoBackend:
    """Neither a daemon nor the gateway in this process (the config does not load): answer each call with why,
    until a daemon runs."""

    def __init__(self, relay: _Relay, why: str, find: Callable[[], Target | None]) -> None:
        self.relay, self.why, self.find = relay, why, find

    async def serve(self) -> Target | None:
        while True:
            taken: list[Message | None] = []
            with anyio.move_on_after(DAEMON_POLL_S):
                taken.append(await self.relay.take())
            if taken and taken[0] is None:
                return None
            if taken and isinstance(taken[0], types.JSONRPCRequest):
                await self.relay.answer(taken[0].id, INTERNAL_ERROR, self.why)
            elif not taken and (target := self.find()) is not None:
                return target


# ---- the session


async def relay(first: Target, config_path: Path, open_local: LocalServer, stop: anyio.Event | None = None) -> None:
    """Serve the agent on stdio through `first`, then whatever serves `config_path` when it goes away; `stop` ends
    the session as the agent closing its input does."""
    async with serve_stdio(stop) as (from_agent, to_agent), to_agent, anyio.create_task_group() as tg:
        session = _Relay(to_agent, config_path)
        tg.start_soon(session.read_agent, from_agent)
        await _run(session, first, open_local)
        tg.cancel_scope.cancel()


async def _run(session: _Relay, first: Target, open_local: LocalServer) -> None:
    gone: set[tuple[int, str]] = set()

    def find() -> Target | None:
        daemons = [d for d in discovery.running() if (int(d["pid"]), str(d["mcp"]["url"])) not in gone]
        info = discovery.newest(daemons, session.config_path)
        return None if info is None else Target.from_info(info)

    target: Target | None = first
    retries = 0
    while not (session.agent_done and not session.queue):
        if target is not None:
            if target is not first or retries:
                _say(f"relaying to {target.name}")
            backend = _DaemonBackend(target, session)
            try:
                await backend.serve()
                return
            except _Lost as lost:
                # A session the daemon ended is started again; one that keeps ending before any answer is not.
                retries = 0 if backend.answered else retries + 1
                if lost.gone or retries > 2:
                    gone.add((target.pid, target.url))
                    _say(f"{target.name} is gone: {lost.reason}")
                    await session.fail_in_flight(death(target, lost.reason))
                    target, retries = find(), 0
                continue
        _say(f"no daemon serves {session.config_path}: serving this agent in process until one does")
        try:
            target = await _LocalBackend(session, open_local, find).serve()
        except Exception as exc:
            why = (
                f"no mcphost daemon is running for {session.config_path}, and the gateway cannot start in "
                f"this process: {exc}. Start `mcphost serve`, or fix the config"
            )
            _say(why)
            await session.fail_in_flight(why)
            target = await _NoBackend(session, why, find).serve()
        if target is None:
            return
