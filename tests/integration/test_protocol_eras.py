"""Both protocol eras on both sides: upstreams that speak only 2026-07-28 (no initialize handshake) or only the
handshake, and agents on either era on every door (stdio in-process, the relay, HTTP)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcphost.upstream.connection import State
from tests.editor_client import allow, editor
from tests.helpers import (
    Daemon,
    Hostile,
    Sandbox,
    agent,
    daemon,
    error_of,
    http_probe,
    mcphost,
    poll,
    raw_agent,
    records_of,
    running,
    text_of,
)

MODERN = "2026-07-28"
ALLOW_ALL = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'


def modern_only_probe(box: Sandbox, extra: str = "") -> str:
    return box.probe_server(extra=extra, flags=("--modern-only",))


def read_call(name: str, text: str = "hi") -> dict[str, object]:
    return {"name": name, "args": {"text": text}, "intent": {"operation_type": "read"}}


async def test_a_stdio_upstream_that_refuses_the_handshake_is_spoken_to_in_2026_07_28(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + modern_only_probe(sandbox))
    async with agent(sandbox) as client:
        result = await client.call_tool("call_tool_read", read_call("probe:read_notes", "modern"))
    assert not result.is_error, text_of(result)
    assert text_of(result) == "read_notes: modern"
    (connected,) = records_of(sandbox, "upstream_connected")
    assert connected["details"]["protocol"] == MODERN


async def test_the_modern_only_probe_really_refuses_a_legacy_client(sandbox: Sandbox) -> None:
    # The test above proves something only if the server would have refused the old handshake.
    sandbox.write_config(ALLOW_ALL + modern_only_probe(sandbox, extra='protocol = "legacy"\nconnect_timeout = 5'))
    async with agent(sandbox) as client:
        error = error_of(await client.call_tool("call_tool_read", read_call("probe:read_notes")))
    assert error["code"] == "UPSTREAM_ERROR"
    assert "2026-07-28 only" in error["message"]
    assert not records_of(sandbox, "upstream_connected")


async def test_an_http_upstream_that_refuses_the_handshake_is_spoken_to_in_2026_07_28(sandbox: Sandbox) -> None:
    async with http_probe("--modern-only") as url:
        sandbox.write_config(ALLOW_ALL + f'[servers.remote]\nurl = "{url}"\n')
        async with agent(sandbox) as client:
            result = await client.call_tool("call_tool_read", read_call("remote:read_notes", "over http"))
            assert text_of(result) == "read_notes: over http"
            # A write goes through the SDK session's path (stdio upstreams have a raw lane; HTTP ones do not).
            wrote = await client.call_tool(
                "call_tool_write", {"name": "remote:plain_echo", "intent": {"operation_type": "write"}}
            )
            assert not wrote.is_error, text_of(wrote)
    (connected,) = records_of(sandbox, "upstream_connected")
    assert connected["details"]["protocol"] == MODERN


async def test_a_2026_upstream_announces_changed_annotations_through_subscriptions_listen(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + modern_only_probe(sandbox))
    async with agent(sandbox) as client:
        first = await client.call_tool("call_tool_read", {"name": "probe:shifty", "intent": {"operation_type": "read"}})
        assert not first.is_error, text_of(first)
        changed = await client.call_tool(
            "call_tool_write",
            {
                "name": "probe:set_shifty",
                "args": {"annotations": {"destructiveHint": True}},
                "intent": {"operation_type": "write"},
            },
        )
        assert not changed.is_error, text_of(changed)
        # No call re-reads the list (the cached definition is trusted for a call it makes stricter); only the
        # listen stream's event can bring the change in.
        with anyio.fail_after(10):
            while not records_of(sandbox, "annotations_changed"):  # noqa: ASYNC110 - another process writes it
                await anyio.sleep(0.05)
        again = await client.call_tool("call_tool_read", {"name": "probe:shifty", "intent": {"operation_type": "read"}})
    assert error_of(again)["code"] == "SERVER_MISMATCH"
    (change,) = records_of(sandbox, "annotations_changed")
    assert change["tool"] == "shifty" and change["details"]["new"] == {"destructiveHint": True}


async def test_a_handshake_only_stdio_upstream_is_spoken_to_with_initialize_and_never_probed(tmp_path: Path) -> None:
    hostile = Hostile(tmp_path)
    async with running(hostile.config()) as server:
        assert server.state is State.CONNECTED, server.last_error
        assert server.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        result = await server.call_tool("echo", {"text": "old school"})
    assert result.data["content"][0]["text"] == "old school"
    assert hostile.requests("server/discover") == 0
    assert hostile.requests("initialize") == 1


async def protocol_spoken(sandbox: Sandbox, server: str, tool: str) -> str:
    """The revision mcphost negotiated with the one upstream in `server` (a [servers.*] table), once a read call
    through it has worked."""
    sandbox.write_config(ALLOW_ALL + server)
    async with agent(sandbox) as client:
        result = await client.call_tool("call_tool_read", read_call(tool, "era"))
    assert text_of(result) == "read_notes: era"
    (connected,) = records_of(sandbox, "upstream_connected")
    return str(connected["details"]["protocol"])


async def test_a_stdio_upstream_of_both_eras_is_spoken_to_after_the_handshake(sandbox: Sandbox) -> None:
    # On a pipe of its own the 2026 era's statelessness buys nothing, and its per-request envelope costs the server
    # on every call: `auto` takes the handshake first there.
    assert await protocol_spoken(sandbox, sandbox.probe_server(), "probe:read_notes") in HANDSHAKE_PROTOCOL_VERSIONS


async def test_an_http_upstream_of_both_eras_is_spoken_to_in_2026_07_28(sandbox: Sandbox) -> None:
    async with http_probe() as url:
        spoken = await protocol_spoken(sandbox, f'[servers.remote]\nurl = "{url}"\n', "remote:read_notes")
    assert spoken == MODERN


async def test_a_stdio_upstream_pinned_to_2026_07_28_is_spoken_to_in_it(sandbox: Sandbox) -> None:
    pinned = sandbox.probe_server(extra='protocol = "2026-07-28"')
    assert await protocol_spoken(sandbox, pinned, "probe:read_notes") == MODERN


async def test_a_server_pinned_to_legacy_is_never_probed(tmp_path: Path) -> None:
    hostile = Hostile(tmp_path)
    async with running(hostile.config(protocol="legacy")) as server:
        assert server.state is State.CONNECTED, server.last_error
    assert hostile.requests("server/discover") == 0
    assert hostile.requests("initialize") == 1


# ---- agents of either era, on every door


@asynccontextmanager
async def daemon_with(tmp_path_factory: pytest.TempPathFactory, permissions: str) -> AsyncIterator[Daemon]:
    box = Sandbox(tmp_path_factory.mktemp("eras"))
    box.write_config(f"[permissions]\n{permissions}\n" + box.probe_server())
    async with daemon(box) as d:
        yield d


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Daemon]:
    async with daemon_with(tmp_path_factory, 'write = "ask"') as d:
        yield d


@asynccontextmanager
async def agent_on(door: str, d: Daemon, mode: str, **client: Any) -> AsyncIterator[Client]:
    """The official SDK client in `mode`, reaching mcphost through `door`."""
    if door == "http":
        http = create_mcp_http_client(headers=d.headers)
        async with http, Client(streamable_http_client(d.url, http_client=http), mode=mode, cache=None, **client) as c:
            yield c
        return
    extra = ["--in-process"] if door == "in-process" else []
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcphost", "mcp", "--config", str(d.box.config), *extra],
        env=d.box.env(),
    )
    async with Client(params, mode=mode, cache=None, **client) as c:
        yield c


DOORS = ["in-process", "relay", "http"]
ERAS = ["legacy", MODERN]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("door", DOORS)
async def test_an_agent_of_either_era_works_on_every_door(shared: Daemon, door: str, mode: str) -> None:
    box = shared.box
    async with editor(shared.editor_socket, allow()) as ed, agent_on(door, shared, mode) as client:
        expected = MODERN if mode == MODERN else None
        assert client.protocol_version == expected or (expected is None and client.protocol_version < MODERN)
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"retrieve_tools", "call_tool_read", "call_tool_write", "call_tool_destructive"}
        found = json.loads(text_of(await client.call_tool("retrieve_tools", {"query": "erase notes"})))
        assert found["tools"][0]["name"] == "probe:wipe_notes"
        read = await client.call_tool("call_tool_read", read_call("probe:read_notes", f"{door} {mode}"))
        assert text_of(read) == f"read_notes: {door} {mode}"
        mismatch = await client.call_tool("call_tool_read", read_call("probe:wipe_notes"))
        assert error_of(mismatch)["code"] == "SERVER_MISMATCH"
        prompts = len(ed.prompts)
        wrote = await client.call_tool(
            "call_tool_write",
            {"name": "probe:plain_echo", "args": {"text": "asked"}, "intent": {"operation_type": "write"}},
        )
        if door == "in-process":
            # Its own process decides, and no editor can attach to it: nobody is there to ask.
            assert error_of(wrote)["code"] == "NO_APPROVER"
        else:
            assert text_of(wrote) == "plain_echo: asked"
            assert len(ed.prompts) == prompts + 1
    calls = box.tool_calls()
    assert calls[-1]["decision"]["by"] == ("no_approver" if door == "in-process" else "editor")
    assert calls[-2]["error"]["code"] == "SERVER_MISMATCH"
    assert calls[-3]["status"] == "success"
    # Records say which agent called, in either era.
    assert all(r.get("client") for r in calls[-3:]), calls[-3:]


# ---- asking through the agent's own client: elicitation, or 2026-07-28's input-required round trip


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def eliciting(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Daemon]:
    async with daemon_with(tmp_path_factory, 'write = "ask"\nno_editor = "elicit"') as d:
        yield d


def user_says(answer: bool, asked: list[str]) -> Any:
    async def callback(_context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": answer})

    return callback


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("door", DOORS)
async def test_the_agents_client_is_asked_in_either_era_on_every_door(eliciting: Daemon, door: str, mode: str) -> None:
    box = eliciting.box
    asked: list[str] = []
    write = {"name": "probe:plain_echo", "args": {"text": f"{door} {mode}"}, "intent": {"operation_type": "write"}}
    async with agent_on(door, eliciting, mode, elicitation_callback=user_says(True, asked)) as client:
        yes = await client.call_tool("call_tool_write", write)
        assert text_of(yes) == f"plain_echo: {door} {mode}"
    assert len(asked) == 1 and "probe:plain_echo" in asked[0]
    calls = box.tool_calls()
    assert calls[-1]["decision"]["by"] == "elicitation" and calls[-1]["decision"]["outcome"] == "allow"
    if mode == MODERN:
        # The first round ended with the question, unforwarded, and is on record as such.
        assert calls[-2]["status"] == "asked" and calls[-2]["arguments"] == {"text": f"{door} {mode}"}
        assert "forwarded" not in calls[-2] or calls[-2]["forwarded"] is False

    async with agent_on(door, eliciting, mode, elicitation_callback=user_says(False, asked)) as client:
        no = await client.call_tool("call_tool_write", write)
    assert error_of(no)["code"] == "PERMISSION_DENIED"
    assert box.tool_calls()[-1]["decision"]["outcome"] == "deny"


ENVELOPE = {
    PROTOCOL_VERSION_META_KEY: MODERN,
    CLIENT_INFO_META_KEY: {"name": "raw-modern", "version": "0"},
    CLIENT_CAPABILITIES_META_KEY: {"elicitation": {"form": {}}},
}
YES = {"mcphost_approval": {"action": "accept", "content": {"approve": True}}}


def modern_write(request_id: int, text: str, **round_trip: Any) -> dict[str, Any]:
    arguments = {"name": "probe:plain_echo", "args": {"text": text}, "intent": {"operation_type": "write"}}
    params = {"name": "call_tool_write", "arguments": arguments, "_meta": ENVELOPE, **round_trip}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def test_an_answer_is_good_for_one_repeat_of_the_same_call_and_cannot_be_forged(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "ask"\nno_editor = "elicit"\n' + sandbox.probe_server())
    async with raw_agent(sandbox, "--in-process") as raw:
        await raw.send(modern_write(1, "one"))
        first = (await raw.answer_to(1, timeout=30))["result"]
        assert first["resultType"] == "input_required"
        question = first["inputRequests"]["mcphost_approval"]
        assert question["method"] == "elicitation/create" and "probe:plain_echo" in question["params"]["message"]
        state = first["requestState"]
        assert "mcphost_approval" not in state and '"q"' not in state  # sealed: the client cannot read it

        await raw.send(modern_write(2, "one", inputResponses=YES, requestState=state))
        answered = (await raw.answer_to(2))["result"]
        assert answered["content"][0]["text"] == "plain_echo: one"

        # The same answer again: spent. The call is asked anew, not let through.
        await raw.send(modern_write(3, "one", inputResponses=YES, requestState=state))
        assert (await raw.answer_to(3))["result"]["resultType"] == "input_required"
        # Carried over to other arguments, or made up: refused by the seal.
        await raw.send(modern_write(4, "two", inputResponses=YES, requestState=state))
        assert (await raw.answer_to(4))["error"]["message"] == "Invalid or expired requestState"
        await raw.send(modern_write(5, "one", inputResponses=YES, requestState='{"q": "x", "n": "y", "t": 0}'))
        assert (await raw.answer_to(5))["error"]["message"] == "Invalid or expired requestState"
        # An answer with no question behind it asks the question.
        await raw.send(modern_write(6, "one", inputResponses=YES))
        assert (await raw.answer_to(6))["result"]["resultType"] == "input_required"
    forwarded = [r for r in sandbox.tool_calls() if r["status"] == "success"]
    assert len(forwarded) == 1
    assert {r["client"] for r in sandbox.tool_calls()} == {"raw-modern 0"}


async def test_an_answer_given_after_prompt_timeout_expires_the_call(sandbox: Sandbox) -> None:
    sandbox.write_config(
        '[permissions]\nwrite = "ask"\nno_editor = "elicit"\nprompt_timeout = 0.2\n' + sandbox.probe_server()
    )
    async with raw_agent(sandbox, "--in-process") as raw:
        await raw.send(modern_write(1, "late"))
        state = (await raw.answer_to(1, timeout=30))["result"]["requestState"]
        await anyio.sleep(0.3)  # the person takes longer than the prompt may wait
        await raw.send(modern_write(2, "late", inputResponses=YES, requestState=state))
        answer = (await raw.answer_to(2))["result"]
    assert answer["isError"] and answer["structuredContent"]["error"]["code"] == "APPROVAL_TIMEOUT"
    record = sandbox.tool_calls()[-1]
    assert record["status"] == "expired" and record["decision"]["wait_ms"] >= 300


@pytest.mark.asyncio(loop_scope="module")
async def test_status_says_which_revision_each_upstream_speaks(shared: Daemon) -> None:
    def connected() -> dict[str, Any] | None:
        shown = mcphost(shared.box, "status", "-o", "json")
        assert shown.returncode == 0, shown.stderr
        (report,) = json.loads(shown.stdout)["daemons"]
        (server,) = report["servers"]
        return server if server["state"] == "connected" else None

    probe = await poll(connected, "the probe upstream connected", limit=30)
    # A stdio upstream of both eras is spoken to after the handshake (see the tests of `auto` above).
    assert probe["protocol"] in HANDSHAKE_PROTOCOL_VERSIONS
    table = mcphost(shared.box, "status")
    assert probe["protocol"] in table.stdout and "PROTOCOL" in table.stdout
