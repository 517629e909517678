"""Shared bits of the editor end-to-end tests: calling probe tools as an agent, finding a daemon's editor socket,
answers that wait for the test to say so, reading the records of one call, and the channel spoken by hand."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from tests.editor_client import Answer
from tests.helpers import Daemon, Sandbox, text_of

# A deadline for anything that should happen "at once" (a prompt arriving, a call ending after an answer).
SOON = 10


async def call(
    client: Any,
    operation: str,
    tool: str,
    args: dict[str, Any] | None = None,
    *,
    reason: str | None = None,
    sensitivity: str | None = None,
) -> Any:
    """One `call_tool_<operation>` of `probe:<tool>`, intent declared to match."""
    intent: dict[str, Any] = {"operation_type": operation}
    if reason is not None:
        intent["reason"] = reason
    if sensitivity is not None:
        intent["data_sensitivity"] = sensitivity
    arguments = {"name": f"probe:{tool}", "args": {"text": "hello"} if args is None else args, "intent": intent}
    return await client.call_tool(f"call_tool_{operation}", arguments)


def assert_ok(result: Any) -> None:
    assert not result.is_error, text_of(result)


def gated(release: asyncio.Event, remember: str = "once") -> Answer:
    """A person who allows, but only once the test sets `release`."""

    async def answer(_request: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return {"decision": "allow", "remember": remember}

    return answer


def by_request(choose: Callable[[dict[str, Any]], Answer]) -> Answer:
    """A person whose answer depends on the prompt (for example, on its tool or arguments)."""

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        return await choose(request)(request)

    return answer


class Background:
    """Agent calls started in a task group, so a test can act while their prompts wait."""

    def __init__(self, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg
        self.results: dict[str, Any] = {}
        self._done: dict[str, anyio.Event] = {}

    def start(self, key: str, coro_fn: Callable[[], Any]) -> None:
        done = self._done[key] = anyio.Event()

        async def run() -> None:
            self.results[key] = await coro_fn()
            done.set()

        self._tg.start_soon(run)

    async def result(self, key: str, timeout: float = SOON) -> Any:
        with anyio.fail_after(timeout):
            await self._done[key].wait()
        return self.results[key]

    def finished(self, key: str) -> bool:
        return self._done[key].is_set()


@asynccontextmanager
async def background() -> AsyncIterator[Background]:
    async with anyio.create_task_group() as tg:
        yield Background(tg)


def new_calls(box: Sandbox, before: int) -> list[dict[str, Any]]:
    """The tool_call records written since the log held `before` of them."""
    return box.tool_calls()[before:]


def last_call(box: Sandbox) -> dict[str, Any]:
    calls = box.tool_calls()
    assert calls, "no tool_call record was written"
    return calls[-1]


def config_uri(path: Path) -> str:
    return path.resolve().as_uri()


class RawClient:
    """An editor speaking the channel by hand: LSP framing over the socket, no pygls on this side."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def send(self, message: dict[str, Any]) -> None:
        self.send_body(json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8"))

    def send_body(self, body: bytes) -> None:
        """`body` framed as it is, whatever it holds."""
        self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def closed_by_daemon(self) -> None:
        """Until the daemon closes the connection (what it sent before is skipped)."""
        async with asyncio.timeout(SOON):
            while await self.reader.read(1 << 16):
                pass

    async def receive(self) -> dict[str, Any]:
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("ascii").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        message: dict[str, Any] = json.loads(await self.reader.readexactly(length))
        return message

    async def response_to(self, request_id: int | None) -> dict[str, Any]:
        async with asyncio.timeout(10):
            while True:
                message = await self.receive()
                if message.get("id") == request_id and "method" not in message:
                    return message


@asynccontextmanager
async def raw(d: Daemon) -> AsyncIterator[RawClient]:
    reader, writer = await asyncio.open_unix_connection(d.editor_socket)
    client = RawClient(reader, writer)
    client.send({"id": 0, "method": "initialize", "params": {"capabilities": {}, "initializationOptions": {}}})
    await client.response_to(0)
    client.send({"method": "initialized", "params": {}})
    try:
        yield client
    finally:
        writer.close()
