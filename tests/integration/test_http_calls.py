"""Tool calls over the daemon's streamable HTTP endpoint take a shortcut past the SDK's session and event stream:
a plain JSON answer when the call needs no stream, an event stream when it must ask the agent's client first, and
everything the SDK did for them still done (session names, cancellation, ended sessions)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from mcphost.serve.stdio import STOPPED
from tests.helpers import Daemon, Sandbox, daemon, http_agent, poll, slow_read, text_of

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


@asynccontextmanager
async def opened(sandbox: Sandbox, more: str = "") -> AsyncIterator[tuple[Daemon, httpx2.AsyncClient, Plain]]:
    """A daemon whose policy allows reads of the probe (and of the servers `more` adds), and a plain client's session
    open on it."""
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server() + more)
    async with daemon(sandbox) as d, httpx2.AsyncClient(timeout=30) as http:
        plain = Plain(http, d.url, d.headers)
        await plain.open()
        yield d, http, plain


async def while_slow(
    plain: Plain, started: Path, gate: Path, then: Callable[[], Awaitable[None]]
) -> list[httpx2.Response]:
    """The answer to a slow call on `plain`'s session (the probe's, held until `gate` exists), with `then` done once
    the upstream has started it."""
    answers: list[httpx2.Response] = []
    async with anyio.create_task_group() as tg:

        async def slow_call() -> None:
            answers.append(await plain.post(call("slow", slow_read(started, gate))))

        tg.start_soon(slow_call)
        await poll(started.exists, "the upstream to start the slow call")
        await then()
    return answers


async def test_a_call_is_answered_as_plain_json_and_recorded_under_its_session(sandbox: Sandbox) -> None:
    async with opened(sandbox) as (_d, _http, plain):
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
    async with opened(sandbox) as (d, http, plain):
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
    started, gate = tmp_path / "started", tmp_path / "gate"
    async with opened(sandbox) as (_d, _http, plain):

        async def cancel() -> None:
            notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}}
            for _ in range(notices):
                assert (await plain.post(notice)).status_code == 202

        answers = await while_slow(plain, started, gate, cancel)
        [record] = await poll(sandbox.tool_calls, "the cancelled call's record")
        gate.touch()
        after = await plain.post(call(2, READ))
    assert record["status"] == "cancelled" and record["tool"] == "slow"
    assert answers[0].status_code == 202 and answers[0].content == b""  # no answer to a cancelled request
    assert after.status_code == 200 and [r["status"] for r in sandbox.tool_calls()] == ["cancelled", "success"]


async def test_a_call_running_when_its_client_ends_the_session_is_cancelled(sandbox: Sandbox, tmp_path: Path) -> None:
    # As the SDK cancels the calls it runs for a session it ends: a write must not go on, and be recorded a success,
    # for a client that has gone.
    started, gate = tmp_path / "started", tmp_path / "gate"
    async with opened(sandbox) as (d, http, plain):

        async def end_session() -> None:
            assert (await http.delete(d.url, headers=plain.headers)).status_code == 200

        answers = await while_slow(plain, started, gate, end_session)
        [record] = await poll(sandbox.tool_calls, "the cancelled call's record")
        gate.touch()
    assert record["status"] == "cancelled" and record["tool"] == "slow"
    assert answers[0].status_code == 202 and answers[0].content == b""


async def test_a_call_cut_short_by_the_daemon_stopping_is_answered_with_why_in_either_era(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    slow = [slow_read(tmp_path / f"started-{n}", tmp_path / f"gate-{n}") for n in (1, 2)]
    # The probe runs one slow call at a time: the 2026-era call goes to a second one.
    async with (
        opened(sandbox, sandbox.probe_server("probe2")) as (d, _http, plain),
        http_agent(d.url, d.headers, mode="auto") as modern,
    ):
        told: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:

            async def handshake_era() -> None:
                try:
                    told["handshake"] = (await plain.post(call("slow", slow[0]))).json()["error"]["message"]
                except httpx2.TransportError as exc:
                    told["handshake"] = exc

            async def modern_era() -> None:
                try:
                    told["2026"] = await modern.call_tool("call_tool_read", {**slow[1], "name": "probe2:slow"})
                except MCPError as exc:
                    told["2026"] = exc.error.message

            tg.start_soon(handshake_era)
            tg.start_soon(modern_era)
            for n in (1, 2):
                await poll((tmp_path / f"started-{n}").exists, "the upstreams to start the slow calls")
            d.process.terminate()
        assert await anyio.to_thread.run_sync(d.process.wait, 15) == 0
    # Not a dropped connection: the agent is told the daemon stopped, and that the call is on record as cancelled.
    assert told == {"handshake": f"tools/call: {STOPPED}", "2026": f"tools/call: {STOPPED}"}, told
    assert [r["status"] for r in sandbox.tool_calls()] == ["cancelled", "cancelled"]
    assert "Traceback" not in d.stderr and "failed" not in d.stderr, d.stderr


async def test_sdk_clients_of_both_eras_call_over_http(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with daemon(sandbox) as d:
        for mode in ("legacy", "auto"):
            async with http_agent(d.url, d.headers, mode=mode) as client:
                assert text_of(await client.call_tool("call_tool_read", READ)) == "read_notes: hi"
    assert [r["status"] for r in sandbox.tool_calls()] == ["success", "success"]


async def test_a_call_that_any_layer_in_front_would_refuse_is_refused_not_answered(sandbox: Sandbox) -> None:
    # The daemon's HTTP server answers a tool call before the ASGI layers run; each of their refusals must stand.
    async with opened(sandbox) as (d, http, plain):
        api_token = d.info["api"]["token"]
        port = d.url.split(":")[2].split("/")[0]
        refused = {
            "no token": {"Authorization": ""},
            "a wrong token": {"Authorization": "Bearer nope"},
            "the REST API's token": {"Authorization": f"Bearer {api_token}"},
            "a foreign Host": {"Host": f"evil.example:{port}"},
            "a web page's Origin": {"Origin": "https://evil.example"},
            "another session's id": {"mcp-session-id": "0123456789abcdef0123456789abcdef"},
        }
        answers = {
            what: await http.post(d.url, json=call(what, READ), headers={**plain.headers, **change})
            for what, change in refused.items()
        }
        allowed = await plain.post(call("allowed", READ))
    statuses = {what: response.status_code for what, response in answers.items()}
    assert statuses == {
        "no token": 401,
        "a wrong token": 401,
        "the REST API's token": 401,
        "a foreign Host": 421,
        "a web page's Origin": 403,
        "another session's id": 404,
    }
    assert "the agents'" in answers["the REST API's token"].json()["message"]
    assert allowed.status_code == 200
    assert [r["status"] for r in sandbox.tool_calls()] == ["success"]


async def _exchange(url: str, raw: bytes, answers: int, *, after_continue: bytes = b"") -> list[bytes]:
    """Write `raw` on one connection (and `after_continue` once a `100 Continue` came), and read `answers` responses
    with a content-length each: the status line, headers and body of each, as they came."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(raw)
        if after_continue:
            assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(after_continue)
        responses = []
        for _ in range(answers):
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
            )
            responses.append(head + await reader.readexactly(length))
        return responses
    finally:
        writer.close()


def _post(plain: Plain, message: dict[str, Any], *, chunked: bool = False, expect: bool = False) -> tuple[bytes, bytes]:
    body = json.dumps(message).encode()
    headers = {k.lower(): v for k, v in plain.headers.items()}
    headers["host"] = plain.url.split("//")[1].split("/")[0]
    if chunked:
        headers["transfer-encoding"] = "chunked"
        body = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:20], body[20:])) + b"0\r\n\r\n"
    else:
        headers["content-length"] = str(len(body))
    if expect:
        headers["expect"] = "100-continue"
    head = b"POST /mcp HTTP/1.1\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items()) + b"\r\n"
    return head, body


async def test_pipelined_chunked_and_continued_calls_are_each_answered_in_order(sandbox: Sandbox) -> None:
    async with opened(sandbox) as (d, _http, plain):
        pipelined = b"".join(b"".join(_post(plain, call(n, {**READ, "args": {"text": f"p{n}"}}))) for n in range(3))
        in_order = await _exchange(d.url, pipelined, 3)
        chunked = await _exchange(d.url, b"".join(_post(plain, call("chunked", READ), chunked=True)), 1)
        head, body = _post(plain, call("continued", READ), expect=True)
        continued = await _exchange(d.url, head, 1, after_continue=body)
    answers = [json.loads(r.split(b"\r\n\r\n", 1)[1]) for r in [*in_order, *chunked, *continued]]
    assert [a["id"] for a in answers] == [0, 1, 2, "chunked", "continued"]
    assert [a["result"]["content"][0]["text"] for a in answers[:3]] == [
        "read_notes: p0",
        "read_notes: p1",
        "read_notes: p2",
    ]
    assert all(r.startswith(b"HTTP/1.1 200 OK\r\n") for r in [*in_order, *chunked, *continued])
    assert len(sandbox.tool_calls()) == 5


async def test_a_call_whose_id_is_no_string_or_integer_is_refused_in_a_session_as_on_every_other_door(
    sandbox: Sandbox,
) -> None:
    # The SDK reads such a request as a notification: 202, never run, never answered (stdio and the 2026 door say
    # -32600).
    async with opened(sandbox) as (_, http, plain):
        answers = []
        for raw_id in ("null", "1.5", "true", '{"a": 1}', "[1]", "NaN"):
            body = json.dumps(call(0, READ)).replace('"id": 0', f'"id": {raw_id}', 1)
            answers.append(await http.post(plain.url, content=body.encode(), headers=plain.headers))
        allowed = await plain.post(call("fine", READ))
    for answer in answers:
        assert answer.status_code == 400, answer.text
        assert answer.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid request: the id must be a string or a number"},
        }
    assert allowed.status_code == 200
    assert len(sandbox.tool_calls()) == 1  # the one call with an id
