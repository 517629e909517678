"""The editor channel's bounds, over a real socket: what one connection may make the daemon hold (a message, a header
section, its unread output) and how many connections it serves. Past a bound, that connection is closed with one line
logged, and the daemon and every other connection carry on."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from mcphost.editor.connection import MAX_UNSENT
from mcphost.editor.listener import MAX_EDITOR_CONNECTIONS
from mcphost.editor.wire import MAX_MESSAGE
from tests.editor.support import SOON, RawClient, call, raw
from tests.helpers import Daemon, Sandbox, daemon, error_of, http_agent, poll

pytestmark = pytest.mark.asyncio(loop_scope="package")  # the shared daemon (conftest.py) lives there


async def connect(d: Daemon) -> RawClient:
    return RawClient(*await asyncio.open_unix_connection(d.editor_socket))


async def still_answers(client: RawClient, d: Daemon, request_id: int) -> None:
    client.send({"id": request_id, "method": "mcphost/status"})
    assert (await client.response_to(request_id))["result"]["pid"] == d.process.pid


async def test_a_message_declared_past_the_size_limit_closes_that_connection_alone(shared: Daemon) -> None:
    # pygls read whatever Content-Length said: a gigabyte declared was a gigabyte buffered.
    async with raw(shared) as other:
        huge = await connect(shared)
        huge.writer.write(b"Content-Length: %d\r\n\r\n{" % (1 << 30))
        await huge.closed_by_daemon()
        huge.writer.close()
        await still_answers(other, shared, 1)
    why = f"a message of {1 << 30} bytes, past the limit of {MAX_MESSAGE}"
    await poll(lambda: why in shared.stderr, "the refusal in the daemon's log")
    assert shared.stderr.count(why) == 1


@pytest.mark.parametrize(
    "header",
    [b"X-Pad: " + b"a" * 100_000, b"X-Pad: a\r\n" * 10_000, b"Content-Length: 2\r\n" * 10_000],
    ids=["one-long-line", "lines-without-end", "no-blank-line"],
)
async def test_a_header_section_that_never_ends_closes_that_connection(shared: Daemon, header: bytes) -> None:
    # pygls read header lines of up to 64 MiB each, and any number of them, waiting for a blank one.
    async with raw(shared) as other:
        endless = await connect(shared)
        endless.writer.write(header)
        await endless.closed_by_daemon()
        endless.writer.close()
        await still_answers(other, shared, 1)


async def test_connections_past_the_limit_are_closed_at_once_and_the_others_keep_working(tmp_path: Path) -> None:
    # Without a bound, a script connecting in a loop took every fd the daemon may open.
    box = Sandbox(tmp_path)
    box.write_config(box.probe_server())
    async with daemon(box) as d, AsyncExitStack() as stack:
        served = [await stack.enter_async_context(raw(d)) for _ in range(MAX_EDITOR_CONNECTIONS)]
        refused = await connect(d)
        notice = await asyncio.wait_for(refused.receive(), SOON)
        await refused.closed_by_daemon()
        refused.writer.close()
        await still_answers(served[0], d, 1)
        await still_answers(served[-1], d, 1)
        await poll(lambda: "refused an editor connection" in d.stderr, "the refusal in the daemon's log")
        assert d.stderr.count("refused an editor connection") == 1
    assert notice["method"] == "window/showMessage"
    assert f"already serves {MAX_EDITOR_CONNECTIONS} editor connections" in notice["params"]["message"]


async def test_an_editor_that_never_reads_its_answers_is_let_go_and_its_prompt_goes_unanswered(
    tmp_path: Path,
) -> None:
    # Answers to an editor that asks and never reads piled up without bound (only notifications had one). Each
    # mcphost/config answer here carries a server entry of 2 MiB, so that few requests pass the bound.
    box = Sandbox(tmp_path)
    padding = '[servers.padding]\ncommand = "unused"\nenabled = false\nargs = ["%s"]\n' % ("p" * (2 << 20))
    box.write_config(box.probe_server() + padding)
    async with daemon(box) as d, http_agent(d.url, d.headers) as agent:
        deaf = await connect(d)
        deaf.send({"id": 0, "method": "initialize", "params": {"capabilities": {}}})
        await deaf.response_to(0)
        deaf.send({"method": "initialized", "params": {}})
        calling = asyncio.create_task(call(agent, "write", "plain_echo"))
        async with asyncio.timeout(SOON):
            while (await deaf.receive()).get("method") != "mcphost/permissionRequest":
                pass
        for request_id in range(1, 2 * MAX_UNSENT // (2 << 20)):
            deaf.send({"id": request_id, "method": "mcphost/config"})
        async with asyncio.timeout(SOON * 3):
            result = await calling
        assert error_of(result)["code"] == "NO_APPROVER"
        await deaf.closed_by_daemon()
        deaf.writer.close()
        async with raw(d) as other:
            await still_answers(other, d, 1)
        why = f"left over {MAX_UNSENT} bytes unread"
        await poll(lambda: why in d.stderr, "the reason in the daemon's log")
        assert d.stderr.count(why) == 1
