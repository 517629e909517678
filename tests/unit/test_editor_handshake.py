"""A socket connection to the editor channel must attach (`initialize`, `initialized`) soon after it connects: one
that never does held one of the channel's connection slots for good, and enough of them shut the editor out."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from mcphost.editor import listener
from tests.helpers import FakeHub


def _framed(message: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def _attach(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> None:
    writer.write(_framed({"id": 1, "method": "initialize", "params": {"capabilities": {}}}))
    await reader.readuntil(b"\r\n\r\n")
    writer.write(_framed({"method": "initialized", "params": {}}))
    await writer.drain()


async def test_a_connection_that_does_not_attach_in_time_is_closed_and_frees_its_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("MCPHOST_RUNTIME_DIR", str(runtime))
    monkeypatch.setattr(listener, "HANDSHAKE_SECONDS", 0.3)
    hub = FakeHub()
    async with listener.listening(hub) as path:  # type: ignore[arg-type]
        idle_reader, idle_writer = await asyncio.open_unix_connection(path)
        editor_reader, editor_writer = await asyncio.open_unix_connection(path)
        await _attach(editor_writer, editor_reader)
        with caplog.at_level(logging.WARNING):
            # Closed by the daemon: the idle one's read ends, the attached one's does not.
            assert await asyncio.wait_for(idle_reader.read(), 5) == b""
            await asyncio.sleep(0.4)
        assert len(hub.connections) == 1
        [attached] = hub.connections.values()
        assert attached.attached and not attached.closed
        assert "did not attach within 0.3 s" in caplog.text
        for writer in (idle_writer, editor_writer):
            writer.close()
