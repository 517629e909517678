"""A response's head and body leave the daemon in one write when uvicorn writes them in the same turn of the loop; a
head whose body waits still goes out at the next turn, and nothing held is lost when the connection closes."""

from __future__ import annotations

import asyncio
from typing import Any

from mcphost.serve.http_server import _OneWrite

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"


class Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def _wrapped() -> tuple[_OneWrite, Recorder]:
    recorder = Recorder()
    wrapped: Any = recorder
    return _OneWrite(wrapped), recorder


async def test_a_head_and_its_body_written_in_one_turn_go_out_in_one_write() -> None:
    one, sent = _wrapped()
    one.write(HEAD)
    one.write(b"{}")
    assert sent.writes == [HEAD + b"{}"]
    await asyncio.sleep(0)
    assert sent.writes == [HEAD + b"{}"]  # nothing held is sent twice


async def test_a_head_whose_body_waits_goes_out_at_the_next_turn() -> None:
    one, sent = _wrapped()
    one.write(HEAD)
    assert sent.writes == []
    await asyncio.sleep(0)
    assert sent.writes == [HEAD]
    one.write(b"event: message\r\n\r\n")
    assert sent.writes == [HEAD, b"event: message\r\n\r\n"]


async def test_closing_sends_what_is_held_first() -> None:
    one, sent = _wrapped()
    one.write(HEAD)
    one.close()
    assert sent.writes == [HEAD] and sent.closed
    await asyncio.sleep(0)
    assert sent.writes == [HEAD]


async def test_everything_else_is_the_transports_own() -> None:
    one, sent = _wrapped()
    one.write(b"0\r\n\r\n")
    assert sent.writes == [b"0\r\n\r\n"]
    assert one.is_closing() is False
    assert one.get_extra_info("peername") == ("127.0.0.1", 1)
