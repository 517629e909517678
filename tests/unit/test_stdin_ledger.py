"""A relay hands the agent's stdin to its daemon: every chunk the daemon takes is noted in the relay's ledger before it
is taken, so that whenever the daemon dies the relay knows what it owes the agent."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import zlib
from typing import Any

import orjson
import pytest

from mcphost.pipes import Peeker
from mcphost.serve import agent_socket, handoff
from mcphost.serve.agent_socket import StdinPump
from mcphost.serve.handoff import Ledger, LedgerFold
from tests.helpers import timers_due_within


def request(request_id: Any, method: str = "tools/call") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}}) + b"\n"


def nonblocking_pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    return r, w


async def pump_until(peeker: Peeker, ledger: Ledger, agent: asyncio.StreamReader, lines: int) -> list[bytes]:
    task = asyncio.ensure_future(StdinPump(peeker, ledger, agent).run())
    try:
        return [await asyncio.wait_for(agent.readuntil(b"\n"), 5) for _ in range(lines)]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_requests_the_daemon_takes_are_in_the_ledger_until_answered() -> None:
    stdin_r, stdin_w = os.pipe()
    ledger_r, ledger_w = nonblocking_pipe()
    notification = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    read = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "call_tool_read", "arguments": {"name": "s:t"}},
        }
    )
    os.write(stdin_w, request(1, "initialize") + notification + request("two") + read + b"\n")
    peeker, ledger = Peeker(stdin_r), Ledger(ledger_w, lambda: None)
    lines = await pump_until(peeker, ledger, asyncio.StreamReader(), 4)
    assert lines[1] == notification

    fold = LedgerFold()
    fold.drain(ledger_r)
    assert fold.in_flight == {
        "1": (1, "initialize", None),
        "two": ("two", "tools/call", None),
        "3": (3, "tools/call", {"name": "s:t"}),  # a read: kept, to be recorded should the daemon die with it
    }
    assert fold.initialized is not None and orjson.loads(fold.initialize or "")["id"] == 1

    await ledger.note({"mcphost-answered": 1, "ok": True})
    await ledger.note({"mcphost-answered": "two", "ok": False})
    fold.drain(ledger_r)
    assert fold.in_flight == {"3": (3, "tools/call", {"name": "s:t"})}
    assert fold.initialize_ok
    # Taken for good: the agent's input holds nothing the relay could read twice.
    fold.untake_last(peeker)
    assert fold.in_flight == {"3": (3, "tools/call", {"name": "s:t"})}
    for fd in (stdin_r, stdin_w, ledger_r, ledger_w):
        os.close(fd)
    peeker.close()


async def test_notes_made_together_reach_the_ledger_in_one_write_and_fold_as_each_would_alone(
    monkeypatch: Any,
) -> None:
    # A cut answer's "written" and its "answered" go together: one system call, not two, on every call of a Node
    # agent's relay; the relay reads them as it reads any two notes.
    stdin_r, stdin_w = os.pipe()
    ledger_r, ledger_w = nonblocking_pipe()
    os.write(stdin_w, request("a") + request("b"))
    peeker, ledger = Peeker(stdin_r), Ledger(ledger_w, lambda: None)
    await pump_until(peeker, ledger, asyncio.StreamReader(), 2)
    writes: list[bytes] = []
    write = os.write

    def noted(fd: int, data: Any) -> int:
        writes.append(bytes(data))
        return write(fd, data)

    monkeypatch.setattr(os, "write", noted)
    await ledger.note({"mcphost-written": 0}, {"mcphost-answered": "a", "ok": True})
    assert len(writes) == 1 and writes[0].count(b"\n") == 2
    fold = LedgerFold()
    fold.drain(ledger_r)
    assert fold.in_flight == {"b": ("b", "tools/call", None)}
    for fd in (stdin_r, stdin_w, ledger_r, ledger_w):
        os.close(fd)
    peeker.close()


async def test_a_chunk_noted_but_never_taken_is_read_by_the_relay_not_owed() -> None:
    stdin_r, stdin_w = os.pipe()
    ledger_r, ledger_w = nonblocking_pipe()
    os.write(stdin_w, request("first"))
    peeker = Peeker(stdin_r)
    ledger = Ledger(ledger_w, lambda: None)
    await pump_until(peeker, ledger, asyncio.StreamReader(), 1)
    os.write(stdin_w, request("second"))
    # The daemon dies between noting the chunk and taking it.
    assert StdinPump(peeker, ledger, asyncio.StreamReader()).note_next() == len(request("second"))

    fold = LedgerFold()
    fold.drain(ledger_r)
    assert set(fold.in_flight) == {"first", "second"}
    relay_side = Peeker(stdin_r)
    fold.untake_last(relay_side)
    assert set(fold.in_flight) == {"first"}  # owed an answer; "second" is still there for the relay to read
    assert os.read(stdin_r, 1000) == request("second")
    for p in (peeker, relay_side):
        p.close()
    for fd in (stdin_r, stdin_w, ledger_r, ledger_w):
        os.close(fd)


async def test_a_line_taken_in_pieces_is_kept_by_the_relay_until_it_is_whole() -> None:
    stdin_r, stdin_w = nonblocking_pipe()
    os.set_blocking(stdin_r, True)
    ledger_r, ledger_w = nonblocking_pipe()
    line = request("long")
    peeker, ledger, agent = Peeker(stdin_r), Ledger(ledger_w, lambda: None), asyncio.StreamReader()
    task = asyncio.ensure_future(StdinPump(peeker, ledger, agent).run())
    try:
        os.write(stdin_w, line[:20])
        fold = LedgerFold()
        for _ in range(100):
            await asyncio.sleep(0.01)
            fold.drain(ledger_r)
            if fold.partial:
                break
        assert bytes(fold.partial) == line[:20] and not fold.in_flight  # taken, not yet a request
        os.write(stdin_w, line[20:])
        assert await asyncio.wait_for(agent.readuntil(b"\n"), 5) == line
        fold.drain(ledger_r)
        assert not fold.partial and set(fold.in_flight) == {"long"}
    finally:
        task.cancel()
    peeker.close()
    for fd in (stdin_r, stdin_w, ledger_r, ledger_w):
        os.close(fd)


async def test_an_unreadable_request_is_owed_its_error_under_its_id() -> None:
    stdin_r, stdin_w = os.pipe()
    ledger_r, ledger_w = nonblocking_pipe()
    os.write(stdin_w, b'{"jsonrpc": "2.0", "id": "broken", "method": "tools/call", "params": \n')
    peeker = Peeker(stdin_r)
    await pump_until(peeker, Ledger(ledger_w, lambda: None), asyncio.StreamReader(), 1)
    fold = LedgerFold()
    fold.drain(ledger_r)
    assert list(fold.in_flight) == ["broken"]
    peeker.close()
    for fd in (stdin_r, stdin_w, ledger_r, ledger_w):
        os.close(fd)


async def test_a_full_ledger_asks_the_relay_to_read_it_and_loses_nothing() -> None:
    ledger_r, ledger_w = nonblocking_pipe()
    loop = asyncio.get_running_loop()
    asked: list[bool] = []
    read = bytearray()

    def relay_reads() -> None:
        with contextlib.suppress(BlockingIOError):
            read.extend(os.read(ledger_r, 1 << 20))

    def ask_to_drain() -> None:
        # The relay, asked, reads the ledger from then on (as its socket's "drain" note makes it do).
        if not asked:
            loop.add_reader(ledger_r, relay_reads)
        asked.append(True)

    ledger = Ledger(ledger_w, ask_to_drain)
    for n in range(2000):
        await asyncio.wait_for(ledger.note({"mcphost-answered": f"id-{n}-{'x' * 200}", "ok": True}), 10)
    loop.remove_reader(ledger_r)
    relay_reads()
    lines = bytes(read).splitlines()
    assert asked and len(lines) == 2000
    assert [orjson.loads(line)["mcphost-answered"].split("-")[1] for line in lines] == [str(n) for n in range(2000)]
    os.close(ledger_r)
    os.close(ledger_w)


def test_a_socket_is_peeked_at_whole_without_a_buffer_of_the_most_a_peek_may_see() -> None:
    import socket
    import tracemalloc

    from mcphost.pipes import PEEK_MAX, READ_CHUNK

    agent, ours = socket.socketpair()
    peeker = Peeker(ours.fileno())
    try:
        agent.sendall(request(1))
        tracemalloc.start()
        try:
            assert peeker.peek() == request(1)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak <= 2 * READ_CHUNK < PEEK_MAX
        assert peeker.take(len(request(1))) == request(1)
        big = b"x" * (READ_CHUNK * 3)
        agent.sendall(big)
        assert peeker.peek() == big  # a first look that came back full looks again, at all of it
        assert peeker.take(len(big)) == big
        assert peeker.peek() is None
    finally:
        peeker.close()
        agent.close()
        ours.close()


async def test_the_relay_sleeps_on_a_quiet_ledger_and_reads_it_a_while_after_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(handoff, "LEDGER_DRAIN_S", 0.05)
    ledger_r, ledger_w = nonblocking_pipe()
    fold = LedgerFold()
    task = asyncio.ensure_future(handoff._drain_every(fold, ledger_r))
    try:
        await asyncio.sleep(0.2)
        assert timers_due_within(5) == []  # nothing written: no read to come, the relay's process asleep
        await Ledger(ledger_w, lambda: None).note({"take": [["a", "tools/call"]], "chunk": 1, "crc": 0})
        for _ in range(100):
            await asyncio.sleep(0.01)
            if fold.in_flight:
                break
        assert set(fold.in_flight) == {"a"}
        await asyncio.sleep(0.1)
        assert timers_due_within(5) == []  # read, and asleep again
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for fd in (ledger_r, ledger_w):
        os.close(fd)


async def test_pieces_of_a_line_reach_the_relay_byte_for_byte_and_are_undone_with_their_chunk() -> None:
    # Every byte value but the line feed, UTF-8 characters cut in the middle, bytes that are no UTF-8 at all: the
    # pieces are noted as latin-1 text and the relay makes the very bytes of them again.
    line = ('{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"text":"é€😀\\u0000"}}').encode()
    line = line[:-2] + bytes(b for b in range(256) if b != 0x0A) + "é€😀".encode() + line[-2:]
    stdin_r, stdin_w = nonblocking_pipe()
    ledger_r, ledger_w = nonblocking_pipe()
    peeker, ledger = Peeker(stdin_r), Ledger(ledger_w, lambda: None)
    pump = StdinPump(peeker, ledger, asyncio.StreamReader())
    fold = LedgerFold()
    cuts = [0, 7, 61, 62, 63, 190, 317, len(line) - 1]
    for start, end in itertools.pairwise(cuts):
        os.write(stdin_w, line[start:end])
        assert pump.note_next() == end - start
        pump.take(end - start)
        fold.drain(ledger_r)
        assert fold.partial == line[:end]
    os.write(stdin_w, line[-1:] + b"\n")
    # The daemon dies between noting the chunk that ends the line and taking it: the relay undoes that note, and
    # the start of the line is what it was.
    assert pump.note_next() == 2
    fold.drain(ledger_r)
    assert fold.partial == b"" and set(fold.in_flight) == {"big"}
    fold.untake_last(Peeker(stdin_r))
    assert fold.partial == line[:-1] and not fold.in_flight
    peeker.close()
    for fd in (stdin_r, stdin_w, ledger_r, ledger_w):
        os.close(fd)


def test_a_piece_noted_in_base64_by_an_earlier_daemon_is_read_too() -> None:
    fold = LedgerFold()
    fold.apply({"chunk": 3, "crc": 0, "part": "AAH/"})
    fold.apply({"chunk": 2, "crc": 0, "text": "éx"})
    assert fold.partial == b"\x00\x01\xff\xe9x"


@pytest.mark.parametrize(
    ("piece", "kind"),
    [
        # Source code as a JSON string holds it (its line feeds escaped): little that JSON escapes again.
        ((b"def f(x):\\n    return x + 1\\n" * 20 + b"# caf\xc3\xa9\\n") * 20, "text"),
        (b'{"id": 1, "name": "a\\"b", "tags": ["x", "y"]}, ' * 200, "part"),  # JSON text: quotes throughout
        (b"\tindented\twith\ttabs\n" * 200, "part"),
        (bytes(range(256)) * 16, "part"),  # anything at all
        (b"\x01\x02" * 2048, "part"),  # control characters: six bytes each as JSON text
    ],
)
def test_a_piece_is_noted_the_cheaper_way_and_read_back_exactly(piece: bytes, kind: str) -> None:
    note = agent_socket._piece(piece)
    assert list(note) == [kind]
    fold = LedgerFold()
    fold.apply(orjson.loads(orjson.dumps({"chunk": len(piece), "crc": 0, **note})))
    assert fold.partial == piece


def test_a_line_that_never_ends_is_held_by_the_relay_only_to_what_the_daemon_refuses_it_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The daemon refuses a line past MAX_LINE whatever follows: the relay keeps its start (the id it is refused under)
    # and no more of it, however long the agent writes on without a line feed. Pieces come as text and in base64.
    monkeypatch.setattr(handoff, "MAX_LINE", 4096)
    head = b'{"jsonrpc":"2.0","id":"endless","method":"tools/call","params":{"text":"'
    fold = LedgerFold()
    fold.apply({"chunk": len(head), "crc": 0, "text": head.decode("latin-1")})
    piece = bytes(range(32, 127)) + b"\xe9\x00"  # 97 bytes
    for i in range(20_000):
        note = {"text": piece.decode("latin-1")} if i % 2 else {"part": base64.b64encode(piece).decode("ascii")}
        fold.apply({"chunk": len(piece), "crc": 0, **note})
        if i % 500 == 0:
            assert len(fold.partial) <= 4096 + len(piece)
    held = fold.partial
    assert held.startswith(head + piece) and len(held) == fold.held and len(fold.pieces) < 4096 // len(piece) + 2
    # A last chunk never taken is still undone, and what is held stays as it was.
    stdin_r, stdin_w = nonblocking_pipe()
    os.write(stdin_w, piece)
    fold.apply({"chunk": len(piece), "crc": zlib.crc32(piece), "text": piece.decode("latin-1")})
    fold.untake_last(Peeker(stdin_r))
    assert fold.partial == held
    # The line's end lets all of it go.
    fold.apply({"chunk": 1, "crc": 0, "take": [["endless", "request"]]})
    assert fold.partial == b"" and fold.held == 0 and set(fold.in_flight) == {"endless"}
    for fd in (stdin_r, stdin_w):
        os.close(fd)


def test_requests_taken_under_one_id_are_each_owed_and_undone_last_first() -> None:
    fold = LedgerFold()
    fold.apply({"chunk": 1, "crc": 0, "take": [["twin", "tools/call", {"name": "s:a"}]]})
    fold.apply({"chunk": 1, "crc": 0, "take": [["twin", "tools/call", {"name": "s:b"}], ["twin", "tools/list"]]})
    assert fold.in_flight == {"twin": ("twin", "tools/call", {"name": "s:a"})}
    assert fold.twins == {"twin": [("twin", "tools/call", {"name": "s:b"}), ("twin", "tools/list", None)]}
    fold.apply({"mcphost-answered": "twin", "ok": True})
    assert fold.in_flight == {"twin": ("twin", "tools/call", {"name": "s:b"})}
    assert fold.twins == {"twin": [("twin", "tools/list", None)]}

    stdin_r, stdin_w = os.pipe()
    os.write(stdin_w, b"x")
    peeker = Peeker(stdin_r)
    fold.last = (1, zlib.crc32(b"x"), ["twin", "twin"], (fold.pieces, 0, 0, None, None))
    fold.untake_last(peeker)  # the last chunk was never taken after all: what it took goes
    assert fold.in_flight == {} and fold.twins == {}
    peeker.close()
    for fd in (stdin_r, stdin_w):
        os.close(fd)
