"""The composition root: builds config, activity log, upstreams and gateway, and wires their events."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread

from mcphost.activity.record import ActivityRecord, RecordType
from mcphost.activity.writer import ActivityLog, LogSettings, Payload
from mcphost.approval.approvals import Approvals
from mcphost.approval.broker import PermissionBroker
from mcphost.approval.grants import GrantStore
from mcphost.config import ConfigError, LoadedConfig
from mcphost.config.diff import ConfigDiff, diff_configs
from mcphost.config.state import state_path
from mcphost.config.watcher import ConfigEvent, ConfigWatcher, Missing, Rejected, Reloaded
from mcphost.errors import tell_each
from mcphost.gateway.hooks import AgentToolGate
from mcphost.gateway.service import Gateway
from mcphost.paths import activity_log_path
from mcphost.upstream.connection import Connector, configured_transport
from mcphost.upstream.manager import UpstreamManager

if TYPE_CHECKING:
    from mcphost.activity.export import ExportStatus, OtlpExporter
    from mcphost.upstream.spawn import EarlyStarts


# "config" (a save was applied), "config_error" (a save was rejected), "upstream" (a server's state changed)
HostListener = Callable[[str], None]


def log_settings(loaded: LoadedConfig) -> LogSettings:
    return LogSettings.of(loaded.config.log)


def error_details(error: ConfigError) -> dict[str, Any]:
    return {"file": str(error.file), "errors": [asdict(issue) for issue in error.issues]}


class Host:
    """Everything one mcphost process runs. Use as an async context manager; upstreams start on entry.

    `watch=True` (the daemon, `mcphost mcp`) follows the config file: a valid save is applied between calls,
    an invalid one keeps the last good config in force and is reported until it is fixed. `connect` says what an
    upstream's client connects to (the configured transport; in-process tests hand in MCP server objects); with it,
    `early` holds the stdio servers' processes spawned before the host was made, which their first connections take.
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        only_servers: list[str] | None = None,
        watch: bool = False,
        connect: Connector = configured_transport,
        early: EarlyStarts | None = None,
    ) -> None:
        if early is not None and connect is configured_transport:
            connect = functools.partial(configured_transport, early=early)
        self.loaded = loaded
        self.config_error: ConfigError | None = None
        self._only = only_servers
        self._watch = watch
        self._watcher: ConfigWatcher | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._listeners: list[HostListener] = []
        self.activity = ActivityLog(activity_log_path(), log_settings(loaded))
        self.upstreams = UpstreamManager(on_event=self._on_upstream_event, connect=connect)
        self.broker = PermissionBroker()
        self.grants = GrantStore(state_path())
        self.approvals = Approvals(self.broker, self.grants)
        # Each call reads `self.loaded` once when it starts, so swapping it is the whole of an atomic reload.
        self.gateway = Gateway(lambda: self.loaded, self.upstreams, self.activity, self.approvals)
        self.hooks = AgentToolGate(lambda: self.loaded, self.activity, self.approvals, self._annotations)
        self._running = False
        self._exporter: OtlpExporter | None = None
        self._retired: list[OtlpExporter] = []  # exporters a reload removed, still flushing what they held
        self._export_subscribed = False

    def _annotations(self, server: str, tool: str) -> dict[str, Any] | None:
        found = self.upstreams.find(server, tool)
        return found.annotations if found is not None else None

    def on_event(self, listener: HostListener) -> None:
        self._listeners.append(listener)

    def _emit(self, kind: str) -> None:
        tell_each(self._listeners, kind, who="host")

    def _servers(self) -> dict[str, Any]:
        servers = self.loaded.config.enabled_servers()
        if self._only is not None:
            servers = {name: cfg for name, cfg in servers.items() if name in self._only}
        return servers

    def _on_upstream_event(self, kind: str, server: str, details: dict[str, Any]) -> None:
        if kind == RecordType.ANNOTATIONS_CHANGED.value:
            self.approvals.note_annotation_change(server, details["tool"], details.get("old"), details.get("new"))
        self.activity.append(ActivityRecord(type=kind, server=server, tool=details.get("tool"), details=details))
        self._emit("upstream")

    # ---- the activity stream to an OpenTelemetry collector ([export.otlp])

    def _configure_export(self, loaded: LoadedConfig) -> None:
        """Start, reconfigure or stop the exporter to match `loaded`. Imported only when configured: a host without
        [export.otlp] pays nothing for it."""
        otlp = loaded.config.export.otlp
        self._retired = [e for e in self._retired if e.alive]
        if otlp is None or not otlp.enabled:
            if self._exporter is not None:
                self._exporter.stop()  # it flushes what it holds in the background, within a short deadline
                self._retired.append(self._exporter)
                self._exporter = None
            return
        from mcphost.activity.export import ExportSettings, OtlpExporter

        settings = ExportSettings.of(otlp)
        if self._exporter is not None:
            self._exporter.configure(settings)
            return
        self._exporter = OtlpExporter(settings)
        self._exporter.start()
        if not self._export_subscribed:
            self.activity.subscribe(self._export)
            self._export_subscribed = True

    def _export(self, payload: Payload) -> None:
        exporter = self._exporter
        if exporter is not None:
            exporter.offer(payload())

    def export_status(self) -> ExportStatus | None:
        """The exporter's counts for `mcphost status`; None when nothing is exported."""
        return self._exporter.status() if self._exporter is not None else None

    def _close_export(self) -> None:
        exporters = [e for e in (self._exporter, *self._retired) if e is not None]
        self._exporter, self._retired = None, []
        for exporter in exporters:
            exporter.stop()
        for exporter in exporters:
            exporter.close()

    # ---- config reload

    def handle_config_event(self, event: ConfigEvent) -> None:
        if isinstance(event, Reloaded):
            self.apply_config(event.loaded)
        elif isinstance(event, Rejected):
            self.reject(event.error, event.sha256)
        elif isinstance(event, Missing):
            print(
                f"mcphost: config {event.path} was removed; the config in force stays until the file is back",
                file=sys.stderr,
                flush=True,
            )

    def apply_config(self, new: LoadedConfig) -> ConfigDiff:
        old = self.loaded
        diff = diff_configs(old.config, new.config)
        cleared = self.config_error is not None
        self.loaded = new
        self.config_error = None
        self.activity.configure(log_settings(new))
        if self._running:
            self._configure_export(new)
        if diff.servers_added or diff.servers_removed or diff.servers_restarted:
            self.upstreams.apply(self._servers())
        details: dict[str, Any] = {
            "file": str(new.path),
            **diff.to_dict(),
            "summary": diff.summary(),
            "sha256": new.sha256,
        }
        if cleared:
            details["cleared_error"] = True
        self.activity.append(ActivityRecord(type=RecordType.CONFIG_RELOAD.value, details=details))
        # A file that appears where none was replaces the built-in default: say so, or "reloaded" puzzles.
        what = (
            f"{new.path} is now in force instead of the built-in default"
            if new.exists and not old.exists
            else f"reloaded from {new.path}"
        )
        print(
            f"mcphost: config {what}: {diff.summary()}" + (" (errors fixed)" if cleared else ""),
            file=sys.stderr,
            flush=True,
        )
        self._emit("config")
        return diff

    def reject(self, error: ConfigError, sha256: str | None = None) -> None:
        """Keep the config in force, and report `error` (a record, stderr, editors) until a save fixes it."""
        self.config_error = error
        sha256 = sha256 or error.sha256
        if sha256 is not None and self._watcher is not None:
            self._watcher.seen(sha256)  # reported here (a broken file at start): the watch does not report it again
        details = {**error_details(error), "sha256": sha256}
        self.activity.append(ActivityRecord(type=RecordType.CONFIG_ERROR.value, details=details))
        print(
            f"mcphost: {error}\nmcphost: the last good config stays in force until the file is fixed",
            file=sys.stderr,
            flush=True,
        )
        self._emit("config_error")

    # ---- life cycle

    async def __aenter__(self) -> Host:
        self._running = True
        # First: upstream_connected records of the first start are exported too.
        self._configure_export(self.loaded)
        try:
            await self.upstreams.__aenter__()
        except BaseException:
            self._running = False
            self._close_export()
            raise
        self.upstreams.apply(self._servers())
        if self._watch:
            # Seeded with the version loaded, not with a second read of the file: a save made while the upstreams
            # started would look like the config in force, and never be applied. (And a plain read here, of a named
            # pipe put in the file's place, would hold the daemon for good.)
            self._watcher = ConfigWatcher.for_loaded(self.loaded, self.handle_config_event)
            self._tg = anyio.create_task_group()
            await self._tg.__aenter__()
            self._tg.start_soon(self._watcher.run, name="config-watcher")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            if self._tg is not None:
                assert self._watcher is not None
                self._watcher.stop.set()
                self._tg.cancel_scope.cancel()
                await self._tg.__aexit__(None, None, None)
                self._tg = None
            await self.upstreams.__aexit__(*exc)
        finally:
            self._running = False
            if self._exporter is not None or self._retired:
                # Off the event loop, and shielded: a host cancelled on its way out still sends what it can.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._close_export)
            self.activity.close()
