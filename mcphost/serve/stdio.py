"""MCP over this process's stdin/stdout on asyncio pipes, for `mcphost mcp`.

The SDK's `stdio_server` reads and writes through worker threads; a profile of `mcphost mcp` put about a
third of its time in those hand-offs. Pipes on the event loop (`mcphost.pipes`) do the same job without threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from mcphost.pipes import claim_stdio, is_pipe_or_socket, pipe_streams

logger = logging.getLogger(__name__)


@asynccontextmanager
async def serve_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """(read_stream, write_stream) for `Server.run`; falls back to the SDK's transport for files and ttys."""
    if not (is_pipe_or_socket(0) and is_pipe_or_socket(1)) or os.isatty(0):
        async with stdio_server() as streams:
            yield streams
        return

    async with pipe_streams(*claim_stdio()) as (reader, writer), _session_streams(reader, writer) as streams:
        yield streams


@asynccontextmanager
async def _session_streams(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> AsyncIterator[tuple[Any, Any]]:
    """The MCP session's message streams over newline-delimited JSON-RPC on `reader` and `writer`."""
    to_server, from_stdin = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_stdout, from_server = anyio.create_memory_object_stream[SessionMessage](16)

    writer_done = anyio.Event()

    async def stdin_reader() -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await _pump_stdin()

    async def _pump_stdin() -> None:
        async with to_server:
            while True:
                try:
                    line = await reader.readline()
                except (asyncio.LimitOverrunError, ValueError) as exc:
                    await to_server.send(exc)
                    continue
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:
                    await to_server.send(exc)
                    continue
                await to_server.send(SessionMessage(message))

    async def stdout_writer() -> None:
        try:
            async with from_server:
                async for session_message in from_server:
                    data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    writer.write(data.encode("utf-8") + b"\n")
                    await writer.drain()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            logger.debug("stdout closed under the writer")
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdin_reader)
        tg.start_soon(stdout_writer)
        try:
            yield from_stdin, to_stdout
        finally:
            # Let the last responses reach the agent (the server closes its write stream when it stops),
            # but never hang on an agent that stopped reading.
            with anyio.move_on_after(5):
                await writer_done.wait()
            tg.cancel_scope.cancel()
