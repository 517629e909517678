from __future__ import annotations

import pytest

from mcphost.intent import ToolVariant
from mcphost.policy import Action, Policy, Remember, RuleSubject, clamp_remember, decide, remember_options


def test_defaults_let_reads_pass_and_ask_for_writes_and_confirm_destructive() -> None:
    policy = Policy()
    assert decide(policy, RuleSubject(ToolVariant.READ, "s", "t")).action is Action.ALLOW
    assert decide(policy, RuleSubject(ToolVariant.WRITE, "s", "t")).action is Action.ASK
    assert decide(policy, RuleSubject(ToolVariant.DESTRUCTIVE, "s", "t")).action is Action.CONFIRM


@pytest.mark.parametrize("variant", list(ToolVariant))
@pytest.mark.parametrize("action", list(Action))
def test_each_variant_follows_its_own_key(variant: ToolVariant, action: Action) -> None:
    policy = Policy(**{variant.operation.value: action})  # type: ignore[arg-type]
    decision = decide(policy, RuleSubject(variant, "s", "t"))
    assert decision.action is action
    assert decision.rule == f"permissions.{variant.operation.value}"


def test_only_ask_and_confirm_need_a_person() -> None:
    assert {a for a in Action if a.needs_person} == {Action.ASK, Action.CONFIRM}


def test_destructive_approvals_are_never_offered_as_always_by_default() -> None:
    assert remember_options(Policy(), ToolVariant.DESTRUCTIVE, True) == [Remember.ONCE, Remember.SESSION]
    assert remember_options(Policy(), ToolVariant.WRITE, True) == list(Remember)


def test_always_for_destructive_needs_the_config_to_say_so() -> None:
    policy = Policy(remember_destructive=Remember.ALWAYS)
    assert Remember.ALWAYS in remember_options(policy, ToolVariant.DESTRUCTIVE, True)


def test_session_is_offered_only_when_the_agent_has_a_session() -> None:
    assert remember_options(Policy(), ToolVariant.WRITE, False) == [Remember.ONCE, Remember.ALWAYS]


def test_a_remember_scope_beyond_the_options_is_clamped_down_never_up() -> None:
    options = [Remember.ONCE, Remember.SESSION]
    assert clamp_remember(Remember.ALWAYS, options) is Remember.SESSION
    assert clamp_remember(Remember.ONCE, options) is Remember.ONCE
    assert clamp_remember(Remember.ALWAYS, [Remember.ONCE]) is Remember.ONCE
    assert clamp_remember(Remember.SESSION, [Remember.ONCE, Remember.ALWAYS]) is Remember.ONCE
