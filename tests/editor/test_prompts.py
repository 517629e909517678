"""Permission prompts end to end: a real daemon, real agents (SDK clients over HTTP and `mcphost mcp`), and the
test editor (pytest-lsp) attached to the editor socket. The package's shared daemon (default policy) serves
them all; every test ends its calls and detaches its editors before it returns, so none leaves a prompt or an
approver behind for the next."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.to_thread
import pytest

from mcphost.approval.prompt import PermissionRequest
from mcphost.editor import protocol as p
from tests.editor.support import (
    SOON,
    assert_ok,
    background,
    by_request,
    call,
    gated,
    last_call,
    new_calls,
)
from tests.editor_client import allow, deny, disconnect, editor, never
from tests.helpers import Daemon, error_of, http_agent, mcphost

pytestmark = pytest.mark.asyncio(loop_scope="package")  # the shared daemon (conftest.py) lives there

OPENAI_KEY = "sk-live-" + "4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


async def test_write_and_destructive_calls_prompt_and_read_calls_never_do(shared: Daemon) -> None:
    async with editor(shared.editor_socket, allow()) as ed, http_agent(shared.url, shared.headers) as client:
        assert_ok(await call(client, "read", "read_notes"))
        assert ed.prompts == []
        assert last_call(shared.box)["decision"]["by"] == "policy"
        assert_ok(await call(client, "write", "plain_echo"))
        assert_ok(await call(client, "destructive", "wipe_notes"))
    assert [(q["tool"], q["variant"], q["operation"], q["action"]) for q in ed.prompts] == [
        ("plain_echo", "call_tool_write", "write", "ask"),
        ("wipe_notes", "call_tool_destructive", "destructive", "confirm"),
    ]


async def test_prompt_carries_what_a_person_needs_with_secrets_redacted(shared: Daemon) -> None:
    secret_args = {"text": "rotate it", "api_key": OPENAI_KEY, "note": f"use Authorization: Bearer {GITHUB_TOKEN}"}
    async with editor(shared.editor_socket, allow()) as ed, http_agent(shared.url, shared.headers) as client:
        sent = datetime.now(UTC)
        assert_ok(
            await call(
                client, "destructive", "wipe_notes", secret_args, reason="clean up the notebook", sensitivity="private"
            )
        )
        assert_ok(await call(client, "write", "read_notes", reason="a write on a read-only tool"))
    destructive, on_read_only = ed.prompts
    PermissionRequest.model_validate(destructive)  # the payload is the documented one
    assert destructive["server"] == "probe" and destructive["tool"] == "wipe_notes"
    assert destructive["variant"] == "call_tool_destructive"
    assert destructive["operation"] == "destructive" and destructive["action"] == "confirm"
    assert destructive["intent"] == {
        "operation_type": "destructive",
        "reason": "clean up the notebook",
        "data_sensitivity": "private",
    }
    assert destructive["annotations"].get("destructiveHint") is True
    assert destructive["call_with"] == "call_tool_destructive"
    # Secrets never reach the editor: by key, and by the shape of the value.
    arguments = destructive["arguments"]
    assert arguments["text"] == "rotate it"
    assert arguments["api_key"] == "[REDACTED]"
    assert "[REDACTED" in arguments["note"]
    assert OPENAI_KEY not in json.dumps(destructive) and GITHUB_TOKEN not in json.dumps(destructive)
    expires = datetime.fromisoformat(destructive["expires_at"])
    assert sent + timedelta(seconds=290) < expires < datetime.now(UTC) + timedelta(seconds=310)
    # No session over stateless HTTP: no "session" (test_relay has an agent with one); destructive never offers
    # "always" by default.
    assert destructive["remember_options"] == ["once"]
    assert destructive["warnings"] == []
    assert on_read_only["remember_options"] == ["once", "always"]
    assert on_read_only["annotations"].get("readOnlyHint") is True and on_read_only["call_with"] == "call_tool_read"
    assert any("read-only" in w for w in on_read_only["warnings"]), on_read_only["warnings"]


async def test_allow_lets_the_call_through_and_records_who_decided(shared: Daemon) -> None:
    async with (
        editor(shared.editor_socket, allow(), name="alice-editor") as ed,
        http_agent(shared.url, shared.headers) as client,
    ):
        result = await call(client, "write", "plain_echo", {"text": "approved"})
    assert_ok(result)
    assert "plain_echo: approved" in result.content[0].text
    record = last_call(shared.box)
    assert record["status"] == "success"
    decision = record["decision"]
    assert decision["by"] == "editor" and decision["outcome"] == "allow" and decision["action"] == "ask"
    assert decision["remember"] == "once"
    assert decision["approver"].startswith("alice-editor")
    assert isinstance(decision["wait_ms"], int | float) and decision["wait_ms"] >= 0
    assert len(ed.prompts) == 1


async def test_deny_ends_the_call_as_permission_denied(shared: Daemon) -> None:
    async with (
        editor(shared.editor_socket, deny(), name="bob-editor") as ed,
        http_agent(shared.url, shared.headers) as c,
    ):
        result = await call(c, "write", "plain_echo", {"text": "nope"})
    error = error_of(result)
    assert error["code"] == "PERMISSION_DENIED"
    assert "bob-editor" in error["message"] and error["details"]["denied_by"] == "editor"
    record = last_call(shared.box)
    assert record["status"] == "denied"
    assert record["decision"]["by"] == "editor" and record["decision"]["outcome"] == "deny"
    assert record["error"]["code"] == "PERMISSION_DENIED"
    assert len(ed.prompts) == 1


async def test_first_answer_wins_and_the_other_editor_is_told_to_withdraw(shared: Daemon) -> None:
    before = len(shared.box.tool_calls())
    async with (
        editor(shared.editor_socket, never(), name="slow-editor") as slow,
        editor(shared.editor_socket, allow(), name="fast-editor") as fast,
        http_agent(shared.url, shared.headers) as client,
    ):
        assert_ok(await call(client, "write", "plain_echo"))
        await slow.wait_for(lambda: bool(slow.cancelled), SOON)
    assert slow.prompts[0]["id"] == fast.prompts[0]["id"]
    assert slow.cancelled == [slow.prompts[0]["id"]]
    assert fast.cancelled == []
    (record,) = new_calls(shared.box, before)
    assert record["decision"]["approver"].startswith("fast-editor")


async def test_an_editor_attaching_while_a_prompt_waits_gets_it_too(shared: Daemon) -> None:
    async with (
        editor(shared.editor_socket, never(), name="first") as first,
        http_agent(shared.url, shared.headers) as client,
        background() as calls,
    ):
        calls.start("write", lambda: call(client, "write", "plain_echo"))
        await first.wait_for(lambda: bool(first.prompts), SOON)
        async with editor(shared.editor_socket, allow(), name="latecomer") as late:
            assert_ok(await calls.result("write"))
        await first.wait_for(lambda: bool(first.cancelled), SOON)
    assert late.prompts[0]["id"] == first.prompts[0]["id"]
    assert last_call(shared.box)["decision"]["approver"].startswith("latecomer")


async def test_concurrent_prompts_are_independent(shared: Daemon) -> None:
    release = asyncio.Event()
    answer = by_request(lambda q: gated(release) if q["arguments"]["text"] == "held" else allow())
    async with (
        editor(shared.editor_socket, answer) as ed,
        http_agent(shared.url, shared.headers) as slow_agent,
        http_agent(shared.url, shared.headers) as quick_agent,
        background() as calls,
    ):
        calls.start("held", lambda: call(slow_agent, "write", "plain_echo", {"text": "held"}))
        await ed.wait_for(lambda: len(ed.prompts) == 1, SOON)
        with anyio.fail_after(SOON):
            assert_ok(await call(quick_agent, "write", "plain_echo", {"text": "quick"}))
        assert not calls.finished("held")
        status = await ed.request(p.STATUS)
        assert status["pending"] == 1 and status["prompts"][0]["id"] == ed.prompts[0]["id"]
        release.set()
        assert_ok(await calls.result("held"))
    assert [q["arguments"]["text"] for q in ed.prompts] == ["held", "quick"]


async def test_a_prompt_survives_one_editor_disconnecting_when_another_is_attached(shared: Daemon) -> None:
    release = asyncio.Event()
    async with (
        editor(shared.editor_socket, never(), name="crashing") as crashing,
        editor(shared.editor_socket, gated(release), name="steady") as steady,
        http_agent(shared.url, shared.headers) as client,
        background() as calls,
    ):
        calls.start("write", lambda: call(client, "write", "plain_echo"))
        await steady.wait_for(lambda: bool(steady.prompts) and bool(crashing.prompts), SOON)
        await disconnect(crashing)
        await steady.wait_for(lambda: len(steady.statuses[-1]["editors"]) == 1, SOON)
        assert not calls.finished("write")
        release.set()
        assert_ok(await calls.result("write"))
    assert last_call(shared.box)["decision"]["approver"].startswith("steady")


async def test_the_sole_editor_disconnecting_ends_the_call_with_no_approver(shared: Daemon) -> None:
    async with (
        editor(shared.editor_socket, never(), name="leaving") as ed,
        http_agent(shared.url, shared.headers) as client,
        background() as calls,
    ):
        calls.start("write", lambda: call(client, "write", "plain_echo"))
        await ed.wait_for(lambda: bool(ed.prompts), SOON)
        await disconnect(ed)
        error = error_of(await calls.result("write"))
    assert error["code"] == "NO_APPROVER"
    assert "disconnected" in error["message"]
    record = last_call(shared.box)
    assert record["status"] == "denied" and record["decision"]["by"] == "no_approver"


async def test_no_editor_attached_denies_at_once(shared: Daemon) -> None:
    async with http_agent(shared.url, shared.headers) as client:
        with anyio.fail_after(SOON):  # not the 300 s prompt_timeout
            error = error_of(await call(client, "write", "plain_echo"))
    assert error["code"] == "NO_APPROVER"
    assert "nobody is attached" in error["message"] and "mcphost approve" in error["message"]
    record = last_call(shared.box)
    assert record["status"] == "denied" and record["decision"]["by"] == "no_approver"


async def test_status_shows_editors_and_waiting_prompts(shared: Daemon) -> None:
    release = asyncio.Event()
    async with (
        editor(shared.editor_socket, gated(release), name="watcher") as ed,
        http_agent(shared.url, shared.headers) as client,
        background() as calls,
    ):
        status = p.StatusPayload.model_validate(await ed.request(p.STATUS))
        assert status.pid == shared.process.pid
        assert status.mcp.url == shared.url and status.mcp.headers == shared.headers
        assert status.config_path == str(shared.box.config)
        assert [e.name for e in status.editors] == ["watcher 1"]
        assert status.pending == 0 and [s.name for s in status.servers] == ["probe"]
        assert ed.statuses, "a status notification arrives on attach"

        calls.start("write", lambda: call(client, "write", "plain_echo"))
        await ed.wait_for(lambda: ed.statuses[-1]["pending"] == 1, SOON)  # notified on change
        waiting = p.StatusPayload.model_validate(await ed.request(p.STATUS))
        assert waiting.pending == 1 and waiting.prompts[0].tool == "plain_echo"

        cli = await anyio.to_thread.run_sync(mcphost, shared.box, "status", "-o", "json")
        assert cli.returncode == 0, cli.stderr
        (report,) = json.loads(cli.stdout)["daemons"]
        assert report["pid"] == shared.process.pid and report["mcp"]["url"] == shared.url
        assert report["pending"] == 1 and [e["name"] for e in report["editors"]] == ["watcher 1"]

        release.set()
        assert_ok(await calls.result("write"))
        await ed.wait_for(lambda: ed.statuses[-1]["pending"] == 0, SOON)


async def test_every_tool_call_record_reaches_the_editor_as_activity(shared: Daemon) -> None:
    before = len(shared.box.tool_calls())
    async with editor(shared.editor_socket, allow()) as ed, http_agent(shared.url, shared.headers) as client:
        assert_ok(await call(client, "read", "read_notes"))
        assert_ok(await call(client, "write", "plain_echo"))
        error_of(await call(client, "read", "wipe_notes"))  # SERVER_MISMATCH: recorded too
        records = new_calls(shared.box, before)
        assert len(records) == 3
        ids = [r["id"] for r in records]

        def seen() -> list[Any]:
            return [a for a in ed.activity if a["type"] == "tool_call"]

        await ed.wait_for(lambda: len(seen()) >= 3, SOON)
    assert [a["id"] for a in seen()] == ids
    assert [a["status"] for a in seen()] == ["success", "success", "rejected"]
    assert seen()[1]["decision"]["by"] == "editor"


async def test_the_activity_an_editor_is_told_is_each_record_as_the_log_has_it(shared: Daemon) -> None:
    # The notification carries the record's line as written: redacted, every character as the log keeps it.
    before = len(shared.box.tool_calls())
    text = f"naïve ✓ \x1b[31mred\x1b[0m Authorization: Bearer {GITHUB_TOKEN} 「引用」"
    async with editor(shared.editor_socket, allow()) as ed, http_agent(shared.url, shared.headers) as client:
        assert_ok(await call(client, "read", "read_notes", {"text": text}, reason=f"token {GITHUB_TOKEN}"))
        assert_ok(await call(client, "write", "plain_echo", {"text": text, "api_key": OPENAI_KEY}))
        records = new_calls(shared.box, before)
        ids = {r["id"] for r in records}

        def seen() -> list[Any]:
            return [a for a in ed.activity if a.get("id") in ids]

        await ed.wait_for(lambda: len(seen()) >= 2, SOON)
    assert seen() == records
    told = json.dumps(seen(), ensure_ascii=False)
    assert GITHUB_TOKEN not in told and OPENAI_KEY not in told
    assert [a["arguments"]["text"] for a in seen()] == [text.replace(GITHUB_TOKEN, "[REDACTED:github]")] * 2
