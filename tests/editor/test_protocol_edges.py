"""The editor channel spoken by hand (LSP framing over the socket, no pygls on this side): what any editor
integration may send, including what pygls-based clients never do."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.editor.support import call
from tests.helpers import Daemon, error_of, http_agent


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def receive(self) -> dict[str, Any]:
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("ascii").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        message: dict[str, Any] = json.loads(await self.reader.readexactly(length))
        return message

    async def response_to(self, request_id: int) -> dict[str, Any]:
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


pytestmark = pytest.mark.asyncio(loop_scope="package")  # the shared daemon (conftest.py) lives there


async def test_a_request_without_params_is_answered(shared: Daemon) -> None:
    # JSON-RPC lets params be left out; vscode-jsonrpc does so for sendRequest("mcphost/status").
    async with raw(shared) as client:
        client.send({"id": 1, "method": "mcphost/status"})
        answer = await client.response_to(1)
    assert answer["result"]["pid"] == shared.process.pid


async def test_bad_revoke_params_get_invalid_params_naming_the_field(shared: Daemon) -> None:
    async with raw(shared) as client:
        client.send({"id": 2, "method": "mcphost/revokeGrants", "params": {"ids": "not-a-list"}})
        answer = await client.response_to(2)
    assert answer["error"]["code"] == -32602
    assert "ids" in answer["error"]["message"]


@pytest.mark.parametrize(
    "error",
    [{"code": -1}, {"code": "x", "message": "m"}, "boom", {"code": -32000, "message": "a well-formed one"}],
    ids=["no-message", "code-not-a-number", "a-string", "well-formed"],
)
async def test_any_error_answer_to_a_prompt_is_this_editor_not_answering_at_once(shared: Daemon, error: Any) -> None:
    # pygls could not read the malformed ones: the answer was dropped and the call waited out prompt_timeout (300 s).
    async with raw(shared) as editor, http_agent(shared.url, shared.headers) as agent:
        calling = asyncio.create_task(call(agent, "write", "plain_echo"))
        async with asyncio.timeout(10):
            while (message := await editor.receive()).get("method") != "mcphost/permissionRequest":
                pass
        editor.send({"id": message["id"], "error": error})
        async with asyncio.timeout(10):
            result = await calling
    assert error_of(result)["code"] == "NO_APPROVER"


async def test_a_second_initialize_does_not_change_what_the_editor_is(shared: Daemon) -> None:
    # A watcher that says initialize again as an approver would be listed as an editor and asked nothing, or the
    # reverse: asked, and not listed.
    reader, writer = await asyncio.open_unix_connection(shared.editor_socket)
    watcher = RawClient(reader, writer)
    try:
        for number, options in enumerate(({"approver": False}, {"approver": True}), start=1):
            params = {"capabilities": {}, "initializationOptions": options}
            watcher.send({"id": number, "method": "initialize", "params": params})
            await watcher.response_to(number)
            watcher.send({"method": "initialized", "params": {}})
            watcher.send({"id": 10 + number, "method": "mcphost/status"})
            status = (await watcher.response_to(10 + number))["result"]
            assert status["editors"] == [], "a watcher is not listed, and stays one"
    finally:
        writer.close()


async def test_an_editors_name_is_kept_short_in_status(shared: Daemon) -> None:
    # It goes into the record of every call it answers (decision.approver).
    reader, writer = await asyncio.open_unix_connection(shared.editor_socket)
    client = RawClient(reader, writer)
    try:
        info = {"name": "n" * 3_000_000, "version": "1"}
        client.send({"id": 1, "method": "initialize", "params": {"capabilities": {}, "clientInfo": info}})
        await client.response_to(1)
        client.send({"method": "initialized", "params": {}})
        client.send({"id": 2, "method": "mcphost/status"})
        [listed] = (await client.response_to(2))["result"]["editors"]
    finally:
        writer.close()
    assert len(listed["name"]) == 200 and listed["name"].endswith("…")


async def test_an_answer_sent_just_before_the_editor_leaves_decides_the_call(shared: Daemon) -> None:
    # An editor that answers and closes its socket at once (a crash, a script): the answer and the end of input
    # arrive in one read. It was lost in most tries, and the call refused as NO_APPROVER.
    async with http_agent(shared.url, shared.headers) as agent:
        for _ in range(16):  # a race: without the fix, one in eight or so was lost
            reader, writer = await asyncio.open_unix_connection(shared.editor_socket)
            editor = RawClient(reader, writer)
            editor.send({"id": 0, "method": "initialize", "params": {"capabilities": {}}})
            await editor.response_to(0)
            editor.send({"method": "initialized", "params": {}})
            calling = asyncio.create_task(call(agent, "write", "plain_echo"))
            async with asyncio.timeout(10):
                while (message := await editor.receive()).get("method") != "mcphost/permissionRequest":
                    pass
            editor.send({"id": message["id"], "result": {"decision": "allow"}})
            writer.close()
            async with asyncio.timeout(10):
                result = await calling
            assert not result.is_error, error_of(result)
