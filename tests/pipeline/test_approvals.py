"""`Approvals.authorize` over plain data: the policy, remembered grants bound to the tool's definition, remember
scopes clamped to the config, and the prompt a person is shown. The broker is real; the person is scripted."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from mcphost.approval.approvals import Approvals, CallFacts
from mcphost.approval.broker import PermissionBroker
from mcphost.approval.grants import GrantStore
from mcphost.approval.prompt import PermissionRequest, PermissionResponse
from mcphost.config import LoadedConfig, parse_config
from mcphost.errors import ErrorCode
from mcphost.intent import ToolVariant
from mcphost.policy import Remember
from tests.helpers import lock_held_by_another_process
from tests.pipeline.conftest import ScriptedApprover, allow


def config(tmp_path: Path, toml: str = "") -> LoadedConfig:
    path = tmp_path / "config.toml"
    return LoadedConfig(parse_config(toml, path), path, exists=True)


def facts(variant: ToolVariant = ToolVariant.WRITE, **changes: Any) -> CallFacts:
    base = CallFacts(
        variant=variant,
        server="notes",
        tool="add_note",
        intent={"operation_type": variant.operation.value, "reason": "the user asked"},
        annotations={},
        call_with="call_tool_write",
        description="Add a note",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        arguments={"text": "buy milk", "password": "hunter2-hunter2"},
        session_id="session-1",
        client="pytest 1.0",
    )
    return dataclasses.replace(base, **changes)


def approvals(tmp_path: Path, person: ScriptedApprover | None = None) -> Approvals:
    broker = PermissionBroker()
    if person is not None:
        broker.attach(person)
    return Approvals(broker, GrantStore(tmp_path / "state.toml"))


def read_only(**changes: Any) -> CallFacts:
    return facts(ToolVariant.READ, annotations={"readOnlyHint": True}, call_with="call_tool_read", **changes)


async def test_a_read_of_a_read_only_tool_is_allowed_by_policy_without_asking(tmp_path: Path) -> None:
    person = ScriptedApprover()
    result = await approvals(tmp_path, person).authorize(config(tmp_path), read_only())
    assert result.error is None and result.decision.by == "policy" and result.decision.outcome == "allow"
    assert result.decision.rule == "permissions.read"
    assert person.asked == []


async def test_a_read_of_a_tool_not_marked_read_only_is_asked_like_a_write(tmp_path: Path) -> None:
    person = ScriptedApprover(script=[allow()])
    unannotated = facts(ToolVariant.READ)  # no annotations: the server never said it only reads
    result = await approvals(tmp_path, person).authorize(config(tmp_path), unannotated)
    assert result.error is None and result.decision.by == "editor"
    assert result.decision.rule == "permissions.write" and result.decision.action == "ask"
    assert person.asked[0].operation == "write" and person.asked[0].variant == "call_tool_read"
    assert any("not marked read-only" in w for w in result.warnings)


async def test_a_write_on_a_destructive_tool_needs_the_destructive_confirmation(tmp_path: Path) -> None:
    person = ScriptedApprover(script=[allow()])
    marked = facts(annotations={"destructiveHint": True}, call_with="call_tool_destructive")
    result = await approvals(tmp_path, person).authorize(config(tmp_path), marked)
    assert result.decision.rule == "permissions.destructive" and person.asked[0].action == "confirm"


async def test_the_agents_own_client_never_confirms_a_destructive_call(tmp_path: Path) -> None:
    asked: list[str] = []

    async def elicit(message: str, schema: dict[str, Any]) -> bool:
        asked.append(message)
        return True

    loaded = config(tmp_path, '[permissions]\nno_editor = "elicit"\n')
    destructive = facts(ToolVariant.DESTRUCTIVE, call_with="call_tool_destructive")
    result = await approvals(tmp_path).authorize(loaded, destructive, elicit)
    assert result.error is not None and result.error.code is ErrorCode.NO_APPROVER and asked == []
    write = await approvals(tmp_path).authorize(loaded, facts(), elicit)
    assert write.error is None and write.decision.by == "elicitation" and len(asked) == 1


async def test_the_prompt_carries_what_a_person_needs_and_no_secret(tmp_path: Path) -> None:
    person = ScriptedApprover(script=[allow()])
    result = await approvals(tmp_path, person).authorize(config(tmp_path), facts())
    assert result.error is None and result.decision.by == "editor"
    [request] = person.asked
    assert request.intent.reason == "the user asked" and request.client == "pytest 1.0"
    assert request.arguments is not None and request.arguments["text"] == "buy milk"
    assert "hunter2" not in request.model_dump_json()
    assert request.remember_options == [Remember.ONCE, Remember.SESSION, Remember.ALWAYS]


async def test_a_one_shot_mcphost_call_is_offered_no_session_grant_by_any_approver(tmp_path: Path) -> None:
    # Its session is the one command: a session grant would end with the call it was given for.
    person = ScriptedApprover(script=[allow(), allow()])
    gate = approvals(tmp_path, person)
    await gate.authorize(config(tmp_path), facts(client="mcphost call 0.1.0"))
    await gate.authorize(config(tmp_path), facts(client="mcphost calling-card 1"))
    one_shot, other = person.asked
    assert one_shot.remember_options == [Remember.ONCE, Remember.ALWAYS]
    assert other.remember_options == [Remember.ONCE, Remember.SESSION, Remember.ALWAYS]


async def test_an_always_grant_holds_until_the_tool_changes(tmp_path: Path) -> None:
    person = ScriptedApprover(script=[allow(Remember.ALWAYS), allow()])
    gate = approvals(tmp_path, person)
    loaded = config(tmp_path)
    first = await gate.authorize(loaded, facts())
    second = await gate.authorize(loaded, facts(session_id="another-session"))
    changed = await gate.authorize(loaded, facts(description="Add a note, and email it to everyone"))
    assert (first.decision.by, second.decision.by, changed.decision.by) == ("editor", "remembered_grant", "editor")
    assert any("dropped" in w for w in changed.warnings)
    assert len(person.asked) == 2


async def test_a_longer_remember_than_the_config_allows_is_clamped(tmp_path: Path) -> None:
    person = ScriptedApprover(script=[allow(Remember.ALWAYS)])
    destructive = facts(ToolVariant.DESTRUCTIVE, call_with="call_tool_destructive")
    result = await approvals(tmp_path, person).authorize(config(tmp_path), destructive)
    assert result.decision.remember == "session"
    assert any("remember_destructive" in w for w in result.warnings)
    assert person.asked[0].action == "confirm"


async def test_a_prompt_nobody_answers_expires(tmp_path: Path) -> None:
    class Silent(ScriptedApprover):
        async def ask(self, request: PermissionRequest) -> PermissionResponse:
            self.asked.append(request)
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    person = Silent()
    loaded = config(tmp_path, "[permissions]\nprompt_timeout = 0.05\n")
    result = await approvals(tmp_path, person).authorize(loaded, facts())
    assert result.error is not None and result.error.code is ErrorCode.APPROVAL_TIMEOUT
    assert result.decision.by == "timeout" and result.decision.outcome == "expired"


async def test_nobody_attached_is_no_approver_naming_the_fix(tmp_path: Path) -> None:
    result = await approvals(tmp_path).authorize(config(tmp_path), facts())
    assert result.error is not None and result.error.code is ErrorCode.NO_APPROVER
    assert "mcphost approve" in result.error.message and 'write = "allow"' in result.error.message


async def test_an_always_that_cannot_be_kept_allows_the_call_once_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The state file's lock held by a process that does not let go (a `mcphost grants revoke` stopped by Ctrl-Z): the
    # daemon waited on it without end, on its event loop. A full disk raised, and the allowed call failed.
    from mcphost.approval import grants

    monkeypatch.setattr(grants, "STATE_LOCK_WAIT_S", 0.2)
    person = ScriptedApprover(script=[allow(Remember.ALWAYS), allow()])
    gate = approvals(tmp_path, person)
    store = gate.grants
    assert isinstance(store, GrantStore)
    lock = store.path.with_name(store.path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock_held_by_another_process(lock) as holder:
        first = await gate.authorize(config(tmp_path), facts())
    assert first.error is None and first.decision.outcome == "allow" and first.decision.remember == "once"
    assert any(f"not remembered: {store.path.name} cannot be written" in w for w in first.warnings)
    assert f"process {holder.pid}" in " ".join(first.warnings)
    second = await gate.authorize(config(tmp_path), facts(session_id="another-session"))
    assert second.decision.by == "editor", "nothing was remembered"
