"""TappedReader offers a line to its tap only when the line is the very one a waiting `readuntil` would return next:
anything else reaches the reader as a plain StreamReader would give it, in order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

from mcphost.pipes import TappedReader


async def _waiting(reader: TappedReader) -> asyncio.Task[bytes]:
    """A `readuntil` that is waiting for data."""
    task = asyncio.ensure_future(reader.readuntil(b"\n"))
    await asyncio.sleep(0)
    assert not task.done()
    return task


def within(step: Awaitable[bytes]) -> Awaitable[bytes]:
    """A read that fails rather than hangs when a line it should find was taken from under it."""
    return asyncio.wait_for(step, 5)


def _tap(reader: TappedReader, take: bool) -> list[bytes]:
    offered: list[bytes] = []

    def tap(line: bytes) -> bool:
        offered.append(line)
        return take

    reader.tap = tap
    return offered


async def test_a_whole_line_arriving_while_a_read_waits_is_taken_by_the_tap_and_never_read() -> None:
    reader = TappedReader(limit=1024)
    offered = _tap(reader, take=True)
    waiting = await _waiting(reader)
    reader.feed_data(b'{"id":1}\n')
    reader.feed_data(b'{"id":2}\n')  # offered too: the first never reached the stream
    reader.feed_eof()
    assert offered == [b'{"id":1}\n', b'{"id":2}\n']
    with pytest.raises(asyncio.IncompleteReadError) as ended:
        await within(waiting)
    assert ended.value.partial == b""  # the reader saw nothing but the end


async def test_a_declined_line_is_read_as_it_came_and_marked_declined_until_the_next_read() -> None:
    reader = TappedReader(limit=1024)
    offered = _tap(reader, take=False)
    waiting = await _waiting(reader)
    reader.feed_data(b"one\n")
    assert await within(waiting) == b"one\n" and reader.declined
    reader.tap = None
    reader.feed_data(b"two\n")
    assert await within(reader.readuntil(b"\n")) == b"two\n" and not reader.declined
    assert offered == [b"one\n"]


async def test_the_end_of_a_line_held_in_part_is_not_offered() -> None:
    reader = TappedReader(limit=1024)
    offered = _tap(reader, take=True)
    waiting = await _waiting(reader)
    reader.feed_data(b'{"id":')
    await asyncio.sleep(0)
    reader.feed_data(b"1}\n")  # one line by itself, yet the end of the one held
    assert await within(waiting) == b'{"id":1}\n'
    assert offered == []


async def test_a_line_arriving_while_nobody_reads_waits_for_its_reader() -> None:
    reader = TappedReader(limit=1024)
    offered = _tap(reader, take=True)
    reader.feed_data(b"first\n")  # no readuntil waits: the reader is busy with what it read before
    assert await within(reader.readuntil(b"\n")) == b"first\n"
    assert offered == []


async def test_a_line_behind_one_not_yet_taken_is_not_offered() -> None:
    reader = TappedReader(limit=1024)
    offered = _tap(reader, take=True)
    waiting = await _waiting(reader)
    reader.feed_data(b"two\nlines\n")  # more than one line: not offered
    reader.feed_data(b"third\n")  # the reader has woken but not yet read: behind the two
    assert await within(waiting) == b"two\n"
    assert await within(reader.readuntil(b"\n")) == b"lines\n"
    assert await within(reader.readuntil(b"\n")) == b"third\n"
    assert offered == []


async def test_a_line_over_the_limit_is_not_offered() -> None:
    reader = TappedReader(limit=8)
    offered = _tap(reader, take=True)
    waiting = await _waiting(reader)
    reader.feed_data(b"0123456789\n")
    with pytest.raises(asyncio.LimitOverrunError):
        await within(waiting)
    assert offered == []


async def test_a_tap_that_fails_leaves_the_line_to_its_reader() -> None:
    reader = TappedReader(limit=1024)

    def broken(line: bytes) -> bool:
        raise RuntimeError("a bug")

    reader.tap = broken
    waiting = await _waiting(reader)
    reader.feed_data(b"kept\n")
    assert await within(waiting) == b"kept\n" and not reader.declined


async def test_an_agents_input_is_read_without_asyncios_256_kib_buffer() -> None:
    # A read allocates the buffer it asks for: 256 KiB, past malloc's mmap threshold, is an mmap and a munmap a call.
    import os
    import tracemalloc

    from mcphost.pipes import READ_CHUNK, pipe_streams

    agent_r, agent_w = os.pipe()
    ours_r, ours_w = os.pipe()
    async with pipe_streams(agent_r, ours_w) as (reader, _):
        os.write(agent_w, b'{"id":0}\n')
        assert await within(reader.readuntil(b"\n")) == b'{"id":0}\n'
        tracemalloc.start()
        try:
            for n in range(1, 4):
                os.write(agent_w, b'{"id":%d}\n' % n)
                assert await within(reader.readuntil(b"\n")) == b'{"id":%d}\n' % n
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    for fd in (agent_w, ours_r):
        os.close(fd)
    assert peak < 2 * READ_CHUNK < 256 * 1024
