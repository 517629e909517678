"""Every editor connection of one daemon, and what they are all told: activity and status fan out to them, config
errors reach them as diagnostics, and the approvers among them stand in front of the permission broker.

The hub is handed what it reports on (the broker, the grants, the activity log, the upstreams, the config state)
rather than the whole host, so it can be built and tested over any of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from mcphost import __version__
from mcphost.activity.writer import ActivityLog, Payload
from mcphost.approval.broker import PermissionBroker
from mcphost.approval.grants import GrantStore
from mcphost.config import ConfigError
from mcphost.editor import protocol as p
from mcphost.editor.connection import EditorConnection
from mcphost.editor.diagnostics import config_diagnostics
from mcphost.gateway.hooks import AgentToolGate
from mcphost.intent import AgentToolUse
from mcphost.paths import read_regular
from mcphost.upstream.manager import UpstreamManager

if TYPE_CHECKING:  # imported only by a host that exports
    from mcphost.activity.export import ExportStatus

logger = logging.getLogger(__name__)

# The config file in force, and why its last save was not applied (None when it was).
ConfigState = Callable[[], tuple[Path, ConfigError | None]]
# The config in force as `mcphost config show` prints it (mcphost.config.show.shown_config).
ShownConfig = Callable[[], dict[str, Any]]
# The OTLP exporter's counts, when one runs.
ExportState = Callable[[], "ExportStatus | None"]


class EditorHub:
    """Every editor connection of one daemon, and what they are all told."""

    def __init__(
        self,
        *,
        broker: PermissionBroker,
        grants: GrantStore,
        activity: ActivityLog,
        upstreams: UpstreamManager,
        config: ConfigState,
        endpoint: p.McpEndpoint | None = None,
        hooks: AgentToolGate | None = None,
        export: ExportState | None = None,
        shown_config: ShownConfig | None = None,
    ) -> None:
        self.broker = broker
        self.grants = grants
        self.activity = activity
        self.upstreams = upstreams
        self.config = config
        self.endpoint = endpoint or p.McpEndpoint(url=None)
        self.hooks = hooks
        self.export = export or (lambda: None)
        self._shown_config = shown_config
        self.socket_path: Path | None = None  # set by the listener while it accepts connections
        self.connections: dict[str, EditorConnection] = {}
        self._status_pending = False
        self._log_error: str | None = None
        self._published: set[str] = set()  # config URIs that currently carry diagnostics
        broker.on_change(self.status_changed)
        activity.subscribe(self._on_record)

    # ---- what editors are told

    def status(self) -> p.StatusPayload:
        config_path, error = self.config()
        return p.StatusPayload(
            version=__version__,
            pid=os.getpid(),
            mcp=self.endpoint,
            config_path=str(config_path),
            log_path=str(self.activity.path),
            editor_socket=str(self.socket_path) if self.socket_path else None,
            servers=[p.UpstreamStatus.model_validate(s.to_dict()) for s in self.upstreams.statuses()],
            pending=len(self.broker.pending),
            prompts=self.broker.prompts(),
            editors=[c.info() for c in self.connections.values() if c.attached and c.approver],
            config_error=str(error) if error is not None else None,
            log_error=self.activity.last_error,
            export=_export_status(self.export()),
        )

    def shown_config(self) -> dict[str, Any]:
        if self._shown_config is None:
            path, _ = self.config()
            raise LookupError(f"this daemon does not show its config ({path})")
        return self._shown_config()

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

    def _on_record(self, payload: Payload) -> None:
        listeners = [c for c in self.connections.values() if c.attached and c.wants_activity]
        for connection in listeners:
            connection.send_json(p.ACTIVITY, payload.line)
        if self.activity.last_error != self._log_error:
            self._log_error = self.activity.last_error
            self.status_changed()

    def host_changed(self, kind: str) -> None:
        """A host event (`Host.on_event`): a config save applied or rejected, an upstream's state changed."""
        if kind in ("config", "config_error"):
            for connection in self.connections.values():
                if connection.attached:
                    self._publish(connection)
        self.status_changed()

    def _diagnostics(self) -> tuple[str, list[lsp.Diagnostic]]:
        path, error = self.config()
        if error is None:
            return path.resolve().as_uri(), []
        return error.file.resolve().as_uri(), config_diagnostics(error, _text_of(error))

    def _publish(self, connection: EditorConnection) -> None:
        uri, diagnostics = self._diagnostics()
        if diagnostics or uri in self._published:
            connection.publish_diagnostics(uri, diagnostics)
        if diagnostics:
            self._published.add(uri)

    async def authorize(self, asked: p.AuthorizeParams) -> p.AuthorizeResult:
        """An agent's hook asks about one of its own tool calls: decided by the gate (which may ask a person)."""
        if self.hooks is None:
            return p.AuthorizeResult(decision="ask", reason="mcphost: this daemon decides no hook calls")
        verdict = await self.hooks.decide(AgentToolUse(**asked.model_dump()))
        return p.AuthorizeResult.model_validate(verdict.to_dict())

    # ---- connections

    def attach(self, connection: EditorConnection) -> None:
        connection.attached = True
        if connection.approver:
            self.broker.attach(connection)
        connection.send(p.STATUS, self.status().model_dump(mode="json", exclude_none=True))
        uri, diagnostics = self._diagnostics()
        if diagnostics:
            connection.publish_diagnostics(uri, diagnostics)
            self._published.add(uri)
        self.status_changed()

    def detach(self, connection: EditorConnection) -> None:
        was_attached = connection.attached
        connection.attached = False
        self.broker.detach(connection.id)
        self.connections.pop(connection.id, None)
        if was_attached:
            self.status_changed()


def _text_of(error: ConfigError) -> str:
    """The text `error`'s issues were found in: the one it carries (the loader and the watcher give theirs). Else
    the file's, read as the loader reads it: this runs on the daemon's event loop, where a plain open of a named pipe
    put in the file's place would wait for a writer for good, every call and SIGTERM with it."""
    if error.text is not None:
        return error.text
    try:
        return read_regular(error.file).decode("utf-8", "replace").removeprefix("\ufeff")
    except OSError:
        return ""


def _export_status(status: ExportStatus | None) -> p.ExportStatus | None:
    return p.ExportStatus.model_validate(dataclasses.asdict(status)) if status is not None else None
