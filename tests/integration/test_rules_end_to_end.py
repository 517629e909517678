"""[[rules]] end to end: an SDK agent's calls decided by rules in a real `mcphost mcp`, the records naming the rule,
and `mcphost rules test` answering without calling anything."""

from __future__ import annotations

import json

from tests.helpers import Sandbox, agent, error_of, mcphost, text_of

RULES = """
[permissions]
write = "ask"

[[rules]]
tool = "probe:plain_echo"
variant = "write"
args = { text = { glob = "draft:*" } }
action = "allow"
reason = "drafts are harmless"

[[rules]]
tool = "probe:*"
variant = "write"
args = { text = { regex = "(?i)drop table" } }
action = "deny"
reason = "no SQL through the echo"
"""


def write(text: str) -> dict[str, object]:
    return {"name": "probe:plain_echo", "args": {"text": text}, "intent": {"operation_type": "write"}}


async def test_rules_on_arguments_decide_an_agents_calls_and_the_record_names_the_rule(sandbox: Sandbox) -> None:
    sandbox.write_config(RULES + sandbox.probe_server())
    async with agent(sandbox) as client:
        allowed = await client.call_tool("call_tool_write", write("draft: a note"))
        denied = await client.call_tool("call_tool_write", write("please DROP TABLE users"))
        unmatched = await client.call_tool("call_tool_write", write("final"))
    assert text_of(allowed) == "plain_echo: draft: a note"
    error = error_of(denied)
    assert error["code"] == "PERMISSION_DENIED"
    assert "rules[1]" in error["message"] and "no SQL through the echo" in error["message"]
    assert error["details"]["rule"] == "rules[1]"
    # Nobody is attached to this in-process agent: the default (ask) ends as NO_APPROVER.
    assert error_of(unmatched)["code"] == "NO_APPROVER"
    first, second, third = sandbox.tool_calls()
    assert (first["decision"]["rule"], first["decision"]["reason"]) == ("rules[0]", "drafts are harmless")
    assert first["decision"]["by"] == "policy" and first["status"] == "success"
    assert (second["decision"]["rule"], second["status"]) == ("rules[1]", "denied")
    assert third["decision"]["rule"] == "permissions.write" and "reason" not in third["decision"]


def test_rules_test_prints_the_decision_and_the_rule_without_calling_anything(sandbox: Sandbox) -> None:
    sandbox.write_config(RULES + sandbox.probe_server())
    shown = mcphost(sandbox, "rules", "test", "probe:plain_echo", "--variant", "write", "--args", '{"text": "draft:x"}')
    assert shown.returncode == 0, shown.stderr
    assert "allow" in shown.stdout and "rules[0]" in shown.stdout and "drafts are harmless" in shown.stdout
    as_json = mcphost(
        sandbox, "rules", "test", "probe:plain_echo", "--variant", "write", "--args", '{"text": "x"}', "-o", "json"
    )
    answer = json.loads(as_json.stdout)
    assert answer | {"config": None} == {
        "tool": "probe:plain_echo",
        "variant": "write",
        "action": "ask",
        "rule": "permissions.write",
        "reason": None,
        "config": None,
    }
    assert not sandbox.log.exists()  # nothing was called, nothing recorded
    bad = mcphost(sandbox, "rules", "test", "probe:plain_echo", "--variant", "write", "--args", "[1]")
    assert bad.returncode == 2 and "JSON object" in bad.stderr
    # What the gateway refuses before any rule is said as it would be: past the stack (5000 levels; this was a
    # RecursionError traceback), or past the 64 levels a call's arguments may nest (no rule would ever see it).
    for levels in (5000, 65):
        deep = '{"text": ' + "[" * levels + "]" * levels + "}"
        refused = mcphost(sandbox, "rules", "test", "probe:plain_echo", "--variant", "write", "--args", deep)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-300:]
        assert "--args" in refused.stderr and "deeper than 64 levels" in refused.stderr
