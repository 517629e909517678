"""What an editor's connection keeps: nothing of a notification once handled, nothing at all once it has closed."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from typing import Any

import pytest

from mcphost.editor.connection import EditorConnection
from tests.helpers import FakeHub


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def read(self, n: int) -> bytes:
        await asyncio.sleep(0)
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk


class _Writer:
    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def _framed(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def test_notifications_leave_nothing_behind_and_a_closed_connection_is_freed() -> None:
    # pygls filed a future per notification whose handler is a generator ($/setTrace, didOpen) and never took it
    # out: an editor grew the daemon by 1.8 KB per 70-byte message, for good (its protocol outlived it in a cache).
    hub = FakeHub()
    connection = EditorConnection(hub, "socket")  # type: ignore[arg-type]
    hub.connections[connection.id] = connection
    notices = [
        {"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}},
        {"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": "file:///a"}}},
    ]
    await connection.serve(_Reader(b"".join(_framed(n) for n in notices) * 1000), _Writer())  # type: ignore[arg-type]
    assert connection.closed and connection.protocol._request_futures == {}
    alive = weakref.ref(connection)
    protocol = weakref.ref(connection.protocol)
    del connection, hub
    gc.collect()
    assert alive() is None and protocol() is None


def test_pygls_logs_a_clients_mistake_in_one_escaped_line_and_not_without_bound(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Logged with its traceback, a flood of bad params wrote hundreds of MB of log and held the daemon's loop.
    import logging

    from mcphost.editor import connection

    pygls_log = logging.getLogger("pygls.protocol.json_rpc")
    assert any(isinstance(f, connection._OneLineEach) for f in pygls_log.filters)
    monkeypatch.setattr(pygls_log, "filters", [connection._OneLineEach()])  # a second of its own
    with caplog.at_level(logging.ERROR, logger="pygls.protocol.json_rpc"):
        for n in range(connection.LOG_LINES_A_SECOND + 30):
            try:
                raise TypeError(f"bad params \x1b[2K{n}\nforged line")
            except TypeError:
                pygls_log.exception('Exception occurred for message "%s"', n)
    lines = [r for r in caplog.records if r.name == "pygls.protocol.json_rpc"]
    assert len(lines) == connection.LOG_LINES_A_SECOND
    text = caplog.text
    assert "Traceback" not in text and "\x1b" not in text and "\nforged" not in text
    assert "TypeError: bad params \\x1b[2K0\\nforged line" in lines[0].getMessage()
