"""The editor in tests: a pytest-lsp `LanguageClient` attached to a daemon's editor socket, answering
`mcphost/permissionRequest` with whatever the test scripts, and recording what it was sent.

    async with editor(info["editor_socket"], answer=allow("session")) as ed:
        ...                      # make agent calls
        await ed.prompted.wait()  # (with anyio.fail_after)
        ed.prompts, ed.cancelled, ed.activity, ed.statuses, ed.client.diagnostics
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.io_ import run_async
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, LanguageClient, register_lsp_features

from mcphost.editor import protocol as p
from mcphost.editor.connection import dict_converter

Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def allow(remember: str = "once") -> Answer:
    async def answer(_request: dict[str, Any]) -> dict[str, Any]:
        return {"decision": "allow", "remember": remember}

    return answer


def deny() -> Answer:
    async def answer(_request: dict[str, Any]) -> dict[str, Any]:
        return {"decision": "deny"}

    return answer


def allow_all(*, naming: bool = False, remember: str = "once") -> Answer:
    """A batch answer: every call allowed; `naming`: destructive calls confirmed by name, as a careful editor does."""

    async def answer(batch: dict[str, Any]) -> dict[str, Any]:
        answers = []
        for request in batch["requests"]:
            one = {"id": request["id"], "decision": "allow", "remember": remember}
            if naming:
                one["confirmed"] = f"{request['server']}:{request['tool']}"
            answers.append(one)
        return {"answers": answers}

    return answer


def deny_all() -> Answer:
    async def answer(batch: dict[str, Any]) -> dict[str, Any]:
        return {"answers": [{"id": r["id"], "decision": "deny"} for r in batch["requests"]]}

    return answer


def never() -> Answer:
    """A person who never answers (the prompt expires, is answered elsewhere, or the editor leaves)."""

    async def answer(_request: dict[str, Any]) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return answer


@dataclass
class Editor:
    client: LanguageClient
    prompts: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)  # prompt ids withdrawn by the daemon ($/cancelRequest)
    batches: list[dict[str, Any]] = field(default_factory=list)  # mcphost/permissionBatch params, as sent
    activity: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    prompted: asyncio.Event = field(default_factory=asyncio.Event)
    withdrawn: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # any notification arrived

    async def request(self, method: str, params: Any = None) -> Any:
        return await self.client.protocol.send_request_async(method, params)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10) -> None:
        """Wait until `predicate()` holds, re-checking on every message (no sleeps)."""
        async with asyncio.timeout(timeout):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


def make_client(
    answer: Answer, *, name: str = "test-editor", batch: Answer | None = None
) -> tuple[LanguageClient, Editor]:
    client = LanguageClient(converter_factory=dict_converter)
    ed = Editor(client)

    async def on_batch(params: Any) -> dict[str, Any]:
        assert batch is not None
        ed.batches.append(params)
        ed.prompted.set()
        ed.changed.set()
        try:
            return await batch(params)
        except asyncio.CancelledError:
            ed.cancelled.append(params["id"])
            ed.withdrawn.set()
            ed.changed.set()
            raise

    async def on_prompt(params: Any) -> dict[str, Any]:
        ed.prompts.append(params)
        ed.prompted.set()
        ed.changed.set()
        try:
            return await answer(params)
        except asyncio.CancelledError:
            ed.cancelled.append(params["id"])
            ed.withdrawn.set()
            ed.changed.set()
            raise

    def on_activity(params: Any) -> None:
        ed.activity.append(params)
        ed.changed.set()

    def on_status(params: Any) -> None:
        ed.statuses.append(params)
        ed.changed.set()

    def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        ed.changed.set()

    # pytest-lsp's own handlers, except the one for diagnostics: ours also wakes `wait_for`.
    features = {m: f for m, f in DEFAULT_CLIENT_FEATURES.items() if m != lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS}
    register_lsp_features(client, features)
    client.feature(p.PERMISSION_REQUEST)(on_prompt)
    if batch is not None:
        client.feature(p.PERMISSION_BATCH)(on_batch)
    client.feature(p.ACTIVITY)(on_activity)
    client.feature(p.STATUS)(on_status)
    client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(on_diagnostics)
    return client, ed


def init_params(name: str, options: dict[str, Any] | None = None) -> lsp.InitializeParams:
    return lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(),
        client_info=lsp.ClientInfo(name=name, version="1"),
        initialization_options=options,
    )


@contextlib.asynccontextmanager
async def editor(
    socket_path: str | Path,
    answer: Answer | None = None,
    *,
    name: str = "test-editor",
    batch: Answer | None = None,
    **options: Any,
) -> AsyncIterator[Editor]:
    """An editor attached over the daemon's Unix socket; `options` become initializationOptions. With `batch`, it
    shows batches (initializationOptions.batch) and answers them with it."""
    client, ed = make_client(answer or allow(), name=name, batch=batch)
    if batch is not None:
        options = {"batch": True, **options}
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    client.protocol.set_writer(writer)
    reading = asyncio.create_task(run_async(stop_event=client._stop_event, reader=reader, protocol=client.protocol))
    try:
        await client.initialize_session(init_params(name, options or None))
        yield ed
    finally:
        with contextlib.suppress(Exception):
            if not writer.is_closing():
                await asyncio.wait_for(client.shutdown_async(None), 5)
                client.exit(None)
        writer.close()
        client._stop_event.set()
        reading.cancel()
        with contextlib.suppress(BaseException):
            await reading


async def disconnect(ed: Editor) -> None:
    """Drop the connection without the shutdown handshake, as a crashed editor would."""
    writer = ed.client.protocol.writer
    assert writer is not None
    writer.close()  # type: ignore[union-attr]
