"""The owner-only socket that takes a passed fd with its first bytes (the relays' way into the daemon)."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import pytest

from mcphost import pipes


async def test_a_listener_out_of_fds_for_a_while_accepts_again_once_it_has_some(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # One EMFILE ended the accepting task for good: the socket stayed bound, and every relay after it hung unanswered.
    loop = asyncio.get_running_loop()
    real = loop.sock_accept
    failures = [OSError(errno.EMFILE, "Too many open files")] * 3

    async def starved(sock: Any) -> Any:
        if failures:
            raise failures.pop()
        return await real(sock)

    monkeypatch.setattr(loop, "sock_accept", starved)
    monkeypatch.setattr(pipes, "ACCEPT_RETRY_S", 0.01)
    monkeypatch.setattr(pipes, "_complained", {})
    served: asyncio.Queue[bytes] = asyncio.Queue()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fds: list[int]) -> None:
        for fd in fds:
            os.close(fd)
        served.put_nowait(await reader.readline())
        writer.close()

    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    async with pipes.owner_only_fd_socket(directory, "relay.sock", handler, "relay socket") as path:
        read_end, write_end = os.pipe()
        try:
            _, writer = await pipes.connect_passing_fd(str(path), b"hello\n", read_end)
            async with asyncio.timeout(10):
                assert await served.get() == b"hello\n"
            writer.close()
        finally:
            os.close(read_end)
            os.close(write_end)
    assert not failures
    said = [r.getMessage() for r in caplog.records if "cannot accept connections" in r.getMessage()]
    assert len(said) == 1, "said once, not once per failed accept"


async def test_asyncios_out_of_fds_complaint_is_said_once_not_once_per_waiting_connection(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # asyncio says it for every connection in the backlog, every retry: 2048 lines a second, a disk's worth.
    monkeypatch.setattr(pipes, "_complained", {})
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    pipes.quiet_accept_failures(loop)
    try:
        for _ in range(2048):
            loop.call_exception_handler(
                {"message": "socket.accept() out of system resource", "exception": OSError(errno.EMFILE, "x")}
            )
        loop.call_exception_handler({"message": "something else went wrong"})
    finally:
        loop.set_exception_handler(previous)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot accept connections" in m for m in messages) == 1
    assert any("something else went wrong" in m for m in messages), "other errors are said as asyncio says them"


def test_the_daemons_limit_on_open_files_is_raised_towards_its_hard_limit() -> None:
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("the hard limit leaves nothing to raise")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        pipes.raise_fd_limit(wanted=512)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == (
            512 if hard == resource.RLIM_INFINITY else min(512, hard)
        )
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
