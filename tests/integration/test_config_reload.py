"""Hot reload: a person edits config.toml while an agent keeps working through the same session."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio

from tests.helpers import Sandbox, agent, daemon, error_of, http_agent, records_of, text_of
from tests.helpers import poll as wait_for

BASE = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'


def intent(op: str) -> dict[str, Any]:
    return {"operation_type": op}


async def test_flipping_strict_validation_applies_to_the_next_call_of_an_open_session(sandbox: Sandbox) -> None:
    probe = sandbox.probe_server()
    sandbox.write_config(BASE + probe)
    async with agent(sandbox) as client:
        call = {"name": "probe:wipe_notes", "args": {"text": "x"}, "intent": intent("read")}
        assert error_of(await client.call_tool("call_tool_read", call))["code"] == "SERVER_MISMATCH"

        sandbox.write_config(BASE + "[intent_declaration]\nstrict_server_validation = false\n" + probe)
        reload = await wait_for(lambda: records_of(sandbox, "config_reload"), "the reload record")
        assert reload[0]["details"]["changed"] == ["intent_declaration.strict_server_validation"]
        assert reload[0]["details"]["servers_restarted"] == []

        lenient = await client.call_tool("call_tool_read", call)
        assert not lenient.is_error and "mcphost warning:" in text_of(lenient)

        sandbox.write_config(BASE + probe)
        await wait_for(lambda: len(records_of(sandbox, "config_reload")) == 2, "the second reload")
        assert error_of(await client.call_tool("call_tool_read", call))["code"] == "SERVER_MISMATCH"
    assert len(records_of(sandbox, "upstream_connected")) == 1, "the upstream was never restarted"


async def test_servers_are_added_and_removed_live_and_the_others_stay_up(sandbox: Sandbox) -> None:
    sandbox.write_config(BASE + sandbox.probe_server())
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as client:
        # whoami has no annotations: a write, so that no "treated as write" warning joins its answer
        who = {"name": "probe:whoami", "intent": intent("write")}
        pid = json.loads(text_of(await client.call_tool("call_tool_write", who)))["pid"]

        sandbox.write_config(BASE + sandbox.probe_server() + sandbox.probe_server("second"))
        await wait_for(lambda: records_of(sandbox, "config_reload"), "the reload")
        found = json.loads(text_of(await client.call_tool("retrieve_tools", {"query": "read notes notebook"})))
        assert "second:read_notes" in {t["name"] for t in found["tools"]}
        echoed = await client.call_tool(
            "call_tool_read", {"name": "second:read_notes", "args": {"text": "hi"}, "intent": intent("read")}
        )
        assert text_of(echoed) == "read_notes: hi"

        sandbox.write_config(BASE + sandbox.probe_server())
        await wait_for(lambda: len(records_of(sandbox, "config_reload")) == 2, "the second reload")
        gone = await client.call_tool("call_tool_read", {"name": "second:read_notes", "intent": intent("read")})
        assert "there is no server 'second'" in error_of(gone)["message"]
        assert json.loads(text_of(await client.call_tool("call_tool_write", who)))["pid"] == pid
        assert "config reloaded" in d.stderr and "servers added: second" in d.stderr
    reloads = records_of(sandbox, "config_reload")
    assert reloads[0]["details"]["servers_added"] == ["second"]
    assert reloads[1]["details"]["servers_removed"] == ["second"]


async def test_a_broken_save_keeps_the_last_good_config_until_it_is_fixed(sandbox: Sandbox) -> None:
    sandbox.write_config(BASE + sandbox.probe_server())
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as client:
        call = {"name": "probe:plain_echo", "args": {"text": "x"}, "intent": intent("write")}

        sandbox.write_config(BASE + '[permissions\nwrite = "deny"\n' + sandbox.probe_server())
        first = await wait_for(lambda: records_of(sandbox, "config_error"), "the syntax error record")
        assert first[0]["details"]["errors"][0]["line"] == 5
        assert "TOML syntax error" in first[0]["details"]["errors"][0]["message"]
        assert not (await client.call_tool("call_tool_write", call)).is_error, "still the last good config"

        sandbox.write_config(BASE.replace('write = "allow"', 'write = "never"') + sandbox.probe_server())
        second = await wait_for(lambda: records_of(sandbox, "config_error")[1:], "the schema error record")
        error = second[0]["details"]["errors"][0]
        assert (error["path"], error["line"], error["column"]) == ("permissions.write", 3, 1)
        assert "'allow', 'ask', 'confirm' or 'deny'" in error["message"]
        assert not (await client.call_tool("call_tool_write", call)).is_error
        await wait_for(lambda: "permissions.write" in d.stderr, "the error on stderr")
        assert "the last good config stays in force" in d.stderr

        sandbox.write_config(BASE.replace('write = "allow"', 'write = "deny"') + sandbox.probe_server())
        fixed = await wait_for(lambda: records_of(sandbox, "config_reload"), "the reload after the fix")
        assert fixed[0]["details"]["cleared_error"] is True
        assert error_of(await client.call_tool("call_tool_write", call))["code"] == "PERMISSION_DENIED"


async def test_saves_by_rename_and_delete_then_recreate_are_both_seen(sandbox: Sandbox) -> None:
    probe = sandbox.probe_server()
    sandbox.write_config(BASE + probe)
    async with agent(sandbox) as client:
        call = {"name": "probe:plain_echo", "args": {"text": "x"}, "intent": intent("write")}
        # How vim, VS Code and most editors save: write a temporary file, rename it over the original.
        temp = sandbox.root / ".config.toml.swp"
        temp.write_text(BASE.replace('write = "allow"', 'write = "deny"') + probe, encoding="utf-8")
        temp.replace(sandbox.config)
        await wait_for(lambda: records_of(sandbox, "config_reload"), "the reload after a rename")
        assert error_of(await client.call_tool("call_tool_write", call))["code"] == "PERMISSION_DENIED"

        sandbox.config.unlink()
        await anyio.sleep(0.3)  # a deletion is not a config: nothing may change while the file is gone
        assert error_of(await client.call_tool("call_tool_write", call))["code"] == "PERMISSION_DENIED"
        assert len(records_of(sandbox, "config_reload")) == 1

        sandbox.write_config(BASE + probe)
        await wait_for(lambda: len(records_of(sandbox, "config_reload")) == 2, "the reload after recreation")
        assert not (await client.call_tool("call_tool_write", call)).is_error


async def test_a_burst_of_saves_ends_on_the_last_one(sandbox: Sandbox) -> None:
    probe = sandbox.probe_server()
    sandbox.write_config(BASE + probe)
    async with agent(sandbox) as client:
        call = {"name": "probe:plain_echo", "args": {"text": "x"}, "intent": intent("write")}
        assert not (await client.call_tool("call_tool_write", call)).is_error
        # No bound on how long the 50 saves take: on a loaded machine this loop is slow, and the promise (the last
        # save is the one in force, and nothing undoes it) does not depend on its speed.
        for i in range(50):
            verdict = "allow" if i % 2 == 0 else "deny"  # the last, 49, denies
            text = BASE.replace('write = "allow"', f'write = "{verdict}"') + f"# save {i}\n" + probe
            sandbox.write_config(text)
            await anyio.sleep(0.018)
        last = hashlib.sha256(text.encode("utf-8")).hexdigest()
        await wait_for(
            lambda: [r for r in records_of(sandbox, "config_reload") if r["details"]["sha256"] == last],
            "the reload of the last save",
        )
        await anyio.sleep(0.3)  # nothing later may come along and undo it
        assert records_of(sandbox, "config_reload")[-1]["details"]["sha256"] == last
        assert error_of(await client.call_tool("call_tool_write", call))["code"] == "PERMISSION_DENIED"


async def test_a_call_under_way_finishes_on_the_upstream_it_started_on_while_a_change_restarts_it(
    sandbox: Sandbox,
) -> None:
    sandbox.write_config(BASE + sandbox.probe_server())
    started, gate = sandbox.root / "started", sandbox.root / "gate"
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as client:
        # whoami has no annotations: a write, so that no "treated as write" warning joins its answer
        who = {"name": "probe:whoami", "intent": intent("write")}
        old_pid = json.loads(text_of(await client.call_tool("call_tool_write", who)))["pid"]
        slow_result: list[Any] = []

        async def slow_call() -> None:
            args = {"started": str(started), "gate": str(gate)}
            call = {"name": "probe:slow", "args": args, "intent": intent("read")}
            slow_result.append(await client.call_tool("call_tool_read", call))

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            await wait_for(started.exists, "the slow call to reach the upstream")
            sandbox.write_config(BASE + sandbox.probe_server(extra="call_timeout = 120"))
            reload = await wait_for(lambda: records_of(sandbox, "config_reload"), "the reload")
            assert reload[0]["details"]["servers_restarted"] == ["probe"]
            new_pid = json.loads(text_of(await client.call_tool("call_tool_write", who)))["pid"]
            assert new_pid != old_pid, "new calls go to the restarted server"
            gate.touch()
        assert not slow_result[0].is_error, text_of(slow_result[0])
        assert json.loads(text_of(slow_result[0]))["pid"] == old_pid, "the call finished where it started"
