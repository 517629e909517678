"""Prompts under non-default [permissions] and [intent_declaration] settings: lenient validation warnings,
`no_editor = "elicit"` (the agent's own client asks its user; these two share a daemon), and a prompt that
expires (its own daemon, with a short prompt_timeout)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.editor.support import SOON, assert_ok, call, last_call
from tests.editor_client import allow, editor, never
from tests.helpers import Daemon, Sandbox, daemon, error_of, http_agent

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lenient(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Daemon]:
    """strict_server_validation off, and no_editor = "elicit" (which matters only while no editor is attached)."""
    box = Sandbox(tmp_path_factory.mktemp("lenient"))
    box.write_config(
        '[intent_declaration]\nstrict_server_validation = false\n\n[permissions]\nno_editor = "elicit"\n\n'
        + box.probe_server()
    )
    async with daemon(box) as d:
        yield d


async def test_lenient_validation_lets_mismatches_through_with_warnings_in_the_prompt(lenient: Daemon) -> None:
    d = lenient
    async with editor(d.editor_socket, allow()) as ed, http_agent(d.url, d.headers) as client:
        assert_ok(await call(client, "write", "read_notes"))
        assert_ok(await call(client, "write", "wipe_notes"))  # strict validation would reject this one
    on_read_only, on_destructive = ed.prompts
    assert any("marked read-only by server" in w for w in on_read_only["warnings"]), on_read_only["warnings"]
    assert any(
        "marked destructive by server" in w and "strict_server_validation is off" in w
        for w in on_destructive["warnings"]
    ), on_destructive["warnings"]
    assert on_destructive["variant"] == "call_tool_write" and on_destructive["call_with"] == "call_tool_destructive"
    assert last_call(d.box)["warnings"] == on_destructive["warnings"]


async def test_an_unanswered_prompt_expires_and_is_withdrawn(sandbox: Sandbox) -> None:
    sandbox.write_config("[permissions]\nprompt_timeout = 0.5\n\n" + sandbox.probe_server())
    async with daemon(sandbox) as d, editor(d.editor_socket, never()) as ed, http_agent(d.url, d.headers) as client:
        with anyio.fail_after(SOON):
            error = error_of(await call(client, "write", "plain_echo"))
        await ed.wait_for(lambda: bool(ed.cancelled), SOON)
    assert error["code"] == "APPROVAL_TIMEOUT"
    assert "0.5 seconds" in error["message"] and "prompt_timeout" in error["message"]
    assert ed.cancelled == [ed.prompts[0]["id"]]
    record = last_call(sandbox)
    assert record["status"] == "expired"
    assert record["decision"]["by"] == "timeout" and record["decision"]["outcome"] == "expired"
    assert record["decision"]["wait_ms"] >= 500
    assert record["error"]["code"] == "APPROVAL_TIMEOUT"


@asynccontextmanager
async def eliciting_agent(
    url: str, headers: dict[str, str], asked: list[Any], mode: str = "legacy"
) -> AsyncIterator[Client]:
    """An agent whose MCP client declares elicitation and says yes to the question put to its user."""

    async def approve(_context: ClientRequestContext, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    http = create_mcp_http_client(headers=headers)
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, elicitation_callback=approve, mode=mode, cache=None) as client:
        yield client


async def test_no_editor_elicit_asks_through_the_agent_client_when_it_can(lenient: Daemon) -> None:
    d, sandbox = lenient, lenient.box
    asked: list[Any] = []
    async with eliciting_agent(d.url, d.headers, asked) as client:
        with anyio.fail_after(SOON):
            assert_ok(await call(client, "write", "plain_echo", {"text": "via elicitation"}, reason="tidy up"))
    (question,) = asked
    assert "probe:plain_echo" in question.message and "tidy up" in question.message
    decision = last_call(sandbox)["decision"]
    assert decision["by"] == "elicitation" and decision["outcome"] == "allow"

    async with http_agent(d.url, d.headers, mode="legacy") as plain:
        with anyio.fail_after(SOON):
            error = error_of(await call(plain, "write", "plain_echo"))
    assert error["code"] == "NO_APPROVER"
    assert last_call(sandbox)["decision"]["by"] == "no_approver"

    # A 2026-era (stateless HTTP) client has no channel for a request of ours: the question goes back in the
    # call's result (input required), and its client repeats the call with the user's answer.
    async with eliciting_agent(d.url, d.headers, asked, mode="auto") as modern:
        assert modern.protocol_version == "2026-07-28"
        with anyio.fail_after(SOON):
            assert_ok(await call(modern, "write", "plain_echo", {"text": "round trip"}, reason="modern"))
    assert len(asked) == 2
    assert "probe:plain_echo" in asked[1].message and "modern" in asked[1].message
    first, second = sandbox.tool_calls()[-2:]
    assert first["status"] == "asked" and first["decision"]["outcome"] == "asked" and not first.get("forwarded")
    assert second["status"] == "success" and second["decision"]["by"] == "elicitation"
    assert second["decision"]["outcome"] == "allow"
