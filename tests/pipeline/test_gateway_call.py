"""`Gateway.call` from start to record, in one process: the two-key check, the policy, a scripted person, the
upstream (the probe server in memory) and the activity record each call leaves."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcphost.errors import ErrorCode
from mcphost.intent import ToolVariant
from mcphost.policy import Remember
from tests.pipeline.conftest import ScriptedApprover, allow, deny

READ, WRITE, DESTRUCTIVE = ToolVariant.READ, ToolVariant.WRITE, ToolVariant.DESTRUCTIVE


def only(records: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(records) == 1, records
    return records[0]


async def test_a_read_on_a_read_only_tool_passes_by_policy_and_is_recorded(in_process: Any) -> None:
    async with in_process() as env:
        outcome = await env.call(READ, "probe:read_notes", args={"text": "hello"})
    assert outcome.error is None
    assert outcome.result is not None and outcome.result.structured_content == {"tool": "read_notes", "text": "hello"}
    record = only(env.records())
    assert record["status"] == "success"
    assert record["decision"]["by"] == "policy" and record["decision"]["rule"] == "permissions.read"
    assert record["metadata"]["intent"]["operation_type"] == "read"
    assert record["arguments"] == {"text": "hello"}


async def test_a_write_is_put_to_the_person_with_redacted_arguments_and_runs_once_allowed(in_process: Any) -> None:
    async with in_process() as env:
        person = ScriptedApprover(script=[allow()])
        env.host.broker.attach(person)
        outcome = await env.call(WRITE, "probe:plain_echo", args={"text": "hi", "api_key": "sk-live-0123456789abcdef"})
    assert outcome.error is None and outcome.result is not None
    [asked] = person.asked
    assert (asked.server, asked.tool, asked.action, asked.variant) == ("probe", "plain_echo", "ask", "call_tool_write")
    assert asked.arguments is not None and asked.arguments["text"] == "hi"
    assert "sk-live" not in str(asked.arguments)
    record = only(env.records())
    assert record["decision"]["by"] == "editor" and record["decision"]["approver"] == person.label
    assert record["status"] == "success"


async def test_a_write_the_person_denies_never_reaches_the_upstream(in_process: Any) -> None:
    async with in_process() as env:
        env.host.broker.attach(ScriptedApprover(script=[deny()]))
        outcome = await env.call(WRITE, "probe:plain_echo", args={"text": "no"})
    assert outcome.error is not None and outcome.error.code is ErrorCode.PERMISSION_DENIED
    assert outcome.result is None
    record = only(env.records())
    assert record["status"] == "denied" and record["decision"]["outcome"] == "deny"
    assert "response_bytes" not in record


async def test_a_delete_through_the_read_variant_is_rejected_before_anyone_is_asked(in_process: Any) -> None:
    async with in_process() as env:
        person = ScriptedApprover()
        env.host.broker.attach(person)
        outcome = await env.call(READ, "probe:wipe_notes", args={"text": "all"})
    assert outcome.error is not None and outcome.error.code is ErrorCode.SERVER_MISMATCH
    assert person.asked == []
    assert only(env.records())["status"] == "rejected"


async def test_two_keys_that_disagree_are_rejected(in_process: Any) -> None:
    async with in_process() as env:
        outcome = await env.call(READ, "probe:read_notes", operation="write")
    assert outcome.error is not None and outcome.error.code is ErrorCode.INTENT_MISMATCH
    assert only(env.records())["error"]["code"] == "INTENT_MISMATCH"


async def test_a_write_with_nobody_attached_ends_as_no_approver(in_process: Any) -> None:
    async with in_process() as env:
        outcome = await env.call(WRITE, "probe:plain_echo", args={"text": "x"})
    assert outcome.error is not None and outcome.error.code is ErrorCode.NO_APPROVER
    record = only(env.records())
    assert record["status"] == "denied" and record["decision"]["by"] == "no_approver"


async def test_a_session_approval_covers_that_session_only(in_process: Any) -> None:
    async with in_process() as env:
        person = ScriptedApprover(script=[allow(Remember.SESSION)])
        env.host.broker.attach(person)
        first = await env.call(WRITE, "probe:plain_echo", args={"text": "1"}, session="agent-a")
        again = await env.call(WRITE, "probe:plain_echo", args={"text": "2"}, session="agent-a")
        other = await env.call(WRITE, "probe:plain_echo", args={"text": "3"}, session="agent-b")
    assert first.error is None and again.error is None and other.error is None
    assert len(person.asked) == 2  # agent-a once, agent-b once
    decided_by = [r["decision"]["by"] for r in env.records()]
    assert decided_by == ["editor", "remembered_grant", "editor"]


async def test_a_policy_of_deny_refuses_without_asking(in_process: Any) -> None:
    async with in_process('[permissions]\nwrite = "deny"\n') as env:
        person = ScriptedApprover()
        env.host.broker.attach(person)
        outcome = await env.call(WRITE, "probe:plain_echo", args={"text": "x"})
    assert outcome.error is not None and outcome.error.code is ErrorCode.PERMISSION_DENIED
    assert "policy" in outcome.error.message and person.asked == []
    assert only(env.records())["decision"] == {
        "by": "policy",
        "action": "deny",
        "outcome": "deny",
        "rule": "permissions.write",
        "at": only(env.records())["decision"]["at"],
    }


async def test_a_tool_error_from_the_upstream_is_recorded_as_an_error(in_process: Any) -> None:
    async with in_process('[permissions]\nwrite = "allow"\n') as env:
        outcome = await env.call(WRITE, "probe:fail", args={})
    assert outcome.error is None and outcome.result is not None and outcome.result.is_error
    assert only(env.records())["status"] == "error"


async def test_an_unknown_tool_names_the_closest_match(in_process: Any) -> None:
    async with in_process() as env:
        outcome = await env.call(READ, "probe:read_note")
    assert outcome.error is not None and outcome.error.code is ErrorCode.TOOL_NOT_FOUND
    assert "probe:read_notes" in outcome.error.message


async def test_every_call_leaves_exactly_one_record_in_order(in_process: Any) -> None:
    async with in_process('[permissions]\nwrite = "allow"\n') as env:
        names = ["probe:read_notes", "probe:plain_echo", "probe:nope", "probe:fail"]
        for name in names:
            await env.call(READ if name == "probe:read_notes" else WRITE, name, args={"text": name})
    assert [f"{r['server']}:{r['tool']}" for r in env.records()] == names


@pytest.mark.parametrize(
    ("variant", "name", "status"),
    [
        (READ, "probe:read_notes", "success"),  # captured while the upstream works
        (READ, "probe:no_such_tool", "rejected"),  # never forwarded: captured before the record is written
        (READ, "probe:wipe_notes", "rejected"),  # SERVER_MISMATCH
        (WRITE, "probe:plain_echo", "denied"),  # captured before anyone is asked
    ],
)
async def test_a_calls_arguments_are_on_its_record_however_it_ends(
    in_process: Any, variant: ToolVariant, name: str, status: str
) -> None:
    args = {"text": "kept", "token": "sk-live-0123456789abcdef"}
    async with in_process() as env:
        env.host.broker.attach(ScriptedApprover(script=[deny()]))
        await env.call(variant, name, args=args)
    record = only(env.records())
    assert record["status"] == status
    assert record["arguments"]["text"] == "kept" and "sk-live" not in json.dumps(record)
    assert record["request_bytes"] == len(json.dumps(args, separators=(",", ":")))
