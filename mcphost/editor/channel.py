"""The daemon's editor channel: one pygls server object per connection (stdio or the local socket), all feeding
one `EditorHub` that fans out activity and status, publishes config diagnostics, and puts the connections in
front of the permission broker as approvers.

pygls serves one connection per server object (its `start_tcp` stops when the connection closes), so the hub
runs the listening socket itself and gives each connection its own `EditorConnection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import socket
import stat
import struct
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cattrs import Converter
from lsprotocol import converters
from lsprotocol import types as lsp
from pydantic import ValidationError
from pygls.exceptions import JsonRpcInvalidParams
from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from mcphost import __version__
from mcphost.activity.record import ActivityRecord, utc_now
from mcphost.editor import protocol as p
from mcphost.editor.broker import ApproverGone
from mcphost.editor.diagnostics import config_diagnostics
from mcphost.paths import ensure_private_dir, runtime_dir

if TYPE_CHECKING:
    from mcphost.daemon import Host

logger = logging.getLogger(__name__)

# Unix socket paths are limited to 108 bytes; past this a deep runtime dir gets a short private one instead.
MAX_SOCKET_PATH = 100
# An editor that stops reading loses activity notifications past this much unsent output, never prompts.
MAX_BUFFERED_NOTIFICATIONS = 8 * 1024 * 1024
_ids = itertools.count(1)


def dict_converter() -> Converter:
    """pygls' converter, except that custom methods' params and results stay plain dicts (pygls' default turns
    them into namedtuples); pydantic validates them against the protocol models instead."""
    converter = converters.get_converter()
    # JSON-RPC 2.0 lets a request or notification leave `params` out (vscode-jsonrpc does, for
    # `sendRequest("mcphost/status")`): read that as null instead of failing to parse the message.
    for message in (JsonRPCRequestMessage, JsonRPCNotification):
        converter.register_structure_hook(message, lambda obj, cls: cls(**{"params": None, **obj}))
    converter.register_structure_hook(JsonRPCResponseMessage, lambda obj, cls: cls(**obj))
    return converter


class _Protocol(LanguageServerProtocol):
    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        # pygls' exit ends the process; here it ends this connection only (the daemon serves others).
        server = self._server
        assert isinstance(server, EditorConnection)
        server.close()
        yield from ()


class _SocketWriter:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)

    def close(self) -> None:
        self._writer.close()

    def buffered(self) -> int:
        return self._writer.transport.get_write_buffer_size()


class EditorConnection(LanguageServer):
    """One attached editor (or `mcphost approve`, or `mcphost status` asking once)."""

    def __init__(self, hub: EditorHub, transport: str) -> None:
        super().__init__("mcphost", __version__, protocol_cls=_Protocol, converter_factory=dict_converter)
        self.hub = hub
        self.id = f"editor-{next(_ids)}"
        self.transport = transport
        self.client_name = "unnamed editor"
        self.attached_at = utc_now()
        self.approver = True  # initializationOptions {"approver": false} for clients that only look
        self.wants_activity = True
        self.attached = False
        self.closed = False
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._writer: _SocketWriter | StdoutWriter | asyncio.StreamWriter | None = None
        handlers: dict[str, Callable[[Any], Any]] = {
            lsp.INITIALIZE: self._on_initialize,
            lsp.INITIALIZED: self._on_initialized,
            lsp.SHUTDOWN: self._on_shutdown,
            p.STATUS: self._on_status,
            p.GRANTS_LIST: self._on_grants,
            p.GRANTS_REVOKE: self._on_revoke,
        }
        for method, handler in handlers.items():
            # pygls tags the function it registers, which a bound method does not allow: register a wrapper.
            self.feature(method)(functools.partial(handler))

    def info(self) -> p.EditorInfo:
        return p.EditorInfo(
            id=self.id,
            name=self.client_name,
            transport="stdio" if self.transport == "stdio" else "socket",
            attached_at=self.attached_at,
        )

    @property
    def label(self) -> str:
        return f"{self.client_name} ({self.id})"

    # ---- handlers (thin: the hub and the broker do the work)

    def _on_initialize(self, params: lsp.InitializeParams) -> None:
        if params.client_info is not None:
            self.client_name = f"{params.client_info.name} {params.client_info.version or ''}".strip()
        options = params.initialization_options
        if isinstance(options, dict):
            self.approver = options.get("approver", True) is not False
            self.wants_activity = options.get("activity", True) is not False

    def _on_initialized(self, params: lsp.InitializedParams) -> None:
        # Requests to the client are allowed only after `initialized`, so this is when prompts may start.
        self.hub.attach(self)

    def _on_shutdown(self, params: Any) -> None:
        self.hub.detach(self)

    def _on_status(self, params: Any) -> dict[str, Any]:
        return self.hub.status().model_dump(mode="json", exclude_none=True)

    def _on_grants(self, params: Any) -> dict[str, Any]:
        grants = [g.info() for g in self.hub.host.grants.all()]
        return p.GrantsResult(grants=grants).model_dump(mode="json", exclude_none=True)

    def _on_revoke(self, params: Any) -> dict[str, Any]:
        try:
            wanted = p.RevokeGrantsParams.model_validate(params or {})
        except ValidationError as exc:
            raise JsonRpcInvalidParams(f"invalid {p.GRANTS_REVOKE} params: {_problems(exc)}") from None
        revoked = self.hub.host.grants.revoke(wanted.ids, wanted.tool, wanted.all)
        self.hub.status_changed()
        return p.RevokeGrantsResult(revoked=[g.info() for g in revoked]).model_dump(mode="json", exclude_none=True)

    # ---- the approver side

    async def ask(self, request: p.PermissionRequest) -> p.PermissionResponse:
        if self.closed:
            raise ApproverGone("disconnected")
        loop = asyncio.get_running_loop()
        msg_id = f"{request.id}.{self.id}"
        waiter: asyncio.Future[Any] = loop.create_future()
        self._waiting[msg_id] = waiter

        def settle(done: Any) -> None:
            # pygls resolves its future on this loop's thread; copy its outcome into ours, so that a pygls-side
            # cancellation (the client sent `shutdown`) reads as "gone", not as this task being cancelled.
            if waiter.done():
                return
            if done.cancelled():
                waiter.set_exception(ApproverGone("shut down"))
            elif done.exception() is not None:
                waiter.set_exception(ApproverGone(f"answered with an error: {done.exception()}"))
            else:
                waiter.set_result(done.result())

        future = self.protocol.send_request(p.PERMISSION_REQUEST, request.model_dump(mode="json"), msg_id=msg_id)
        future.add_done_callback(settle)
        try:
            result = await waiter
        except asyncio.CancelledError:
            # The request's future stays registered: the client answers a cancelled request too (JSON-RPC), and
            # pygls would log an unknown id for that late answer; `settle` ignores it.
            if not (waiter.done() and not waiter.cancelled() and waiter.exception() is None):
                if not self.closed:
                    # A typed CancelParams: pygls builds an lsprotocol CancelNotification for this method, and its
                    # converter cannot unstructure a plain dict as CancelParams (the notice was never sent).
                    self.protocol.notify(p.CANCEL_REQUEST, lsp.CancelParams(id=msg_id))
                raise
            # The answer was read before the cancellation: a client that answers and detaches at once (its
            # `shutdown` read in the same batch as its answer, which detaches it) still gave an answer.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            result = waiter.result()
        finally:
            self._waiting.pop(msg_id, None)
        try:
            return p.PermissionResponse.model_validate(result)
        except ValidationError as exc:
            raise ApproverGone(f"answered with an invalid result ({_problems(exc)})") from None

    # ---- sending

    def send(self, method: str, params: Any) -> None:
        if self.closed:
            return
        writer = self._writer
        if isinstance(writer, _SocketWriter) and writer.buffered() > MAX_BUFFERED_NOTIFICATIONS:
            return
        try:
            self.protocol.notify(method, params)
        except Exception:
            logger.debug("cannot notify %s", self.label, exc_info=True)

    def publish_diagnostics(self, uri: str, diagnostics: list[lsp.Diagnostic]) -> None:
        if not self.closed:
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

    # ---- life cycle

    async def serve(self, reader: Any, writer: _SocketWriter | StdoutWriter | asyncio.StreamWriter) -> None:
        self._writer = writer
        self.protocol.set_writer(writer)
        self._stop_event = stop = threading.Event()
        try:
            await run_async(
                stop_event=stop, reader=reader, protocol=self.protocol, logger=logger, error_handler=self._error
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            logger.debug("%s went away", self.label)
        finally:
            self.close()

    def _error(self, error: Exception, source: Any) -> None:
        logger.warning("editor channel %s: %s", self.label, error)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._stop_event is not None:
            self._stop_event.set()
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(ApproverGone("disconnected"))
        self.hub.detach(self)
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()


class EditorHub:
    """Every editor connection of one daemon, and what they are all told."""

    def __init__(self, host: Host, endpoint: p.McpEndpoint | None = None) -> None:
        self.host = host
        self.endpoint = endpoint or p.McpEndpoint(url=None)
        self.socket_path: Path | None = None
        self.connections: dict[str, EditorConnection] = {}
        self._status_pending = False
        self._log_error: str | None = None
        self._published: set[str] = set()  # config URIs that currently carry diagnostics
        host.broker.on_change(self.status_changed)
        host.on_event(self._on_host_event)
        host.activity.subscribe(self._on_record)

    # ---- what editors are told

    def status(self) -> p.StatusPayload:
        host = self.host
        error = host.config_error
        return p.StatusPayload(
            version=__version__,
            pid=os.getpid(),
            mcp=self.endpoint,
            config_path=str(host.loaded.path),
            log_path=str(host.activity.path),
            editor_socket=str(self.socket_path) if self.socket_path else None,
            servers=[p.UpstreamStatus.model_validate(s.to_dict()) for s in host.upstreams.statuses()],
            pending=len(host.broker.pending),
            prompts=host.broker.prompts(),
            editors=[c.info() for c in self.connections.values() if c.attached and c.approver],
            config_error=str(error) if error is not None else None,
            log_error=host.activity.last_error,
        )

    def status_changed(self) -> None:
        """Coalesce a burst of changes (a prompt starting on three editors) into one notification."""
        if self._status_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._status_pending = True
        loop.call_soon(self._send_status)

    def _send_status(self) -> None:
        self._status_pending = False
        attached = [c for c in self.connections.values() if c.attached]
        if not attached:
            return
        payload = self.status().model_dump(mode="json", exclude_none=True)
        for connection in attached:
            connection.send(p.STATUS, payload)

    def _on_record(self, record: ActivityRecord) -> None:
        listeners = [c for c in self.connections.values() if c.attached and c.wants_activity]
        if listeners:
            payload = record.model_dump(mode="json", exclude_none=True)
            for connection in listeners:
                connection.send(p.ACTIVITY, payload)
        if self.host.activity.last_error != self._log_error:
            self._log_error = self.host.activity.last_error
            self.status_changed()

    def _on_host_event(self, kind: str) -> None:
        if kind in ("config", "config_error"):
            for connection in self.connections.values():
                if connection.attached:
                    self._publish(connection)
        self.status_changed()

    def _diagnostics(self) -> tuple[str, list[lsp.Diagnostic]]:
        path = self.host.loaded.path
        error = self.host.config_error
        if error is None:
            return path.resolve().as_uri(), []
        try:
            text = error.file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        return error.file.resolve().as_uri(), config_diagnostics(error, text)

    def _publish(self, connection: EditorConnection) -> None:
        uri, diagnostics = self._diagnostics()
        if diagnostics or uri in self._published:
            connection.publish_diagnostics(uri, diagnostics)
        if diagnostics:
            self._published.add(uri)

    # ---- connections

    def attach(self, connection: EditorConnection) -> None:
        connection.attached = True
        if connection.approver:
            self.host.broker.attach(connection)
        connection.send(p.STATUS, self.status().model_dump(mode="json", exclude_none=True))
        uri, diagnostics = self._diagnostics()
        if diagnostics:
            connection.publish_diagnostics(uri, diagnostics)
            self._published.add(uri)
        self.status_changed()

    def detach(self, connection: EditorConnection) -> None:
        was_attached = connection.attached
        connection.attached = False
        self.host.broker.detach(connection.id)
        self.connections.pop(connection.id, None)
        if was_attached:
            self.status_changed()

    async def _serve_socket_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None and not _same_user(sock):
            logger.warning("refused an editor-channel connection from another user")
            writer.close()
            return
        connection = EditorConnection(self, "socket")
        self.connections[connection.id] = connection
        try:
            await connection.serve(reader, _SocketWriter(writer))
        except Exception:
            logger.exception("editor connection %s failed", connection.id)

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[Path]:
        """Accept editor connections on an owner-only Unix socket for as long as the context lasts."""
        path, private_dir = _socket_path()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by a dead daemon whose pid we now have
        old_umask = os.umask(0o177)  # the socket is born 0600: no window in which others could connect
        try:
            server = await asyncio.start_unix_server(self._serve_socket_client, path=str(path))
        finally:
            os.umask(old_umask)
        self.socket_path = path
        try:
            yield path
        finally:
            self.socket_path = None
            server.close()
            for connection in list(self.connections.values()):
                connection.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            if private_dir is not None:
                with contextlib.suppress(OSError):
                    private_dir.rmdir()

    async def serve_stdio(self) -> None:
        """The editor that spawned this daemon, on stdin/stdout; returns when it closes the channel or exits."""
        connection = EditorConnection(self, "stdio")
        self.connections[connection.id] = connection
        async with stdio_streams() as (reader, writer):
            await connection.serve(reader, writer)


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """Reader and writer for the channel on fd 0/1. The fds are taken over: 0 and 1 then point at /dev/null and
    stderr, so that no stray print (ours, a library's, an upstream's) can ever corrupt the protocol stream."""
    from mcphost.gateway.stdio import claim_stdio, is_pipe_or_socket, pipe_streams

    proto_in, proto_out = claim_stdio()
    if not (is_pipe_or_socket(proto_in) and is_pipe_or_socket(proto_out)):
        # A regular file (a recorded session replayed): pygls' thread-backed reader.
        yield (
            StdinAsyncReader(os.fdopen(proto_in, "rb", buffering=0)),
            StdoutWriter(os.fdopen(proto_out, "wb", buffering=0)),
        )
        return
    async with pipe_streams(proto_in, proto_out) as streams:
        yield streams


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())


def _socket_path() -> tuple[Path, Path | None]:
    directory = ensure_private_dir(runtime_dir())
    path = directory / f"daemon-{os.getpid()}.sock"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path, None
    private = Path(tempfile.mkdtemp(prefix="mcphost-"))  # 0700, and short enough
    return private / "editor.sock", private


def _same_user(sock: socket.socket) -> bool:
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the socket file's 0600 mode is the guard where peer credentials are not available
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", creds)[1]
    return uid == os.getuid()


def socket_is_ours(path: Path) -> bool:
    """A socket file owned by this user and closed to others: the only kind `mcphost approve` connects to."""
    try:
        st = path.stat()
    except OSError:
        return False
    return bool(stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077)
