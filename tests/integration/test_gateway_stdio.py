"""The agent's view: the official MCP SDK client drives `mcphost mcp` over stdio against real upstream processes."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest

from tests.helpers import Sandbox, agent, error_of, text_of

ALLOW_ALL = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'


def intent(op: str, **extra: str) -> dict[str, Any]:
    return {"operation_type": op, **extra}


async def test_agent_sees_exactly_four_tools_with_intent_schemas(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with agent(sandbox) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"retrieve_tools", "call_tool_read", "call_tool_write", "call_tool_destructive"}
    for variant in ("call_tool_read", "call_tool_write", "call_tool_destructive"):
        schema = tools[variant].input_schema
        assert {"name", "args_json", "args", "intent"} <= set(schema["properties"])
        assert schema["properties"]["intent"]["properties"]["operation_type"]["enum"] == [
            "read",
            "write",
            "destructive",
        ]
        assert variant.removeprefix("call_tool_") in (tools[variant].description or "")
    assert "Will be rejected if server marks tool as destructive" in (tools["call_tool_read"].description or "")


async def test_retrieve_tools_ranks_and_recommends_a_variant_per_annotation(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with agent(sandbox) as client:
        result = await client.call_tool("retrieve_tools", {"query": "erase notes", "limit": 20})
    answer = json.loads(text_of(result))
    # Compact and ASCII: no layout for the agent's model to read as tokens, and anything hidden shows as an escape.
    assert text_of(result) == json.dumps(answer, separators=(",", ":"))
    assert "call_tool_read" in answer["usage_instructions"]
    by_name = {t["name"]: t for t in answer["tools"]}
    assert answer["tools"][0]["name"] == "probe:wipe_notes"
    assert all(0 <= t["score"] <= 1 for t in answer["tools"])
    scores = [t["score"] for t in answer["tools"]]
    assert scores == sorted(scores, reverse=True)
    wipe = by_name["probe:wipe_notes"]
    assert wipe["annotations"]["destructiveHint"] is True
    assert wipe["call_with"] == "call_tool_destructive"
    assert wipe["server"] == "probe"
    assert wipe["inputSchema"]["properties"]["text"]["type"] == "string"
    assert by_name["probe:read_notes"]["call_with"] == "call_tool_read"


async def test_unannotated_tool_is_recommended_write_and_has_no_annotations(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with agent(sandbox) as client:
        answer = json.loads(text_of(await client.call_tool("retrieve_tools", {"query": "echo text back"})))
    echo = next(t for t in answer["tools"] if t["name"] == "probe:plain_echo")
    assert "annotations" not in echo
    assert echo["call_with"] == "call_tool_write"
    both = json.loads(text_of(await _retrieve(sandbox, "claims read-only destructive")))["tools"]
    assert next(t for t in both if t["name"] == "probe:both_hints")["call_with"] == "call_tool_destructive"


async def _retrieve(sandbox: Sandbox, query: str) -> Any:
    async with agent(sandbox) as client:
        return await client.call_tool("retrieve_tools", {"query": query})


async def test_matrix_end_to_end_through_a_real_upstream(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with agent(sandbox) as client:
        ok = await client.call_tool(
            "call_tool_read", {"name": "probe:read_notes", "args": {"text": "hi"}, "intent": intent("read")}
        )
        assert not ok.is_error and text_of(ok) == "read_notes: hi"
        assert ok.structured_content == {"tool": "read_notes", "text": "hi"}

        rejected = await client.call_tool("call_tool_read", {"name": "probe:wipe_notes", "intent": intent("read")})
        assert error_of(rejected) == {
            "code": "SERVER_MISMATCH",
            "message": "Tool 'probe:wipe_notes' is marked destructive by server, use call_tool_destructive",
            "details": {
                "variant": "call_tool_read",
                "tool": "probe:wipe_notes",
                "recommended_variant": "call_tool_destructive",
            },
        }
        write_on_destructive = await client.call_tool(
            "call_tool_write", {"name": "probe:wipe_notes", "intent": intent("write")}
        )
        assert error_of(write_on_destructive)["code"] == "SERVER_MISMATCH"

        mismatch = await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": intent("write")})
        assert error_of(mismatch)["message"] == "Intent mismatch: tool is call_tool_read but intent declares write"

        destructive = await client.call_tool(
            "call_tool_destructive",
            {"name": "probe:read_notes", "args_json": '{"text": "x"}', "intent": intent("destructive")},
        )
        assert not destructive.is_error

        warned = await client.call_tool(
            "call_tool_write", {"name": "probe:read_notes", "args": {"text": "w"}, "intent": intent("write")}
        )
        assert not warned.is_error
        assert warned.content[-1].text.startswith("mcphost warning:")
        assert "read-only" in warned.content[-1].text

    calls = sandbox.tool_calls()
    assert [c["status"] for c in calls] == ["success", "rejected", "rejected", "rejected", "success", "success"]
    assert len({c["session_id"] for c in calls}) == 1, "one agent connection, one session id"
    assert calls[0]["metadata"] == {
        "tool_variant": "call_tool_read",
        "intent": {"operation_type": "read"},
        "annotations": {"readOnlyHint": True},
        "call_with": "call_tool_read",
    }
    assert calls[0]["arguments"] == {"text": "hi"}
    assert calls[0]["request_bytes"] == len('{"text":"hi"}')
    assert calls[0]["response_bytes"] > 0 and "hi" in calls[0]["response_preview"]
    assert calls[1]["error"]["code"] == "SERVER_MISMATCH"
    assert calls[5]["warnings"] and "read-only" in calls[5]["warnings"][0]
    assert calls[0]["decision"]["by"] == "policy" and calls[0]["decision"]["outcome"] == "allow"


async def test_every_malformed_call_gets_a_contract_error_and_the_session_survives(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("call_tool_read", {"name": "probe:read_notes"}, "MISSING_INTENT"),
        ("call_tool_read", {"name": "probe:read_notes", "intent": {}}, "MISSING_OPERATION_TYPE"),
        ("call_tool_read", {"name": "probe:read_notes", "intent": intent("unknown")}, "INVALID_OPERATION_TYPE"),
        ("call_tool_destructive", {"name": "probe:wipe_notes", "intent": intent("read")}, "INTENT_MISMATCH"),
        (
            "call_tool_read",
            {"name": "probe:read_notes", "intent": intent("read", data_sensitivity="secret")},
            "INVALID_SENSITIVITY",
        ),
        (
            "call_tool_read",
            {"name": "probe:read_notes", "intent": intent("read", reason="r" * 1001)},
            "REASON_TOO_LONG",
        ),
        (
            "call_tool_read",
            {"name": "probe:read_notes", "args_json": "{not json", "intent": intent("read")},
            "INVALID_ARGS",
        ),
        (
            "call_tool_read",
            {"name": "probe:read_notes", "args_json": "[1, 2]", "intent": intent("read")},
            "INVALID_ARGS",
        ),
        (
            "call_tool_read",
            {"name": "probe:read_notes", "args": {}, "args_json": "{}", "intent": intent("read")},
            "INVALID_ARGS",
        ),
        ("call_tool_read", {"name": "probe:read_notes", "args": [1], "intent": intent("read")}, "INVALID_ARGS"),
        ("call_tool_read", {"name": "probe:read_notes", "arguments": {}, "intent": intent("read")}, "INVALID_ARGS"),
        ("call_tool_read", {"intent": intent("read")}, "INVALID_ARGS"),
        ("call_tool_read", {"name": 42, "intent": intent("read")}, "INVALID_ARGS"),
        ("call_tool_read", {"name": "probe:read_nots", "intent": intent("read")}, "TOOL_NOT_FOUND"),
        ("call_tool_read", {"name": "nosuch:tool", "intent": intent("read")}, "TOOL_NOT_FOUND"),
        ("call_tool_read", {"name": "no-colon", "intent": intent("read")}, "TOOL_NOT_FOUND"),
        ("call_tool", {"name": "probe:read_notes"}, "TOOL_NOT_FOUND"),
        ("retrieve_tools", {"query": "x", "limit": "ten"}, "INVALID_ARGS"),
    ]
    async with agent(sandbox) as client:
        for tool, arguments, code in bad:
            result = await client.call_tool(tool, arguments)
            assert error_of(result)["code"] == code, (tool, arguments, text_of(result))
        # The same session still works after all of that.
        ok = await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": intent("read")})
        assert not ok.is_error


async def test_tool_not_found_names_the_closest_match(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with agent(sandbox) as client:
        result = await client.call_tool("call_tool_read", {"name": "probe:read_nots", "intent": intent("read")})
    error = error_of(result)
    assert "probe:read_notes" in error["message"]
    assert error["details"]["closest_matches"][0] == "probe:read_notes"


async def test_legacy_call_tool_answers_with_the_migration_message(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with agent(sandbox) as client:
        result = await client.call_tool("call_tool", {"name": "probe:read_notes", "args_json": "{}"})
    assert text_of(result) == (
        "Tool 'call_tool' not found. Use call_tool_read, call_tool_write, or call_tool_destructive with matching "
        "intent.operation_type. See retrieve_tools for annotations and recommendations."
    )


@pytest.mark.parametrize(
    "shape",
    [
        {"intent": json.dumps({"operation_type": "read", "reason": "as a string"})},
        {"intent_operation_type": "read", "intent_reason": "flat", "intent_data_sensitivity": "public"},
    ],
    ids=["json-string", "flat"],
)
async def test_alternative_intent_shapes_are_accepted_and_recorded(sandbox: Sandbox, shape: dict[str, Any]) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with agent(sandbox) as client:
        ok = await client.call_tool("call_tool_read", {"name": "probe:read_notes", **shape})
        assert not ok.is_error, text_of(ok)
        flat_mismatch = {k: ("write" if k.endswith("operation_type") else v) for k, v in shape.items()}
        if "intent" in shape:
            flat_mismatch = {"intent": json.dumps({"operation_type": "write"})}
        bad = await client.call_tool("call_tool_read", {"name": "probe:read_notes", **flat_mismatch})
        assert error_of(bad)["code"] == "INTENT_MISMATCH"
    assert sandbox.tool_calls()[0]["metadata"]["intent"]["operation_type"] == "read"


async def test_lenient_server_validation_warns_the_agent_and_the_record(sandbox: Sandbox) -> None:
    sandbox.write_config(
        ALLOW_ALL + "[intent_declaration]\nstrict_server_validation = false\n" + sandbox.probe_server()
    )
    async with agent(sandbox) as client:
        result = await client.call_tool("call_tool_read", {"name": "probe:wipe_notes", "intent": intent("read")})
    assert not result.is_error
    assert "marked destructive by server" in result.content[-1].text
    record = sandbox.tool_calls()[-1]
    assert record["status"] == "success" and "marked destructive by server" in record["warnings"][0]


async def test_policy_deny_and_nobody_to_ask_are_denials_with_a_fix(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "deny"\n' + sandbox.probe_server())
    async with agent(sandbox) as client:
        denied = await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": intent("read")})
        asked = await client.call_tool("call_tool_write", {"name": "probe:plain_echo", "intent": intent("write")})
        confirm = await client.call_tool(
            "call_tool_destructive", {"name": "probe:wipe_notes", "intent": intent("destructive")}
        )
    assert error_of(denied)["code"] == "PERMISSION_DENIED"
    assert 'permissions.read = "deny"' in error_of(denied)["message"]
    assert error_of(asked)["code"] == "NO_APPROVER"
    assert "mcphost approve" in error_of(asked)["message"]
    assert error_of(confirm)["code"] == "NO_APPROVER"
    statuses = [(c["status"], c["decision"]["by"]) for c in sandbox.tool_calls()]
    assert statuses == [("denied", "policy"), ("denied", "no_approver"), ("denied", "no_approver")]


async def test_upstream_tool_errors_pass_through_as_the_tools_own(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with agent(sandbox) as client:
        result = await client.call_tool("call_tool_write", {"name": "probe:fail", "intent": intent("write")})
    assert result.is_error and text_of(result) == "the tool failed on purpose"
    assert sandbox.tool_calls()[-1]["status"] == "error"


async def test_upstream_that_dies_mid_call_gives_upstream_error_then_comes_back(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with agent(sandbox) as client:
        died = await client.call_tool("call_tool_write", {"name": "probe:crash", "intent": intent("write")})
        error = error_of(died)
        assert error["code"] == "UPSTREAM_ERROR"
        assert "'probe'" in error["message"]
        # mcphost reconnects by itself; the next calls succeed once it has (bounded wait, no fixed sleep).
        with anyio.fail_after(20):
            while True:
                again = await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": intent("read")})
                if not again.is_error:
                    break
                assert error_of(again)["code"] == "UPSTREAM_ERROR"
                await anyio.sleep(0.1)
    types_seen = [r["type"] for r in sandbox.records()]
    assert "upstream_lost" in types_seen
    assert types_seen.count("upstream_connected") >= 2


async def test_changed_annotations_are_rechecked_at_call_time(sandbox: Sandbox) -> None:
    sandbox.write_config(ALLOW_ALL + sandbox.probe_server())
    async with agent(sandbox) as client:
        first = await client.call_tool("call_tool_read", {"name": "probe:shifty", "intent": intent("read")})
        assert not first.is_error
        changed = await client.call_tool(
            "call_tool_write",
            {"name": "probe:set_shifty", "args": {"annotations": {"destructiveHint": True}}, "intent": intent("write")},
        )
        assert not changed.is_error
        # The very next call: the server said the list changed before it answered, so the list mcphost read a moment
        # ago (which it trusts for a few seconds otherwise) no longer counts.
        again = await client.call_tool("call_tool_read", {"name": "probe:shifty", "intent": intent("read")})
        assert again.is_error and error_of(again)["code"] == "SERVER_MISMATCH"
        found = json.loads(text_of(await client.call_tool("retrieve_tools", {"query": "shifty annotations change"})))
        assert next(t for t in found["tools"] if t["name"] == "probe:shifty")["call_with"] == "call_tool_destructive"
    changes = [r for r in sandbox.records() if r["type"] == "annotations_changed"]
    assert changes and changes[0]["tool"] == "shifty"


async def test_a_server_that_cannot_start_does_not_block_the_others(sandbox: Sandbox) -> None:
    broken = f'[servers.broken]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", "import sys; sys.exit(7)"]\n'
    missing = '[servers.missing]\ncommand = "/nonexistent/mcp-server"\n'
    sandbox.write_config(broken + missing + sandbox.probe_server())
    async with agent(sandbox) as client:
        answer = json.loads(text_of(await client.call_tool("retrieve_tools", {"query": "notes"})))
        assert any(t["name"] == "probe:read_notes" for t in answer["tools"])
        states = {s["name"]: s for s in answer["diagnostics"]["servers"]}
        assert set(states) == {"broken", "missing"}
        assert all(s["state"] == "reconnecting" and s["error"] for s in states.values())
        result = await client.call_tool("call_tool_read", {"name": "missing:anything", "intent": intent("read")})
        assert error_of(result)["code"] == "UPSTREAM_ERROR"
        assert "'missing'" in error_of(result)["message"]


async def test_disabled_server_is_not_started(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server() + sandbox.probe_server("off", "enabled = false"))
    async with agent(sandbox) as client:
        answer = json.loads(text_of(await client.call_tool("retrieve_tools", {"query": "notes", "limit": 50})))
    assert {t["server"] for t in answer["tools"]} == {"probe"}


async def test_legacy_handshake_clients_are_served_too(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with agent(sandbox, mode="legacy") as client:
        result = await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": intent("read")})
    assert not result.is_error
