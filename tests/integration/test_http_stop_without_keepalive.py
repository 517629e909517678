"""A call over HTTP that asks for no keep-alive (`Connection: close`, as Python's urllib and any HTTP/1.0 client send)
is not taken by the HTTP server's own way for agents' calls (`_AgentsHttp`): it goes the ASGI way, to the call
shortcut in a handshake-era session, to the SDK in the 2026 era. Cut short there by a stopping daemon (uvicorn's wait
for the requests in flight ran out), it is answered as the other way answers it: the JSON-RPC error saying the daemon
was stopped, as a whole answer or as the last event of the event stream its answer had begun, never a bare 500 and no
traceback in the daemon's log; the call is on record as cancelled, once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import pytest

from mcphost.serve.stdio import STOPPED
from tests.helpers import (
    JSON_BOTH,
    Daemon,
    Sandbox,
    daemon,
    initialize_request,
    poll,
    slow_read,
    tools_call,
    with_sitecustomize,
)
from tests.integration.test_stdio_calls import modern_meta

MODERN = "2026-07-28"
# The SDK's answer to a 2026-era call commits to an event stream once the call has run this long: cut to a fraction
# of a second in the daemon, so that a call outlasts it in a test.
SHORT_SDK_WINDOW = """
from mcp.server import _streamable_http_modern

_streamable_http_modern._SSE_PING_INTERVAL = 0.3
"""


class Exchange:
    """One POST over a connection of its own that asks for no keep-alive, and what the daemon writes back, read as
    it comes until the daemon closes the connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.received = b""

    @classmethod
    async def post(cls, d: Daemon, headers: dict[str, str], body: dict[str, Any]) -> Exchange:
        url = urlsplit(d.url)
        assert url.hostname == "127.0.0.1" and url.port is not None
        payload = json.dumps(body).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "connection": "close"}.items())
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        request = f"POST {url.path} HTTP/1.1\r\nhost: {url.netloc}\r\ncontent-length: {len(payload)}\r\n{head}\r\n"
        writer.write(request.encode() + payload)
        await writer.drain()
        return cls(reader, writer)

    async def read_until(self, marker: bytes) -> None:
        """Read until `marker` has come (a sign that the answer is an event stream under way)."""
        with anyio.fail_after(15):
            while marker not in self.received:
                chunk = await self.reader.read(65536)
                assert chunk, f"the connection closed before {marker!r} came: {self.received!r}"
                self.received += chunk

    async def read_to_end(self) -> bytes:
        with anyio.fail_after(15):
            self.received += await self.reader.read()
        return self.received

    def close(self) -> None:
        self.writer.close()


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """A whole HTTP/1.1 response: its status, its headers (names in lower case) and its body, unchunked."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        whole = b""
        while True:
            size, _, body = body.partition(b"\r\n")
            assert size, f"the event stream was cut off, not ended: {raw!r}"
            length = int(size, 16)
            if not length:
                break
            whole, body = whole + body[:length], body[length + 2 :]
        body = whole
    return int(status_line.split()[1]), headers, body


def last_message(headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The JSON-RPC message of a whole JSON answer, or the last event of an event stream."""
    if headers["content-type"].startswith("text/event-stream"):
        data = [line for line in body.decode().splitlines() if line.startswith("data: ")]
        body = data[-1].removeprefix("data: ").encode()
    else:
        assert headers["content-type"] == "application/json", headers
    decoded: dict[str, Any] = json.loads(body)
    return decoded


async def handshake_session(d: Daemon, *, elicits: bool) -> dict[str, str]:
    """A handshake-era session opened over plain HTTP (keep-alive, as any client opens one); `elicits`: its client
    says it takes questions (elicitation). The headers every later request of it carries."""
    import httpx2

    initialize = initialize_request("no-keep-alive")
    if elicits:
        initialize["params"]["capabilities"] = {"elicitation": {}}
    base = {**d.headers, **JSON_BOTH}
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(d.url, json=initialize, headers=base)
        session = {**base, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        await http.post(d.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return session


# (era, whether the answer is an event stream under way when the daemon stops)
CASES = [("handshake", False), ("handshake", True), (MODERN, False), (MODERN, True)]


@pytest.mark.parametrize(
    ("era", "streaming"), CASES, ids=["handshake", "handshake-event-stream", MODERN, f"{MODERN}-event-stream"]
)
async def test_a_call_asking_for_no_keep_alive_cut_short_by_the_daemon_stopping_is_told_why(
    sandbox: Sandbox, tmp_path: Path, era: str, streaming: bool
) -> None:
    started, gate = tmp_path / "started", tmp_path / "gate"
    permissions = '[permissions]\nread = "allow"\nwrite = "ask"\nno_editor = "elicit"\n\n'
    sandbox.write_config(permissions + sandbox.probe_server())
    env = with_sitecustomize(tmp_path, SHORT_SDK_WINDOW) if era == MODERN and streaming else None
    async with daemon(sandbox, env=env) as d:
        if era == "handshake" and streaming:
            # A write the policy asks the agent's client about: the answer is an event stream carrying the question,
            # which nobody answers.
            headers = await handshake_session(d, elicits=True)
            write = {"name": "probe:plain_echo", "args": {"text": "w"}, "intent": {"operation_type": "write"}}
            body = tools_call("cut", "call_tool_write", write)
        elif era == "handshake":
            headers = await handshake_session(d, elicits=False)
            body = tools_call("cut", "call_tool_read", slow_read(started, gate))
        else:
            body = tools_call("cut", "call_tool_read", slow_read(started, gate))
            body["params"]["_meta"] = modern_meta()
            routing = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "call_tool_read"}
            headers = {**d.headers, **JSON_BOTH, **routing}
        exchange = await Exchange.post(d, headers, body)
        try:
            if era == "handshake" and streaming:
                await exchange.read_until(b"elicitation/create")
            else:
                await poll(started.exists, "the upstream to start the slow call")
                if streaming:
                    await exchange.read_until(b": ping")
            assert (b"text/event-stream" in exchange.received) is streaming, exchange.received
            d.process.terminate()
            assert await anyio.to_thread.run_sync(d.process.wait, 15) == 0
            raw = await exchange.read_to_end()
        finally:
            exchange.close()
            gate.touch()
    status, response_headers, response_body = parse(raw)
    assert response_headers["content-type"].startswith("text/event-stream" if streaming else "application/json")
    assert (status, last_message(response_headers, response_body)) == (
        200,
        {"jsonrpc": "2.0", "id": "cut", "error": {"code": -32603, "message": f"tools/call: {STOPPED}"}},
    ), raw
    assert [r["status"] for r in sandbox.tool_calls()] == ["cancelled"]
    assert "Traceback" not in d.stderr and "CancelledError" not in d.stderr, d.stderr
