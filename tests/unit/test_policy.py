from __future__ import annotations

import pytest

from mcphost.intent import ToolVariant
from mcphost.policy import Action, Policy, decide


def test_defaults_let_reads_pass_and_ask_for_writes_and_confirm_destructive() -> None:
    policy = Policy()
    assert decide(policy, ToolVariant.READ, "s", "t").action is Action.ALLOW
    assert decide(policy, ToolVariant.WRITE, "s", "t").action is Action.ASK
    assert decide(policy, ToolVariant.DESTRUCTIVE, "s", "t").action is Action.CONFIRM


@pytest.mark.parametrize("variant", list(ToolVariant))
@pytest.mark.parametrize("action", list(Action))
def test_each_variant_follows_its_own_key(variant: ToolVariant, action: Action) -> None:
    policy = Policy(**{variant.operation.value: action})  # type: ignore[arg-type]
    decision = decide(policy, variant, "s", "t")
    assert decision.action is action
    assert decision.rule == f"permissions.{variant.operation.value}"


def test_only_ask_and_confirm_need_a_person() -> None:
    assert {a for a in Action if a.needs_person} == {Action.ASK, Action.CONFIRM}
