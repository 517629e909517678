"""Tool calls over `mcphost mcp` take a shortcut past the SDK's dispatch (and past the SDK session to a stdio
upstream): what the SDK did for them must still happen. The agent's own client is asked (elicitation), a cancelled
call is cut short and recorded, the client's name reaches the record, and clients of either protocol era are
served."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import orjson
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcphost.activity.reader import LOOK_OVER_FROM
from mcphost.serve.stdio import STOPPED
from tests.helpers import (
    Hostile,
    RawAgent,
    Sandbox,
    agent,
    daemon,
    error_of,
    initialize_request,
    poll,
    raw_agent,
    slow_read,
    text_of,
    with_sitecustomize,
)

LENIENT = '[permissions]\nread = "allow"\nwrite = "ask"\nno_editor = "elicit"\n\n'
READ = {"name": "probe:read_notes", "args": {"text": "hi"}, "intent": {"operation_type": "read"}}
WRITE = {"name": "probe:plain_echo", "args": {"text": "asked"}, "intent": {"operation_type": "write"}}


def call_line(
    request_id: Any, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None, sdk_way: bool = False
) -> str:
    """A tools/call line; `sdk_way`: one the shortcut leaves to the SDK, which reads it as the same call (an explicit
    null `requestState` is no state to the SDK, but the shortcut takes no repeat of a call that asked)."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if sdk_way:
        params["requestState"] = None
    if meta is not None:
        params["_meta"] = meta
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


async def eliciting(box: Sandbox, answer: str, asked: list[str]) -> Any:
    async def reply(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action=answer, content={"approve": True} if answer == "accept" else None)

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcphost", "mcp", "--in-process", "--config", str(box.config)],
        env=box.env(),
    )
    return Client(stdio_client(params), elicitation_callback=reply, mode="legacy", cache=None)


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_a_write_over_stdio_asks_the_agents_own_client_when_no_editor_is_attached(
    sandbox: Sandbox, answer: str
) -> None:
    sandbox.write_config(LENIENT + sandbox.probe_server())
    asked: list[str] = []
    async with await eliciting(sandbox, answer, asked) as client:
        result = await client.call_tool("call_tool_write", WRITE)
    assert len(asked) == 1 and "probe:plain_echo" in asked[0]
    [record] = sandbox.tool_calls()
    assert record["decision"]["by"] == "elicitation"
    if answer == "accept":
        assert not result.is_error and "asked" in text_of(result)
        assert record["status"] == "success" and record["decision"]["outcome"] == "allow"
    else:
        assert error_of(result)["code"] == "PERMISSION_DENIED"
        assert record["status"] == "denied"


async def test_a_call_cancelled_by_the_agent_gets_no_answer_and_is_recorded_as_cancelled(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    started, gate = tmp_path / "started", tmp_path / "gate"
    slow = slow_read(started, gate)
    async with raw_agent(sandbox, "--in-process") as raw:
        await raw.initialize()
        await raw.send_line(call_line("slow-1", "call_tool_read", slow))
        await poll(started.exists, "the upstream to start the slow call")
        await raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1"}})
        [record] = await poll(sandbox.tool_calls, "the cancelled call's record")
        assert record["status"] == "cancelled" and record["forwarded"] is True and record["tool"] == "slow"
        # The session goes on, and the cancelled call's answer never comes: the next line answers the next call.
        await raw.send_line(call_line(2, "call_tool_read", READ))
        answer = await raw.receive()
        assert answer["id"] == 2 and "read_notes: hi" in json.dumps(answer["result"])
    gate.touch()


async def test_a_call_cancelled_in_the_same_write_as_its_request_is_still_cancelled(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    # The cancellation reaches mcphost before the call's task has started: it must wait for the call, not be lost,
    # and it lands before the call is forwarded.
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    started, gate = tmp_path / "started", tmp_path / "gate"
    slow = slow_read(started, gate)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1"}}
    async with raw_agent(sandbox, "--in-process") as raw:
        await raw.initialize()
        # A call first, so that the upstream is up and the slow call's first wait would be its answer.
        await raw.send_line(call_line(1, "call_tool_read", READ))
        assert (await raw.receive())["id"] == 1
        await raw.send_line(call_line("slow-1", "call_tool_read", slow) + "\n" + json.dumps(cancel))
        [record] = await poll(lambda: sandbox.tool_calls()[1:], "the cancelled call's record")
        assert record["status"] == "cancelled" and record["tool"] == "slow"
        await raw.send_line(call_line(2, "call_tool_read", READ))
        answer = await raw.receive()
        assert answer["id"] == 2  # the cancelled call is never answered
    # Cut before it was forwarded, it never reached the upstream.
    assert record["forwarded"] is False and not started.exists()
    gate.touch()


async def test_the_client_name_and_progress_meta_reach_the_record(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with raw_agent(sandbox, "--in-process") as raw:
        await raw.initialize()
        await raw.send_line(call_line(7, "call_tool_read", READ, meta={"progressToken": "p-1"}))
        answer = await raw.answer_to(7)
    assert answer["result"]["isError"] is False
    assert answer["result"]["structuredContent"] == {"tool": "read_notes", "text": "hi"}
    [record] = sandbox.tool_calls()
    assert record["client"] == "raw-agent 0" and record["session_id"].startswith("stdio-")


async def test_an_error_result_and_a_warning_reach_the_agent_as_the_sdk_would_send_them(sandbox: Sandbox) -> None:
    sandbox.write_config(
        '[intent_declaration]\nstrict_server_validation = false\n\n[permissions]\nwrite = "allow"\n\n'
        + sandbox.probe_server()
    )
    async with agent(sandbox, "--in-process", mode="legacy") as client:
        failed = await client.call_tool(
            "call_tool_write", {"name": "probe:fail", "args": {}, "intent": {"operation_type": "write"}}
        )
        mismatch = await client.call_tool(
            "call_tool_write",
            {"name": "probe:read_notes", "args": {"text": "w"}, "intent": {"operation_type": "write"}},
        )
        unknown = await client.call_tool("call_tool_read", {"name": "probe:nope", "intent": {"operation_type": "read"}})
    assert failed.is_error and "failed on purpose" in text_of(failed)
    assert not mismatch.is_error and "mcphost warning: " in text_of(mismatch)
    assert error_of(unknown)["code"] == "TOOL_NOT_FOUND"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_clients_of_both_protocol_eras_call_through_stdio(sandbox: Sandbox, mode: str) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with agent(sandbox, "--in-process", mode=mode) as client:
        with anyio.fail_after(30):
            result = await client.call_tool("call_tool_read", READ)
    assert not result.is_error and text_of(result) == "read_notes: hi"
    assert [r["status"] for r in sandbox.tool_calls()] == ["success"]


# ---- 2026-era calls: the shortcut answers them as the SDK does


def modern_meta(**capabilities: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "modern-agent", "version": "3"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


MODERN_CASES = {
    "a read": ("call_tool_read", READ),
    "an upstream's error result": ("call_tool_write", {"name": "probe:fail", "args": {}, "intent": WRITE["intent"]}),
    "a warning beside the result": (
        "call_tool_write",
        {"name": "probe:read_notes", "args": {"text": "w"}, "intent": {"operation_type": "write"}},
    ),
    "an unknown upstream tool": ("call_tool_read", {"name": "probe:nope", "intent": {"operation_type": "read"}}),
    "a tool mcphost does not have": ("call_tool", READ),
    "retrieve_tools": ("retrieve_tools", {"query": "notes"}),
}


COUNTING = """
import os
from mcphost.serve import mcp_server

shaped = mcp_server.sdk_result


def counted(*args, **kwargs):
    with open(os.environ["MCPHOST_TEST_SHORTCUT_COUNT"], "a") as f:
        f.write("shortcut\\n")
    return shaped(*args, **kwargs)


mcp_server.sdk_result = counted
"""


@pytest.mark.parametrize("door", ["--in-process", "relay"])
async def test_a_2026_era_call_is_answered_exactly_as_the_sdk_answers_it(
    sandbox: Sandbox, door: str, tmp_path: Path
) -> None:
    # A call that says it brings no state back (`requestState: null`) is the SDK's: the shortcut takes no repeat of a
    # call that asked. The same call without it is the shortcut's, from a client that could be asked too (the config
    # asks no agent's client). Both answers, and both records, must be the same. In process, a sitecustomize counts
    # the shortcut's answers.
    count = tmp_path / "shortcut-count"
    counting = with_sitecustomize(tmp_path, COUNTING, MCPHOST_TEST_SHORTCUT_COUNT=str(count))
    sandbox.write_config(
        '[intent_declaration]\nstrict_server_validation = false\n\n[permissions]\nread = "allow"\nwrite = "allow"\n\n'
        + sandbox.probe_server()
    )
    async with contextlib.AsyncExitStack() as stack:
        if door == "relay":
            await stack.enter_async_context(daemon(sandbox))
        args, env = ([door], counting) if door != "relay" else ([], None)
        raw = await stack.enter_async_context(raw_agent(sandbox, *args, env=env))
        discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": modern_meta()}}
        await raw.send(discover)
        assert (await raw.answer_to(0))["result"]["supportedVersions"] == ["2026-07-28"]
        for case, (tool, arguments) in MODERN_CASES.items():
            before = len(sandbox.tool_calls())
            await raw.send_line(call_line("sdk", tool, arguments, meta=modern_meta(elicitation={}), sdk_way=True))
            by_sdk = await raw.answer_to("sdk")
            await raw.send_line(call_line("shortcut", tool, arguments, meta=modern_meta()))
            by_shortcut = await raw.answer_to("shortcut")
            assert {k: v for k, v in by_shortcut.items() if k != "id"} == {
                k: v for k, v in by_sdk.items() if k != "id"
            }, case
            records = sandbox.tool_calls()[before:]  # on disk before either answer was sent
            assert len(records) in (0, 2), (case, records)
            if records:
                sdk_record, shortcut_record = records
                assert sdk_record["client"] == shortcut_record["client"] == "modern-agent 3", case
                assert sdk_record["session_id"] == shortcut_record["session_id"], case
                assert sdk_record["status"] == shortcut_record["status"], case
        if door == "relay":
            assert "relaying to" in raw.stderr, raw.stderr
        else:
            assert count.read_text().splitlines() == ["shortcut"] * len(MODERN_CASES)


async def test_a_2026_era_call_cancelled_by_the_agent_gets_no_answer_and_is_recorded_as_cancelled(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    started, gate = tmp_path / "started", tmp_path / "gate"
    async with raw_agent(sandbox, "--in-process") as raw:
        await raw.send({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": modern_meta()}})
        await raw.answer_to(0)
        await raw.send_line(call_line("slow-1", "call_tool_read", slow_read(started, gate), meta=modern_meta()))
        await poll(started.exists, "the upstream to start the slow call")
        await raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1"}})
        [record] = await poll(sandbox.tool_calls, "the cancelled call's record")
        assert record["status"] == "cancelled" and record["client"] == "modern-agent 3"
        await raw.send_line(call_line(2, "call_tool_read", READ, meta=modern_meta()))
        answer = await raw.receive()
        assert answer["id"] == 2 and answer["result"]["content"] == [{"type": "text", "text": "read_notes: hi"}]
    gate.touch()


# ---- odd calls: the shortcut's answer is the SDK's

# An id with a run of 19 digits sends its line the SDK's way (`shortcut_message` leaves whatever may hold an integer
# past 64 bits to the SDK's parser); one with a letter in front goes the shortcut's.
SDK_ID, SHORTCUT_ID = "1234567890123456789", "s234567890123456789"
ODD = {
    "escape sequences and a right-to-left mark": {**READ, "args": {"text": "\x1b[31m\u202e\x00"}},
    "a megabyte argument": {**READ, "args": {"text": "x" * 1_000_000}},
    "deep arguments": {**READ, "args": {"text": "x", "deep": json.loads("[" * 60 + "]" * 60)}},
    "too deep to record": {**READ, "args": {"text": "x", "deep": json.loads("[" * 100 + "]" * 100)}},
    "a lone surrogate": {**READ, "args": {"text": "\ud800"}},
    # json.dumps writes `NaN` and `Infinity`, which are no JSON: the SDK's reader takes them, orjson does not.
    "NaN and an infinity": {**READ, "args": {"text": float("nan"), "n": [float("inf")]}},
    "arguments as JSON text": {"name": "probe:read_notes", "args_json": '{"text": "j"}', "intent": READ["intent"]},
    "arguments twice": {**READ, "args_json": "{}"},
    "an intent as a string": {**READ, "intent": json.dumps(READ["intent"])},
    "a flat intent": {"name": "probe:read_notes", "args": {"text": "f"}, "intent_operation_type": "read"},
    "a mismatched intent": {**READ, "intent": {"operation_type": "write"}},
    "no intent": {"name": "probe:read_notes", "args": {"text": "x"}},
    "a secret in the reason": {**READ, "intent": {"operation_type": "read", "reason": "ghp_" + "a" * 36}},
    "an unknown server": {**READ, "name": "nowhere:read_notes"},
}
# What no shortcut can take: it is no JSON, and orjson, which the shortcuts read with, refuses it.
SDK_ONLY = {"NaN and an infinity"}


async def opened(
    stack: contextlib.AsyncExitStack, box: Sandbox, door: str, modern: bool, taken: Path | None = None
) -> RawAgent:
    """A raw agent on `door` ("--in-process", or "relay" to a daemon started here), its session opened in the era
    asked: a 2026-era `server/discover`, or the handshake. In process, the shortcut notes in `taken` the id of each
    request it takes."""
    env = None
    if door == "relay":
        await stack.enter_async_context(daemon(box))
    elif taken is not None:
        env = with_sitecustomize(taken.parent, TAKEN, MCPHOST_TEST_TAKEN=str(taken))
    raw = await stack.enter_async_context(raw_agent(box, *([door] if door != "relay" else []), env=env))
    if modern:
        await raw.send({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": modern_meta()}})
        await raw.answer_to(0, timeout=30)
    else:
        await raw.initialize()
    return raw


def plain_request(request_id: Any, modern: bool, arguments: dict[str, Any] | None = READ) -> dict[str, Any]:
    """A call_tool_read request in the era asked; with SDK_ID it goes the SDK's way, with SHORTCUT_ID the
    shortcut's: in the 2026 era by an explicit null `requestState`, as the id alone would take it too; in the
    handshake era by the id's digits, which send a short line the SDK's way, and a long one (read first, its values
    looked over: the digits are no integer) by a member beside the request's own, which the SDK's reading passes
    over and the shortcut leaves to it."""
    params: dict[str, Any] = {"name": "call_tool_read", "arguments": arguments}
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    if modern:
        params["_meta"] = modern_meta()
        if request_id == SDK_ID:
            params["requestState"] = None
    elif request_id == SDK_ID and len(json.dumps(message)) >= LOOK_OVER_FROM:
        message["sdk_way"] = None
    return message


async def both_ways(
    raw: RawAgent,
    modern: bool,
    arguments: dict[str, Any] = READ,
    change: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The answers (without their ids) to the same call_tool_read (made odd by `change`) sent the SDK's way and the
    shortcut's."""
    answers = []
    for request_id in (SDK_ID, SHORTCUT_ID):
        message = plain_request(request_id, modern, arguments)
        await raw.send(change(message) if change is not None else message)
        answer = await raw.answer_to(request_id, timeout=30)
        answers.append({k: v for k, v in answer.items() if k != "id"})
    return answers


TAKEN = """
import os
from mcphost.serve import mcp_server

start = mcp_server.DirectCalls._start


def noted(self, request_id, *args, **kwargs):
    with open(os.environ["MCPHOST_TEST_TAKEN"], "a") as f:
        f.write(f"{request_id}\\n")
    return start(self, request_id, *args, **kwargs)


mcp_server.DirectCalls._start = noted
"""


@pytest.mark.parametrize("door", ["--in-process", "relay"])
@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
async def test_an_odd_call_gets_the_same_answer_and_record_from_the_shortcut_as_from_the_sdk(
    sandbox: Sandbox, door: str, modern: bool, tmp_path: Path
) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    taken = tmp_path / "taken"
    async with contextlib.AsyncExitStack() as stack:
        raw = await opened(stack, sandbox, door, modern, taken)
        for case, arguments in ODD.items():
            before = len(sandbox.tool_calls())
            answers = await both_ways(raw, modern, arguments)
            assert answers[0] == answers[1], case
            # A line the protocol refuses (a lone surrogate in its JSON) is no call: a JSON-RPC error, either way.
            records = sandbox.tool_calls()[before:]
            assert len(records) == (0 if "error" in answers[0] else 2), (case, answers[0], records)
            for key in ("status", "error", "arguments", "arguments_preview", "metadata", "response_preview"):
                assert all(r.get(key) == records[0].get(key) for r in records), (case, key)
            if case == "NaN and an infinity":  # refused, not forwarded as null
                assert records[0]["status"] == "rejected" and "no JSON value" in records[0]["error"]["message"], records
    if door != "relay":  # in process, the shortcut noted what it took: only the calls meant for it, nearly all
        took = taken.read_text().splitlines()
        assert set(took) == {SHORTCUT_ID} and len(took) >= len(ODD) - 1 - len(SDK_ONLY), took


SOURCE = "".join(f"    rows[{n}] = {{'id': [{n}], 'ok': items[{n}]}}\n" for n in range(300))  # 1 500 brackets


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
async def test_a_call_carrying_source_code_is_taken_by_the_shortcut_and_answered_as_by_the_sdk(
    sandbox: Sandbox, modern: bool, tmp_path: Path
) -> None:
    # Brackets in strings bound how deep a message can nest, but do not nest it: a file's content as an argument
    # (a bracket or two in every line) is no reason to take the long way.
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    taken = tmp_path / "taken"
    async with contextlib.AsyncExitStack() as stack:
        raw = await opened(stack, sandbox, "--in-process", modern, taken)
        answers = await both_ways(raw, modern, {**READ, "args": {"text": SOURCE}})
    assert answers[0] == answers[1]
    assert SOURCE in json.dumps(answers[0]["result"]["content"][0]["text"]) or answers[0]["result"]["content"][0][
        "text"
    ].endswith(SOURCE)
    assert taken.read_text().splitlines() == [SHORTCUT_ID]


# Arguments as hostile as JSON allows, none past what orjson writes: the checks encode them once, and the upstream is
# sent that encoding as it is.
ESCAPED = {
    "page": json.dumps([{"id": 1, "title": 'say "hi" \\ bye', "body": "a\nb"}] * 40, separators=(",", ":")),
    "controls": "\u0000\u001b[31m\u007f\u2028\u2029\t\r\n",
    "wide": "\U0001f600 é 漢字 \ufeff",
    "": {"nested": [[[{"x": None}]], True, False], "numbers": [-0.0, 1e-7, 1.5e300, 2**63 - 1, -(2**63), 2**64 - 1]},
}


@pytest.mark.parametrize("door", ["--in-process", "relay"])
async def test_arguments_encoded_once_reach_the_upstream_as_the_agent_sent_them(sandbox: Sandbox, door: str) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    args = {"text": ESCAPED}
    async with contextlib.AsyncExitStack() as stack:
        raw = await opened(stack, sandbox, door, False)
        await raw.send(plain_request(1, False, {**READ, "args": args}))
        answer = await raw.answer_to(1, timeout=30)
    assert answer["result"]["structuredContent"] == {"tool": "read_notes", "text": ESCAPED}, answer
    record = sandbox.tool_calls()[-1]
    assert record["status"] == "success"
    assert record["request_bytes"] == len(orjson.dumps(args))


# ---- odd results: what an upstream answers reaches the agent the same either way

# Tool results the SDK's model takes, written as no SDK would write them: what the agent receives must not depend on
# which way its call took.
ODD_RESULTS = {
    "null structured content": {"content": [{"type": "text", "text": "x"}], "structuredContent": None},
    "a block with null annotations": {"content": [{"type": "text", "text": "x", "annotations": None}]},
    "null _meta": {"content": [{"type": "text", "text": "x"}], "_meta": None},
    "an extra member": {"content": [{"type": "text", "text": "x"}], "extra": {"kept": None}},
    "an image block": {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png", "annotations": None}]},
    "a list of structured content": {"content": [{"type": "text", "text": "x"}], "structuredContent": [1, None]},
    "a text block with an extra member": {"content": [{"type": "text", "text": "x", "more": None}]},
    "isError as null": {"content": [{"type": "text", "text": "x"}], "isError": None},
    "a float in structured content": {"content": [{"type": "text", "text": "x"}], "structuredContent": {"f": 1.0}},
}


@pytest.mark.parametrize("door", ["--in-process", "relay"])
@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
async def test_an_odd_result_reaches_the_agent_the_same_by_the_shortcut_as_by_the_sdk(
    sandbox: Sandbox, door: str, modern: bool, tmp_path: Path
) -> None:
    hostile = Hostile(tmp_path)
    sandbox.write_config(
        '[intent_declaration]\nstrict_server_validation = false\n\n[permissions]\nread = "allow"\nwrite = "allow"\n\n'
        + hostile.toml()
    )
    async with contextlib.AsyncExitStack() as stack:
        raw = await opened(stack, sandbox, door, modern)
        differ = {}
        for case, result in ODD_RESULTS.items():
            arguments = {"name": "hostile:malformed", "args": {"result": result}, "intent": {"operation_type": "read"}}
            before = len(sandbox.tool_calls())
            answers = await both_ways(raw, modern, arguments)
            if answers[0] != answers[1]:
                differ[case] = answers
            # Both went through to the upstream, whose answer is what reached the agent.
            assert [r["decision"]["outcome"] for r in sandbox.tool_calls()[before:]] == ["allow"] * 2, case
        assert not differ, json.dumps(differ, indent=1)


@pytest.mark.parametrize("door", ["--in-process", "relay"])
async def test_a_call_after_an_initialize_the_sdk_refused_is_refused_by_the_shortcut_too(
    sandbox: Sandbox, door: str
) -> None:
    # The SDK opens no session for an `initialize` it cannot read (here a version that is no string): the calls that
    # follow get its refusal, whichever way they go.
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with contextlib.AsyncExitStack() as stack:
        if door == "relay":
            await stack.enter_async_context(daemon(sandbox))
        raw = await stack.enter_async_context(raw_agent(sandbox, *([door] if door != "relay" else [])))
        bad = initialize_request("raw-agent")
        bad["params"]["protocolVersion"] = 20251125
        await raw.send(bad)
        assert "error" in await raw.answer_to("init", timeout=30)
        answers = []
        for request_id in (SDK_ID, SHORTCUT_ID):
            await raw.send_line(call_line(request_id, "call_tool_read", READ))
            answer = await raw.answer_to(request_id, timeout=30)
            answers.append({k: v for k, v in answer.items() if k != "id"})
        assert answers[0] == answers[1] and "error" in answers[0], answers
    assert sandbox.tool_calls() == []


# ---- odd requests: a request the SDK would read otherwise, or not at all, is the SDK's


def odd_envelopes(modern: bool) -> dict[str, Any]:
    """tools/call requests that differ from a plain one in their envelope or their params' `_meta`, each a function
    of the plain request."""

    def meta(**extra: Any) -> Any:
        return lambda m: {**m, "params": {**m["params"], "_meta": {**m["params"].get("_meta", {}), **extra}}}

    cases: dict[str, Any] = {
        "no jsonrpc member": lambda m: {k: v for k, v in m.items() if k != "jsonrpc"},
        "jsonrpc 1.0": lambda m: {**m, "jsonrpc": "1.0"},
        "a result member too": lambda m: {**m, "result": {}},
        "a member of no JSON-RPC message": lambda m: {**m, "extra": 1},
        "a progress token that is an object": meta(progressToken={"a": 1}),
        "a progress token that is a number with a fraction": meta(progressToken=1.5),
        "a progress token": meta(progressToken="p-1"),
        "a meta member of the client's own": meta(**{"example.com/trace": "t-1"}),
        "a param no schema has": lambda m: {**m, "params": {**m["params"], "other": 1}},
        "an empty tool name": lambda m: {**m, "params": {**m["params"], "name": ""}},
    }
    if not modern:
        cases["a meta that is no object"] = lambda m: {**m, "params": {**m["params"], "_meta": 5}}
    return cases


@pytest.mark.parametrize("door", ["--in-process", "relay"])
@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
async def test_an_odd_request_gets_the_same_answer_either_way(
    sandbox: Sandbox, door: str, modern: bool, tmp_path: Path
) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    taken = tmp_path / "taken"
    async with contextlib.AsyncExitStack() as stack:
        raw = await opened(stack, sandbox, door, modern, taken)
        differ = {}
        for case, change in odd_envelopes(modern).items():
            answers = await both_ways(raw, modern, change=change)
            if answers[0] != answers[1]:
                differ[case] = answers
        assert not differ, json.dumps(differ, indent=1)
        # Taken for a response (an `error` beside its method), a request gets no answer from the SDK: nor may the
        # shortcut run it. The call after it is answered; the odd one was never taken.
        await raw.send({**plain_request("odd", modern), "error": {"code": 1, "message": "x"}})
        await raw.send(plain_request(SHORTCUT_ID, modern))
        assert "result" in await raw.answer_to(SHORTCUT_ID, timeout=30)
    if door != "relay":
        assert "odd" not in taken.read_text().splitlines()


@pytest.mark.parametrize("door", ["--in-process", "relay"])
async def test_a_write_whose_answer_holds_a_lone_surrogate_is_a_success_on_record_and_in_the_agents_hands(
    sandbox: Sandbox, door: str, tmp_path: Path
) -> None:
    # JSON lets an upstream write "\ud800"; the tool ran. The answer's preview once failed to encode it, and the agent
    # was told UPSTREAM_ERROR for a write that had happened: it might have made it again.
    hostile = Hostile(tmp_path)
    sandbox.write_config('[permissions]\nread = "allow"\nwrite = "allow"\n\n' + hostile.toml())
    async with contextlib.AsyncExitStack() as stack:
        raw = await opened(stack, sandbox, door, modern=False)
        arguments = {
            "name": "hostile:malformed",
            "args": {"result": {"content": []}, "unpaired": True},
            "intent": {"operation_type": "write"},
        }
        await raw.send_line(call_line(7, "call_tool_write", arguments))
        answer = await raw.answer_to(7, timeout=30)
    assert answer["result"]["isError"] is False, answer
    assert answer["result"]["content"][0]["text"] == "done \ud800 here"
    [record] = sandbox.tool_calls()
    assert record["status"] == "success", record
    assert record["response_preview"] == "done \ufffd here", record


async def test_a_call_the_sdk_runs_when_a_signal_stops_mcphost_is_answered_with_why_like_any_other(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    # The shortcut's calls cut by a shutdown signal are answered with why; one the SDK ran was left with the
    # connection closing under it ("Connection closed" in the agent's client).
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    started, gate = tmp_path / "started", tmp_path / "gate"
    async with raw_agent(sandbox, "--in-process") as raw:
        await raw.initialize()
        await raw.send_line(call_line("slow-sdk", "call_tool_read", slow_read(started, gate), sdk_way=True))
        await poll(started.exists, "the upstream to start the slow call")
        raw.process.terminate()
        answer = await raw.answer_to("slow-sdk", timeout=20)
        with anyio.fail_after(20):
            await raw.process.wait()
    assert answer["error"]["message"] == f"tools/call: {STOPPED}", answer
    [record] = sandbox.tool_calls()
    assert (record["tool"], record["status"]) == ("slow", "cancelled")
    gate.touch()
