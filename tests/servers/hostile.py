"""An upstream that misbehaves the ways real ones do, for the fault tests. Stdlib only: it writes its JSON-RPC by
hand, so it can send what no SDK would let it (malformed tools, huge answers, keys in any order).

Run as `python tests/servers/hostile.py` (newline-delimited JSON-RPC on stdin/stdout). The JSON file named by
`HOSTILE_STATE` is read on each request, so a test can change the server while it runs:

- `bad_tools`: list malformed tools beside the good ones;
- `shifty`: the annotations of the tool `shifty` (changed without notifications/tools/list_changed);
- `result_first`: write answers as {"result", "jsonrpc", "id"} (the TypeScript SDK's order);
- `linger`: ignore SIGTERM and the end of stdin (read once, at start);
- `init_error`: answer `initialize` with this error message;
- `junk`: write this line on stdout before anything else (read once, at start).

`HOSTILE_TRACE` names a file that gets one line per request method received.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}}
READ_ONLY = {"readOnlyHint": True}


def _state() -> dict[str, Any]:
    path = os.environ.get("HOSTILE_STATE")
    if path and Path(path).exists():
        return dict(json.loads(Path(path).read_text(encoding="utf-8")))
    return {}


def _tool(name: str, description: str, schema: Any, annotations: dict[str, Any] | None = None) -> Any:
    tool: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema}
    if annotations is not None:
        tool["annotations"] = annotations
    return tool


def _tools(state: dict[str, Any]) -> list[Any]:
    tools = [
        _tool("echo", "Echo text back", OBJECT, READ_ONLY),
        _tool("big", "Answer with `bytes` bytes of text", {"type": "object"}, READ_ONLY),
        _tool("block", "Write this server's pid to the file `started`; never answer", {"type": "object"}, READ_ONLY),
        _tool("slow", "Answer after `seconds` seconds", {"type": "object"}, READ_ONLY),
        _tool("shout", "Write `lines` lines of `width` bytes to stderr, then answer", {"type": "object"}, READ_ONLY),
        _tool("spawn", "Start a child process in this server's group; write its pid to `pidfile`", {"type": "object"}),
        _tool("shifty", "A tool whose annotations change silently", OBJECT, state.get("shifty", READ_ONLY)),
        _tool("malformed", "Answer with the object `result` as the tool's result, whatever it is", {"type": "object"}),
    ]
    if state.get("bad_tools"):
        tools[1:1] = [
            _tool("schema_not_object", "Its input schema is a string", "not a schema"),
            {"description": "A tool without a name", "inputSchema": OBJECT},
            _tool("has:colon", "A name mcphost cannot address", OBJECT),
            _tool("bell\x07and\x1b[31mred", "A name with control characters", OBJECT),
            _tool("huge_description", "x" * 1_000_000, OBJECT),
            _tool("echo", "A second tool named echo", OBJECT),
            _tool("deep_schema", "An input schema nested 400 levels deep", _nested(400)),
            # Written as the escape \ud800: valid JSON, no Unicode, which pydantic's parser refuses for the line
            _tool("unpaired", "A description with a lone surrogate \ud800 in it", OBJECT),
            _tool("yes_read", "Marked read-only with a string", OBJECT, {"readOnlyHint": "yes"}),
            # Written as NaN and Infinity (json.dumps allows them), no JSON: taken by pydantic's parser
            _tool("not_a_number", "Bounds", {"type": "number", "maximum": float("inf"), "default": float("nan")}),
        ]
    return tools


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


# What the next answer writes in place of the string _RAW, and before itself on its line.
_RAW = "<raw>"
_raw: list[str] = []
_junk: list[str] = []


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "echo":
        return _text(str(args.get("text", "")))
    if name == "big":
        return _text("x" * int(args["bytes"]))
    if name == "block":
        Path(args["started"]).write_text(str(os.getpid()), encoding="utf-8")
        while True:
            time.sleep(60)
    if name == "slow":
        time.sleep(float(args["seconds"]))
        return _text("late")
    if name == "shout":
        width = int(args.get("width", 10))
        for i in range(int(args["lines"])):
            sys.stderr.write(f"line {i} \x1b[31mred\x1b[0m " + "y" * width + "\n")
        sys.stderr.flush()
        return _text("shouted")
    if name == "malformed":
        result = dict(args["result"])
        if args.get("unpaired"):  # valid JSON, not valid Unicode: written as the escape \ud800
            result["content"] = [{"type": "text", "text": "done \ud800 here"}]
        if args.get("unpaired") == "structured":  # and in structured content, a key too
            result["structuredContent"] = {"\ud800k": "\udfff"}
        if "nest" in args:  # deeper than mcphost lets an agent's arguments go: made here
            result["structuredContent"] = _nested(int(args["nest"]))
        if "raw" in args:  # written as it is where the structured content goes: NaN, 1e400, 5000 brackets
            text = str(args["raw"])
            if "deep" in args:
                text = "[" * int(args["deep"]) + text + "]" * int(args["deep"])
            result["structuredContent"] = {"n": _RAW}
            _raw.append(text)
        if "junk" in args:  # written on the answer's line, before it
            _junk.append(str(args["junk"]))
        return result
    if name == "spawn":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        Path(args["pidfile"]).write_text(str(child.pid), encoding="utf-8")
        return _text(str(child.pid))
    return {**_text(f"unknown tool {name}"), "isError": True}


def _answer(request: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize" and state.get("init_error"):
        return {"error": {"code": -32000, "message": state["init_error"]}}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "hostile", "version": "1.0"},
        }
    if method == "tools/list":
        return {"tools": _tools(state)}
    if method == "tools/call":
        return _call(params["name"], params.get("arguments") or {})
    if method == "ping":
        return {}
    # A handshake-era server knows no other method (server/discover among them), as real ones answer.
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def _send(request_id: Any, result: dict[str, Any], state: dict[str, Any]) -> None:
    body, rid = json.dumps(result), json.dumps(request_id)
    if set(result) == {"error"}:
        line = f'{{"jsonrpc": "2.0", "id": {rid}, "error": {json.dumps(result["error"])}}}'
    elif state.get("result_first"):
        line = f'{{"result": {body}, "jsonrpc": "2.0", "id": {rid}}}'
    else:
        line = f'{{"jsonrpc": "2.0", "id": {rid}, "result": {body}}}'
    if _raw:
        line = line.replace(json.dumps(_RAW), _raw.pop())
    if _junk:
        line = _junk.pop() + line
    sys.stdout.buffer.write(line.encode() + b"\n")
    sys.stdout.buffer.flush()


def main() -> None:
    linger = bool(_state().get("linger"))
    if linger:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    trace = os.environ.get("HOSTILE_TRACE")
    if _state().get("junk"):  # a line where the protocol goes, as a server that logs to stdout writes one
        sys.stdout.write(_state()["junk"] + "\n")
        sys.stdout.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if trace:
            with open(trace, "a", encoding="utf-8") as f:
                f.write(f"{request.get('method')}\n")
        if "id" not in request or "method" not in request:
            continue  # a notification, or an answer to a request of ours (we send none)
        state = _state()
        _send(request["id"], _answer(request, state), state)
    while linger:
        time.sleep(60)


if __name__ == "__main__":
    main()
