"""The shortcut's calls at the end of a session: each cut short once, through its task, so what a call shields (the
write of its record) always completes before the session ends."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pydantic_core
import pytest

from mcphost.serve.stdio import CallCut, Job, _Calls, parse_line, shortcut_message


def call(log: list[str], name: str, started: anyio.Event | None = None) -> Job:
    async def job(cut: CallCut) -> None:
        try:
            if started is not None:
                started.set()
            await anyio.sleep(5)  # the upstream's answer, which comes only if the call is never cut short
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.01)  # the record's write, which must not be cut short in turn
                log.append(f"{name} recorded")
            raise

    return job


async def test_calls_cut_short_finish_their_shielded_record_before_the_session_ends() -> None:
    log: list[str] = []
    started = anyio.Event()
    async with _Calls() as calls:
        calls.start(CallCut(call(log, "a", started)))
        calls.start(CallCut(call(log, "b")))
        await started.wait()
        calls.cancel()
    assert sorted(log) == ["a recorded", "b recorded"]


async def test_a_session_cancelled_while_waiting_for_its_calls_cuts_them_short_and_still_waits() -> None:
    log: list[str] = []
    started = anyio.Event()
    with anyio.CancelScope() as outer:
        async with anyio.create_task_group() as tg:

            async def session() -> None:
                async with _Calls() as calls:
                    calls.start(CallCut(call(log, "a", started)))
                    await started.wait()
                log.append("session left")  # never: the cancellation goes on once the calls ended

            tg.start_soon(session)
            await started.wait()
            await anyio.sleep(0.01)  # the session now waits for its call, as at the end of the agent's input
            outer.cancel()
    assert outer.cancelled_caught
    assert log == ["a recorded"]


async def test_a_call_that_fails_outside_its_own_handling_is_logged_and_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[str] = []

    async def broken(cut: CallCut) -> None:
        raise RuntimeError("a bug")

    async def fine(cut: CallCut) -> None:
        await anyio.sleep(0.01)
        done.append("fine")

    async with _Calls() as calls:
        calls.start(CallCut(broken))
        calls.start(CallCut(fine))
    assert done == ["fine"]
    assert "a bug" in caplog.text


async def test_a_call_its_agent_cancels_ends_quietly_and_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The agent's notifications/cancelled cuts one call short through what the call was given: that call ends
    # there, its shielded record written, with nothing logged as a failure, and the session's other calls carry on.
    log: list[str] = []
    started = anyio.Event()
    running: dict[str, CallCut] = {}

    async def cancelled_by_its_agent(cut: CallCut) -> None:
        running["a"] = cut
        await call(log, "a", started)(cut)
        log.append("a answered")  # never: the call was cut short

    async def other(cut: CallCut) -> None:
        await started.wait()
        running["a"].cancel()
        await anyio.sleep(0.02)
        log.append("b answered")

    async with _Calls() as calls:
        calls.start(CallCut(cancelled_by_its_agent))
        calls.start(CallCut(other))
    assert log == ["a recorded", "b answered"]
    assert "failed outside its own handling" not in caplog.text


async def test_a_call_cut_short_again_while_it_writes_its_record_still_writes_it() -> None:
    # The agent cancels, then its input ends: the second cut must not break into the shielded write the first began.
    log: list[str] = []
    started, writing = anyio.Event(), anyio.Event()
    handed: list[CallCut] = []

    async def cancelled_twice(cut: CallCut) -> None:
        handed.append(cut)
        try:
            started.set()
            await anyio.sleep(5)
        except BaseException:
            with anyio.CancelScope(shield=True):
                writing.set()
                await anyio.sleep(0.01)
                log.append("a recorded")
            raise

    async with _Calls() as calls:
        calls.start(CallCut(cancelled_twice))
        await started.wait()
        handed[0].cancel()
        await writing.wait()
        handed[0].cancel()
        calls.cancel()
    assert log == ["a recorded"]


async def test_a_call_cut_short_before_its_task_starts_runs_to_its_first_wait_and_is_cut_there() -> None:
    # The agent's input ends in the same read as its request: the call is cut before it ran, and must still reach
    # the gateway, which records it as cancelled.
    log: list[str] = []
    async with _Calls() as calls:
        calls.start(CallCut(call(log, "a")))
        calls.cancel()
    assert log == ["a recorded"]


@pytest.mark.parametrize("depth", [1, 60, 150, 190, 195, 196, 197, 198, 199, 200, 250, 600])
def test_what_the_shortcut_parses_the_sdks_parser_reads_too(depth: int) -> None:
    # pydantic-core's parser stops at a depth; the shortcut takes only what it would read. Brackets inside a string
    # (source code as an argument) are no depth: such a call is taken however many it holds.
    nested = json.loads("[" * depth + "]" * depth)
    code = "".join(f"rows[{n}] = {{'k': [{n}]}}\n" for n in range(400))
    for arguments in ({"deep": nested}, {"deep": nested, "text": code}):
        data = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": arguments}})
        try:
            pydantic_core.from_json(data)
        except ValueError:
            read = False
        else:
            read = True
        taken = shortcut_message(data.encode()) is not None
        assert read or not taken, depth
        assert taken or depth > 150, depth


SOURCE = "".join(f"rows[{n}] = {{'k': [{n}]}}\n" for n in range(300))  # a file's worth: read first, then looked over


@pytest.mark.parametrize("text", [SOURCE, "x"], ids=["long", "short"])
def test_a_message_the_sdks_parser_reads_otherwise_is_left_to_it_however_long(text: str) -> None:
    def line(arguments: dict[str, Any]) -> bytes:
        params = {"name": "call_tool_read", "arguments": {"args": {"text": text, **arguments}}}
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()

    assert shortcut_message(line({"n": 2**70})) is None  # orjson would round it; the SDK keeps every digit
    assert shortcut_message(line({"n": [[-(2**64) - 1]]})) is None
    deep: Any = []
    for _ in range(250):
        deep = [deep]
    assert shortcut_message(line({"deep": deep})) is None  # deeper than the SDK's parser goes
    # A float past 2**63 (any that large has no fraction) may be an integer orjson rounded: the SDK's, to be safe.
    assert shortcut_message(line({"f": 1e19})) is None or text == "x"
    plain = line({"n": 2**63 - 1, "f": 2.5e-300, "id": "12345678901234567890123"})
    taken = shortcut_message(plain)
    assert taken == json.loads(plain) or text == "x"  # short: a run of 19 digits sends it the long way, to be safe
    if text == SOURCE:
        assert taken is not None and taken["params"]["arguments"]["args"]["n"] == 2**63 - 1


@pytest.mark.parametrize("raw_id", ["NaN", "Infinity", "-Infinity", "1.5", "true", "{}", "[1]"])
def test_a_request_whose_id_is_no_string_or_integer_is_answered_as_invalid_not_taken_for_a_notification(
    raw_id: str,
) -> None:
    # The SDK's reader takes NaN and the infinities (no JSON): such a request passed for a notification, unanswered.
    line = '{"jsonrpc":"2.0","id":' + raw_id + ',"method":"tools/call","params":{"name":"call_tool_read"}}'
    answer = parse_line(line.encode())
    assert isinstance(answer, bytes), answer
    assert json.loads(answer) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid request: the id must be a string or a number"},
    }
    assert not isinstance(parse_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}'), bytes)
