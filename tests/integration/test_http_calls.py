"""Tool calls over the daemon's streamable HTTP endpoint take a shortcut past the SDK's session and event stream:
a plain JSON answer when the call needs no stream, an event stream when it must ask the agent's client first, and
everything the SDK did for them still done (session names, cancellation, ended sessions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.helpers import Sandbox, daemon, http_agent, poll, slow_read, text_of

INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "plain", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
READ = {"name": "probe:read_notes", "args": {"text": "hi"}, "intent": {"operation_type": "read"}}


def call(request_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": "call_tool_read", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


class Plain:
    """A client with no SDK: one handshake-era session, one POST per message."""

    def __init__(self, http: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> None:
        self.http, self.url, self.headers = http, url, {**headers, **ACCEPT}

    async def open(self) -> None:
        opened = await self.http.post(self.url, json=INIT, headers=self.headers)
        assert opened.status_code == 200, opened.text
        self.headers |= {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def post(self, message: dict[str, Any]) -> httpx2.Response:
        return await self.http.post(self.url, json=message, headers=self.headers)


async def test_a_call_is_answered_as_plain_json_and_recorded_under_its_session(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with daemon(sandbox) as d, httpx2.AsyncClient(timeout=30) as http:
        plain = Plain(http, d.url, d.headers)
        await plain.open()
        first, second = await plain.post(call(1, READ)), await plain.post(call(2, READ))
    for response, request_id in ((first, 1), (second, 2)):
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        answer = response.json()
        assert answer["id"] == request_id and answer["result"]["content"][0]["text"] == "read_notes: hi"
    records = sandbox.tool_calls()
    assert [r["client"] for r in records] == ["plain 1", "plain 1"]
    assert records[0]["session_id"] == records[1]["session_id"] and records[0]["session_id"].startswith("http-")
    # The name on record is derived from the transport's id, never the id itself (issue 13).
    assert plain.headers["mcp-session-id"] not in json.dumps(records)


async def test_an_ended_session_is_not_served_by_the_shortcut(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with daemon(sandbox) as d, httpx2.AsyncClient(timeout=30) as http:
        plain = Plain(http, d.url, d.headers)
        await plain.open()
        assert (await plain.post(call(1, READ))).status_code == 200
        ended = await http.delete(d.url, headers=plain.headers)
        assert ended.status_code == 200
        after = await plain.post(call(2, READ))
    assert after.status_code == 404
    assert len(sandbox.tool_calls()) == 1


@pytest.mark.parametrize("notices", [1, 2])
async def test_a_call_cancelled_over_http_is_recorded_as_cancelled(
    sandbox: Sandbox, tmp_path: Path, notices: int
) -> None:
    # Twice: a client that repeats its cancellation must not break into the record's write the first one began.
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    started, gate = tmp_path / "started", tmp_path / "gate"
    slow = slow_read(started, gate)
    async with daemon(sandbox) as d, httpx2.AsyncClient(timeout=30) as http:
        plain = Plain(http, d.url, d.headers)
        await plain.open()
        answers: list[httpx2.Response] = []
        async with anyio.create_task_group() as tg:

            async def slow_call() -> None:
                answers.append(await plain.post(call("slow", slow)))

            tg.start_soon(slow_call)
            await poll(started.exists, "the upstream to start the slow call")
            notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}}
            for _ in range(notices):
                assert (await plain.post(notice)).status_code == 202
        [record] = await poll(sandbox.tool_calls, "the cancelled call's record")
        gate.touch()
        after = await plain.post(call(2, READ))
    assert record["status"] == "cancelled" and record["tool"] == "slow"
    assert answers[0].status_code == 202 and answers[0].content == b""  # no answer to a cancelled request
    assert after.status_code == 200 and [r["status"] for r in sandbox.tool_calls()] == ["cancelled", "success"]


async def test_sdk_clients_of_both_eras_call_over_http(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with daemon(sandbox) as d:
        for mode in ("legacy", "auto"):
            async with http_agent(d.url, d.headers, mode=mode) as client:
                assert text_of(await client.call_tool("call_tool_read", READ)) == "read_notes: hi"
    assert [r["status"] for r in sandbox.tool_calls()] == ["success", "success"]
