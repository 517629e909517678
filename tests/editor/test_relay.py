"""`mcphost mcp` with a daemon running for the same config: the agent's session is relayed to the daemon, so its
prompts reach the editor attached there, and each relayed agent process is its own session."""

from __future__ import annotations

import pytest

from tests.editor.support import assert_ok, call, last_call
from tests.editor_client import allow, editor
from tests.helpers import Daemon, agent, error_of

pytestmark = pytest.mark.asyncio(loop_scope="package")  # the shared daemon (conftest.py) lives there


async def test_a_relayed_agent_is_prompted_in_the_daemon_editor_with_session_offered(shared: Daemon) -> None:
    async with editor(shared.editor_socket, allow(), name="relay-editor") as ed, agent(shared.box) as client:
        assert_ok(await call(client, "write", "plain_echo", {"text": "relayed"}))
        record = last_call(shared.box)
        assert_ok(await call(client, "destructive", "wipe_notes"))
    write, destructive = ed.prompts
    assert (write["tool"], write["arguments"]) == ("plain_echo", {"text": "relayed"})
    assert record["decision"]["by"] == "editor" and record["decision"]["approver"].startswith("relay-editor")
    # The relay always has a session, so "session" is offered; destructive still lacks "always".
    assert write["session_id"] and write["session_id"] == destructive["session_id"] == record["session_id"]
    assert write["remember_options"] == ["once", "session", "always"]
    assert destructive["remember_options"] == ["once", "session"]


async def test_in_process_does_not_relay_so_nobody_can_approve(shared: Daemon) -> None:
    async with editor(shared.editor_socket, allow()) as ed, agent(shared.box, "--in-process") as client:
        error = error_of(await call(client, "write", "plain_echo"))
    assert error["code"] == "NO_APPROVER"
    assert ed.prompts == []


async def test_two_relayed_agents_are_distinct_sessions_for_session_grants(shared: Daemon) -> None:
    async with (
        editor(shared.editor_socket, allow("session")) as ed,
        agent(shared.box) as first,
        agent(shared.box) as second,
    ):
        assert_ok(await call(first, "write", "plain_echo"))
        assert_ok(await call(first, "write", "plain_echo"))
        assert len(ed.prompts) == 1
        assert last_call(shared.box)["decision"]["by"] == "remembered_grant"
        assert_ok(await call(second, "write", "plain_echo"))
    first_prompt, second_prompt = ed.prompts
    assert first_prompt["session_id"] and second_prompt["session_id"]
    assert first_prompt["session_id"] != second_prompt["session_id"]
    assert last_call(shared.box)["decision"]["by"] == "editor"
