"""`mcphost serve`: the agent endpoint over streamable HTTP on loopback, behind a bearer token and an Origin check."""

from __future__ import annotations

import json
import stat
import sys

import anyio
import anyio.to_thread
import httpx2

from tests.helpers import Sandbox, agent, daemon, error_of, http_agent, http_probe, text_of

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_agent_calls_through_the_daemon_over_http(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        assert d.url.startswith("http://127.0.0.1:")
        async with http_agent(d.url, d.headers) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"retrieve_tools", "call_tool_read", "call_tool_write", "call_tool_destructive"}
            ok = await client.call_tool(
                "call_tool_read",
                {"name": "probe:read_notes", "args": {"text": "hi"}, "intent": {"operation_type": "read"}},
            )
            assert text_of(ok) == "read_notes: hi"
            bad = await client.call_tool(
                "call_tool_read", {"name": "probe:wipe_notes", "intent": {"operation_type": "read"}}
            )
            assert error_of(bad)["code"] == "SERVER_MISMATCH"
    assert [c["status"] for c in sandbox.tool_calls()] == ["success", "rejected"]


async def test_http_sessions_keep_one_id_per_agent(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    call = {"name": "probe:read_notes", "intent": {"operation_type": "read"}}
    async with daemon(sandbox) as d:
        for _ in range(2):
            async with http_agent(d.url, d.headers, mode="legacy") as client:
                await client.call_tool("call_tool_read", call)
                await client.call_tool("call_tool_read", call)
    ids = [c["session_id"] for c in sandbox.tool_calls()]
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]


async def test_discovery_file_is_private_and_removed_on_exit(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        files = list((sandbox.root / "run").glob("daemon-*.json"))
        mode = stat.S_IMODE(files[0].stat().st_mode)
        assert mode == 0o600
        assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700
        d.process.terminate()
        await anyio.to_thread.run_sync(d.process.wait, 15)
    assert not list((sandbox.root / "run").glob("daemon-*.json"))


async def test_requests_without_the_token_are_refused(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d, httpx2.AsyncClient() as http:
        missing = await http.post(d.url, json=INIT, headers=MCP_HEADERS)
        wrong = await http.post(d.url, json=INIT, headers={**MCP_HEADERS, "Authorization": "Bearer nope"})
        right = await http.post(d.url, json=INIT, headers={**MCP_HEADERS, **d.headers})
    assert missing.status_code == 401
    assert wrong.status_code == 401
    assert "WWW-Authenticate" in missing.headers
    assert right.status_code == 200


async def test_foreign_origins_and_hosts_are_refused_even_with_the_token(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d, httpx2.AsyncClient() as http:
        evil_origin = await http.post(
            d.url, json=INIT, headers={**MCP_HEADERS, **d.headers, "Origin": "https://evil.example"}
        )
        rebinding = await http.post(d.url, json=INIT, headers={**MCP_HEADERS, **d.headers, "Host": "evil.example"})
        local_origin = await http.post(
            d.url, json=INIT, headers={**MCP_HEADERS, **d.headers, "Origin": d.url.rsplit("/", 1)[0]}
        )
    assert evil_origin.status_code == 403
    assert rebinding.status_code in (403, 421)
    assert local_origin.status_code == 200


async def test_daemon_listens_on_loopback_only(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        port = int(d.url.split(":")[2].split("/")[0])
        if sys.platform.startswith("linux"):
            listening = {
                line.split()[1]
                for line in open("/proc/net/tcp", encoding="utf-8").read().splitlines()[1:]
                if line.split()[3] == "0A"
            }
            assert f"0100007F:{port:04X}" in listening
            assert f"00000000:{port:04X}" not in listening


async def test_stdio_agent_reaches_an_http_upstream_with_headers_from_the_config(sandbox: Sandbox) -> None:
    async with http_probe() as url:
        sandbox.write_config(
            f'[permissions]\nwrite = "allow"\n[servers.remote]\nurl = "{url}"\n'
            'headers = { Authorization = "Bearer upstream-secret" }\n'
        )
        async with agent(sandbox) as client:
            result = await client.call_tool(
                "call_tool_write", {"name": "remote:whoami", "intent": {"operation_type": "write"}}
            )
            assert json.loads(text_of(result))["authorization"] == "Bearer upstream-secret"
        assert "upstream-secret" not in sandbox.log.read_text(encoding="utf-8")
