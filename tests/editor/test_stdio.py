"""`mcphost serve --stdio` as an editor runs it (vscode-languageclient spawns the daemon and appends `--stdio`),
driven through pytest-lsp's own fixture machinery: the test client starts the daemon as a subprocess and speaks
the editor channel on its stdin/stdout."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import register_lsp_features

from mcphost.editor import protocol as p
from mcphost.editor.connection import dict_converter
from tests.editor.support import SOON, assert_ok, call
from tests.helpers import Sandbox, http_agent, poll

# pytest-lsp starts the server before any fixture of ours runs, from a config made at import: the sandbox for
# these daemons is named here, made by the client factory just before a daemon starts, and removed when the
# module is done.
BOX = Sandbox(Path(tempfile.gettempdir()) / f"mcphost-stdio-{os.getpid()}")


class StdioEditor(LanguageClient):
    """pytest-lsp's client that answers prompts with "allow once", records what it is sent, and keeps a copy of
    every byte the daemon writes to its stdout."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prompts: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.stdout = bytearray()

    async def start_io(self, cmd: str, *args: Any, **kwargs: Any) -> None:
        await super().start_io(cmd, *args, **kwargs)
        # The reading task is created but has not run yet (nothing was awaited since): tee the stream now.
        assert self._server is not None and self._server.stdout is not None
        stream = self._server.stdout
        readline, readexactly = stream.readline, stream.readexactly

        async def tee_line() -> bytes:
            data = await readline()
            self.stdout += data
            return data

        async def tee_exactly(n: int) -> bytes:
            data = await readexactly(n)
            self.stdout += data
            return data

        stream.readline = tee_line  # type: ignore[method-assign]
        stream.readexactly = tee_exactly  # type: ignore[method-assign]


def stdio_editor() -> StdioEditor:
    BOX.root.mkdir(mode=0o700, exist_ok=True)  # runs just before the daemon is spawned
    BOX.write_config(BOX.probe_server())
    client = StdioEditor(converter_factory=dict_converter)  # custom methods' params as dicts, not namedtuples
    register_lsp_features(client)

    async def on_prompt(params: dict[str, Any]) -> dict[str, Any]:
        client.prompts.append(params)
        return {"decision": "allow", "remember": "once"}

    def on_status(params: dict[str, Any]) -> None:
        client.statuses.append(params)

    def on_activity(params: dict[str, Any]) -> None:
        del params

    client.feature(p.PERMISSION_REQUEST)(on_prompt)
    client.feature(p.STATUS)(on_status)
    client.feature(p.ACTIVITY)(on_activity)
    return client


@pytest.fixture(scope="module", autouse=True)
def _remove_the_sandbox() -> Iterator[None]:
    yield
    shutil.rmtree(BOX.root, ignore_errors=True)


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "mcphost", "serve", "--stdio", "--port", "0"],
        server_env={**os.environ, **BOX.env()},
        client_factory=stdio_editor,
    )
)
async def client(lsp_client: StdioEditor) -> AsyncIterator[None]:
    params = lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(), client_info=lsp.ClientInfo(name="stdio-editor", version="1")
    )
    result = await lsp_client.initialize_session(params)
    assert result.server_info is not None and result.server_info.name == "mcphost"
    yield
    server = lsp_client._server
    if server is not None and server.returncode is None:
        await lsp_client.shutdown_session()


def lsp_frames(data: bytes) -> list[dict[str, Any]]:
    """Every byte must belong to a well-formed LSP message: headers, a blank line, a JSON-RPC body."""
    messages: list[dict[str, Any]] = []
    at = 0
    while at < len(data):
        end = data.find(b"\r\n\r\n", at)
        assert end >= 0, f"bytes outside any message at offset {at}: {bytes(data[at : at + 80])!r}"
        length = None
        for header in data[at:end].decode("ascii").split("\r\n"):
            name, _, value = header.partition(": ")
            assert name in ("Content-Length", "Content-Type"), f"not an LSP header: {header!r}"
            if name == "Content-Length":
                length = int(value)
        assert length is not None
        body = data[end + 4 : end + 4 + length]
        assert len(body) == length
        message = json.loads(body)
        assert message["jsonrpc"] == "2.0"
        messages.append(message)
        at = end + 4 + length
    return messages


def discovery_file(pid: int) -> Path:
    return BOX.root / "run" / f"daemon-{pid}.json"


async def test_the_spawning_editor_sees_status_and_answers_prompts_over_stdio(client: StdioEditor) -> None:
    assert client._server is not None
    status = p.StatusPayload.model_validate(await client.protocol.send_request_async(p.STATUS, None))
    assert status.pid == client._server.pid
    assert status.mcp.url is not None and status.mcp.url.startswith("http://127.0.0.1:")
    assert [(e.name, e.transport) for e in status.editors] == [("stdio-editor 1", "stdio")]
    # The editor channel answers from the start; the discovery file appears once the agents' endpoint is up.
    await poll(discovery_file(status.pid).exists, "the discovery file")
    info = json.loads(discovery_file(status.pid).read_text(encoding="utf-8"))
    assert info["mcp"]["url"] == status.mcp.url

    async with http_agent(status.mcp.url, status.mcp.headers) as agent:
        assert_ok(await call(agent, "write", "plain_echo", {"text": "over stdio"}))
    (prompt,) = client.prompts
    assert (prompt["tool"], prompt["arguments"]) == ("plain_echo", {"text": "over stdio"})
    record = BOX.tool_calls()[-1]
    assert record["decision"]["by"] == "editor" and record["decision"]["approver"].startswith("stdio-editor")
    assert client.error is None


async def test_closing_the_stdio_session_ends_the_daemon_and_stdout_carries_only_protocol(
    client: StdioEditor,
) -> None:
    server = client._server
    assert server is not None
    await client.protocol.send_request_async(p.STATUS, None)
    await poll(discovery_file(server.pid).exists, "the discovery file")
    assert server.returncode is None

    with anyio.fail_after(SOON):
        await client.shutdown_session()  # shutdown, exit; then waits for the process to end
    assert server.returncode == 0
    assert not discovery_file(server.pid).exists()

    messages = lsp_frames(bytes(client.stdout))
    assert any(m.get("id") is not None and "result" in m for m in messages)  # answers to our requests
    assert any(m.get("method") == p.STATUS for m in messages)  # and notifications
    assert client.error is None
