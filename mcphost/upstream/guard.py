"""What stands between an upstream's transport and the SDK session: the checks the SDK does not make.

- an answer larger than the server's `max_result_bytes` becomes an error response to its request, carrying the
  size, instead of being parsed (stdio measures the raw line; HTTP, whose transport has parsed the JSON already,
  measures before the SDK builds its models);
- a tools/list page with malformed tools loses those tools (named, with the reason, in the page's `_meta`), so the
  SDK, which validates the page whole, accepts the rest;
- the end of the read stream is reported, so a server that dies while idle is noticed at once.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic_core import to_json

from mcphost.console import safe
from mcphost.pipes import json_size
from mcphost.upstream.screening import page_is_valid, screen_page

logger = logging.getLogger(__name__)

# In the JSON-RPC band left to implementations (-32000..-32019), clear of the SDK's own -32000 and -32001.
RESULT_TOO_LARGE = -32010
# Marks the error as made here, not sent by the server with the same code.
_MARK = "mcphost_result_too_large"
# Where a screened tools/list page names its dropped tools, as [[name, reason], ...].
DROPPED_META = "mcphost/droppedTools"


class MessageTooLarge(Exception):
    """A message from the server longer than the limit, not parsed. A stdio transport puts this in its read stream
    in place of the message; what little could be read of the envelope says which request it answers."""

    def __init__(self, size: int, limit: int, kind: str | None, request_id: types.RequestId | None) -> None:
        super().__init__(f"a message of {size} bytes, over the limit of {limit}")
        self.size = size
        self.limit = limit
        self.kind = kind  # "response", "other" (a request or notification), or None when the envelope was unreadable
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class TooLarge:
    size: int
    limit: int


def too_large(exc: BaseException) -> TooLarge | None:
    """The size and limit, when `exc` is the error this guard answered an oversized result with."""
    if isinstance(exc, MCPError) and exc.code == RESULT_TOO_LARGE and isinstance(exc.data, dict):
        data = exc.data
        if data.get(_MARK) is True and isinstance(data.get("size"), int) and isinstance(data.get("limit"), int):
            return TooLarge(data["size"], data["limit"])
    return None


# The envelope of an oversized line, from its first and last bytes only. Servers order the keys differently:
# the Python SDK writes {"jsonrpc", "id", "result"}, the TypeScript SDK {"result", "jsonrpc", "id"}.
_ID = rb'-?\d+|"(?:[^"\\]|\\.)*"'
_FIRST_KEYS = re.compile(
    rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?(?:"id"\s*:\s*(?P<id>' + _ID + rb")\s*,\s*)?"
    rb'(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?P<key>result|error|method|params)"\s*:'
)
_LAST_ID = re.compile(rb'"id"\s*:\s*(?P<id>' + _ID + rb')\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def envelope(head: bytes, tail: bytes) -> tuple[str | None, types.RequestId | None]:
    """(kind, request id) of a JSON-RPC message known only by its first and last bytes."""
    first = _FIRST_KEYS.match(head)
    if first is None:
        return None, None
    kind = "response" if first["key"] in (b"result", b"error") else "other"
    raw_id = first["id"]
    if raw_id is None and (last := _LAST_ID.search(tail)) is not None:
        raw_id = last["id"]
    if raw_id is None:
        return kind, None
    try:
        value = json.loads(raw_id)
    except ValueError:
        return kind, None
    return kind, value if isinstance(value, int | str) else None


class Guard:
    """The state both guarded streams share: the requests sent and not yet answered, and the negotiated version."""

    def __init__(self, server: str, limit: int, *, measure: bool, on_eof: Callable[[], None]) -> None:
        self.server = server
        self.limit = limit
        # A transport that cannot measure raw lines (HTTP) has the parsed result measured here instead.
        self.measure = measure
        self.on_eof = on_eof
        self.version: str | None = None
        self._pending: dict[types.RequestId, tuple[types.RequestId, str]] = {}

    def wrap(self, read: Any, write: Any) -> tuple[GuardedRead, GuardedWrite]:
        return GuardedRead(self, read), GuardedWrite(self, write)

    # ---- outbound

    def outbound(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            self._pending[coerce_request_id(message.id)] = (message.id, message.method)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            # A cancelled request may never be answered; forget it so its id cannot take a stray answer.
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, int | str):
                self._pending.pop(coerce_request_id(request_id), None)

    # ---- inbound

    def inbound(self, item: SessionMessage | Exception) -> SessionMessage | Exception | None:
        """The item the session gets instead of `item`, or None to drop it."""
        if isinstance(item, MessageTooLarge):
            return self._oversized(item)
        if not isinstance(item, SessionMessage):
            return item
        message = item.message
        if isinstance(message, types.JSONRPCError):
            if message.id is not None:
                self._pending.pop(coerce_request_id(message.id), None)
            return item
        if not isinstance(message, types.JSONRPCResponse):
            return item
        request_id, method = self._pending.pop(coerce_request_id(message.id), (message.id, ""))
        if self.measure:
            size = _json_size(message.result)
            if size > self.limit:
                return self._refusal(request_id, method, size)
        if method == "initialize":
            version = message.result.get("protocolVersion")
            self.version = version if isinstance(version, str) else None
        elif method == "tools/list":
            return self._screened(item, message)
        return item

    def _oversized(self, item: MessageTooLarge) -> SessionMessage | None:
        request_id = item.request_id
        if request_id is None and item.kind != "other" and len(self._pending) == 1:
            # Unreadable envelope, one request waiting: it can only be that request's answer.
            request_id = next(iter(self._pending.values()))[0]
        entry = self._pending.pop(coerce_request_id(request_id), None) if request_id is not None else None
        if item.kind == "other" or entry is None:
            logger.warning(
                "upstream %s: dropped a message of %d bytes (over max_result_bytes, %d) answering no waiting request",
                self.server,
                item.size,
                item.limit,
            )
            return None
        return self._refusal(entry[0], entry[1], item.size)

    def _refusal(self, request_id: types.RequestId, method: str, size: int) -> SessionMessage:
        logger.warning(
            "upstream %s: refused an answer to %s of %d bytes (max_result_bytes is %d)",
            self.server,
            safe(method or "a request", 80),
            size,
            self.limit,
        )
        error = types.ErrorData(
            code=RESULT_TOO_LARGE,
            message=f"the answer is {size} bytes, over max_result_bytes ({self.limit})",
            data={_MARK: True, "size": size, "limit": self.limit},
        )
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))

    def _screened(self, item: SessionMessage, message: types.JSONRPCResponse) -> SessionMessage:
        result = message.result
        meta = result.get("_meta")
        if isinstance(meta, dict) and DROPPED_META in meta:
            # Only this guard may say what was dropped.
            result = {**result, "_meta": {k: v for k, v in meta.items() if k != DROPPED_META}}
        tools = result.get("tools")
        if isinstance(tools, list) and not page_is_valid(result, self.version):
            kept, dropped = screen_page(tools, self.version)
            if dropped:
                meta = result.get("_meta")
                meta = dict(meta) if isinstance(meta, dict) else {}
                meta[DROPPED_META] = [list(entry) for entry in dropped]
                result = {**result, "tools": kept, "_meta": meta}
        if result is message.result:
            return item
        return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result), item.metadata)


def _json_size(value: Any) -> int:
    try:
        return len(to_json(value))
    except ValueError:  # nested past pydantic's serializer's limit (a tools/list page screening then drops)
        try:
            return json_size(value)
        except (ValueError, RecursionError):
            return 0


class GuardedRead:
    def __init__(self, guard: Guard, inner: Any) -> None:
        self._guard = guard
        self._inner = inner

    async def receive(self) -> SessionMessage | Exception:
        while True:
            try:
                item = await self._inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._guard.on_eof()
                raise
            out = self._guard.inbound(item)
            if out is not None:
                return out

    def __aiter__(self) -> GuardedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._guard.on_eof()
        await self._inner.aclose()

    async def __aenter__(self) -> GuardedRead:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class GuardedWrite:
    def __init__(self, guard: Guard, inner: Any) -> None:
        self._guard = guard
        self._inner = inner

    async def send(self, item: SessionMessage) -> None:
        self._guard.outbound(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> GuardedWrite:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
