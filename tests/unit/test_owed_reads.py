"""A read has no start on record: when a daemon dies with one in flight, its relay records it from what it kept of
the call (`handoff.owed_read`), never its arguments, and what an agent put there is cut short and redacted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcphost.serve.handoff import LedgerFold, owed_read
from mcphost.serve.relay import record_lost_reads
from tests.helpers import Sandbox

TOKEN = "ghp_" + "a1B2" * 9


def request(variant: str, arguments: Any, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": variant, "arguments": arguments, **params},
    }


def test_only_a_read_is_kept_and_never_its_arguments() -> None:
    read = request(
        "call_tool_read", {"name": "fs:read", "args": {"path": "/etc/passwd"}, "intent": {"operation_type": "read"}}
    )
    assert owed_read(read) == {"name": "fs:read", "intent": {"operation_type": "read"}}
    for variant in ("call_tool_write", "call_tool_destructive", "retrieve_tools", None):
        assert owed_read(request(variant, {"name": "fs:read"})) is None  # type: ignore[arg-type]
    assert owed_read({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ["call_tool_read"]}) is None


@pytest.mark.parametrize(
    ("arguments", "intent"),
    [
        ({"name": "s:t", "intent": '{"operation_type": "read"}'}, {"raw": '{"operation_type": "read"}'}),
        (
            {"name": "s:t", "intent_operation_type": "read", "intent_reason": 5},
            {"operation_type": "read", "reason": "5"},
        ),
        ({"name": "s:t", "intent": {"operation_type": ["read"], "other": "x"}}, {"operation_type": "['read']"}),
        ({"name": "s:t"}, None),
        ("not an object", None),
    ],
)
def test_every_form_of_intent_is_kept_as_text(arguments: Any, intent: Any) -> None:
    kept = owed_read(request("call_tool_read", arguments))
    assert kept is not None and kept.get("intent") == intent


def test_what_an_agent_wrote_is_kept_small() -> None:
    kept = owed_read(request("call_tool_read", {"name": "s:" + "t" * 100_000, "intent": {"reason": "r" * 100_000}}))
    assert kept is not None and len(json.dumps(kept)) < 2_100


def test_a_2026_era_request_names_its_client() -> None:
    meta = {"io.modelcontextprotocol/clientInfo": {"name": "agent", "version": 7}}
    kept = owed_read(request("call_tool_read", {"name": "s:t"}, _meta=meta))
    assert kept is not None and kept["client"] == {"name": "agent", "version": "7"}


def test_the_ledger_keeps_a_read_with_its_request_and_an_old_entry_without() -> None:
    fold = LedgerFold()
    fold.apply({"chunk": 10, "crc": 0, "take": [[1, "tools/call", {"name": "s:t"}], ["2", "ping"]]})
    assert sorted(fold.in_flight.values(), key=lambda taken: taken[1]) == [
        ("2", "ping", None),
        (1, "tools/call", {"name": "s:t"}),
    ]


async def test_a_lost_read_is_recorded_with_its_secrets_redacted(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n')
    kept = owed_read(
        request(
            "call_tool_read",
            {
                "name": "fs:read",
                "args": {"token": TOKEN},
                "intent": {"operation_type": "read", "reason": f"use {TOKEN}"},
            },
        )
    )
    assert kept is not None
    await record_lost_reads(sandbox.config, [kept], "the daemon 1 went away during this call", "agent 1.0")
    [record] = sandbox.tool_calls()
    assert (record["server"], record["tool"], record["status"], record["client"]) == (
        "fs",
        "read",
        "error",
        "agent 1.0",
    )
    assert record["error"] == {"code": "UPSTREAM_ERROR", "message": "the daemon 1 went away during this call"}
    assert "forwarded" not in record, "whether it reached the upstream is not known"
    assert TOKEN not in (sandbox.data / "activity.jsonl").read_text(encoding="utf-8")


async def test_a_config_that_cannot_be_read_still_lets_the_read_be_recorded(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nread = "maybe"\n')
    await record_lost_reads(sandbox.config, [{"name": "s:t"}], "gone", None)
    assert [(r["server"], r["status"]) for r in sandbox.tool_calls()] == [("s", "error")]
