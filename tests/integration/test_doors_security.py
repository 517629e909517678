"""The agent-facing doors against agents that misbehave or pass for one another (issue 13): a session identity an
agent cannot copy, every route behind the Host and Origin checks, and an answer to every unreadable line on stdio,
in process and through the relay."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import pytest_asyncio

from tests.editor_client import editor
from tests.helpers import Daemon, RawAgent, Sandbox, agent, daemon, http_agent, poll, raw_agent, text_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

RELAY_HEADER = "x-mcphost-relay-session"
WRITE = {"name": "probe:plain_echo", "args": {"text": "hi"}, "intent": {"operation_type": "write"}}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Daemon]:
    box = Sandbox(tmp_path_factory.mktemp("doors"))
    box.write_config(box.probe_server())
    async with daemon(box) as d:
        yield d


async def session_when_offered(request: dict[str, Any]) -> dict[str, Any]:
    """A person who allows, remembering it for the session whenever the prompt offers that."""
    return {"decision": "allow", "remember": "session" if "session" in request["remember_options"] else "once"}


def decided_by(box: Sandbox) -> str:
    return str(box.tool_calls()[-1]["decision"]["by"])


# ---- session identities


async def test_a_stateless_agent_that_copies_an_http_sessions_id_is_prompted_not_granted(shared: Daemon) -> None:
    async with (
        editor(shared.editor_socket, session_when_offered) as ed,
        http_agent(shared.url, shared.headers, mode="legacy") as first,
    ):
        assert not (await first.call_tool("call_tool_write", WRITE)).is_error
        assert not (await first.call_tool("call_tool_write", WRITE)).is_error
        assert decided_by(shared.box) == "remembered_grant"
        stolen = ed.prompts[-1]["session_id"]
        assert stolen
        # The id is the legacy session's, minted by the daemon; a 2026-era request that names it proves nothing.
        async with http_agent(shared.url, {**shared.headers, "mcp-session-id": stolen}, mode="2026-07-28") as b:
            assert not (await b.call_tool("call_tool_write", WRITE)).is_error
        assert decided_by(shared.box) == "editor"
    assert ed.prompts[-1]["session_id"] is None
    assert "session" not in ed.prompts[-1]["remember_options"]


async def test_the_session_id_on_record_does_not_open_that_http_session(shared: Daemon) -> None:
    # The id in records and prompts names the session; it must not be the transport's session id, which would let
    # whoever reads it send requests inside that session, and so under its session approvals.
    async with (
        editor(shared.editor_socket, session_when_offered) as ed,
        http_agent(shared.url, shared.headers, mode="legacy") as first,
    ):
        assert not (await first.call_tool("call_tool_write", WRITE)).is_error
        shown = ed.prompts[-1]["session_id"]
        request = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "call_tool_write", "arguments": WRITE},
        }
        headers = {
            **shared.headers,
            "mcp-session-id": shown,
            "mcp-protocol-version": "2025-06-18",
            "Accept": "application/json, text/event-stream",
        }
        async with httpx2.AsyncClient(timeout=15) as http:
            response = await http.post(shared.url, json=request, headers=headers)
    assert response.status_code == 404, response.text
    assert decided_by(shared.box) == "editor"


async def test_an_agent_that_copies_a_relayed_sessions_id_is_prompted_not_granted(shared: Daemon) -> None:
    async with editor(shared.editor_socket, session_when_offered) as ed, agent(shared.box) as first:
        assert not (await first.call_tool("call_tool_write", WRITE)).is_error
        assert not (await first.call_tool("call_tool_write", WRITE)).is_error
        assert decided_by(shared.box) == "remembered_grant", "the relayed agent's own session grant holds"
        stolen = ed.prompts[-1]["session_id"]
        assert stolen.startswith("relay-")
        bare = stolen.removeprefix("relay-")
        # What another agent can learn (the id in records and prompts), sent as a session id and in the header
        # relays once proved their sessions with over HTTP (they now hold a connection to the agent socket).
        copies = [
            {"mcp-session-id": stolen},
            {RELAY_HEADER: stolen},
            {RELAY_HEADER: bare},
            {RELAY_HEADER: f"{bare}.{'0' * 64}"},
            {RELAY_HEADER: f"{stolen}.{'0' * 64}"},
        ]
        before = len(ed.prompts)
        for copied in copies:
            async with http_agent(shared.url, {**shared.headers, **copied}, mode="2026-07-28") as second:
                assert not (await second.call_tool("call_tool_write", WRITE)).is_error
            assert decided_by(shared.box) == "editor", copied
    copied_prompts = ed.prompts[before:]
    assert len(copied_prompts) == len(copies)
    for prompt in copied_prompts:
        assert prompt["session_id"] is None  # a stateless request: a session of one call
        assert "session" not in prompt["remember_options"]


async def test_a_relayed_modern_agent_is_one_session_held_by_its_relay(shared: Daemon) -> None:
    # A 2026-era agent has no handshake: the relay's connection to the daemon makes its calls one session.
    async with editor(shared.editor_socket, session_when_offered) as ed, agent(shared.box, mode="2026-07-28") as a:
        assert not (await a.call_tool("call_tool_write", WRITE)).is_error
        assert not (await a.call_tool("call_tool_write", WRITE)).is_error
        assert decided_by(shared.box) == "remembered_grant"
    assert ed.prompts[-1]["session_id"].startswith("relay-")


# ---- Host and Origin on every route


async def test_foreign_hosts_and_origins_are_refused_on_every_route(shared: Daemon) -> None:
    base = shared.url.removesuffix("/mcp")
    routes = [(shared.url, shared.headers), (shared.api_url, shared.api_headers), (base + "/nowhere", shared.headers)]
    async with httpx2.AsyncClient(timeout=15) as http:
        for url, token in routes:
            for bad, expected in (({"Host": "evil.example"}, 421), ({"Origin": "https://evil.example"}, 403)):
                for headers in ({**token, **bad}, bad):
                    response = await http.get(url, headers=headers)
                    assert response.status_code == expected, (url, headers, response.status_code)
        local = await http.get(shared.api_url, headers={**shared.api_headers, "Origin": base})
        unknown = await http.get(base + "/nowhere", headers=shared.headers)
    assert local.status_code == 200
    assert unknown.status_code == 404


async def test_the_daemon_does_not_name_its_http_server_software(shared: Daemon) -> None:
    async with httpx2.AsyncClient(timeout=15) as http:
        for url, token in ((shared.url, shared.headers), (shared.api_url, shared.api_headers)):
            response = await http.get(url, headers=token)
            assert "server" not in response.headers, (url, response.headers)


# ---- stdio: every request gets an answer

DEEP = 250


def tool_call(request_id: Any, args_json: str) -> str:
    arguments = '{"name": "probe:read_notes", "args": ' + args_json + ', "intent": {"operation_type": "read"}}'
    return (
        '{"jsonrpc": "2.0", "id": ' + json.dumps(request_id) + ', "method": "tools/call", '
        '"params": {"name": "call_tool_read", "arguments": ' + arguments + "}}"
    )


# (what is sent, the id of the answer, its JSON-RPC code, a word its message must hold)
BAD_LINES: list[tuple[str | bytes, Any, int, str]] = [
    (tool_call("deep", '{"x": ' + "[" * DEEP + "]" * DEEP + "}"), "deep", -32602, "nest"),
    (tool_call(41, '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"), 41, -32602, "nest"),
    (tool_call("lone", '{"text": "\\udfff"}'), "lone", -32602, "surrogate"),
    (tool_call(42, '{"text": "\\ud800 then text"}'), 42, -32602, "surrogate"),
    ('{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": ', 5, -32700, "parse"),
    (b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "\xff"}}', 8, -32700, "UTF-8"),
    ("hello", None, -32700, "parse"),
    ('{"jsonrpc": "2.0", "id": 6, "method": 42}', 6, -32600, "method"),
    ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', None, -32600, "id"),
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": [1]}', 7, -32602, "params"),
]


async def answers_every_bad_line(raw: RawAgent) -> None:
    await raw.initialize()
    for line, request_id, code, word in BAD_LINES:
        await raw.send_line(line)
        answer = await raw.receive(timeout=10)
        assert answer.get("id", "missing") == request_id, (line[:80], answer)
        assert answer["error"]["code"] == code, (line[:80], answer)
        assert word.lower() in answer["error"]["message"].lower(), (line[:80], answer)
    # A broken notification gets no answer (there is no one to answer): the next line's answer comes next.
    await raw.send_line('{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"x": "\\udfff"}}')
    await raw.send_line(tool_call("after", '{"text": "still here"}'))
    answer = await raw.receive(timeout=10)
    assert answer["id"] == "after" and "still here" in json.dumps(answer["result"]), answer


async def test_every_unreadable_request_gets_an_error_in_process(shared: Daemon) -> None:
    async with raw_agent(shared.box, "--in-process") as raw:
        await answers_every_bad_line(raw)
    assert "relaying" not in raw.stderr


async def test_every_unreadable_request_gets_an_error_through_the_relay(shared: Daemon) -> None:
    async with raw_agent(shared.box) as raw:
        await answers_every_bad_line(raw)
    assert "relaying" in raw.stderr
    assert "Traceback" not in raw.stderr


async def test_the_relay_passes_a_readable_call_through_unchanged(shared: Daemon) -> None:
    async with agent(shared.box) as client:
        arguments = {"name": "probe:read_notes", "args": {"text": "é ☃ 𝄞"}, "intent": {"operation_type": "read"}}
        result = await client.call_tool("call_tool_read", arguments)
    assert text_of(result) == "read_notes: é ☃ 𝄞"


async def closed_by_daemon(reader: asyncio.StreamReader) -> bytes:
    """What the daemon sent on a connection until it closed it (a close with what we sent unread is a reset, which
    may take what it sent with it)."""
    received = b""
    async with asyncio.timeout(30):
        with contextlib.suppress(ConnectionResetError):
            while chunk := await reader.read(1 << 16):
                received += chunk
    return received


async def test_connections_that_send_nothing_or_dribble_a_request_are_closed(shared: Daemon) -> None:
    # No token is needed to hold a connection open: an idle one, or one fed a byte at a time, kept its fd for good,
    # and enough of them left no fd for an agent or a relay.
    host, port = shared.url.removeprefix("http://").split("/")[0].split(":")
    idle_reader, idle_writer = await asyncio.open_connection(host, int(port))
    slow_reader, slow_writer = await asyncio.open_connection(host, int(port))
    head = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\nX-Padding: ".encode()

    async def dribble() -> None:
        with contextlib.suppress(ConnectionError):
            for byte in head + b"x" * 1000:
                slow_writer.write(bytes([byte]))
                await slow_writer.drain()
                await asyncio.sleep(0.05)

    dribbling = asyncio.create_task(dribble())
    try:
        assert await closed_by_daemon(idle_reader) == b""
        await closed_by_daemon(slow_reader)
        assert not dribbling.done(), "the daemon waited for the whole dribbled request"
    finally:
        dribbling.cancel()
        idle_writer.close()
        slow_writer.close()
    async with http_agent(shared.url, shared.headers) as session:  # and agents are served as before
        assert not (await session.call_tool("call_tool_read", _read_call())).is_error


def _read_call() -> dict[str, Any]:
    return {"name": "probe:read_notes", "args": {"text": "x"}, "intent": {"operation_type": "read"}}


async def test_a_request_head_past_its_limit_gets_431_and_the_connection_is_closed(shared: Daemon) -> None:
    # httptools holds a header of any length as it arrives: 200 MB sent, the daemon kept 300 MB.
    host, port = shared.url.removeprefix("http://").split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nX-Big: ".encode())
        with contextlib.suppress(ConnectionError):
            for _ in range(40):  # 2.5 MiB, never finished
                writer.write(b"y" * (64 * 1024))
                await writer.drain()
        answer = await closed_by_daemon(reader)
    finally:
        writer.close()
    assert answer in (
        b"",
        b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    )
    # The daemon's stderr is read by a thread of this process: it may come in after the connection's end.
    await poll(lambda: "passed 1048576 bytes" in shared.stderr, "the daemon to say why it closed the connection")
    async with http_agent(shared.url, shared.headers) as session:
        assert not (await session.call_tool("call_tool_read", _read_call())).is_error
