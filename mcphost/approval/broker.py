"""The permission broker: pending prompts, and the approvers (editors, `mcphost approve`) that answer them.

The pending-action model: a call that needs a person becomes a prompt sent to every attached approver at once.
The first answer wins and the prompt is withdrawn from the others. An approver that disconnects stops counting;
when none is left for a prompt, the call ends as NO_APPROVER. An approver that attaches while prompts wait is
sent them too. Each prompt waits on its own, so one slow person never holds up another agent's calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from mcphost.approval.prompt import PendingPrompt, PermissionRequest, PermissionResponse

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
    reason: str | None = None  # why nobody answered, for the error message


@dataclass(slots=True)
class _Pending:
    request: PermissionRequest
    result: asyncio.Future[BrokerResult]
    started: float = field(default_factory=time.perf_counter)
    asking: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


class PermissionBroker:
    def __init__(self) -> None:
        self.approvers: dict[str, Approver] = {}
        self.pending: dict[str, _Pending] = {}
        self._listeners: list[Callable[[], None]] = []
        self._closed: str | None = None

    def on_change(self, listener: Callable[[], None]) -> None:
        """Called when approvers attach or leave and when prompts start or end (for `mcphost/status`)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            try:
                listener()
            except Exception:
                logger.exception("broker listener failed")

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

    async def request(self, request: PermissionRequest, *, expires_in: float) -> BrokerResult:
        """Ask every attached approver; the first answer wins. Never raises for what an approver does."""
        started = time.perf_counter()
        if self._closed is not None:
            return BrokerResult(Outcome.NO_APPROVER, reason=self._closed)
        if not self.approvers:
            return BrokerResult(Outcome.NO_APPROVER, reason="no editor or `mcphost approve` is attached")
        pending = _Pending(request, asyncio.get_running_loop().create_future())
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
        task = asyncio.get_running_loop().create_task(self._run(pending, approver), name=f"prompt-{approver.id}")
        pending.asking[approver.id] = task

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
