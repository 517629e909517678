"""All upstream servers together: started concurrently, looked up by "server:tool", searched with BM25."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from mcphost.config.models import ServerConfig, launch_spec
from mcphost.upstream.connection import (
    Connector,
    EventSink,
    State,
    UpstreamServer,
    UpstreamTool,
    configured_transport,
)
from mcphost.upstream.index import BM25Index, Document, parameter_names

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    transport: str
    state: str
    tools: int
    error: str | None
    dropped_tools: tuple[tuple[str, str], ...] = ()  # (name, reason): tools left out as malformed
    protocol: str | None = None  # the MCP revision the live connection speaks

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "transport": self.transport, "state": self.state, "tools": self.tools}
        if self.protocol:
            out["protocol"] = self.protocol
        if self.error:
            out["error"] = self.error
        if self.dropped_tools:
            out["dropped_tools"] = [{"name": name, "reason": reason} for name, reason in self.dropped_tools]
        return out


class UpstreamManager:
    """Owns one `UpstreamServer` per enabled server; a server that fails never blocks or takes down the others."""

    def __init__(
        self,
        on_event: Callable[[str, str, dict[str, Any]], None] | None = None,
        connect: Connector = configured_transport,
    ) -> None:
        self.servers: dict[str, UpstreamServer] = {}
        self._connect = connect
        self._tg: anyio.abc.TaskGroup | None = None
        self._on_event = on_event
        self._index: BM25Index | None = None
        self._index_key: tuple[tuple[str, int], ...] = ()

    async def __aenter__(self) -> UpstreamManager:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close_all()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        self._tg = None

    def close_all(self) -> None:
        """Disconnect every server now: their calls in flight end at once as `UpstreamCallFailed` (a host shutting
        down must not wait on a call that may never end), and their processes are stopped."""
        for server in self.servers.values():
            server.close()

    def _sink(self, name: str) -> EventSink:
        def sink(kind: str, details: dict[str, Any]) -> None:
            if self._on_event is not None:
                self._on_event(kind, name, details)

        return sink

    def apply(self, configs: Mapping[str, ServerConfig]) -> None:
        """Start added servers, stop removed ones, restart changed ones; leave the unchanged ones alone. Each
        server runs and is compared by its launch spec: one that would start the same way is unchanged."""
        assert self._tg is not None, "use UpstreamManager as an async context manager"
        launched = {name: launch_spec(config) for name, config in configs.items()}
        for name in list(self.servers):
            if name not in launched or launched[name] != self.servers[name].config:
                # Out of the table first, so new calls go to the successor; calls in flight finish on this one.
                self._tg.start_soon(self.servers.pop(name).retire, name=f"retire:{name}")
        for name, config in launched.items():
            if name not in self.servers:
                server = UpstreamServer(name, config, self._sink(name), self._connect)
                self.servers[name] = server
                self._tg.start_soon(server.run, name=f"upstream:{name}")

    async def wait_ready(self, limit_s: float, names: list[str] | None = None) -> None:
        """Wait until every (named) server has connected or failed once, so a first search sees real tools."""
        targets = [self.servers[n] for n in (names or list(self.servers)) if n in self.servers]
        for server in targets:  # not all(generator): the hot path, after start-up, with no frame of its own
            if not server.first_attempt_done:
                break
        else:
            return
        with anyio.move_on_after(limit_s):
            for server in targets:
                await server.wait_first_attempt(limit_s)

    # ---- lookup and search

    def all_tools(self) -> list[UpstreamTool]:
        return [tool for server in self.servers.values() for tool in server.tools.values()]

    def find(self, server: str, tool: str) -> UpstreamTool | None:
        upstream = self.servers.get(server)
        return upstream.tools.get(tool) if upstream else None

    def index(self) -> BM25Index:
        # Rebuilt only when some server's tool list changed since the last search.
        key = tuple((name, server.tools_version) for name, server in sorted(self.servers.items()))
        if self._index is None or key != self._index_key:
            self._index = BM25Index(
                Document(t.qualified, t.name, f"{t.title or ''} {t.description}", parameter_names(t.input_schema))
                for t in self.all_tools()
            )
            self._index_key = key
        return self._index

    def statuses(self) -> list[ServerStatus]:
        return [
            ServerStatus(
                name,
                s.config.transport,
                s.state.value,
                len(s.tools),
                s.last_error if s.state is not State.CONNECTED else None,
                tuple(s.dropped_tools),
                s.protocol_version if s.state is State.CONNECTED else None,
            )
            for name, s in sorted(self.servers.items())
        ]
