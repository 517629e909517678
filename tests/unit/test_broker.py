"""The permission broker with scripted approvers: who gets asked, which answer counts, what ends a prompt."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from mcphost.approval.broker import ApproverGone, Outcome, PermissionBroker
from mcphost.approval.prompt import Answer, PermissionRequest, PermissionResponse, PromptIntent
from mcphost.policy import Remember


def request(prompt_id: str = "p1") -> PermissionRequest:
    return PermissionRequest(
        id=prompt_id,
        variant="call_tool_write",
        operation="write",
        action="ask",
        server="todo",
        tool="add",
        intent=PromptIntent(operation_type="write"),
        call_with="call_tool_write",
        expires_at="2026-01-01T00:00:00Z",
        remember_options=[Remember.ONCE],
    )


@dataclass
class Scripted:
    """An approver whose answer the test releases (or fails) when it wants."""

    id: str
    answers: asyncio.Queue[PermissionResponse | Exception] = field(default_factory=asyncio.Queue)
    asked: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    was_asked: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def label(self) -> str:
        return f"scripted {self.id}"

    async def ask(self, req: PermissionRequest) -> PermissionResponse:
        self.asked.append(req.id)
        self.was_asked.set()
        try:
            answer = await self.answers.get()
        except asyncio.CancelledError:
            self.withdrawn.append(req.id)
            raise
        if isinstance(answer, Exception):
            raise answer
        return answer


ALLOW = PermissionResponse(decision=Answer.ALLOW, remember=Remember.ONCE)
DENY = PermissionResponse(decision=Answer.DENY)


async def settle() -> None:
    # Let cancelled approver tasks run their cancellation handlers.
    for _ in range(5):
        await asyncio.sleep(0)


async def test_nobody_attached_ends_at_once_as_no_approver() -> None:
    result = await PermissionBroker().request(request(), expires_in=5)
    assert result.outcome is Outcome.NO_APPROVER
    assert "attached" in (result.reason or "")


async def test_the_first_answer_wins_and_the_prompt_is_withdrawn_from_the_others() -> None:
    broker = PermissionBroker()
    a, b = Scripted("a"), Scripted("b")
    broker.attach(a)
    broker.attach(b)
    call = asyncio.create_task(broker.request(request(), expires_in=5))
    await asyncio.wait_for(asyncio.gather(a.was_asked.wait(), b.was_asked.wait()), 5)
    b.answers.put_nowait(DENY)
    result = await asyncio.wait_for(call, 5)
    await settle()
    assert result.outcome is Outcome.ANSWERED
    assert result.response == DENY and result.approver == "scripted b"
    assert a.withdrawn == ["p1"] and b.withdrawn == []
    assert broker.pending == {}


async def test_no_answer_in_time_is_a_timeout_and_the_prompt_is_withdrawn() -> None:
    broker = PermissionBroker()
    a = Scripted("a")
    broker.attach(a)
    result = await broker.request(request(), expires_in=0.05)
    await settle()
    assert result.outcome is Outcome.TIMEOUT
    assert result.wait_ms >= 40
    assert a.withdrawn == ["p1"]


async def test_a_prompt_goes_on_with_the_remaining_approver_when_one_leaves() -> None:
    broker = PermissionBroker()
    a, b = Scripted("a"), Scripted("b")
    broker.attach(a)
    broker.attach(b)
    call = asyncio.create_task(broker.request(request(), expires_in=5))
    await asyncio.wait_for(asyncio.gather(a.was_asked.wait(), b.was_asked.wait()), 5)
    broker.detach("a")
    await settle()
    assert not call.done()
    b.answers.put_nowait(ALLOW)
    assert (await asyncio.wait_for(call, 5)).approver == "scripted b"


async def test_the_last_approver_leaving_ends_the_prompt_as_no_approver() -> None:
    broker = PermissionBroker()
    a = Scripted("a")
    broker.attach(a)
    call = asyncio.create_task(broker.request(request(), expires_in=5))
    await asyncio.wait_for(a.was_asked.wait(), 5)
    broker.detach("a")
    result = await asyncio.wait_for(call, 5)
    assert result.outcome is Outcome.NO_APPROVER
    assert "disconnected" in (result.reason or "")


async def test_an_approver_that_cannot_answer_is_named_in_the_reason() -> None:
    broker = PermissionBroker()
    a = Scripted("a")
    broker.attach(a)
    a.answers.put_nowait(ApproverGone("answered with an invalid result"))
    result = await asyncio.wait_for(broker.request(request(), expires_in=5), 5)
    assert result.outcome is Outcome.NO_APPROVER
    assert "scripted a: answered with an invalid result" in (result.reason or "")


async def test_an_approver_attaching_while_a_prompt_waits_is_asked_too() -> None:
    broker = PermissionBroker()
    a, late = Scripted("a"), Scripted("late")
    broker.attach(a)
    call = asyncio.create_task(broker.request(request(), expires_in=5))
    await asyncio.wait_for(a.was_asked.wait(), 5)
    broker.attach(late)
    await asyncio.wait_for(late.was_asked.wait(), 5)
    late.answers.put_nowait(ALLOW)
    assert (await asyncio.wait_for(call, 5)).approver == "scripted late"


async def test_a_call_that_is_cancelled_withdraws_its_prompt() -> None:
    broker = PermissionBroker()
    a = Scripted("a")
    broker.attach(a)
    call = asyncio.create_task(broker.request(request(), expires_in=5))
    await asyncio.wait_for(a.was_asked.wait(), 5)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await settle()
    assert a.withdrawn == ["p1"]
    assert broker.pending == {}


async def test_a_prompt_left_unanswered_does_not_hold_up_another() -> None:
    broker = PermissionBroker()
    a = Scripted("a")
    broker.attach(a)
    first = asyncio.create_task(broker.request(request("first"), expires_in=5))
    second = asyncio.create_task(broker.request(request("second"), expires_in=5))
    await settle()
    assert a.asked == ["first", "second"]
    a.answers.put_nowait(ALLOW)  # one answer: exactly one of the two calls goes on, the other keeps waiting
    done, waiting = await asyncio.wait({first, second}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1 and len(waiting) == 1
    assert len(broker.pending) == 1
    a.answers.put_nowait(DENY)
    results = await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert sorted(r.response.decision.value for r in results if r.response) == ["allow", "deny"]


async def test_listeners_hear_of_attach_detach_and_prompts() -> None:
    broker = PermissionBroker()
    changes: list[int] = []
    broker.on_change(lambda: changes.append(len(broker.pending)))
    a = Scripted("a")
    broker.attach(a)
    a.answers.put_nowait(ALLOW)
    await broker.request(request(), expires_in=5)
    broker.detach("a")
    assert changes == [0, 1, 0, 0]
    assert broker.prompts() == []


async def test_closing_ends_waiting_prompts_and_refuses_new_ones() -> None:
    broker = PermissionBroker()
    a = Scripted("a")
    broker.attach(a)
    call = asyncio.create_task(broker.request(request(), expires_in=5))
    await asyncio.wait_for(a.was_asked.wait(), 5)
    broker.close("mcphost is shutting down")
    result = await asyncio.wait_for(call, 5)
    await settle()
    assert (result.outcome, result.reason) == (Outcome.NO_APPROVER, "mcphost is shutting down")
    assert a.withdrawn == ["p1"]
    later = await broker.request(request("p2"), expires_in=5)
    assert later.outcome is Outcome.NO_APPROVER
