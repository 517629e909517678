"""A daemon that stops under a claimed HTTP call tells the agent why, as `mcphost mcp` does: a whole error answer,
or, when the call's event stream has begun, that answer as the stream's last event (written as uvicorn writes a chunk,
with no wait: the server is going). The whole answer's way is exercised against a real daemon in
tests/integration/test_http_calls.py; the event stream's is here."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from mcphost.serve.http_app import Claim
from mcphost.serve.http_server import _AgentsHttp
from mcphost.serve.stdio import STOPPED


class _Wire:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data


@pytest.mark.parametrize("begun", [False, True], ids=["whole", "event-stream-begun"])
def test_a_call_the_stopping_daemon_cuts_is_answered_with_why_whole_or_as_its_streams_last_event(begun: bool) -> None:
    wire = _Wire()
    written: list[tuple[int, bytes]] = []
    protocol = SimpleNamespace(
        transport=wire, _write_answer=lambda _cycle, status, body: written.append((status, body))
    )
    cycle = SimpleNamespace(disconnected=False, response_complete=False, response_started=begun, chunked_encoding=begun)
    _AgentsHttp._answer_stopped(protocol, Claim(None, ("call-7", "call_tool_read", {}), None), cycle)  # type: ignore[arg-type]
    if begun:
        size, rest = wire.data.split(b"\r\n", 1)
        event, end = rest[: int(size, 16)], rest[int(size, 16) :]
        assert end == b"\r\n0\r\n\r\n" and cycle.response_complete  # the chunk, then the body's end
        assert event.startswith(b"event: message\r\ndata: ") and event.endswith(b"\r\n\r\n")
        body = event.removeprefix(b"event: message\r\ndata: ").strip()
    else:
        [(status, body)] = written
        assert status == 200 and wire.data == b""
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "id": "call-7",
        "error": {"code": -32603, "message": f"tools/call: {STOPPED}"},
    }
