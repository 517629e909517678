"""No call without its record: hostile input is refused before it is forwarded, a call cut short is recorded as
cancelled, a write is on record before the upstream sees it, and a log that cannot be written stops calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mcphost.approval.prompt import PermissionRequest, PermissionResponse
from mcphost.errors import ErrorCode
from mcphost.intent import ToolVariant
from tests.helpers import lock_held_by_another_process
from tests.pipeline.conftest import InProcess, ScriptedApprover

READ, WRITE = ToolVariant.READ, ToolVariant.WRITE
ALLOW_ALL = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'
# probe:slow is marked read-only: called as a write, it passes only with the annotation check lenient.
SLOW_AS_WRITE = ALLOW_ALL + "[intent_declaration]\nstrict_server_validation = false\n"


class Waiting(ScriptedApprover):
    """A person who never answers: the call waits on the prompt until it is cut short."""

    def __init__(self) -> None:
        super().__init__()
        self.prompted = asyncio.Event()

    async def ask(self, request: PermissionRequest) -> PermissionResponse:
        self.asked.append(request)
        self.prompted.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def gate_files(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "started", tmp_path / "gate"


async def wait_for(path: Path) -> None:
    async with asyncio.timeout(10):
        while not path.exists():  # noqa: ASYNC110 (a file the upstream creates: no event to wait on)
            await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    "arguments",
    [
        {"intent": {"operation_type": "read", "reason": "lone \udfff surrogate"}},
        {"intent_operation_type": "read", "intent_reason": "flat \ud800 form"},
        {"intent": {"operation_type": "read"}, "args": {"text\udfff": "a key"}},
        {"intent": {"operation_type": "read"}, "args_json": '{"text": "escaped \\udfff in JSON text"}'},
    ],
    ids=["reason", "flat-reason", "argument-key", "args_json-escape"],
)
async def test_text_that_is_not_valid_unicode_is_refused_before_it_is_forwarded(
    in_process: Any, arguments: dict[str, Any], tmp_path: Path
) -> None:
    async with in_process() as env:
        outcome = await env.host.gateway.call(READ, {"name": "probe:read_notes", **arguments}, _ctx())
    assert outcome.error is not None and outcome.error.code is ErrorCode.INVALID_ARGS
    assert "not valid Unicode" in outcome.error.message and outcome.result is None
    [record] = env.records()
    assert record["status"] == "rejected" and record["error"]["code"] == "INVALID_ARGS"


async def test_arguments_nested_too_deep_are_refused_and_recorded(in_process: Any) -> None:
    deep: Any = "bottom"
    for _ in range(500):
        deep = {"d": deep}
    async with in_process() as env:
        as_object = await env.call(READ, "probe:read_notes", args={"text": deep})
        as_json = await env.host.gateway.call(
            READ,
            {"name": "probe:read_notes", "intent": {"operation_type": "read"}, "args_json": "[" * 5000 + "]" * 5000},
            _ctx(),
        )
    for outcome in (as_object, as_json):
        assert outcome.error is not None and outcome.error.code is ErrorCode.INVALID_ARGS
        assert "deeper than" in outcome.error.message
    assert [r["status"] for r in env.records()] == ["rejected", "rejected"]


async def test_a_nan_from_an_agents_message_is_refused_and_recorded_not_forwarded_as_null(in_process: Any) -> None:
    # The SDK's JSON reader takes `NaN` and `1e400` from an agent's message; orjson wrote them as null, so the tool
    # was called with null and the record said null, where the agent had sent neither.
    async with in_process() as env:
        outcome = await env.call(READ, "probe:read_notes", args={"text": float("nan")})
    assert outcome.error is not None and outcome.error.code is ErrorCode.INVALID_ARGS
    assert "arguments.args.text is NaN" in outcome.error.message and outcome.result is None
    [record] = env.records()
    assert record["status"] == "rejected" and record["error"]["code"] == "INVALID_ARGS"
    assert record.get("forwarded") is not True


async def test_a_call_cancelled_while_its_prompt_waits_is_recorded_as_cancelled(in_process: Any) -> None:
    async with in_process() as env:
        person = Waiting()
        env.host.broker.attach(person)
        task = asyncio.create_task(env.call(WRITE, "probe:plain_echo", args={"text": "x"}))
        async with asyncio.timeout(10):
            await person.prompted.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    [record] = env.records()
    assert record["status"] == "cancelled" and record["forwarded"] is False
    assert record["server"] == "probe" and record["tool"] == "plain_echo"


async def test_a_call_cancelled_in_the_upstream_is_recorded_as_cancelled_after_forwarding(
    in_process: Any, tmp_path: Path
) -> None:
    started, gate = gate_files(tmp_path)
    async with in_process(ALLOW_ALL) as env:
        task = asyncio.create_task(env.call(READ, "probe:slow", args={"started": str(started), "gate": str(gate)}))
        await wait_for(started)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.touch()
    [record] = env.records()
    assert record["status"] == "cancelled" and record["forwarded"] is True


async def test_a_write_is_on_record_before_the_upstream_sees_it(in_process: Any, tmp_path: Path) -> None:
    started, gate = gate_files(tmp_path)
    async with in_process(SLOW_AS_WRITE) as env:
        task = asyncio.create_task(slow_write(env, started, gate))
        await wait_for(started)
        # The upstream is inside the call: the log already says so.
        lines = [json.loads(line) for line in env.box.log.read_text().splitlines()]
        [start] = [r for r in lines if r["type"] == "tool_call_started"]
        assert start["status"] == "started" and start["tool"] == "slow"
        assert start["decision"]["outcome"] == "allow"
        gate.touch()
        outcome = await task
    assert outcome.error is None
    [done] = env.records()
    assert done["started_id"] == start["id"] and done["status"] == "success"


async def test_a_read_is_not_recorded_twice(in_process: Any) -> None:
    async with in_process() as env:
        await env.call(READ, "probe:read_notes", args={"text": "x"})
    lines = [json.loads(line) for line in env.box.log.read_text().splitlines()]
    assert [r["type"] for r in lines if r["type"].startswith("tool_call")] == ["tool_call"]


def slow_write(env: InProcess, started: Path, gate: Path) -> Any:
    """probe:slow called as a write: it touches `started`, then answers once `gate` exists."""
    return env.call(WRITE, "probe:slow", args={"started": str(started), "gate": str(gate)})


def full_disk(env: InProcess) -> None:
    """The log's next write fails with ENOSPC: the live file is /dev/full."""
    env.host.activity.close()
    log = env.box.log
    if log.exists():
        log.unlink()
    log.symlink_to("/dev/full")


async def test_on_a_full_disk_a_write_is_refused_before_it_is_forwarded(in_process: Any, tmp_path: Path) -> None:
    started, gate = gate_files(tmp_path)
    gate.touch()
    async with in_process(SLOW_AS_WRITE) as env:
        full_disk(env)
        outcome = await slow_write(env, started, gate)
    assert outcome.error is not None and outcome.error.code is ErrorCode.AUDIT_UNAVAILABLE
    assert "not forwarded" in outcome.error.message and "Free space" in outcome.error.message
    assert not started.exists(), "the upstream was reached although the call was refused"


async def test_a_log_dir_anyone_may_write_refuses_calls_before_they_are_forwarded_and_says_how_to_fix_it(
    in_process: Any, tmp_path: Path
) -> None:
    started, gate = gate_files(tmp_path)
    gate.touch()
    async with in_process(SLOW_AS_WRITE) as env:
        env.host.activity.close()  # the next record opens the log again, and looks at its directory
        env.box.data.chmod(0o777)
        try:
            outcome = await slow_write(env, started, gate)
        finally:
            env.box.data.chmod(0o700)
    assert outcome.error is not None and outcome.error.code is ErrorCode.AUDIT_UNAVAILABLE
    assert f"chmod o-w {env.box.data}" in outcome.error.message and "not forwarded" in outcome.error.message
    assert not started.exists(), "the upstream was reached although the call was refused"


async def test_a_write_refused_on_a_full_disk_is_not_left_as_outcome_unknown_once_the_disk_is_back(
    in_process: Any, tmp_path: Path
) -> None:
    # The start is held in memory and written once the disk takes writes again; its outcome must name it, or
    # `activity list --status started` shows a call that never ran as "outcome unknown".
    from mcphost.activity.query import RecordFilter, matching_newest_first

    started, gate = gate_files(tmp_path)
    gate.touch()
    async with in_process(SLOW_AS_WRITE) as env:
        full_disk(env)
        outcome = await slow_write(env, started, gate)
        assert outcome.error is not None and outcome.error.code is ErrorCode.AUDIT_UNAVAILABLE
        env.host.activity.close()
        env.box.log.unlink()  # the disk has room again
        await env.call(READ, "probe:read_notes", args={"text": "x"})
    lines = [json.loads(line) for line in env.box.log.read_text().splitlines()]
    [start] = [r for r in lines if r["type"] == "tool_call_started"]
    [refused] = [r for r in lines if r["type"] == "tool_call" and r["tool"] == "slow"]
    assert refused["started_id"] == start["id"] and refused["error"]["code"] == "AUDIT_UNAVAILABLE"
    assert list(matching_newest_first(env.box.log, RecordFilter(status="started"))) == []
    assert not started.exists()


async def test_a_write_cancelled_while_its_start_is_made_durable_names_that_start(
    in_process: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process(ALLOW_ALL) as env:
        activity = env.host.activity
        real = activity.write
        writing = asyncio.Event()

        async def slow_start(record: Any, **kw: Any) -> bool:
            durable = await real(record, **kw)
            if record.type == "tool_call_started":
                writing.set()
                await asyncio.Event().wait()  # the fsync the cancellation arrives in
            return durable

        monkeypatch.setattr(activity, "write", slow_start)
        task = asyncio.create_task(env.call(WRITE, "probe:plain_echo", args={"text": "x"}))
        async with asyncio.timeout(10):
            await writing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    lines = [json.loads(line) for line in env.box.log.read_text().splitlines()]
    [start] = [r for r in lines if r["type"] == "tool_call_started"]
    [done] = [r for r in lines if r["type"] == "tool_call"]
    assert done["status"] == "cancelled" and done["forwarded"] is False and done["started_id"] == start["id"]


async def test_on_a_full_disk_a_read_result_is_withheld(in_process: Any) -> None:
    async with in_process() as env:
        full_disk(env)
        outcome = await env.call(READ, "probe:read_notes", args={"text": "x"})
    assert outcome.error is not None and outcome.error.code is ErrorCode.AUDIT_UNAVAILABLE
    assert outcome.result is None and "withheld" in outcome.error.message


async def test_while_the_log_cannot_be_written_a_read_is_not_forwarded_and_the_record_says_what_the_agent_got(
    in_process: Any, tmp_path: Path
) -> None:
    started, gate = gate_files(tmp_path)
    gate.touch()
    slow = {"started": str(started), "gate": str(gate)}
    async with in_process() as env:
        full_disk(env)
        # The first read meets the full disk only once it has run: its result is withheld.
        first = await env.call(READ, "probe:read_notes", args={"text": "x"})
        # Now the log is known to fail: the next read tries the disk first, and is not forwarded.
        second = await env.call(READ, "probe:slow", args=slow)
        assert not started.exists(), "a read ran while its record could not be written"
        env.host.activity.close()
        env.box.log.unlink()  # the disk has room again
        third = await env.call(READ, "probe:slow", args=slow)
    assert first.error is not None and "withheld" in first.error.message
    assert second.error is not None and second.error.code is ErrorCode.AUDIT_UNAVAILABLE
    assert "not forwarded" in second.error.message
    assert third.error is None and started.exists()
    # Every record held while the disk was full is written, in order, saying what its agent was told.
    records = env.records()
    assert [(r["tool"], r["status"]) for r in records] == [
        ("read_notes", "error"),
        ("slow", "error"),
        ("slow", "success"),
    ]
    assert records[0]["error"]["code"] == records[1]["error"]["code"] == "AUDIT_UNAVAILABLE"
    assert records[0]["forwarded"] is True and records[1].get("forwarded") is not True


async def test_on_failure_continue_lets_calls_run_while_the_disk_is_full(in_process: Any) -> None:
    async with in_process(ALLOW_ALL + '[log]\non_failure = "continue"\n') as env:
        full_disk(env)
        outcome = await env.call(WRITE, "probe:plain_echo", args={"text": "x"})
    assert outcome.error is None and outcome.result is not None


def _ctx() -> Any:
    from mcphost.gateway.service import CallContext

    return CallContext(session_id="s", client="pytest")


async def test_a_log_locked_by_a_process_that_does_not_let_go_refuses_calls_and_names_that_process(
    in_process: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcphost.activity import writer

    started, gate = gate_files(tmp_path)
    gate.touch()
    monkeypatch.setattr(writer, "LOCK_WAIT_S", 0.2)
    async with in_process(SLOW_AS_WRITE) as env:
        with lock_held_by_another_process(env.box.log) as holder:
            first = await slow_write(env, started, gate)
            # Once the lock was found held, a call does not wait the whole time again: this one would hang here.
            monkeypatch.setattr(writer, "LOCK_WAIT_S", 3600.0)
            second = await env.call(READ, "probe:read_notes", args={"text": "x"})
            assert not started.exists(), "a write ran while its record could not be written"
        third = await env.call(READ, "probe:read_notes", args={"text": "y"})
    for refused in (first, second):
        assert refused.error is not None and refused.error.code is ErrorCode.AUDIT_UNAVAILABLE
        message = refused.error.message
        assert "not forwarded" in message and f"process {holder.pid}" in message and "Resume or end" in message
        assert "Free space" not in message
    assert third.error is None
    # Nothing lost: the refused calls' records, held meanwhile, are written once the holder lets go.
    assert [(r["tool"], r["status"]) for r in env.records()] == [
        ("slow", "error"),
        ("read_notes", "error"),
        ("read_notes", "success"),
    ]
