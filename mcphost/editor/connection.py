"""One attached editor (or `mcphost approve`, or `mcphost status` asking once): a pygls server object per
connection, whose handlers are thin: the hub and the broker do the work.

pygls serves one connection per server object (its `start_tcp` stops when the connection closes), so the listener
gives each connection its own `EditorConnection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, cast

from cattrs import Converter
from lsprotocol import converters
from lsprotocol import types as lsp
from pydantic import ValidationError
from pygls.exceptions import FeatureRequestError, JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from mcphost import __version__
from mcphost.activity.record import utc_now
from mcphost.approval.broker import ApproverGone
from mcphost.approval.prompt import PermissionBatch, PermissionBatchResult, PermissionRequest, PermissionResponse
from mcphost.console import safe
from mcphost.editor import protocol as p
from mcphost.editor import wire
from mcphost.pipes import READ_CHUNK

if TYPE_CHECKING:
    from mcphost.editor.hub import EditorHub

logger = logging.getLogger(__name__)


class _OneLineEach(logging.Filter):
    """pygls' own log lines as the daemon shows them. It logs a client's mistake (params of the wrong shape, an id of
    no use) with the whole traceback: an editor repeating one wrote hundreds of MB of log in seconds, and the writes
    held the loop every agent's call waits on. One escaped line each, at most LOG_LINES_A_SECOND; what is dropped is
    counted in the next line that goes out."""

    def __init__(self) -> None:
        super().__init__()
        self._second = 0.0
        self._lines = 0
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self._second >= 1.0:
            self._second, self._lines = now, 0
        self._lines += 1
        if self._lines > LOG_LINES_A_SECOND:
            self._dropped += 1
            return False
        text = record.getMessage()
        if record.exc_info is not None and record.exc_info[1] is not None:
            text = f"{text} ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        if self._dropped:
            text, self._dropped = f"({self._dropped} lines like it dropped) {text}", 0
        record.msg, record.args = safe(text, 600), None
        record.exc_info = record.exc_text = record.stack_info = None
        return True


LOG_LINES_A_SECOND = 20
_PYGLS_LINES = _OneLineEach()
for _name in ("pygls.protocol.json_rpc", "pygls.protocol.language_server", "pygls.feature_manager", "pygls.client"):
    logging.getLogger(_name).addFilter(_PYGLS_LINES)

# An editor that stops reading loses activity notifications past this much unsent output, never prompts.
MAX_BUFFERED_NOTIFICATIONS = 8 * 1024 * 1024
# Past this much unsent output it is let go: an editor that sends requests and never reads the answers would have the
# daemon hold them all. Well above the notifications' bound, so that what it still gets (answers, prompts: a prompt's
# arguments are sent only when small) has room; whatever it was asked then counts as not answered.
MAX_UNSENT = 32 * 1024 * 1024
_ids = itertools.count(1)
MAX_CLIENT_NAME = 200


@functools.cache
def dict_converter() -> Converter:
    """pygls' converter, except that custom methods' params and results stay plain dicts (pygls' default turns
    them into namedtuples); pydantic validates them against the protocol models instead. One for every connection:
    making one costs some 13 ms and 75 KB, which a client connecting in a loop would have the daemon spend."""
    converter = converters.get_converter()
    # JSON-RPC 2.0 lets a request or notification leave `params` out (vscode-jsonrpc does, for
    # `sendRequest("mcphost/status")`): read that as null instead of failing to parse the message.
    for message in (JsonRPCRequestMessage, JsonRPCNotification):
        converter.register_structure_hook(message, lambda obj, cls: cls(**{"params": None, **obj}))
    # An answer with a member JSON-RPC does not name (an editor's own bookkeeping) is still that answer: pygls failed
    # on it, and the prompt it answered waited out its timeout.
    converter.register_structure_hook(
        JsonRPCResponseMessage, lambda obj, cls: cls(**{k: obj[k] for k in ("id", "result", "jsonrpc") if k in obj})
    )
    converter.register_structure_hook(lsp.ResponseErrorMessage, _error_response)
    return converter


def _error_response(obj: dict[str, Any], cls: type[lsp.ResponseErrorMessage]) -> lsp.ResponseErrorMessage:
    """An error answer read whatever its shape: one that pygls could not read (no message, a code that is not a
    number, a string for an error) was dropped, and the prompt it answered waited out its timeout. Any error answer
    is that editor not answering."""
    error = obj.get("error")
    fields = error if isinstance(error, dict) else {"message": error}
    code, message = fields.get("code"), fields.get("message")
    return cls(
        id=obj.get("id"),
        error=lsp.ResponseError(
            code=code if type(code) is int else lsp.ErrorCodes.InternalError,
            message=message if isinstance(message, str) else str(message or "an error without a message"),
            data=fields.get("data"),
        ),
        jsonrpc=obj.get("jsonrpc", "2.0"),
    )


def _ignored(method: str) -> Callable[..., Generator[Any, Any, None]]:
    """A handler for `method` that does nothing, in place of pygls' built-in one."""

    @lsp_method(method)
    def ignore(self: Any, *args: Any) -> Generator[Any, Any, None]:
        yield from ()

    return ignore


class _Protocol(LanguageServerProtocol):
    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        # pygls' exit ends the process; here it ends this connection only (the daemon serves others).
        server = self._server
        assert isinstance(server, EditorConnection)
        server.close()
        yield from ()

    # The channel carries prompts, not documents (the extension syncs none): pygls kept every document and
    # workspace folder an editor named, without bound, and failed on changes to one it was never sent. Its handlers
    # are found by name, so these take their places.
    lsp_text_document__did_open = _ignored(lsp.TEXT_DOCUMENT_DID_OPEN)
    lsp_text_document__did_change = _ignored(lsp.TEXT_DOCUMENT_DID_CHANGE)
    lsp_text_document__did_close = _ignored(lsp.TEXT_DOCUMENT_DID_CLOSE)
    lsp_notebook_document__did_open = _ignored(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    lsp_notebook_document__did_change = _ignored(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    lsp_notebook_document__did_close = _ignored(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    lsp_workspace__did_change_workspace_folders = _ignored(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)

    # pygls caches these per protocol object (`lru_cache` on the method): the cache held the last 128 connections'
    # protocols, and all they held, after their editors left. The table they read is no slower than the cache.
    def get_message_type(self, method: str) -> type[Any] | None:  # type: ignore[override]
        return cast("type[Any] | None", lsp.METHOD_TO_TYPES.get(method, (None,))[0])

    def get_result_type(self, method: str) -> type[Any] | None:  # type: ignore[override]
        return cast("type[Any] | None", lsp.METHOD_TO_TYPES.get(method, (None, None))[1])

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        # pygls files the future of every handler that is a generator or a coroutine under its message's id, and
        # takes it out again only for a request's answer: each such notification ($/setTrace, didOpen) left one
        # behind for the connection's life, some 1.8 KB an editor could send in 70 bytes. Gone once done.
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(functools.partial(self._forget_future, msg_id))

    def _forget_future(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:  # not a later request's under a reused id
            del self._request_futures[msg_id]

    def handle_message(self, message: Any) -> None:
        if self._shutdown and isinstance(message, JsonRPCRequestMessage) and message.method != lsp.EXIT:
            # pygls drops a request after `shutdown` unanswered, and its client waits for good: LSP answers it.
            error = lsp.ResponseError(code=lsp.ErrorCodes.InvalidRequest, message="the server is shutting down")
            self._send_response(message.id, None, error)
            return
        super().handle_message(message)

    def _send_response(self, msg_id: Any, result: Any = None, error: lsp.ResponseError | None = None) -> None:
        # Every error answer pygls makes passes here: a handler that raised had its traceback sent in `data`.
        super()._send_response(msg_id, result, None if error is None else wire.client_safe(error))


class SocketWriter:
    """The daemon's end of a socket or pipe, which stops writing, and has `overflowed` called once, when what its
    peer has left unread passes MAX_UNSENT."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.overflowed: Callable[[], None] | None = None
        self._over = False

    def write(self, data: bytes) -> None:
        if self._over or self._writer.is_closing():
            return
        # Checked before the write, not after: one large message to a peer that keeps up always goes out.
        if self.buffered() > MAX_UNSENT:
            self._over = True
            if self.overflowed is not None:
                self.overflowed()
            return
        self._writer.write(data)

    def close(self) -> None:
        if self._over:
            # A graceful close waits for the buffer to drain, which a peer that does not read never lets happen.
            self._writer.transport.abort()
        else:
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
        self.batches = False  # initializationOptions {"batch": true}: it shows mcphost/permissionBatch
        self.wants_activity = True
        self.attached = False
        self.closed = False
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._sent: dict[str, Future[Any]] = {}  # pygls' future of each request `_waiting` waits on
        self._deciding: set[asyncio.Task[Any]] = set()  # hook requests under way: withdrawn when the hook leaves
        self._writer: SocketWriter | StdoutWriter | None = None
        handlers: dict[str, Callable[[Any], Any]] = {
            lsp.INITIALIZE: self._on_initialize,
            lsp.INITIALIZED: self._on_initialized,
            lsp.SHUTDOWN: self._on_shutdown,
            p.STATUS: self._on_status,
            p.GRANTS_LIST: self._on_grants,
            p.GRANTS_REVOKE: self._on_revoke,
            p.CONFIG: self._on_config,
            p.AUTHORIZE: self._on_authorize,
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
        if self.attached:
            # Once attached, what it is stays as the broker and `status` know it: a second initialize turning a
            # watcher into an approver (or back) would be listed as one thing and asked as the other.
            logger.warning("editor %s sent initialize again; its first one stands", self.label)
            return
        if params.client_info is not None:
            # Shown in status and put in the record of every call it answers (decision.approver): a name, kept short.
            name = f"{params.client_info.name} {params.client_info.version or ''}".strip()
            # As text a log line, a terminal and the state file can all take: no control character, no lone
            # surrogate (a grant naming its approver so could not be saved, and was in force unsaved).
            name = safe(name.encode("utf-8", "replace").decode("utf-8"))
            self.client_name = name if len(name) <= MAX_CLIENT_NAME else name[: MAX_CLIENT_NAME - 1] + "…"
        options = params.initialization_options
        if isinstance(options, dict):
            self.approver = options.get("approver", True) is not False
            self.wants_activity = options.get("activity", True) is not False
            self.batches = options.get("batch", False) is True

    def _on_initialized(self, params: lsp.InitializedParams) -> None:
        # Requests to the client are allowed only after `initialized`, so this is when prompts may start.
        if not self.attached:
            self.hub.attach(self)

    def _on_shutdown(self, params: Any) -> None:
        self.hub.detach(self)

    def _on_status(self, params: Any) -> dict[str, Any]:
        return self.hub.status().model_dump(mode="json", exclude_none=True)

    def _on_grants(self, params: Any) -> dict[str, Any]:
        grants = [g.info() for g in self.hub.grants.all()]
        return p.GrantsResult(grants=grants).model_dump(mode="json", exclude_none=True)

    def _on_config(self, params: Any) -> dict[str, Any]:
        try:
            shown = self.hub.shown_config()
        except LookupError as exc:
            # Said to the editor as it is: any other exception's message is withheld (wire.client_safe).
            raise JsonRpcException(str(exc), wire.REQUEST_FAILED) from None
        return p.ConfigResult.model_validate(shown).model_dump(mode="json")

    def _on_revoke(self, params: Any) -> dict[str, Any]:
        try:
            wanted = p.RevokeGrantsParams.model_validate(params or {})
        except ValidationError as exc:
            raise JsonRpcInvalidParams(f"invalid {p.GRANTS_REVOKE} params: {_problems(exc)}") from None
        try:
            revoked = self.hub.grants.revoke(wanted.ids, wanted.tool, wanted.all)
        except OSError as exc:
            # Said as it is (the state file, and why it cannot be changed): any other exception's message is withheld.
            raise JsonRpcException(
                f"the grants cannot be changed: {exc.strerror or exc}", wire.REQUEST_FAILED
            ) from None
        self.hub.status_changed()
        return p.RevokeGrantsResult(revoked=[g.info() for g in revoked]).model_dump(mode="json", exclude_none=True)

    async def _on_authorize(self, params: Any) -> dict[str, Any]:
        try:
            asked = p.AuthorizeParams.model_validate(params or {})
        except ValidationError as exc:
            raise JsonRpcInvalidParams(f"invalid {p.AUTHORIZE} params: {_problems(exc)}") from None
        task = asyncio.current_task()
        if task is not None:
            self._deciding.add(task)
        try:
            verdict = await self.hub.authorize(asked)
        finally:
            if task is not None:
                self._deciding.discard(task)
        return verdict.model_dump(mode="json", exclude_none=True)

    # ---- the approver side

    async def ask(self, request: PermissionRequest) -> PermissionResponse:
        result = await self._ask(p.PERMISSION_REQUEST, request.model_dump(mode="json"), f"{request.id}.{self.id}")
        try:
            return PermissionResponse.model_validate(result)
        except ValidationError as exc:
            raise ApproverGone(f"answered with an invalid result ({_problems(exc)})") from None

    async def ask_batch(self, batch: PermissionBatch) -> PermissionBatchResult:
        result = await self._ask(p.PERMISSION_BATCH, batch.model_dump(mode="json"), f"{batch.id}.{self.id}")
        try:
            return PermissionBatchResult.model_validate(result)
        except ValidationError as exc:
            raise ApproverGone(f"answered the batch with an invalid result ({_problems(exc)})") from None

    async def _ask(self, method: str, params: dict[str, Any], msg_id: str) -> Any:
        if self.closed:
            raise ApproverGone("disconnected")
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        self._waiting[msg_id] = waiter
        future = self.protocol.send_request(method, params, msg_id=msg_id)
        self._sent[msg_id] = future
        future.add_done_callback(lambda done: _settle(waiter, done))
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
            self._sent.pop(msg_id, None)
        return result

    # ---- sending

    def _behind(self) -> bool:
        """Closed, or so far behind in reading that a notification is dropped rather than queued."""
        writer = self._writer
        return self.closed or (isinstance(writer, SocketWriter) and writer.buffered() > MAX_BUFFERED_NOTIFICATIONS)

    def send(self, method: str, params: Any) -> None:
        if self._behind():
            return
        try:
            self.protocol.notify(method, params)
        except Exception:
            logger.debug("cannot notify %s", self.label, exc_info=True)

    def send_json(self, method: str, params: bytes) -> None:
        """`send`, for params that are JSON already (a record as its log line has it): framed here. pygls would
        encode them again, its converter walking every value first: some 60 µs a record, paid by every call while an
        editor watches."""
        writer = self._writer
        if writer is None or self._behind():
            return
        try:
            writer.write(wire.notification(method, params))
        except Exception:
            logger.debug("cannot notify %s", self.label, exc_info=True)

    def publish_diagnostics(self, uri: str, diagnostics: list[lsp.Diagnostic]) -> None:
        if not self.closed:
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

    # ---- life cycle

    async def serve(self, reader: ChunkReader, writer: SocketWriter | StdoutWriter) -> None:
        """Read and handle messages until the editor leaves, breaks the framing's bounds, or is closed."""
        self._writer = writer
        if isinstance(writer, SocketWriter):
            writer.overflowed = self._fell_behind
        self.protocol.set_writer(writer)
        self._stop_event = stop = threading.Event()
        framer = wire.Framer()
        try:
            while not stop.is_set() and (chunk := await reader.read(READ_CHUNK)):
                try:
                    bodies = framer.feed(chunk)
                except wire.FrameError as exc:
                    logger.warning("editor channel %s: closed: %s", self.label, exc)
                    break
                for body in bodies:
                    if stop.is_set():
                        break
                    self._receive(body)
        except ConnectionError:
            logger.debug("%s went away", self.label)
        finally:
            self.close()

    def _receive(self, body: bytes) -> None:
        message = wire.screen(body)
        if isinstance(message, wire.Refused):
            self._refuse(message)
            return
        try:
            structured = self.protocol.structure_message(message)
        except JsonRpcException as exc:  # pygls has logged why
            self._refuse(wire.unreadable(message, isinstance(exc, JsonRpcInvalidParams)))
            return
        try:
            self.protocol.handle_message(structured)
        except Exception:
            logger.exception("editor channel %s: a message could not be handled", self.label)

    def _refuse(self, refused: wire.Refused) -> None:
        logger.info("editor channel %s: %s", self.label, refused.why)
        if refused.reply is not None:
            self.protocol._send_data(refused.reply)

    def _fell_behind(self) -> None:
        logger.warning("editor channel %s: closed: it left over %d bytes unread", self.label, MAX_UNSENT)
        # Not from inside the write that found it: that write may come from the hub going over its connections
        # (a config diagnostic to each), which closing, as it detaches this one, would change under it.
        asyncio.get_running_loop().call_soon(self.close)

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls' default shows the editor "Error in server: <the exception>", internal detail: the log has it. A
        # request's error is in its answer, and pygls has logged it.
        if source is not FeatureRequestError:
            logger.warning("editor channel %s: %s", self.label, error)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._stop_event is not None:
            self._stop_event.set()
        for msg_id, waiter in self._waiting.items():
            sent = self._sent.get(msg_id)
            if sent is not None and sent.done():
                # Answered, then gone at once: pygls settled its future in the same turn as the end of input was
                # read, and its callback (`_settle`) has yet to run. The answer stands.
                _settle(waiter, sent)
            elif not waiter.done():
                waiter.set_exception(ApproverGone("disconnected"))
        for task in self._deciding:
            # The hook was ended (its agent's timeout, or the agent itself): its prompt leaves the person's screen.
            task.cancel()
        self.hub.detach(self)
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()


class ChunkReader(Protocol):
    """What `serve` reads from: an asyncio StreamReader, or anything else that reads so."""

    async def read(self, n: int) -> bytes: ...


def _settle(waiter: asyncio.Future[Any], done: Future[Any]) -> None:
    """Copy the outcome of pygls' future for a request into ours, so that a pygls-side cancellation (the client
    sent `shutdown`) reads as "gone", not as the asking task being cancelled."""
    if waiter.done():
        return
    if done.cancelled():
        waiter.set_exception(ApproverGone("shut down"))
    elif done.exception() is not None:
        waiter.set_exception(ApproverGone(f"answered with an error: {done.exception()}"))
    else:
        waiter.set_result(done.result())


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
