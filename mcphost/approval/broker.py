"""The permission broker: pending prompts, and the approvers (editors, `mcphost approve`) that answer them.

The pending-action model: a call that needs a person becomes a prompt sent to every attached approver at once.
The first answer wins and the prompt is withdrawn from the others. An approver that disconnects stops counting;
when none is left for a prompt, the call ends as NO_APPROVER. An approver that attaches while prompts wait is
sent them too. Each prompt waits on its own, so one slow person never holds up another agent's calls.

Batches: an approver that shows batches (`batches = True`, `ask_batch`) gets the prompts of one agent session that
arrive within the policy's `batch_window` as one `PermissionBatch` once the window (counted from the first) closes;
a window that gathered one prompt sends it alone. Each call in a batch still waits, expires and is answered on its
own: one answered elsewhere or expired leaves the batch (its answer there is ignored), and the batch is withdrawn
once none of its calls waits any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from mcphost.approval.prompt import (
    PendingPrompt,
    PermissionBatch,
    PermissionBatchResult,
    PermissionRequest,
    PermissionResponse,
    batch_response,
)
from mcphost.errors import tell_each

logger = logging.getLogger(__name__)


class ApproverGone(Exception):
    """The approver can no longer answer: it disconnected, shut down, or answered with something unusable."""


class Approver(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def label(self) -> str:
        """Who answered, for the record: the editor's name and connection."""
        ...

    async def ask(self, request: PermissionRequest) -> PermissionResponse:
        """The person's answer. Raises ApproverGone; on cancellation, withdraws the prompt from the person."""
        ...


class BatchApprover(Approver, Protocol):
    """An approver that can show several calls of one agent session as one question."""

    batches: bool

    async def ask_batch(self, batch: PermissionBatch) -> PermissionBatchResult:
        """The person's answers. Raises ApproverGone; on cancellation, withdraws the batch from the person."""
        ...


def takes_batches(approver: Approver) -> bool:
    return getattr(approver, "batches", False) is True and callable(getattr(approver, "ask_batch", None))


# More calls than this in one window make a new batch: a list a person can still read.
MAX_BATCH = 20


def batch_key(request: PermissionRequest) -> str | None:
    """Which prompts may share a batch: those of one agent session. A 2026-07-28 agent over HTTP has no session
    (each request stands alone), so its prompts go together by the client's name; an agent with neither is never
    batched."""
    if request.session_id is not None:
        return f"session:{request.session_id}"
    if request.client:
        return f"client:{request.client}"
    return None


class Outcome(StrEnum):
    ANSWERED = "answered"
    TIMEOUT = "timeout"
    NO_APPROVER = "no_approver"


@dataclass(frozen=True, slots=True)
class BrokerResult:
    outcome: Outcome
    response: PermissionResponse | None = None
    approver: str | None = None
    wait_ms: float = 0.0
    reason: str | None = None  # why nobody answered, or why a batch's answer was turned into a deny
    batch: str | None = None  # the batch the answer came in


class _Asking(Protocol):
    def cancel(self, msg: Any | None = None) -> Any: ...


@dataclass(slots=True)
class _Pending:
    request: PermissionRequest
    result: asyncio.Future[BrokerResult]
    batch_window: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    # approver id -> its question under way: a task of its own, or a place in a batch
    asking: dict[str, _Asking] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class _Batch:
    approver: BatchApprover
    key: str
    items: list[_Pending] = field(default_factory=list)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[None] | None = None


@dataclass(eq=False, slots=True)
class _InBatch:
    """One prompt's place in a batch, cancelled as a task would be: the prompt leaves the batch, and a batch left
    with no prompt stops gathering or is withdrawn from the person."""

    broker: PermissionBroker
    batch: _Batch
    pending: _Pending

    def cancel(self, msg: Any | None = None) -> bool:
        batch = self.batch
        if self.pending in batch.items:
            batch.items.remove(self.pending)
        self.broker._lost(self.pending, batch.approver.id)
        if not batch.items:
            if batch.task is not None:
                batch.task.cancel()
            else:
                self.broker._stop_gathering(batch)
        return True


class PermissionBroker:
    def __init__(self) -> None:
        self.approvers: dict[str, Approver] = {}
        self.pending: dict[str, _Pending] = {}
        self._gathering: dict[tuple[str, str], _Batch] = {}
        self._listeners: list[Callable[[], None]] = []
        self._closed: str | None = None

    def on_change(self, listener: Callable[[], None]) -> None:
        """Called when approvers attach or leave and when prompts start or end (for `mcphost/status`)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        tell_each(self._listeners, who="broker")

    def prompts(self) -> list[PendingPrompt]:
        return [
            PendingPrompt(
                id=p.request.id,
                variant=p.request.variant,
                server=p.request.server,
                tool=p.request.tool,
                expires_at=p.request.expires_at,
            )
            for p in self.pending.values()
        ]

    # ---- approvers

    def attach(self, approver: Approver) -> None:
        self.approvers[approver.id] = approver
        for pending in self.pending.values():
            self._ask(pending, approver)
        self._changed()

    def detach(self, approver_id: str) -> None:
        if self.approvers.pop(approver_id, None) is None:
            return
        for pending in list(self.pending.values()):
            task = pending.asking.get(approver_id)
            if task is not None:
                task.cancel()
        self._changed()

    # ---- prompts

    async def request(
        self, request: PermissionRequest, *, expires_in: float, batch_window: float = 0.0
    ) -> BrokerResult:
        """Ask every attached approver; the first answer wins. Never raises for what an approver does.
        `batch_window`: seconds this prompt may wait for others of its agent session, for approvers that batch."""
        started = time.perf_counter()
        if self._closed is not None:
            return BrokerResult(Outcome.NO_APPROVER, reason=self._closed)
        if not self.approvers:
            return BrokerResult(Outcome.NO_APPROVER, reason="no editor or `mcphost approve` is attached")
        pending = _Pending(request, asyncio.get_running_loop().create_future(), batch_window)
        self.pending[request.id] = pending
        for approver in list(self.approvers.values()):
            self._ask(pending, approver)
        self._changed()
        try:
            return await asyncio.wait_for(asyncio.shield(pending.result), expires_in)
        except TimeoutError:
            return BrokerResult(Outcome.TIMEOUT, wait_ms=ms_since(started))
        finally:
            # Answered, expired, or the call itself was cancelled: the prompt leaves every other screen.
            del self.pending[request.id]
            for task in list(pending.asking.values()):
                task.cancel()
            self._changed()

    def close(self, reason: str) -> None:
        """End every waiting prompt as unanswerable, and refuse new ones (the daemon is stopping)."""
        self._closed = reason
        for pending in self.pending.values():
            if not pending.result.done():
                pending.result.set_result(
                    BrokerResult(Outcome.NO_APPROVER, wait_ms=ms_since(pending.started), reason=reason)
                )

    def _ask(self, pending: _Pending, approver: Approver) -> None:
        if approver.id in pending.asking or pending.result.done():
            return
        together = batch_key(pending.request)
        if pending.batch_window > 0 and together is not None and takes_batches(approver):
            self._gather(pending, approver, together)  # type: ignore[arg-type]  # takes_batches checked the shape
            return
        self._ask_alone(pending, approver)

    def _ask_alone(self, pending: _Pending, approver: Approver) -> None:
        task = asyncio.get_running_loop().create_task(self._run(pending, approver), name=f"prompt-{approver.id}")
        pending.asking[approver.id] = task

    # ---- batches

    def _gather(self, pending: _Pending, approver: BatchApprover, together: str) -> None:
        key = (approver.id, together)
        batch = self._gathering.get(key)
        if batch is None:
            batch = self._gathering[key] = _Batch(approver, together)
            batch.timer = asyncio.get_running_loop().call_later(pending.batch_window, self._flush, batch)
        batch.items.append(pending)
        pending.asking[approver.id] = _InBatch(self, batch, pending)
        if len(batch.items) >= MAX_BATCH:
            self._flush(batch)

    def _stop_gathering(self, batch: _Batch) -> None:
        if self._gathering.get((batch.approver.id, batch.key)) is batch:
            del self._gathering[(batch.approver.id, batch.key)]
        if batch.timer is not None:
            batch.timer.cancel()

    def _flush(self, batch: _Batch) -> None:
        """The window closed: one prompt goes alone, more go as one batch."""
        self._stop_gathering(batch)
        live = [p for p in batch.items if not p.result.done()]
        if not live:
            return
        if len(live) == 1:
            alone = live[0]
            batch.items.clear()
            alone.asking.pop(batch.approver.id, None)
            self._ask_alone(alone, batch.approver)
            return
        batch.items[:] = live
        batch.task = asyncio.get_running_loop().create_task(self._run_batch(batch), name=f"batch-{batch.approver.id}")

    async def _run_batch(self, batch: _Batch) -> None:
        approver = batch.approver
        items = list(batch.items)
        started = min(p.started for p in items)
        question = PermissionBatch(
            id=batch.id,
            session_id=items[0].request.session_id,
            client=items[0].request.client,
            requests=[p.request for p in items],
            expires_at=min(p.request.expires_at for p in items),
        )
        try:
            result = await approver.ask_batch(question)
        except asyncio.CancelledError:
            for pending in list(batch.items):
                batch.items.remove(pending)
                self._lost(pending, approver.id)
            raise
        except Exception as exc:  # ApproverGone, or an approver's bug: for its prompts, "no answer" from it
            if not isinstance(exc, ApproverGone):
                logger.exception("approver %s failed on batch %s", approver.label, batch.id)
            logger.info("approver %s cannot answer batch %s: %s", approver.label, batch.id, exc)
            for pending in list(batch.items):
                batch.items.remove(pending)
                pending.failures.append(f"{approver.label}: {exc}")
                self._lost(pending, approver.id)
            return
        answers = {answer.id: answer for answer in result.answers}
        for pending in list(batch.items):
            batch.items.remove(pending)
            pending.asking.pop(approver.id, None)
            if pending.result.done():
                continue  # answered elsewhere meanwhile
            response, why = batch_response(pending.request, answers.get(pending.request.id))
            pending.result.set_result(
                BrokerResult(
                    Outcome.ANSWERED,
                    response=response,
                    approver=approver.label,
                    wait_ms=ms_since(started),
                    reason=why,
                    batch=batch.id,
                )
            )

    async def _run(self, pending: _Pending, approver: Approver) -> None:
        try:
            response = await approver.ask(pending.request)
        except ApproverGone as exc:
            logger.info("approver %s cannot answer prompt %s: %s", approver.label, pending.request.id, exc)
            pending.failures.append(f"{approver.label}: {exc}")
            self._lost(pending, approver.id)
            return
        except asyncio.CancelledError:
            # Withdrawn (answered elsewhere, expired) or the approver detached: in the latter case the prompt
            # may have nobody left to ask.
            self._lost(pending, approver.id)
            raise
        except Exception as exc:  # an approver's bug must not end the call any other way than "no answer"
            logger.exception("approver %s failed on prompt %s", approver.label, pending.request.id)
            pending.failures.append(f"{approver.label}: {exc}")
            self._lost(pending, approver.id)
            return
        pending.asking.pop(approver.id, None)
        if not pending.result.done():
            pending.result.set_result(
                BrokerResult(
                    Outcome.ANSWERED, response=response, approver=approver.label, wait_ms=ms_since(pending.started)
                )
            )

    def _lost(self, pending: _Pending, approver_id: str) -> None:
        pending.asking.pop(approver_id, None)
        if pending.asking or pending.result.done():
            return
        reason = "the editor that was asked disconnected and no other approver is attached"
        if pending.failures:
            reason = "no attached approver could answer (" + "; ".join(pending.failures) + ")"
        with contextlib.suppress(asyncio.InvalidStateError):
            pending.result.set_result(
                BrokerResult(Outcome.NO_APPROVER, wait_ms=ms_since(pending.started), reason=reason)
            )


def ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
