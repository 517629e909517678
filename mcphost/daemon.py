"""The composition root: builds config, activity log, upstreams and gateway, and wires their events."""

from __future__ import annotations

import logging
from typing import Any

from mcphost.activity.record import ActivityRecord
from mcphost.activity.writer import ActivityLog, LogSettings
from mcphost.config import LoadedConfig
from mcphost.gateway.service import Gateway
from mcphost.paths import activity_log_path
from mcphost.upstream.manager import UpstreamManager

logger = logging.getLogger(__name__)


def log_settings(loaded: LoadedConfig) -> LogSettings:
    log = loaded.config.log
    return LogSettings(fsync=log.fsync, max_bytes=log.max_bytes, keep=log.keep)


class Host:
    """Everything one mcphost process runs. Use as an async context manager; upstreams start on entry."""

    def __init__(self, loaded: LoadedConfig, *, only_servers: list[str] | None = None) -> None:
        self.loaded = loaded
        self._only = only_servers
        self.activity = ActivityLog(activity_log_path(), log_settings(loaded))
        self.upstreams = UpstreamManager(on_event=self._on_upstream_event)
        self.gateway = Gateway(lambda: self.loaded, self.upstreams, self.activity)

    def _servers(self) -> dict[str, Any]:
        servers = self.loaded.config.enabled_servers()
        if self._only is not None:
            servers = {name: cfg for name, cfg in servers.items() if name in self._only}
        return servers

    def _on_upstream_event(self, kind: str, server: str, details: dict[str, Any]) -> None:
        self.activity.append(ActivityRecord(type=kind, server=server, tool=details.get("tool"), details=details))

    async def __aenter__(self) -> Host:
        await self.upstreams.__aenter__()
        self.upstreams.apply(self._servers())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.upstreams.__aexit__(*exc)
        finally:
            self.activity.close()
