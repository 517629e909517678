"""The editor channel spoken by hand (LSP framing over the socket, no pygls on this side): what any editor
integration may send, including what pygls-based clients never do."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.editor.support import RawClient, call, raw
from tests.helpers import Daemon, error_of, http_agent

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


async def test_an_answer_with_a_member_json_rpc_does_not_name_still_decides_the_call(shared: Daemon) -> None:
    # pygls could not read it: the answer was dropped and the call waited out prompt_timeout (300 s).
    async with raw(shared) as editor, http_agent(shared.url, shared.headers) as agent:
        calling = asyncio.create_task(call(agent, "write", "plain_echo"))
        async with asyncio.timeout(10):
            while (message := await editor.receive()).get("method") != "mcphost/permissionRequest":
                pass
        editor.send({"id": message["id"], "result": {"decision": "allow"}, "sentAt": 1764000000})
        async with asyncio.timeout(10):
            result = await calling
    assert not result.is_error, error_of(result)


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


async def test_a_body_that_is_not_json_gets_a_parse_error_and_the_connection_stays_open(shared: Daemon) -> None:
    # pygls logged it and answered nothing: an editor waiting on that request waited forever.
    async with raw(shared) as client:
        client.send_body(b'{"id": 1, "method": ')
        answer = await client.response_to(None)
        assert answer["error"]["code"] == -32700 and "data" not in answer["error"]
        client.send({"id": 2, "method": "mcphost/status"})
        assert (await client.response_to(2))["result"]["pid"] == shared.process.pid


@pytest.mark.parametrize(
    ("body", "answered_id", "named"),
    [
        (b"5", None, "object"),
        (b"[1, 2]", None, "batch"),
        (b'{"jsonrpc": "2.0", "id": 3}', 3, "no method"),
        (b'{"jsonrpc": "2.0", "id": 4, "method": 5}', 4, "method must be a string"),
        (b'{"id": 5, "method": "mcphost/status"}', 5, '"jsonrpc": "2.0"'),
        (b'{"jsonrpc": "2.0", "id": [6], "method": "mcphost/status"}', None, "id must be"),
    ],
    ids=["a-number", "a-batch", "no-method", "method-not-a-string", "no-jsonrpc", "id-an-array"],
)
async def test_json_that_is_not_a_request_gets_invalid_request_with_its_id_and_no_internals(
    shared: Daemon, body: bytes, answered_id: int | None, named: str
) -> None:
    # A method that was not a string had pygls answer -32603 with its traceback (file paths, source lines) in data.
    async with raw(shared) as client:
        client.send_body(body)
        answer = await client.response_to(answered_id)
        client.send({"id": 7, "method": "mcphost/status"})
        assert (await client.response_to(7))["result"]["pid"] == shared.process.pid, "the connection stays open"
    assert answer["error"]["code"] == -32600
    assert named in answer["error"]["message"]
    assert "data" not in answer["error"] and "Error" not in answer["error"]["message"]


async def test_params_of_the_wrong_type_get_invalid_params_with_the_id(shared: Daemon) -> None:
    # An initialize whose params pygls could not read got no answer at all.
    reader, writer = await asyncio.open_unix_connection(shared.editor_socket)
    client = RawClient(reader, writer)
    try:
        client.send({"id": 1, "method": "initialize", "params": 5})
        assert (await client.response_to(1))["error"]["code"] == -32602
        client.send({"id": 2, "method": "initialize", "params": {"capabilities": 5}})
        answer = await client.response_to(2)
    finally:
        writer.close()
    assert answer["error"] == {"code": -32602, "message": "Invalid params for initialize"}


async def test_a_notification_that_fails_shows_the_editor_no_internals(shared: Daemon) -> None:
    # pygls showed the editor "Error in server: KeyError: 'file:///nope'" (window/showMessage): the log has it.
    async with raw(shared) as client:
        changed = {"textDocument": {"uri": "file:///nope", "version": 2}, "contentChanges": [{"text": "x"}]}
        client.send({"method": "textDocument/didChange", "params": changed})
        client.send({"id": 1, "method": "mcphost/status"})
        shown = []
        async with asyncio.timeout(10):
            while "id" not in (message := await client.receive()):
                if message["method"] == "window/showMessage":
                    shown.append(message["params"])
    assert shown == []


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_documents_an_editor_opens_are_not_kept(shared: Daemon) -> None:
    # The channel carries prompts, not documents: pygls kept every one an editor opened, 16 MiB each, without bound.
    if not Path(f"/proc/{shared.process.pid}/status").exists():
        pytest.skip("no /proc here to read the daemon's memory from")
    before = resident_bytes(shared.process.pid)
    async with raw(shared) as client:
        for n in range(40):
            document = {"uri": f"file:///big-{n}", "languageId": "text", "version": 1, "text": "x" * (2 << 20)}
            client.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})
            await client.writer.drain()
        client.send({"id": 1, "method": "mcphost/status"})
        assert "result" in await client.response_to(1)
    grown = resident_bytes(shared.process.pid) - before
    assert grown < 40 << 20, f"the daemon grew by {grown >> 20} MiB for 80 MiB of documents"


async def test_a_request_after_shutdown_is_answered_that_the_server_is_shutting_down(shared: Daemon) -> None:
    # pygls dropped it unanswered, and its client waited for good; LSP answers it with InvalidRequest.
    async with raw(shared) as client:
        client.send({"id": 1, "method": "shutdown"})
        assert (await client.response_to(1)).get("result") is None
        client.send({"id": 2, "method": "mcphost/status"})
        async with asyncio.timeout(10):
            answer = await client.response_to(2)
    assert answer["error"]["code"] == -32600 and "shutting down" in answer["error"]["message"]
