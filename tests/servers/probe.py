"""A real upstream MCP server for the tests: tools with every kind of annotation, and ways to misbehave.

Run as `python -m tests.servers.probe [--http PORT] [--modern-only]` (`--modern-only`: a 2026-07-28 server that
refuses the initialize handshake). `PROBE_STATE` names a JSON file the server reads on
start and on each list, so a test can change annotations and have the server say so (tools/list_changed).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.message import SessionMessage
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION

OBJECT = {"type": "object", "properties": {"text": {"type": "string", "description": "Text to echo back"}}}


def _pipe_sizes() -> list[int]:
    """How much each pipe this process holds open can hold (Linux's F_GETPIPE_SZ): the SDK moves the protocol's stdin
    and stdout off fds 0 and 1, so every pipe is looked at."""
    import fcntl
    import stat

    fds = Path("/proc/self/fd")
    sizes = []
    for entry in fds.iterdir() if fds.is_dir() else []:
        try:
            if stat.S_ISFIFO(os.fstat(int(entry.name)).st_mode):
                sizes.append(int(fcntl.fcntl(int(entry.name), 1032)))
        except OSError:
            continue
    return sorted(sizes)


def _state() -> dict[str, Any]:
    path = os.environ.get("PROBE_STATE")
    if path and Path(path).exists():
        return dict(json.loads(Path(path).read_text(encoding="utf-8")))
    return {}


def _tools() -> list[types.Tool]:
    state = _state()
    flip = state.get("shifty", {"readOnlyHint": True})
    return [
        types.Tool(
            name="read_notes",
            description="Read the notes in the notebook",
            input_schema=OBJECT,
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="wipe_notes",
            description="Erase every note permanently",
            input_schema=OBJECT,
            annotations=types.ToolAnnotations(destructive_hint=True),
        ),
        types.Tool(name="plain_echo", description="Echo text back (no annotations at all)", input_schema=OBJECT),
        types.Tool(
            name="both_hints",
            description="Claims to be read-only and destructive at once",
            input_schema=OBJECT,
            annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=True),
        ),
        types.Tool(
            name="shifty",
            description="A tool whose annotations change while it runs",
            input_schema=OBJECT,
            annotations=types.ToolAnnotations(
                read_only_hint=flip.get("readOnlyHint"), destructive_hint=flip.get("destructiveHint")
            ),
        ),
        types.Tool(
            name="set_shifty",
            description="Change shifty's annotations and announce it",
            input_schema={"type": "object", "properties": {"annotations": {"type": "object"}}},
        ),
        types.Tool(name="crash", description="Exit the server process in the middle of the call", input_schema=OBJECT),
        types.Tool(name="fail", description="Answer with a tool error", input_schema=OBJECT),
        types.Tool(name="whoami", description="Report the Authorization header and env seen", input_schema=OBJECT),
        types.Tool(
            name="slow",
            description="Touch the file `started`, then answer once the file `gate` exists",
            input_schema={"type": "object", "properties": {"started": {"type": "string"}, "gate": {"type": "string"}}},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
    ]


async def on_list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_tools())


async def on_call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "crash":
        os._exit(3)
    if params.name == "fail":
        return types.CallToolResult(content=[types.TextContent(text="the tool failed on purpose")], is_error=True)
    if params.name == "set_shifty":
        path = os.environ["PROBE_STATE"]
        state = _state()
        state["shifty"] = args.get("annotations", {})
        Path(path).write_text(json.dumps(state), encoding="utf-8")
        # Said both ways: a handshake-era client hears the notification, a 2026-era one its listen stream.
        await ctx.session.send_tool_list_changed()
        await BUS.publish(ToolsListChanged())
        return types.CallToolResult(content=[types.TextContent(text="changed")])
    if params.name == "slow":
        Path(args["started"]).touch()
        with anyio.fail_after(30):
            # The gate is a file another process creates: there is no event to wait on.
            while not Path(args["gate"]).exists():  # noqa: ASYNC110
                await anyio.sleep(0.01)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps({"pid": os.getpid()}))])
    if params.name == "whoami":
        request = ctx.request
        auth = request.headers.get("authorization") if request is not None else None
        seen = {"authorization": auth, "pid": os.getpid(), "pipes": _pipe_sizes()}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(seen))])
    text = args.get("text", "")
    return types.CallToolResult(
        content=[types.TextContent(text=f"{params.name}: {text}")],
        structured_content={"tool": params.name, "text": text},
    )


BUS = InMemorySubscriptionBus()


def build() -> Server[Any]:
    return Server(
        "probe",
        version="1.0",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_subscriptions_listen=ListenHandler(BUS),
    )


# A server of the 2026-07-28 revision only: the initialize handshake is refused as such a server refuses it.
MODERN_ONLY = ["2026-07-28"]


def _refusal(request_id: Any) -> types.JSONRPCError:
    error = types.ErrorData(
        code=UNSUPPORTED_PROTOCOL_VERSION,
        message="this server speaks 2026-07-28 only; the initialize handshake is not served",
        data={"supported": MODERN_ONLY},
    )
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


async def serve_stdio(modern_only: bool) -> None:
    server = build()
    async with stdio_server() as (read, write):
        if not modern_only:
            await server.run(read, write, server.create_initialization_options())
            return
        inner_write, inner_read = anyio.create_memory_object_stream[Any](16)

        async def screen() -> None:
            async with inner_write:
                async for item in read:
                    message = getattr(item, "message", None)
                    if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
                        await write.send(SessionMessage(_refusal(message.id)))
                    else:
                        await inner_write.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(screen)
            await server.run(inner_read, write, server.create_initialization_options())


def _refusing_initialize(app: Any) -> Any:
    """The HTTP app, with any POST whose JSON-RPC method is `initialize` refused before the SDK sees it."""

    async def screened(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            event = await receive()
            chunks.append(event.get("body", b""))
            more = event.get("more_body", False)
        body = b"".join(chunks)
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("method") == "initialize":
            answer = _refusal(message.get("id")).model_dump_json(by_alias=True, exclude_none=True).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return dict(await receive())

        await app(scope, replay, send)

    return screened


def serve_http(port: int, modern_only: bool) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen(16)
    app = build().streamable_http_app(host="127.0.0.1")
    if modern_only:
        app = _refusing_initialize(app)
    print(f"probe: listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--modern-only", action="store_true", help="refuse the initialize handshake")
    ns = parser.parse_args()
    if ns.http is not None:
        serve_http(ns.http, ns.modern_only)
    else:
        anyio.run(serve_stdio, ns.modern_only)
