"""Test plumbing: an isolated user (data, config and runtime dirs) and helpers to start real processes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

TESTS = Path(__file__).resolve().parent
PROBE = TESTS / "servers" / "probe.py"


@dataclass
class Sandbox:
    """One pretend user of mcphost: every path the host touches lives under `root`."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.data / "activity.jsonl"

    @property
    def probe_state(self) -> Path:
        return self.root / "probe-state.json"

    def env(self) -> dict[str, str]:
        return {
            "MCPHOST_CONFIG": str(self.config),
            "MCPHOST_DATA_DIR": str(self.data),
            "MCPHOST_RUNTIME_DIR": str(self.root / "run"),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }

    def write_config(self, text: str) -> Path:
        self.config.write_text(text, encoding="utf-8")
        return self.config

    def probe_server(self, name: str = "probe", extra: str = "") -> str:
        """A [servers.NAME] table running the probe upstream over stdio."""
        return (
            f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PROBE))}]\n"
            f"env = {{ PROBE_STATE = {json.dumps(str(self.probe_state))} }}\n{extra}\n"
        )

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines() if line.strip()]

    def tool_calls(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["type"] == "tool_call"]


@asynccontextmanager
async def agent(box: Sandbox, *extra_args: str, mode: str = "auto") -> AsyncIterator[Client]:
    """An agent: the official SDK client driving `mcphost mcp` as a subprocess over stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcphost", "mcp", "--config", str(box.config), *extra_args], env=box.env()
    )
    async with Client(params, mode=mode, cache=None) as client:
        yield client


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")


def error_of(result: Any) -> dict[str, Any]:
    assert result.is_error, f"expected an error, got: {text_of(result)}"
    error: dict[str, Any] = result.structured_content["error"]
    assert text_of(result).startswith(error["message"])
    return error
