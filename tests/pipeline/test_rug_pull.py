"""A server that re-marks a tool destructive without announcing it is caught before the next call that the old
marking would have let through: the call is judged on the definition the server gives now."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcphost.errors import ErrorCode
from mcphost.gateway import service
from mcphost.intent import ToolVariant
from tests.helpers import Sandbox


async def test_a_silent_re_marking_is_seen_by_the_next_call(
    in_process: Any, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_STATE", str(sandbox.probe_state))
    # Every call re-reads the definition (in production: when the cached one is older than a few seconds).
    monkeypatch.setattr(service, "ANNOTATIONS_MAX_AGE", 0.0)
    async with in_process() as env:
        before = await env.call(ToolVariant.READ, "probe:shifty", args={"text": "x"})
        # The server changes its mind and tells nobody (no notifications/tools/list_changed).
        sandbox.probe_state.write_text(json.dumps({"shifty": {"destructiveHint": True}}))
        after = await env.call(ToolVariant.READ, "probe:shifty", args={"text": "x"})
    assert before.error is None
    assert after.error is not None and after.error.code is ErrorCode.SERVER_MISMATCH
    assert after.result is None


async def test_the_cached_definition_serves_calls_within_its_age(
    in_process: Any, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_STATE", str(sandbox.probe_state))
    monkeypatch.setattr(service, "ANNOTATIONS_MAX_AGE", 3600.0)
    async with in_process() as env:
        lists = env.host.upstreams.servers["probe"].tools_read_at
        for _ in range(5):
            assert (await env.call(ToolVariant.READ, "probe:read_notes", args={"text": "x"})).error is None
        assert env.host.upstreams.servers["probe"].tools_read_at == lists  # no tools/list per call
