"""The client side of the editor channel, for mcphost's own commands that stay attached (`approve`, `demo`):
find a running daemon, attach to its editor socket like an editor does, and speak the same protocol.

Commands that ask one question and leave (`status`, `grants`) use `mcphost.cli.channel.ask` instead, which
needs no pygls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.client import JsonRPCClient
from pygls.io_ import run_async
from pygls.protocol import JsonRPCProtocol

from mcphost import __version__, discovery
from mcphost.approval.prompt import PermissionRequest, PermissionResponse
from mcphost.discovery import NoDaemon as NoDaemon  # re-exported: `approve` and the demo catch it from here
from mcphost.discovery import socket_is_ours
from mcphost.editor import protocol as p
from mcphost.editor.connection import dict_converter

PromptHandler = Callable[[PermissionRequest], Awaitable[PermissionResponse]]


class _ClientProtocol(JsonRPCProtocol):
    def get_message_type(self, method: str) -> type[Any] | None:
        # `$/cancelRequest` (a prompt withdrawn) must be read as typed CancelParams: pygls' cancel handling reads
        # `params.id`, and a plain JSON-RPC protocol would hand it a dict.
        return lsp.CancelNotification if method == lsp.CANCEL_REQUEST else None


class ChannelClient(JsonRPCClient):
    """A JSON-RPC client with LSP framing over the daemon's Unix socket."""

    def __init__(self) -> None:
        super().__init__(protocol_cls=_ClientProtocol, converter_factory=dict_converter)
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    async def connect(self, path: Path) -> None:
        reader, writer = await asyncio.open_unix_connection(str(path))
        self._writer = writer
        self.protocol.set_writer(writer)

        async def read() -> None:
            try:
                await run_async(stop_event=self._stop_event, reader=reader, protocol=self.protocol)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                self.closed.set()
                # Requests still waiting will never be answered: fail them instead of hanging.
                for future in list(self.protocol._request_futures.values()):
                    if future.done():
                        continue
                    if isinstance(future, asyncio.Task):
                        # The daemon's requests to us (prompts being answered) share this dict: their handler
                        # tasks cannot take an exception (Task.set_exception raises); nobody waits for them now.
                        future.cancel()
                    else:
                        future.set_exception(ConnectionError("the daemon closed the editor channel"))

        self._reader_task = asyncio.create_task(read())

    async def request(self, method: str, params: Any = None) -> Any:
        return await asyncio.wrap_future(self.protocol.send_request(method, params))

    async def initialize(self, name: str, *, approver: bool, activity: bool) -> None:
        params = lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(),
            process_id=os.getpid(),
            client_info=lsp.ClientInfo(name=name, version=__version__),
            initialization_options={"approver": approver, "activity": activity},
        )
        await self.request(lsp.INITIALIZE, self.protocol._converter.unstructure(params))
        self.protocol.notify(lsp.INITIALIZED, {})

    async def close(self) -> None:
        if self._writer is not None and not self.closed.is_set():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.request(lsp.SHUTDOWN), 2)
                self.protocol.notify(lsp.EXIT)
            self._writer.close()
        self._stop_event.set()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task


def pick_daemon(pid: int | None = None) -> dict[str, Any]:
    """The daemon to attach to: the one with this pid, else the only one, else the newest (with a note)."""
    daemons = [d for d in discovery.running() if d.get("editor_socket")]
    if pid is not None:
        daemons = [d for d in daemons if d.get("pid") == pid]
        if not daemons:
            raise NoDaemon(f"no running mcphost daemon has pid {pid}: see `mcphost status`")
    if not daemons:
        raise NoDaemon(
            "no mcphost daemon is running: start one with `mcphost serve` (or open VS Code with the mcphost "
            "extension, which starts one)"
        )
    daemons.sort(key=lambda d: str(d.get("started_at", "")))
    return daemons[-1]


@contextlib.asynccontextmanager
async def attached(
    info: dict[str, Any],
    name: str,
    *,
    approver: bool = False,
    activity: bool = False,
    on_prompt: PromptHandler | None = None,
    on_notification: Callable[[str, Any], None] | None = None,
) -> AsyncIterator[ChannelClient]:
    """Attach to a daemon from its discovery info; detach on exit."""
    path = Path(str(info["editor_socket"]))
    if not socket_is_ours(path):
        raise NoDaemon(f"{path} is not an editor socket owned by you and closed to others; refusing to attach")
    client = ChannelClient()
    if on_prompt is not None:
        handler = on_prompt

        async def _prompt(params: Any) -> dict[str, Any]:
            request = PermissionRequest.model_validate(params)
            response = await handler(request)
            return response.model_dump(mode="json")

        client.feature(p.PERMISSION_REQUEST)(_prompt)

    notify = on_notification or (lambda _method, _params: None)
    # Config errors come as diagnostics too, for editors that show them on the file; a command that has no file open
    # takes them as any notification (`mcphost/status` carries the same error), never as an unknown method, which
    # pygls would log as a warning on the person's terminal.
    for method in (p.ACTIVITY, p.STATUS, lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS):

        def forward(params: Any, method: str = method) -> None:
            notify(method, params)

        client.feature(method)(forward)
    try:
        await client.connect(path)
    except OSError as exc:
        raise NoDaemon(f"cannot attach to the daemon at {path}: {exc.strerror or exc}") from None
    try:
        await client.initialize(name, approver=approver, activity=activity)
        yield client
    finally:
        await client.close()
