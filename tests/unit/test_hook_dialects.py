"""Every agent's hook payload read, and every answer written, exactly as that agent documents it. The payloads and
the answers are the fixtures in tests/fixtures/hooks (each names its source in the README beside them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcphost.serve.hook import (
    PERMISSION_REQUEST,
    PRE_TOOL_USE,
    HookInputError,
    blocked,
    detect_dialect,
    handled,
    parse_payload,
    render,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"


def fixture(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / name).read_text(encoding="utf-8")))


INPUTS = sorted(
    p.relative_to(FIXTURES).as_posix()
    for p in FIXTURES.glob("*/*.json")
    if p.name.startswith(("pretooluse", "permissionrequest"))
)


@pytest.mark.parametrize("name", INPUTS)
def test_every_documented_payload_is_read_as_its_agents(name: str) -> None:
    request = parse_payload((FIXTURES / name).read_bytes())
    assert request.dialect == name.split("/")[0]
    assert request.event == (PERMISSION_REQUEST if "permissionrequest" in name else PRE_TOOL_USE)
    assert request.use.tool_name
    assert isinstance(request.use.tool_input, dict)


def test_the_fields_an_agent_sends_reach_the_decision() -> None:
    use = parse_payload((FIXTURES / "claude-code/pretooluse-bash-rm.json").read_bytes()).use
    payload = fixture("claude-code/pretooluse-bash-rm.json")
    assert (use.agent, use.tool_name, use.tool_input) == ("claude-code", "Bash", payload["tool_input"])
    assert (use.session_id, use.tool_use_id, use.cwd) == (payload["session_id"], payload["tool_use_id"], payload["cwd"])
    camel = parse_payload((FIXTURES / "copilot-cli/pretooluse-bash-docs-example.json").read_bytes())
    assert camel.camel_case and camel.use.tool_name == "bash" and "command" in camel.use.tool_input


def same_shape(answer: str, documented: dict[str, Any]) -> None:
    """The answer has exactly the documented keys, nesting and decision; only the reason text is ours."""
    ours = json.loads(answer)

    def shape(value: Any, reason_keys: tuple[str, ...] = ("permissionDecisionReason", "message")) -> Any:
        if isinstance(value, dict):
            return {k: "<text>" if k in reason_keys else shape(v) for k, v in value.items() if k != "interrupt"}
        return value

    assert shape(ours) == shape(documented)


@pytest.mark.parametrize(
    ("payload", "decision", "documented"),
    [
        ("claude-code/pretooluse-bash.json", "deny", "claude-code/output-pretooluse-deny.json"),
        ("claude-code/pretooluse-bash.json", "allow", "claude-code/output-pretooluse-allow.json"),
        ("claude-code/pretooluse-bash.json", "ask", "claude-code/output-pretooluse-ask.json"),
        ("claude-code/permissionrequest-bash.json", "deny", "claude-code/output-permissionrequest-deny.json"),
        ("vscode/pretooluse-run_in_terminal.json", "deny", "vscode/output-pretooluse-deny.json"),
        ("vscode/pretooluse-run_in_terminal.json", "ask", "vscode/output-pretooluse-ask.json"),
        ("vscode/pretooluse-run_in_terminal.json", "allow", "claude-code/output-pretooluse-allow.json"),
        ("codex/pretooluse-bash.json", "deny", "codex/output-pretooluse-deny.json"),
        ("codex/permissionrequest-bash.json", "allow", "codex/output-permissionrequest-allow.json"),
        ("codex/permissionrequest-bash.json", "deny", "codex/output-permissionrequest-deny.json"),
        ("copilot-cli/pretooluse-bash-camelcase.json", "deny", "copilot-cli/output-pretooluse-deny.json"),
    ],
)
def test_each_decision_is_written_the_way_the_agent_reads_it(payload: str, decision: str, documented: str) -> None:
    answer = render(parse_payload((FIXTURES / payload).read_bytes()), decision, "why")
    assert answer.exit_code == 0 and answer.stderr == ""
    same_shape(answer.stdout, fixture(documented))


def test_a_permission_request_allow_leaves_the_input_as_the_agent_sent_it() -> None:
    # Claude Code's documented allow may carry an `updatedInput`; mcphost changes nothing, so it sends none.
    answer = render(parse_payload((FIXTURES / "claude-code/permissionrequest-bash.json").read_bytes()), "allow", "ok")
    documented = fixture("claude-code/output-permissionrequest-allow.json")
    del documented["hookSpecificOutput"]["decision"]["updatedInput"]
    assert json.loads(answer.stdout) == documented


@pytest.mark.parametrize(
    ("payload", "decision"),
    [
        ("codex/pretooluse-bash.json", "allow"),  # Codex takes only a deny: an allow would fail the hook
        ("codex/pretooluse-bash.json", "ask"),
        ("claude-code/permissionrequest-bash.json", "ask"),  # the agent is about to ask: no answer lets it
        ("codex/permissionrequest-bash.json", "ask"),
        ("claude-code/pretooluse-bash.json", "pass"),
    ],
)
def test_what_an_agent_cannot_take_is_answered_with_silence(payload: str, decision: str) -> None:
    answer = render(parse_payload((FIXTURES / payload).read_bytes()), decision, "why")
    assert (answer.stdout, answer.stderr, answer.exit_code) == ("", "", 0)


def test_a_codex_deny_carries_no_key_codex_does_not_know() -> None:
    answer = render(parse_payload((FIXTURES / "codex/pretooluse-bash.json").read_bytes()), "deny", "no")
    assert json.loads(answer.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no",
        }
    }


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"hook_event_name": "PreToolUse"}',
        b'{"tool_name": "Bash", "tool_input": "rm -rf /"}',
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_an_unreadable_payload_blocks_the_call(raw: bytes) -> None:
    with pytest.raises(HookInputError) as caught:
        parse_payload(raw)
    answer = blocked(str(caught.value))
    assert answer.exit_code == 2 and answer.stderr.strip() and answer.stdout == ""


def test_where_exit_codes_are_ignored_a_block_is_a_printed_deny() -> None:
    for name in ("claude-code/permissionrequest-bash.json", "copilot-cli/pretooluse-bash-camelcase.json"):
        request = parse_payload((FIXTURES / name).read_bytes())
        answer = blocked("cannot decide", request)
        assert answer.exit_code == 0 and "deny" in answer.stdout


def test_events_mcphost_has_no_say_in_get_no_answer() -> None:
    request = parse_payload(b'{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {}}')
    assert not handled(request)
    assert render(request, "deny", "x").stdout == ""


def test_agent_overrides_detection_and_detection_follows_the_documented_order() -> None:
    payload = fixture("claude-code/pretooluse-bash.json")
    assert parse_payload(json.dumps(payload).encode(), "codex").dialect == "codex"
    assert detect_dialect({**payload, "turn_id": "t", "model": "m"}) == "codex"
    assert detect_dialect({**payload, "timestamp": "2026-01-01T00:00:00Z"}) == "vscode"
    assert detect_dialect({"toolName": "bash", "timestamp": 1}) == "copilot-cli"


def test_hostile_text_in_a_payload_is_carried_not_choked_on() -> None:
    payload = {"tool_name": "Bash", "tool_input": {"command": "echo \ud800 \x1b[31m"}, "hook_event_name": "PreToolUse"}
    request = parse_payload(json.dumps(payload).encode())
    answer = render(request, "deny", "reason with \ud800 and \x1b[2J")
    assert json.loads(answer.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    answer.stdout.encode("ascii")  # escaped: no raw control or surrogate reaches the agent's parser
