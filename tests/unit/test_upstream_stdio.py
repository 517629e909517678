"""Reading an upstream's stdout: JSON-RPC lines, lines over the limit counted without being kept, and the lane's
answers taken as they arrive."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from mcphost.upstream import stdio
from mcphost.upstream.guard import MessageTooLarge
from mcphost.upstream.spawn import Launch, default_environment
from mcphost.upstream.stdio import LineReader, RawLane, parse_line


def test_lines_are_split_across_chunks_and_blank_ones_skipped() -> None:
    reader = LineReader(limit=100)
    assert reader.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert reader.feed(b":2}\n\n  \n") == [b'{"b":2}']


def test_a_line_over_the_limit_is_counted_in_pieces_and_its_envelope_kept() -> None:
    reader = LineReader(limit=1000)
    body = b'{"jsonrpc":"2.0","id":12,"result":{"text":"' + b"x" * 5000
    out = []
    for start in range(0, len(body), 700):
        out += reader.feed(body[start : start + 700])
    out += reader.feed(b'"}}\n{"jsonrpc":"2.0","id":13,"result":{}}\n')
    oversized, normal = out
    assert isinstance(oversized, MessageTooLarge)
    assert oversized.size == len(body) + 3
    assert (oversized.kind, oversized.request_id, oversized.limit) == ("response", 12, 1000)
    assert normal == b'{"jsonrpc":"2.0","id":13,"result":{}}'


def test_a_line_exactly_at_the_limit_is_kept() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert LineReader(limit=len(line)).feed(line + b"\n") == [line]


def test_a_line_that_is_not_json_rpc_becomes_an_error_item() -> None:
    assert isinstance(parse_line(b"not json"), Exception)
    parsed = parse_line(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    assert isinstance(parsed, SessionMessage) and isinstance(parsed.message, types.JSONRPCResponse)


def test_an_answer_pydantic_refuses_for_what_it_holds_still_reaches_its_request() -> None:
    # A lone surrogate: taken as Python reads it, for the guard to screen (the tool at fault dropped).
    parsed = parse_line(b'{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"t","description":"a \\ud800"}]}}')
    assert isinstance(parsed, SessionMessage) and isinstance(parsed.message, types.JSONRPCResponse)
    assert parsed.message.id == 4 and parsed.message.result["tools"][0]["description"] == "a \ud800"
    # Nested past Python's reader too: its request is answered with why, at once rather than at its timeout.
    deep = b'{"jsonrpc":"2.0","id":5,"result":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    failed = parse_line(deep)
    assert isinstance(failed, SessionMessage) and isinstance(failed.message, types.JSONRPCError)
    assert failed.message.id == 5 and "nests too deep" in failed.message.error.message
    # A request or notification that deep is no answer to anything: not JSON-RPC, as before.
    assert isinstance(
        parse_line(b'{"jsonrpc":"2.0","method":"x","params":' + b"[" * 100_000 + b"]" * 100_000 + b"}"), Exception
    )


# ---- the lane's answers, taken as they arrive

# A server that answers each tools/call the way its tool's name says: at once; after a notification of its own;
# or in two writes, the line split in the middle.
_SERVER = r"""
import json, sys, time
for raw in sys.stdin:
    request = json.loads(raw)
    answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"content": [], "isError": False}}) + "\n"
    how = request["params"]["name"]
    if how == "after_a_notice":
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                     "params": {"level": "info", "data": "first"}}) + "\n")
        sys.stdout.flush()
        time.sleep(0.05)
    elif how == "split":
        sys.stdout.write(answer[:20])
        sys.stdout.flush()
        time.sleep(0.05)
        answer = answer[20:]
    sys.stdout.write(answer)
    sys.stdout.flush()
"""


@asynccontextmanager
async def _server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[RawLane, Any, list[bytes]]]:
    """The lane and the session's read stream of a running `_SERVER`, and every chunk its stdout reader read."""
    read: list[bytes] = []

    class Watched(stdio.LineReader):
        def feed(self, chunk: bytes) -> list[bytes | MessageTooLarge]:
            read.append(chunk)
            return super().feed(chunk)

    monkeypatch.setattr(stdio, "LineReader", Watched)
    lanes: list[RawLane] = []
    launch = Launch(sys.executable, ("-c", _SERVER), default_environment(), None)
    async with stdio.stdio_transport("t", launch, 1 << 20, lanes.append) as (
        from_server,
        _,
    ):
        yield lanes[0], from_server, read


async def test_a_lane_answer_arriving_whole_while_the_reader_waits_never_reaches_the_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with _server(monkeypatch) as (lane, _, read):
        for n in range(3):
            answer = await lane.request("tools/call", {"name": "at_once"}, within=10)
            assert answer["id"] == f"{stdio.RAW_ID_PREFIX}{n}" and answer["result"]["isError"] is False
    assert read == []


async def test_a_lane_answer_split_across_writes_is_joined_by_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _server(monkeypatch) as (lane, _, read):
        answer = await lane.request("tools/call", {"name": "split"}, within=10)
    assert answer["result"] == {"content": [], "isError": False}
    assert len(read) == 2


async def test_a_lane_answer_waits_behind_a_line_the_session_has_not_taken_yet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The server's notice came first: its answer must not overtake it while the reader still holds the notice.
    async with _server(monkeypatch) as (lane, from_server, read), anyio.create_task_group() as tg:
        answers: list[Any] = []

        async def call() -> None:
            answers.append(await lane.request("tools/call", {"name": "after_a_notice"}, within=10))

        tg.start_soon(call)
        with anyio.move_on_after(0.5):
            while not answers:
                await anyio.lowlevel.checkpoint()
        assert answers == []  # the reader holds the notice, so the answer is behind it
        notice = await from_server.receive()
        assert notice.message.method == "notifications/message"
    assert answers[0]["result"]["isError"] is False
    assert len(read) == 2  # the notice, then the answer: both through the reader
    # The reader has taken all it was given, so the next answer arriving whole is taken as it arrives again.
    async with _server(monkeypatch) as (lane, from_server, read), anyio.create_task_group() as tg:
        first = anyio.Event()

        async def call_after_a_notice() -> None:
            await lane.request("tools/call", {"name": "after_a_notice"}, within=10)
            first.set()

        tg.start_soon(call_after_a_notice)
        assert (await from_server.receive()).message.method == "notifications/message"
        await first.wait()
        answer = await lane.request("tools/call", {"name": "at_once"}, within=10)
    assert b"notifications/message" in read[0]
    assert not any(answer["id"].encode() in chunk for chunk in read)


async def test_what_a_caller_does_meanwhile_runs_once_the_request_is_out(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _server(monkeypatch) as (lane, _, _read):
        ran: list[str] = []
        answer = await lane.request("tools/call", {"name": "at_once"}, within=10, meanwhile=lambda: ran.append("x"))
    assert ran == ["x"] and answer["result"]["isError"] is False


async def test_an_answer_the_tap_fails_to_take_still_reaches_its_call(monkeypatch: pytest.MonkeyPatch) -> None:
    take = stdio.RawLane.take
    failures: list[bytes] = []

    def fails_once(self: RawLane, line: bytes) -> bool:
        if not failures:
            failures.append(line)
            raise RuntimeError("a bug")
        return take(self, line)

    monkeypatch.setattr(stdio.RawLane, "take", fails_once)
    async with _server(monkeypatch) as (lane, _, read):
        answer = await lane.request("tools/call", {"name": "at_once"}, within=10)
    assert failures and answer["result"]["isError"] is False
    assert len(read) == 1  # by way of the reader


async def test_an_upstreams_answers_are_read_without_asyncios_256_kib_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    # A read allocates the buffer it asks for: 256 KiB, past malloc's mmap threshold, is an mmap and a munmap a call.
    import tracemalloc

    from mcphost.pipes import READ_CHUNK

    async with _server(monkeypatch) as (lane, _, _):
        await lane.request("tools/call", {"name": "at_once"}, within=10)
        tracemalloc.start()
        try:
            for _ in range(3):
                await lane.request("tools/call", {"name": "at_once"}, within=10)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 2 * READ_CHUNK < 256 * 1024


# ---- the lane's time limits: one timer, set for the earliest deadline


class _Stdin:
    """What a lane writes its requests to: every line kept, the OS taking each whole."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.transport = self

    def write(self, data: bytes) -> None:
        self.lines.append(json.loads(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    async def drain(self) -> None:
        return None


async def test_each_request_fails_at_its_own_deadline_and_one_answered_in_time_never_does() -> None:
    stdin = _Stdin()
    lane = RawLane(stdin)  # type: ignore[arg-type]
    failed: dict[str, float] = {}
    answered: dict[str, Any] = {}
    start = anyio.current_time()

    async def ask(name: str, within: float) -> None:
        try:
            answered[name] = await lane.request("tools/call", {"name": name}, within=within)
        except stdio.LaneTimeout:
            failed[name] = anyio.current_time() - start

    with anyio.fail_after(10):  # a deadline that is never watched would hang here
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "late", 0.4)
            await anyio.lowlevel.checkpoint()
            tg.start_soon(ask, "early", 0.1)  # asked after "late", due before it: the timer is set again, sooner
            tg.start_soon(ask, "answered", 0.2)
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            answered_id = next(line["id"] for line in stdin.lines if line["params"]["name"] == "answered")
            assert lane.take(json.dumps({"jsonrpc": "2.0", "id": answered_id, "result": {"content": []}}).encode())
    assert set(failed) == {"early", "late"}
    assert 0.1 <= failed["early"] < 0.4 <= failed["late"]
    assert answered == {"answered": {"jsonrpc": "2.0", "id": answered_id, "result": {"content": []}}}
    # Each failed request was called off at the server, as the SDK does; the answered one was not.
    cancelled = [line["params"]["requestId"] for line in stdin.lines if line.get("method") == "notifications/cancelled"]
    assert answered_id not in cancelled and len(cancelled) == 2


async def test_a_deadline_after_a_quiet_spell_still_fires() -> None:
    # The timer set for a request answered long ago finds nothing due; a later request's deadline is watched anew.
    stdin = _Stdin()
    lane = RawLane(stdin)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:

        async def answer_first() -> None:
            await anyio.lowlevel.checkpoint()
            lane.take(json.dumps({"jsonrpc": "2.0", "id": stdin.lines[0]["id"], "result": {}}).encode())

        tg.start_soon(answer_first)
        assert "result" in await lane.request("ping", {}, within=0.05)
    await anyio.sleep(0.1)
    with anyio.fail_after(10), pytest.raises(stdio.LaneTimeout):
        await lane.request("ping", {}, within=0.05)


async def test_an_integer_past_64_bits_goes_out_and_comes_back_with_every_digit() -> None:
    stdin = _Stdin()
    lane = RawLane(stdin)  # type: ignore[arg-type]
    wide = 2**70 + 1  # orjson would refuse to write it, and read it as 1.1805916207174113e+21

    async def answer() -> None:
        await anyio.lowlevel.checkpoint()
        [request] = stdin.lines
        assert request["params"]["arguments"] == {"n": wide}  # what the server reads, parsed exactly
        line = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"n": wide, "m": [-(2**64) - 1]}})
        assert lane.take(line.encode())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(answer)
            got = await lane.request("tools/call", {"name": "t", "arguments": {"n": wide}})
    assert got["result"] == {"n": wide, "m": [-(2**64) - 1]}
    assert type(got["result"]["n"]) is int


async def test_a_request_cancelled_while_it_waits_is_called_off_at_the_server() -> None:
    # A client gone mid-call, an agent's notifications/cancelled, a daemon stopping: the call is cancelled here, and
    # the server must hear of it, or it carries on with a write the record calls cancelled.
    stdin = _Stdin()
    lane = RawLane(stdin)  # type: ignore[arg-type]
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await lane.request("tools/call", {"name": "t", "arguments": {}})

            tg.start_soon(call)
            while not stdin.lines:
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
    [request, notice] = stdin.lines
    assert notice == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request["id"]}}
    answered = RawLane(stdin)  # type: ignore[arg-type]
    stdin.lines.clear()

    async def answer() -> None:
        await anyio.lowlevel.checkpoint()
        answered.take(json.dumps({"jsonrpc": "2.0", "id": stdin.lines[0]["id"], "result": {}}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        await answered.request("ping", {})
    assert [line.get("method") for line in stdin.lines] == ["ping"]  # an answered request is not called off
