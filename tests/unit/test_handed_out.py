"""The daemon's side of an agent's stdout handed over by its relay (`HandedOut`), when the agent stops reading."""

from __future__ import annotations

import asyncio
import os
import socket

from mcphost.serve.agent_socket import HandedOut


async def test_giving_up_a_stdout_the_agent_stopped_reading_is_quiet() -> None:
    # A write to it failed and asyncio closed its transport; the session's end then gives it up. asyncio's abort of a
    # closed pipe raises (AttributeError), which cut the rest of the session's cleanup short (found by a probe).
    loop = asyncio.get_running_loop()
    read_end, write_end = os.pipe()
    ours, theirs = socket.socketpair()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(write_end, "wb", buffering=0)
    )
    agent = asyncio.StreamWriter(transport, protocol, None, loop)
    _, relay = await asyncio.open_connection(sock=ours)
    out = HandedOut(agent, relay)
    os.close(read_end)  # the agent stops reading
    agent.write(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    assert transport.is_closing()  # the write failed at once (EPIPE)
    for _ in range(3):  # its connection_lost, a loop turn later, is what leaves it unable to abort
        await asyncio.sleep(0)
    out.give_up()
    relay.close()
    theirs.close()
