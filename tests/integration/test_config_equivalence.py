"""A save that changes nothing a server starts with restarts nothing (issue 15). The case a person meets first: a
daemon on the built-in default, then `mcphost config init` writes the starter file, which is that same default."""

from __future__ import annotations

import json

import anyio.to_thread

from tests.helpers import Sandbox, daemon, http_agent, mcphost, poll, records_of, text_of

BASE = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'


async def test_config_init_under_a_daemon_on_the_built_in_default_restarts_no_server(sandbox: Sandbox) -> None:
    assert not sandbox.config.exists()
    async with daemon(sandbox) as d:
        await poll(lambda: records_of(sandbox, "upstream_connected"), "the todo server to start")
        init = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "config", "init"))
        assert init.returncode == 0, init.stderr
        [reload] = await poll(lambda: records_of(sandbox, "config_reload"), "the daemon to take up the new file")
        # A restarted server would have to connect again before this call could be answered.
        call = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "call", "tool-read", "todo:list_tasks"))
        assert call.returncode == 0, call.stderr
    assert reload["details"]["servers_restarted"] == [] and reload["details"]["changed"] == []
    assert reload["details"]["summary"] == "no change in effect"
    assert [r["server"] for r in records_of(sandbox, "upstream_connected")] == ["todo"], "todo was never restarted"
    assert f"config {sandbox.config} is now in force instead of the built-in default: no change in effect" in d.stderr


async def test_naming_the_data_dir_a_server_is_handed_anyway_restarts_nothing(sandbox: Sandbox) -> None:
    sandbox.write_config(BASE + sandbox.probe_server())
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as client:
        who = {"name": "probe:whoami", "intent": {"operation_type": "write"}}
        pid = json.loads(text_of(await client.call_tool("call_tool_write", who)))["pid"]
        same = sandbox.probe_server().replace(
            "env = { ", f"env = {{ MCPHOST_DATA_DIR = {json.dumps(str(sandbox.data))}, "
        )
        assert same != sandbox.probe_server()
        sandbox.write_config(BASE + same)
        [reload] = await poll(lambda: records_of(sandbox, "config_reload"), "the reload")
        assert reload["details"]["servers_restarted"] == [] and reload["details"]["changed"] == []
        assert json.loads(text_of(await client.call_tool("call_tool_write", who)))["pid"] == pid

        # A data dir of its own is a change: the server restarts with it.
        sandbox.write_config(
            BASE + same.replace(json.dumps(str(sandbox.data)), json.dumps(str(sandbox.root / "other")))
        )
        await poll(lambda: len(records_of(sandbox, "config_reload")) == 2, "the second reload")
        assert records_of(sandbox, "config_reload")[-1]["details"]["servers_restarted"] == ["probe"]
        assert json.loads(text_of(await client.call_tool("call_tool_write", who)))["pid"] != pid
