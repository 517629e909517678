"""One upstream MCP server: its connection, its cached tools, and the reconnect loop that keeps it up."""

from __future__ import annotations

import itertools
import logging
import math
import random
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

import anyio
import mcp_types as types
import orjson
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field, ValidationError

from mcphost import __version__
from mcphost.activity.reader import NonFinite, looked_over, nests_deeper, opening_brackets
from mcphost.config.models import ServerConfig
from mcphost.console import safe
from mcphost.pipes import encoded, json_size, json_spelling, non_finite_at
from mcphost.upstream.era import HandshakeFirstClient
from mcphost.upstream.guard import DROPPED_META, Guard, MessageTooLarge, too_large
from mcphost.upstream.screening import SHOWN_NAME_CHARS, Dropped, tool_problem
from mcphost.upstream.spawn import EarlyStarts, Launch, own_env
from mcphost.upstream.stdio import LaneClosed, NotJsonRpc, RawLane, non_finite_answer, stdio_transport

logger = logging.getLogger(__name__)

BACKOFF_BASE = 0.5
BACKOFF_MAX = 30.0
CLIENT_INFO = types.Implementation(name="mcphost", version=__version__)
# Process-wide, so a server removed and added again never reuses a version an index was built from.
_TOOL_LIST_VERSIONS = itertools.count(1)


class State(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class UpstreamTool:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None  # as the server sent them (camelCase keys), None if it sent none
    title: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.server}:{self.name}"

    @classmethod
    def from_mcp(cls, server: str, tool: types.Tool) -> UpstreamTool:
        annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
        return cls(
            server=server,
            name=tool.name,
            description=tool.description or "",
            input_schema=dict(tool.input_schema),
            annotations=annotations or None,
            title=tool.title,
        )


class UpstreamUnavailable(Exception):
    """The server is not connected (starting, reconnecting, or failed); `reason` says why."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(reason)
        self.server = server
        self.reason = reason


class UpstreamCallFailed(Exception):
    """The call reached the server but did not come back (it died, timed out, or answered with a protocol error)."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(reason)
        self.server = server
        self.reason = reason


class UpstreamResultTooLarge(UpstreamCallFailed):
    """The server answered, but its answer (the JSON of the JSON-RPC message) is larger than the server's
    `max_result_bytes`; it was refused unparsed. The server stays connected."""

    def __init__(self, server: str, size: int, limit: int) -> None:
        super().__init__(server, f"the answer is {size} bytes, over max_result_bytes ({limit})")
        self.size = size
        self.limit = limit


class _CheckedResult(types.CallToolResult):
    """The SDK's CallToolResult, its content told apart by `type`: one look-up per block instead of trying each kind of
    block in turn (what every answer on the lane pays for, on the busiest path), and an error that names the field
    at fault rather than every kind the block is not."""

    content: list[Annotated[types.ContentBlock, Field(discriminator="type")]]


# A tool answer's large parts as orjson wrote them, by each part's identity, the part held beside its writing.
Encodings = dict[int, tuple[Any, orjson.Fragment]]


class ToolResult:
    """A tool's answer, checked to be one, as the server sent it (JSON-ready), so that passing it on needs no second
    serialization. The SDK's model of it is made for whoever asks (`model`): an answer of plain text blocks, what
    most tools send, is checked by a look at its keys, and the call never touches a validator."""

    __slots__ = ("_model", "data", "encodings", "is_error")

    def __init__(self, data: dict[str, Any], model: types.CallToolResult | None = None) -> None:
        self.data = data
        self._model = model
        self.is_error = model.is_error if model is not None else data.get("isError") is True
        # Its large parts (a text block's text, the structured content) as orjson wrote them to measure the answer,
        # by the part's identity, for the agent's copy to be written with (`json_size`). Each entry holds its part, so
        # no other object can take that identity while the entry lives.
        self.encodings: Encodings = {}

    def json_size(self) -> int:
        """Bytes of the answer as compact JSON. A large text or structured content is written once for it and kept
        (`encodings`): the answer the agent gets holds the same, and an API's JSON in a text takes orjson tens of
        microseconds to escape."""
        data = self.data
        parts: dict[str, Any] | None = None  # `data` with its large parts as written, once there is one
        content = data.get("content")
        if type(content) is list:
            for index, block in enumerate(content):
                text = block.get("text") if type(block) is dict else None
                if type(text) is str and len(text) >= ENCODED_PART_MIN and (written := self._kept(text)) is not None:
                    if parts is None:
                        parts = {**data, "content": list(content)}
                    parts["content"][index] = {**block, "text": written}
        structured = data.get("structuredContent")
        if type(structured) is dict and (written := self._kept(structured)) is not None:
            if parts is None:
                parts = dict(data)
            parts["structuredContent"] = written
        try:
            return len(orjson.dumps(data if parts is None else parts))
        except (orjson.JSONEncodeError, TypeError):  # integers past 64 bits, lone surrogates
            self.encodings.clear()
            return json_size(data)

    def _kept(self, part: Any) -> orjson.Fragment | None:
        """`part` as written, kept for the agent's answer; None for a part too short to keep (written again with the
        whole, which costs less), or that orjson cannot write (the whole then goes through Python's encoder)."""
        written = encoded(part)
        if written is None or len(written) < ENCODED_PART_MIN:
            return None
        fragment = orjson.Fragment(written)
        self.encodings[id(part)] = (part, fragment)
        return fragment

    @classmethod
    def of(cls, model: types.CallToolResult) -> ToolResult:
        """The SDK client's answer; raises TooDeep as `checked` does (pydantic's serializer stops near 250 levels), and
        NonFinite where it holds NaN or an infinity (pydantic's reader takes them, its writer makes each a null)."""
        found = _non_finite_in(model)
        if found is not None:
            raise NonFinite(f"{json_spelling(found[1])} (at {found[0]})")
        try:
            data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        except ValueError as exc:
            if "depth" in str(exc):
                raise TooDeep from None
            raise
        if too_deep(data):
            raise TooDeep
        return cls(data, model)

    @classmethod
    def checked(cls, data: Any) -> ToolResult:
        """`data` as a tool's answer; raises ValidationError where it is none, TooDeep where it nests past what
        can be passed on."""
        if plain_text_result(data):
            # Text blocks nest three levels: only structured content and _meta may go deeper.
            if ("structuredContent" in data or "_meta" in data) and too_deep(data):
                raise TooDeep
            return cls(data)
        model = _CheckedResult.model_validate(data)  # raises for anything not an object
        if too_deep(data):
            raise TooDeep
        return cls(data, model)

    @property
    def model(self) -> types.CallToolResult:
        if self._model is None:
            self._model = _CheckedResult.model_validate(self.data)
        return self._model


# How deep an answer may nest: past some 250 levels the serializers on its way (pydantic's, orjson) give up, after the
# call has run and been recorded as a success.
MAX_RESULT_DEPTH = 200


class TooDeep(ValueError):
    """A tool's answer nests deeper than MAX_RESULT_DEPTH."""


def _too_deep(server: str) -> UpstreamCallFailed:
    return UpstreamCallFailed(
        server, f"the answer nests deeper than {MAX_RESULT_DEPTH} levels, more than mcphost can pass on"
    )


def _non_finite_in(model: types.CallToolResult) -> tuple[str, float] | None:
    """Where the SDK's model of an answer holds NaN or an infinity: only its fields of any JSON (structured content,
    the `_meta`s) can, the typed ones refuse them and what no field names is not kept."""
    found = non_finite_at(model.structured_content, "structuredContent") or non_finite_at(model.meta, "_meta")
    for index, block in enumerate(model.content):
        found = found or non_finite_at(getattr(block, "meta", None), f"content[{index}]._meta")
        resource = getattr(block, "resource", None)
        found = found or non_finite_at(getattr(resource, "meta", None), f"content[{index}].resource._meta")
    return found


def too_deep(data: Any) -> bool:
    """Whether `data` nests deeper than MAX_RESULT_DEPTH: a look at a small answer, a count of the brackets of a
    large one as orjson writes it, and a walk only where that count allows the depth."""
    seen = looked_over(data)
    if seen is not None and not seen[0]:  # (a wide integer ends the look early, its depth untold)
        return seen[1] > MAX_RESULT_DEPTH
    written = encoded(data)
    if written is not None and opening_brackets(written) <= MAX_RESULT_DEPTH:
        return False
    return nests_deeper(data, MAX_RESULT_DEPTH + 1)


# A text this long or longer is kept written (`ToolResult.json_size`); a shorter one costs less to write again than
# to keep.
ENCODED_PART_MIN = 1024

# The keys of a result, and of a text block, that need no validator to be read as the SDK's model reads them: any
# other (an alias the model also takes, `is_error`, say) and the answer goes to the validator.
_RESULT_KEYS = frozenset({"content", "isError", "structuredContent", "_meta"})
_TEXT_KEYS = frozenset({"type", "text"})


def plain_text_result(data: Any) -> bool:
    """Whether `data` is a tool result the SDK's model would take as it is: text blocks only, each a type and a
    text; `isError` a bool; `_meta` an object (structuredContent may be anything)."""
    if type(data) is not dict or not data.keys() <= _RESULT_KEYS:
        return False
    content = data.get("content")
    if type(content) is not list:
        return False
    for block in content:
        if type(block) is not dict or block.get("type") != "text" or type(block.get("text")) is not str:
            return False
        if not block.keys() <= _TEXT_KEYS:
            return False
    meta = data.get("_meta")
    return type(data.get("isError", False)) is bool and (meta is None or type(meta) is dict)


@dataclass(frozen=True, slots=True)
class ToolsChanged:
    server: str
    added: list[str]
    removed: list[str]
    annotations_changed: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]]
    changed: list[str]  # any part of the definition (description, schema, annotations)


EventSink = Callable[[str, dict[str, Any]], None]


def describe_exception(exc: BaseException) -> str:
    """A one-line reason from whatever a transport raised, unwrapping task-group exception groups. Escaped and cut:
    an upstream's error message reaches the host's stderr, status and the agent with it."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return safe(exc.error.message, REASON_CHARS)
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip()
    return safe(f"{type(exc).__name__}: {text}" if text else type(exc).__name__, REASON_CHARS)


REASON_CHARS = 500


@asynccontextmanager
async def _transport(
    name: str,
    config: ServerConfig,
    on_eof: Callable[[], None],
    on_lane: Callable[[RawLane], None],
    early: EarlyStarts | None,
    on_end: Callable[[str], None],
) -> AsyncIterator[tuple[Any, Any]]:
    if config.command is not None:
        if sys.platform == "win32":  # pragma: no cover - no process groups or pdeathsig to set up there
            params = StdioServerParameters(
                command=config.command, args=config.args, env=own_env(config), cwd=config.cwd
            )
            guard = Guard(name, config.max_result_bytes, measure=True, on_eof=on_eof)
            async with stdio_client(params, errlog=sys.stderr) as (read, write):
                yield guard.wrap(read, write)
            return
        launch = Launch.of(config)
        assert launch is not None
        # Lines are measured before they are parsed, so the guard need not measure again.
        guard = Guard(name, config.max_result_bytes, measure=False, on_eof=on_eof)
        spawned = early.take(name, launch) if early is not None else None
        async with stdio_transport(name, launch, config.max_result_bytes, on_lane, spawned, on_end) as (read, write):
            yield guard.wrap(read, write)
    else:
        assert config.url is not None
        guard = Guard(name, config.max_result_bytes, measure=True, on_eof=on_eof)
        http = create_mcp_http_client(headers=dict(config.headers) or None)
        async with http, streamable_http_client(config.url, http_client=http) as (read, write):
            yield guard.wrap(read, write)


# What an upstream's `Client` connects to: a transport for the configured server (stdio or streamable HTTP), or,
# for in-process tests, an MCP server object in this process. Called with the name, the config and a callback for
# the transport's end of stream.
Connector = Callable[[str, ServerConfig, Callable[[], None]], Any]


class _ConfiguredTransport:
    """The configured server's transport, as the `Client` enters it; `lane` is its raw lane for tool calls while
    it is open, `ended` how its process ended once it has closed (stdio only)."""

    def __init__(
        self, name: str, config: ServerConfig, on_eof: Callable[[], None], early: EarlyStarts | None = None
    ) -> None:
        self.lane: RawLane | None = None
        self.ended: str | None = None
        self._context = _transport(name, config, on_eof, self._set_lane, early, self._set_ended)

    def _set_lane(self, lane: RawLane) -> None:
        self.lane = lane

    def _set_ended(self, how: str) -> None:
        self.ended = how

    async def __aenter__(self) -> tuple[Any, Any]:
        return await self._context.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self.lane = None
        return await self._context.__aexit__(*exc_info)


def configured_transport(
    name: str, config: ServerConfig, on_eof: Callable[[], None], early: EarlyStarts | None = None
) -> Any:
    """The configured server's transport; a stdio server's process is taken from `early` when it was spawned there
    as this connection would spawn it."""
    return _ConfiguredTransport(name, config, on_eof, early)


class UpstreamServer:
    def __init__(
        self,
        name: str,
        config: ServerConfig,
        on_event: EventSink | None = None,
        connect: Connector = configured_transport,
    ) -> None:
        self.name = name
        self.config = config
        self._connect = connect
        self.state = State.CONNECTING
        self.last_error: str | None = None
        self.tools: dict[str, UpstreamTool] = {}
        self.tools_version = 0  # renewed whenever the tool list or any tool's definition changes
        # The tools the last full read of the list left out, as (name as shown, why): for status and diagnostics.
        self.dropped_tools: list[Dropped] = []
        # time.monotonic() when the last full read of the tool list began; None before the first. Not anyio's clock:
        # every call looks at it, and anyio finds its backend each time it is asked the time.
        self.tools_read_at: float | None = None
        # time.monotonic() when the server last said its list changed: a list read begun before it is stale.
        self._changed_at = 0.0
        self._refreshing: _Refresh | None = None
        self.server_info: str | None = None
        self._client: Client | None = None
        self.protocol_version: str | None = None  # what the live connection negotiated
        self._lane: RawLane | None = None  # tool calls skip the SDK session where the transport offers this
        self._first_attempt_done = anyio.Event()
        self._refresh_wanted = anyio.Event()
        self._cancel: anyio.CancelScope | None = None
        self._on_event = on_event or (lambda _kind, _details: None)
        self._closed = False
        self._in_flight = 0
        self._transport: Any = None  # the last connection's transport: how its process ended, when it says
        self._idle: anyio.Event | None = None  # made by `retire` when it must wait for calls in flight

    # ---- life cycle

    async def run(self) -> None:
        """Connect, serve, and reconnect with backoff until closed. Never raises (but for cancellation)."""
        attempt = 0
        with anyio.CancelScope() as scope:
            self._cancel = scope
            while not self._closed:
                lost = anyio.Event()
                connected = False
                reason = "the server closed the connection"
                # One scope around the whole session (anyio needs scopes nested): its deadline bounds the start only.
                with anyio.CancelScope(deadline=anyio.current_time() + self.config.connect_timeout) as start_scope:
                    try:
                        async with self._client_for(lost.set) as client:
                            await self._refresh_tools(client, initial=True)
                            start_scope.deadline = math.inf
                            self._client = client
                            self.state, self.last_error, attempt, connected = State.CONNECTED, None, 0, True
                            self._first_attempt_done.set()
                            details: dict[str, Any] = {
                                "tools": len(self.tools),
                                "server": self.server_info,
                                "protocol": self.protocol_version,
                            }
                            if self.dropped_tools:
                                details["dropped_tools"] = [list(entry) for entry in self.dropped_tools]
                            self._on_event("upstream_connected", details)
                            logger.info("upstream %s connected (%d tools)", self.name, len(self.tools))
                            async with anyio.create_task_group() as tg:
                                tg.start_soon(self._refresh_on_notification, client)
                                if self.modern:
                                    tg.start_soon(self._listen_for_changes, client)
                                await lost.wait()
                                tg.cancel_scope.cancel()
                    except Exception as exc:
                        reason = describe_exception(exc)
                    finally:
                        self._client = None
                ended = getattr(self._transport, "ended", None)
                if start_scope.cancelled_caught:
                    reason = f"did not start within connect_timeout ({self.config.connect_timeout:g}s)"
                elif ended is not None:
                    # "Connection closed" says nothing a person can act on; the exit status and the server's last
                    # words usually do (a missing variable, a wrong path).
                    reason = f"{reason}; {ended}"
                if self._closed:
                    break
                self.last_error = reason
                self.state = State.RECONNECTING
                self._first_attempt_done.set()
                delay = min(BACKOFF_MAX, BACKOFF_BASE * 2**attempt) * random.uniform(0.8, 1.2)
                attempt += 1
                if connected:
                    self._on_event("upstream_lost", {"reason": reason, "retry_in_s": round(delay, 2)})
                logger.warning("upstream %s: %s; retrying in %.1fs", self.name, reason, delay)
                await anyio.sleep(delay)
        self.state = State.CLOSED

    @asynccontextmanager
    async def _client_for(self, on_eof: Callable[[], None]) -> AsyncIterator[Client]:
        # "auto" connects servers of either era without a setting: over HTTP 2026-07-28 first (server/discover, the
        # handshake as fallback), over stdio the handshake first (`mcphost.upstream.era` says why).
        transport = self._transport = self._connect(self.name, self.config, on_eof)
        client = (Client if self.config.url is not None else HandshakeFirstClient)(
            transport,
            mode=self.config.protocol,
            cache=None,
            message_handler=self._on_message,
            client_info=CLIENT_INFO,
        )
        async with client:
            info = client.server_info
            self.server_info = f"{info.name} {info.version}".strip() if info else None
            self.protocol_version = client.protocol_version
            lane = getattr(transport, "lane", None)
            if lane is not None and self.modern:
                # A 2026-era request stands alone: each one carries the version and who asks, as the SDK's own do.
                lane.envelope = {
                    PROTOCOL_VERSION_META_KEY: client.protocol_version,
                    CLIENT_INFO_META_KEY: CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True),
                    CLIENT_CAPABILITIES_META_KEY: {},
                }
            self._lane = lane
            if lane is not None:
                lane.on_list_changed = self._list_changed
            try:
                yield client
            finally:
                self._lane = None

    @property
    def modern(self) -> bool:
        """Whether the connection speaks a 2026-era revision (no handshake; list changes come by subscription)."""
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def first_attempt_done(self) -> bool:
        return self._first_attempt_done.is_set()

    async def wait_first_attempt(self, limit_s: float) -> None:
        with anyio.move_on_after(limit_s):
            await self._first_attempt_done.wait()

    def close(self) -> None:
        self._closed = True
        if self._cancel is not None:
            self._cancel.cancel()

    async def retire(self) -> None:
        """Close once the calls in flight are answered (a config change must not cut a call already under way);
        new calls already go to this server's successor."""
        if self._in_flight:
            self._idle = anyio.Event()
            with anyio.move_on_after(self.config.call_timeout):
                await self._idle.wait()
        self.close()

    # ---- tools

    def _list_changed(self) -> None:
        """The server says its tool list changed: from now, the list read before is stale. Read again in the
        background, and the next call that needs the list fresh (one its annotations let through less strictly)
        waits for a read begun after this instead of trusting the old one for ANNOTATIONS_MAX_AGE: a server may
        re-mark a tool destructive, say so, and have the agent call it at once."""
        self._changed_at = time.monotonic()
        self._refresh_wanted.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._list_changed()
        elif isinstance(message, Exception) and not isinstance(message, NotJsonRpc):
            # A line that is not JSON-RPC at all was reported as it was read (`parse_line`), with the line itself.
            logger.warning("upstream %s sent something unreadable: %s", self.name, describe_exception(message))

    async def _listen_for_changes(self, client: Client) -> None:
        """At 2026-07-28 a server announces list changes only to a `subscriptions/listen` stream. The stream has
        no replay, so each (re)opening re-reads the list: a change made while it was down is not lost."""
        attempt = 0
        while True:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    if not subscription.honored.tools_list_changed:
                        return  # it will not say: calls re-read the list when they need it fresh
                    if attempt:
                        self._list_changed()  # a change made while the stream was down is not replayed
                    attempt = 0
                    async for _event in subscription:
                        self._list_changed()
                # A graceful close: the server ended the stream, not the connection. Open it again.
            except ListenNotSupportedError:
                return
            except MCPError as exc:
                if exc.error.code == METHOD_NOT_FOUND:
                    return
                logger.info("upstream %s: the change subscription ended: %s", self.name, describe_exception(exc))
            except Exception as exc:
                logger.info("upstream %s: the change subscription ended: %s", self.name, describe_exception(exc))
            attempt += 1
            await anyio.sleep(min(BACKOFF_MAX, BACKOFF_BASE * 2 ** min(attempt, 6)))

    async def _refresh_on_notification(self, client: Client) -> None:
        while True:
            await self._refresh_wanted.wait()
            self._refresh_wanted = anyio.Event()
            try:
                await self._refresh_once(client)
            except Exception as exc:
                logger.warning("upstream %s: refreshing tools failed: %s", self.name, describe_exception(exc))

    async def refresh(self) -> None:
        """Re-read the tool list now (used when a call names a tool the cache does not know)."""
        client = self._client
        if client is not None:
            await self._refresh_once(client)

    async def fresh_tool(self, name: str, max_age: float) -> UpstreamTool | None:
        """The tool as the server defines it now, within `max_age` seconds: the tool list is read again first when
        the last read is older, since a server may change a tool (its annotations) without saying so. Changes found
        are reported like announced ones (`annotations_changed`). Concurrent callers share one read.

        None when the server no longer lists the tool. Raises `UpstreamUnavailable` when the server is not
        connected, `UpstreamCallFailed` when the list cannot be read.
        """
        client = self.require_client()
        read_at = self.tools_read_at
        if max_age <= 0 or read_at is None or read_at < self._changed_at or time.monotonic() - read_at > max_age:
            for _ in range(3):  # the read joined may have begun before the server's last change: then one more
                try:
                    await self._refresh_once(client)
                except UpstreamCallFailed:
                    raise
                except Exception as exc:
                    reason = f"reading its tool list failed: {describe_exception(exc)}"
                    raise UpstreamCallFailed(self.name, reason) from exc
                read_at = self.tools_read_at
                if read_at is not None and read_at >= self._changed_at:
                    break
        return self.tools.get(name)

    async def _refresh_once(self, client: Client) -> None:
        """Read the tool list, or wait for the read already under way: many calls checking at once cost the server
        one tools/list, and two reads can never overwrite each other's results out of order."""
        while (running := self._refreshing) is not None:
            await running.done.wait()
            if running.cancelled:
                # The call that began the read was cancelled, not the read's server at fault: read again (or wait for
                # the read another waiter begins). One agent's cancelled call must not fail another's.
                continue
            if running.error is not None:
                raise UpstreamCallFailed(self.name, f"reading its tool list failed: {running.error}")
            return
        refresh = self._refreshing = _Refresh()
        try:
            await self._refresh_tools(client)
        except Exception as exc:
            refresh.error = describe_exception(exc)
            raise
        except BaseException:
            refresh.cancelled = True
            raise
        finally:
            self._refreshing = None
            refresh.done.set()

    async def _refresh_tools(self, client: Client, *, initial: bool = False) -> None:
        started = time.monotonic()
        tools: dict[str, UpstreamTool] = {}
        dropped: list[Dropped] = []
        cursor: str | None = None
        with anyio.fail_after(self.config.connect_timeout):
            for _ in range(1000):
                page = await client.list_tools(cursor=cursor)
                dropped += _dropped_by_guard(page)
                for tool in page.tools:
                    problem = tool_problem(tool)
                    if problem is None and tool.name in tools:
                        problem = "an earlier tool of this server has the same name"
                    if problem is not None:
                        dropped.append((safe(tool.name, SHOWN_NAME_CHARS) or "<empty name>", problem))
                        continue
                    tools[tool.name] = UpstreamTool.from_mcp(self.name, tool)
                cursor = page.next_cursor
                if not cursor:
                    break
        self._note_dropped(dropped)
        self.tools_read_at = started
        change = _diff(self.name, self.tools, tools)
        self.tools = tools
        if initial or change.added or change.removed or change.changed:
            self.tools_version = next(_TOOL_LIST_VERSIONS)
        if not initial and (change.added or change.removed or change.changed):
            logger.info("upstream %s: tools changed (+%d -%d)", self.name, len(change.added), len(change.removed))
            for name, (old, new) in change.annotations_changed.items():
                self._on_event("annotations_changed", {"tool": name, "old": old, "new": new})

    def _note_dropped(self, dropped: list[Dropped]) -> None:
        known = set(self.dropped_tools)
        for name, reason in dropped:
            # Once per tool and reason, not on every re-read of the list.
            if (name, reason) not in known:
                logger.warning("upstream %s: dropped the tool %r: %s", self.name, name, reason)
        self.dropped_tools = dropped

    # ---- calls

    def require_client(self) -> Client:
        if self._client is None or self.state is not State.CONNECTED:
            reason = self.last_error or self.state.value
            raise UpstreamUnavailable(self.name, reason)
        return self._client

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        meanwhile: Callable[[], None] | None = None,
        encoded: bytes | None = None,
    ) -> ToolResult:
        """`meanwhile` runs once the call is on its way (while the server works on it, where the lane carries it).
        `encoded`: `arguments` as orjson wrote them, if the caller has that; the lane writes it as it is."""
        client = self.require_client()
        self._in_flight += 1
        lane = self._lane
        try:
            if lane is not None:
                written = arguments if encoded is None else orjson.Fragment(encoded)
                return await self._call_on_lane(lane, tool, written, meanwhile)
            if meanwhile is not None:
                meanwhile()
            with anyio.fail_after(self.config.call_timeout):
                return ToolResult.of(await client.call_tool(tool, arguments))
        except (UpstreamCallFailed, UpstreamUnavailable):
            raise
        except TooDeep:
            raise _too_deep(self.name) from None
        except NonFinite as exc:
            raise UpstreamCallFailed(self.name, non_finite_answer(str(exc))) from None
        except TimeoutError:
            raise UpstreamCallFailed(
                self.name, f"no answer within call_timeout ({self.config.call_timeout:g}s)"
            ) from None
        except Exception as exc:
            oversized = too_large(exc)
            if oversized is not None:
                raise UpstreamResultTooLarge(self.name, oversized.size, oversized.limit) from None
            raise UpstreamCallFailed(self.name, describe_exception(exc)) from exc
        finally:
            self._in_flight -= 1
            if self._in_flight == 0 and self._idle is not None:
                self._idle.set()

    async def _call_on_lane(
        self,
        lane: RawLane,
        tool: str,
        arguments: dict[str, Any] | orjson.Fragment,
        meanwhile: Callable[[], None] | None,
    ) -> ToolResult:
        try:
            response = await lane.request(
                "tools/call",
                {"name": tool, "arguments": arguments},
                within=self.config.call_timeout,
                meanwhile=meanwhile,
            )
        except LaneClosed as exc:
            raise UpstreamCallFailed(self.name, f"the connection closed during the call ({exc})") from None
        if isinstance(response, MessageTooLarge):
            raise UpstreamResultTooLarge(self.name, response.size, response.limit)
        error = response.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            if isinstance(message, str) and message.strip():
                reason = message
            elif isinstance(message, str):
                # An SDK server turns an exception whose text is empty (a bare TimeoutError) into this.
                code = error.get("code")
                reason = f"it answered with JSON-RPC error {safe(str(code), 40)} and no message"
            else:
                reason = f"an unreadable error: {safe(str(error), 200)}"
            raise UpstreamCallFailed(self.name, reason)
        data = response.get("result")
        if isinstance(data, dict) and data.get("resultType") == "input_required":
            raise UpstreamCallFailed(
                self.name, "the server asked for input from its user (input_required), which mcphost does not pass on"
            )
        try:
            return ToolResult.checked(data)
        except TooDeep:
            raise _too_deep(self.name) from None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in e['loc']) or 'result'}: {e['msg']}" for e in exc.errors()[:3]
            )
            raise UpstreamCallFailed(self.name, f"the answer is not a tool result ({problems})") from None


@dataclass(slots=True)
class _Refresh:
    done: anyio.Event = field(default_factory=anyio.Event)
    error: str | None = None
    cancelled: bool = False  # the task that began it was cancelled (the read itself did not fail)


def _dropped_by_guard(page: types.ListToolsResult) -> list[Dropped]:
    entries = (page.meta or {}).get(DROPPED_META)
    if not isinstance(entries, list):
        return []
    return [(str(e[0]), str(e[1])) for e in entries if isinstance(e, list | tuple) and len(e) == 2]


def _diff(server: str, old: dict[str, UpstreamTool], new: dict[str, UpstreamTool]) -> ToolsChanged:
    changed = {
        name: (old[name].annotations, tool.annotations)
        for name, tool in new.items()
        if name in old and old[name].annotations != tool.annotations
    }
    return ToolsChanged(
        server=server,
        added=sorted(set(new) - set(old)),
        removed=sorted(set(old) - set(new)),
        annotations_changed=changed,
        changed=sorted(name for name, tool in new.items() if name in old and old[name] != tool),
    )
