"""The permission broker with scripted approvers: who gets asked, which answer counts, what ends a prompt."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from mcphost.approval.broker import MAX_BATCH, ApproverGone, Outcome, PermissionBroker
from mcphost.approval.prompt import (
    Answer,
    BatchAnswer,
    PermissionBatch,
    PermissionBatchResult,
    PermissionRequest,
    PermissionResponse,
    PromptIntent,
)
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


# ---- batches


def in_session(prompt_id: str, session: str | None = "s1", operation: str = "write") -> PermissionRequest:
    return request(prompt_id).model_copy(
        update={"session_id": session, "client": "agent", "operation": operation, "tool": f"t-{prompt_id}"}
    )


@dataclass
class Batching(Scripted):
    """A scripted approver that shows batches: each batch waits for the answer the test releases."""

    batches: bool = True
    batched: list[list[str]] = field(default_factory=list)
    batch_answers: asyncio.Queue[PermissionBatchResult | Exception] = field(default_factory=asyncio.Queue)
    batch_withdrawn: list[str] = field(default_factory=list)
    was_batched: asyncio.Event = field(default_factory=asyncio.Event)

    async def ask_batch(self, batch: PermissionBatch) -> PermissionBatchResult:
        self.batched.append([r.id for r in batch.requests])
        self.was_batched.set()
        try:
            answer = await self.batch_answers.get()
        except asyncio.CancelledError:
            self.batch_withdrawn.append(batch.id)
            raise
        if isinstance(answer, Exception):
            raise answer
        return answer


def answers(*pairs: tuple[str, str], **extra: str) -> PermissionBatchResult:
    return PermissionBatchResult(
        answers=[BatchAnswer(id=i, decision=Answer(d), confirmed=extra.get(i)) for i, d in pairs]
    )


async def test_prompts_of_one_session_within_the_window_are_one_batch_and_each_gets_its_answer() -> None:
    broker = PermissionBroker()
    a = Batching("a")
    broker.attach(a)
    calls = [asyncio.create_task(broker.request(in_session(i), expires_in=5, batch_window=0.05)) for i in "xyz"]
    await asyncio.wait_for(a.was_batched.wait(), 5)
    assert a.batched == [["x", "y", "z"]] and a.asked == []
    a.batch_answers.put_nowait(answers(("x", "allow"), ("z", "deny")))  # y left out: denied
    x, y, z = await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert [r.response.decision if r.response else None for r in (x, y, z)] == ["allow", "deny", "deny"]
    assert x.batch is not None and x.batch == y.batch == z.batch
    assert y.reason is not None and "left this call out" in y.reason


async def test_a_window_that_gathers_one_prompt_asks_it_alone() -> None:
    broker = PermissionBroker()
    a = Batching("a")
    broker.attach(a)
    call = asyncio.create_task(broker.request(in_session("x"), expires_in=5, batch_window=0.02))
    await asyncio.wait_for(a.was_asked.wait(), 5)
    a.answers.put_nowait(ALLOW)
    result = await asyncio.wait_for(call, 5)
    assert result.response == ALLOW and result.batch is None and a.batched == []


async def test_sessions_and_sessionless_agents_without_a_name_are_never_batched_together() -> None:
    broker = PermissionBroker()
    a = Batching("a")
    broker.attach(a)
    nameless = in_session("n", session=None).model_copy(update={"client": None})
    calls = [
        asyncio.create_task(broker.request(r, expires_in=5, batch_window=0.05))
        for r in (in_session("x", "s1"), in_session("y", "s2"), nameless)
    ]
    await asyncio.wait_for(a.was_asked.wait(), 5)
    await asyncio.sleep(0.1)
    assert a.batched == [] and sorted(a.asked) == ["n", "x", "y"]
    for _ in calls:
        a.answers.put_nowait(ALLOW)
    await asyncio.wait_for(asyncio.gather(*calls), 5)


async def test_a_destructive_call_allowed_in_a_batch_without_its_name_is_denied() -> None:
    broker = PermissionBroker()
    a = Batching("a")
    broker.attach(a)
    reqs = [in_session("w"), in_session("d", operation="destructive"), in_session("e", operation="destructive")]
    calls = [asyncio.create_task(broker.request(r, expires_in=5, batch_window=0.02)) for r in reqs]
    await asyncio.wait_for(a.was_batched.wait(), 5)
    # "d" named (as server:tool), "e" named wrongly.
    a.batch_answers.put_nowait(answers(("w", "allow"), ("d", "allow"), ("e", "allow"), d="todo:t-d", e="todo:t-d"))
    w, d, e = await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert [r.response.decision if r.response else None for r in (w, d, e)] == ["allow", "allow", "deny"]
    assert e.reason is not None and "by name" in e.reason


async def test_a_batch_is_withdrawn_once_none_of_its_calls_waits() -> None:
    broker = PermissionBroker()
    a, b = Batching("a"), Scripted("b")
    broker.attach(a)
    broker.attach(b)
    calls = [asyncio.create_task(broker.request(in_session(i), expires_in=5, batch_window=0.02)) for i in "xy"]
    await asyncio.wait_for(a.was_batched.wait(), 5)
    b.answers.put_nowait(ALLOW)
    b.answers.put_nowait(DENY)
    first, second = await asyncio.wait_for(asyncio.gather(*calls), 5)
    await settle()
    assert {first.approver, second.approver} == {"scripted b"}
    assert len(a.batch_withdrawn) == 1


async def test_an_approver_that_leaves_mid_batch_leaves_its_calls_to_nobody() -> None:
    broker = PermissionBroker()
    a = Batching("a")
    broker.attach(a)
    calls = [asyncio.create_task(broker.request(in_session(i), expires_in=5, batch_window=0.02)) for i in "xy"]
    await asyncio.wait_for(a.was_batched.wait(), 5)
    broker.detach("a")
    results = await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert [r.outcome for r in results] == [Outcome.NO_APPROVER] * 2


async def test_a_batch_the_approver_cannot_answer_is_named_in_each_calls_reason() -> None:
    broker = PermissionBroker()
    a = Batching("a")
    broker.attach(a)
    calls = [asyncio.create_task(broker.request(in_session(i), expires_in=5, batch_window=0.02)) for i in "xy"]
    await asyncio.wait_for(a.was_batched.wait(), 5)
    a.batch_answers.put_nowait(ApproverGone("answered with an invalid result"))
    results = await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert all(r.outcome is Outcome.NO_APPROVER and "invalid result" in (r.reason or "") for r in results)


async def test_more_calls_than_a_batch_holds_make_another_batch() -> None:
    broker = PermissionBroker()
    a = Batching("a")
    broker.attach(a)
    ids = [f"c{i}" for i in range(MAX_BATCH + 2)]
    calls = [asyncio.create_task(broker.request(in_session(i), expires_in=5, batch_window=0.05)) for i in ids]
    await asyncio.wait_for(a.was_batched.wait(), 5)
    assert a.batched[0] == ids[:MAX_BATCH]  # full: sent at once, before the window closed
    a.batch_answers.put_nowait(answers(*[(i, "allow") for i in ids[:MAX_BATCH]]))
    a.batch_answers.put_nowait(answers(*[(i, "allow") for i in ids[MAX_BATCH:]]))
    results = await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert a.batched[1] == ids[MAX_BATCH:]
    assert all(r.response == PermissionResponse(decision=Answer.ALLOW) for r in results)
