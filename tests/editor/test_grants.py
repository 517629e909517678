"""Remembered approvals end to end: once, session (per agent session), always (the state file, across daemon
restarts, `mcphost grants`), the clamp on destructive calls, and grants dropped when a tool's annotations change.

Tests that only make session grants use the package's shared daemon (a session grant never reaches another
agent session); tests of `always` grants or of other config get their own."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import anyio.to_thread
import pytest

from tests.editor.support import SOON, assert_ok, call, last_call, new_calls
from tests.editor_client import allow, editor
from tests.helpers import Daemon, Sandbox, daemon, http_agent, mcphost

pytestmark = pytest.mark.asyncio(loop_scope="package")  # the shared daemon (conftest.py) lives there


def state_grants(box: Sandbox) -> list[dict[str, Any]]:
    path = box.data / "state.toml"
    if not path.exists():
        return []
    grants: list[dict[str, Any]] = tomllib.loads(path.read_text(encoding="utf-8")).get("grants", [])
    return grants


async def cli_json(box: Sandbox, *args: str) -> Any:
    done = await anyio.to_thread.run_sync(lambda: mcphost(box, *args, "-o", "json"))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_remember_once_prompts_again_next_time(shared: Daemon) -> None:
    before = len(shared.box.tool_calls())
    async with editor(shared.editor_socket, allow("once")) as ed, http_agent(shared.url, shared.headers) as client:
        assert_ok(await call(client, "write", "plain_echo"))
        assert_ok(await call(client, "write", "plain_echo"))
    assert len(ed.prompts) == 2
    assert [(r["decision"]["by"], r["decision"]["remember"]) for r in new_calls(shared.box, before)] == [
        ("editor", "once"),
        ("editor", "once"),
    ]


async def test_remember_session_covers_that_agent_session_only(shared: Daemon) -> None:
    async with editor(shared.editor_socket, allow("session"), name="sessions") as ed:
        async with http_agent(shared.url, shared.headers, mode="legacy") as first:
            assert_ok(await call(first, "write", "plain_echo"))
            assert ed.prompts[0]["remember_options"] == ["once", "session", "always"]
            assert_ok(await call(first, "write", "plain_echo"))
            assert len(ed.prompts) == 1
            record = last_call(shared.box)
            assert record["decision"]["by"] == "remembered_grant" and record["decision"]["remember"] == "session"
            assert record["decision"]["rule"].startswith("grant:session:")
            assert record["decision"]["approver"].startswith("sessions")
            listed = (await cli_json(shared.box, "grants", "list"))["grants"]
            mine = [g for g in listed if g["session_id"] == record["session_id"]]
            assert [(g["scope"], g["server"], g["tool"], g["variant"]) for g in mine] == [
                ("session", "probe", "plain_echo", "call_tool_write")
            ]
            assert mine[0]["daemon"] == shared.process.pid
        async with http_agent(shared.url, shared.headers, mode="legacy") as second:
            assert_ok(await call(second, "write", "plain_echo"))
        assert len(ed.prompts) == 2
        assert ed.prompts[1]["session_id"] != ed.prompts[0]["session_id"]
    assert state_grants(shared.box) == []  # session grants never reach the state file


async def test_destructive_always_is_clamped_to_session_with_a_warning(shared: Daemon) -> None:
    async with (
        editor(shared.editor_socket, allow("always")) as ed,
        http_agent(shared.url, shared.headers, mode="legacy") as client,
    ):
        assert_ok(await call(client, "destructive", "wipe_notes"))
        assert "always" not in ed.prompts[0]["remember_options"]
        record = last_call(shared.box)
        assert record["decision"]["by"] == "editor" and record["decision"]["remember"] == "session"
        assert any("remember 'always' is not allowed" in w and "'session'" in w for w in record["warnings"])
        assert_ok(await call(client, "destructive", "wipe_notes"))
        assert len(ed.prompts) == 1
        assert last_call(shared.box)["decision"]["by"] == "remembered_grant"
    assert [g for g in state_grants(shared.box) if g["tool"] == "wipe_notes"] == []


async def test_a_grant_is_dropped_when_the_tool_annotations_change(shared: Daemon) -> None:
    async with (
        editor(shared.editor_socket, allow("session")) as ed,
        http_agent(shared.url, shared.headers, mode="legacy") as client,
    ):
        assert_ok(await call(client, "write", "shifty"))
        assert_ok(await call(client, "write", "shifty"))
        assert [q["tool"] for q in ed.prompts] == ["shifty"]
        assert last_call(shared.box)["decision"]["by"] == "remembered_grant"

        # The server changes shifty (read-only -> unannotated) and says so with tools/list_changed.
        assert_ok(await call(client, "write", "set_shifty", {"annotations": {}}))

        def changed() -> bool:
            return any(a["type"] == "annotations_changed" and a.get("tool") == "shifty" for a in ed.activity)

        await ed.wait_for(changed, SOON)
        assert_ok(await call(client, "write", "shifty"))
    assert [q["tool"] for q in ed.prompts] == ["shifty", "set_shifty", "shifty"]
    warnings = ed.prompts[-1]["warnings"]
    assert any("remembered approval (session)" in w and "was dropped" in w for w in warnings), warnings
    assert any("changed this tool's annotations" in w and "readOnlyHint: true" in w for w in warnings), warnings
    assert ed.prompts[-1]["annotations"] == {}
    record = last_call(shared.box)
    assert record["decision"]["by"] == "editor"
    assert any("was dropped" in w for w in record["warnings"])


async def test_always_is_persisted_survives_a_restart_and_can_be_revoked(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with (
        daemon(sandbox) as first,
        editor(first.editor_socket, allow("always")) as ed,
        http_agent(first.url, first.headers) as client,
    ):
        assert_ok(await call(client, "write", "plain_echo"))
        assert_ok(await call(client, "write", "plain_echo"))
        assert len(ed.prompts) == 1
        decision = last_call(sandbox)["decision"]
        assert decision["by"] == "remembered_grant" and decision["remember"] == "always"
    (stored,) = state_grants(sandbox)
    assert (stored["server"], stored["tool"], stored["variant"]) == ("probe", "plain_echo", "call_tool_write")
    (listed,) = (await cli_json(sandbox, "grants", "list"))["grants"]
    assert (listed["scope"], listed["server"], listed["tool"]) == ("always", "probe", "plain_echo")

    async with (
        daemon(sandbox) as second,
        editor(second.editor_socket, allow("once")) as ed,
        http_agent(second.url, second.headers) as client,
    ):
        assert_ok(await call(client, "write", "plain_echo"))
        assert ed.prompts == []
        decision = last_call(sandbox)["decision"]
        assert decision["by"] == "remembered_grant" and decision["remember"] == "always"
        assert decision["rule"] == f"grant:always:{listed['id']}"

        revoked = (await cli_json(sandbox, "grants", "revoke", listed["id"]))["revoked"]
        assert [g["id"] for g in revoked] == [listed["id"]]
        assert state_grants(sandbox) == []
        assert_ok(await call(client, "write", "plain_echo"))
        assert len(ed.prompts) == 1
        assert last_call(sandbox)["decision"]["by"] == "editor"


async def test_destructive_always_is_kept_when_the_config_allows_it(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nremember_destructive = "always"\n\n' + sandbox.probe_server())
    async with (
        daemon(sandbox) as d,
        editor(d.editor_socket, allow("always")) as ed,
        http_agent(d.url, d.headers) as client,
    ):
        assert_ok(await call(client, "destructive", "wipe_notes"))
        assert ed.prompts[0]["remember_options"] == ["once", "always"]
        record = last_call(sandbox)
        assert record["decision"]["remember"] == "always" and record["warnings"] == []
        assert_ok(await call(client, "destructive", "wipe_notes"))
        assert len(ed.prompts) == 1
    (stored,) = state_grants(sandbox)
    assert (stored["tool"], stored["variant"]) == ("wipe_notes", "call_tool_destructive")


async def test_an_approval_no_state_file_can_hold_is_never_in_force_unsaved(sandbox: Sandbox) -> None:
    # A lone surrogate in the editor's name (the grant's approver) or in a pattern's glob: the state file's write
    # failed, the call the person allowed failed with no decision on record, and the grant stayed in force, unsaved.
    sandbox.write_config(sandbox.probe_server())

    async def pattern_always(_request: dict[str, Any]) -> dict[str, Any]:
        return {"decision": "allow", "remember": "always", "match": "pattern", "pattern": {"text": "[!\udfff]*"}}

    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as client:
        async with editor(d.editor_socket, pattern_always) as patterned:
            assert_ok(await call(client, "write", "plain_echo", {"text": "a"}))
            first = last_call(sandbox)
            assert_ok(await call(client, "write", "plain_echo", {"text": "b"}))
        assert len(patterned.prompts) == 2  # the pattern was no grant: asked again
        assert first["decision"]["by"] == "editor" and first["status"] == "success"
        assert any("lone UTF-16 surrogate" in w for w in first["warnings"]), first["warnings"]
        assert state_grants(sandbox) == []

        async with editor(d.editor_socket, allow("always"), name="nvim-\udc80\x1b[2K") as named:
            assert_ok(await call(client, "write", "plain_echo", {"text": "c"}))
            assert_ok(await call(client, "write", "plain_echo", {"text": "d"}))
        assert len(named.prompts) == 1
        (stored,) = state_grants(sandbox)
        assert stored["approver"].startswith("nvim-?\\x1b[2K")
        assert last_call(sandbox)["decision"]["by"] == "remembered_grant"
