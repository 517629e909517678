"""The call pipeline in one process: a real `Host` whose upstream is the probe MCP server object, connected in
memory (no subprocess, no socket), with scripted approvers standing in for the person. The daemon tests keep
covering the socket and stdio boundaries; these cover what happens between them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mcphost.approval.prompt import Answer, PermissionRequest, PermissionResponse
from mcphost.config import LoadedConfig, parse_config
from mcphost.gateway.service import CallContext, CallOutcome
from mcphost.host import Host
from mcphost.intent import ToolVariant
from mcphost.policy import Remember
from tests.helpers import Sandbox
from tests.servers import probe

PROBE_CONFIG = """
[servers.probe]
command = "unused-in-memory"
"""


@dataclass
class ScriptedApprover:
    """Answers each prompt with the next scripted answer (allow once when the script runs out)."""

    id: str = "scripted-1"
    script: list[PermissionResponse] = field(default_factory=list)
    asked: list[PermissionRequest] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"scripted approver ({self.id})"

    async def ask(self, request: PermissionRequest) -> PermissionResponse:
        self.asked.append(request)
        return self.script.pop(0) if self.script else allow()


def allow(remember: Remember = Remember.ONCE) -> PermissionResponse:
    return PermissionResponse(decision=Answer.ALLOW, remember=remember)


def deny() -> PermissionResponse:
    return PermissionResponse(decision=Answer.DENY)


@dataclass
class InProcess:
    host: Host
    box: Sandbox

    async def call(
        self,
        variant: ToolVariant,
        name: str,
        *,
        args: dict[str, Any] | None = None,
        operation: str | None = None,
        session: str | None = "session-1",
    ) -> CallOutcome:
        arguments: dict[str, Any] = {
            "name": name,
            "intent": {"operation_type": operation or variant.operation.value},
        }
        if args is not None:
            arguments["args"] = args
        return await self.host.gateway.call(variant, arguments, CallContext(session_id=session, client="pytest"))

    def records(self) -> list[dict[str, Any]]:
        return self.box.tool_calls()


@pytest.fixture
async def in_process(sandbox: Sandbox) -> AsyncIterator[Callable[[str], Any]]:
    """`async with in_process(extra_toml) as env`: a host on the probe server, under PROBE_CONFIG + extra_toml."""

    @contextlib.asynccontextmanager
    async def start(extra: str = "") -> AsyncIterator[InProcess]:
        path = Path(sandbox.config)
        text = PROBE_CONFIG + extra
        loaded = LoadedConfig(parse_config(text, path), path, exists=True)
        async with Host(loaded, connect=lambda _name, _config, _on_eof: probe.build()) as host:
            await host.upstreams.wait_ready(10, None)
            yield InProcess(host, sandbox)

    yield start
