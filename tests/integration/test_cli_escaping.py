"""An upstream's text reaches a person's terminal through `mcphost tools` and `mcphost call`: escaped, never acted on.

The upstream below puts terminal escape sequences where a server controls the text: tool names, descriptions,
results and errors. A terminal would act on them: set its title, plant a hyperlink whose text hides its target,
erase the line it is on. The human output shows them escaped; `-o json` stays the exact JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import anyio.to_thread
import pytest

from tests.helpers import HOSTILE, Sandbox, daemon, mcphost

TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;http://x\x1b\\click here\x1b]8;;\x1b\\"
ERASE = "\x1b[2K"
CSI8 = "\x9b2K"  # the one-byte CSI some terminals take as ESC [
EVIL = TITLE + LINK + ERASE + CSI8
RAW = ("\x1b", "\x07", "\x9b")

UPSTREAM = f"""
import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

EVIL = {EVIL!r}
TITLE = {TITLE!r}
OBJECT = {{"type": "object", "properties": {{"text": {{"type": "string"}}}}}}
READ = types.ToolAnnotations(read_only_hint=True)


async def on_list_tools(ctx, params):
    return types.ListToolsResult(tools=[
        types.Tool(name="read_notes", description="Read the notes " + EVIL + "\\nsecond line", input_schema=OBJECT,
                   annotations=READ),
        types.Tool(name="sneaky" + TITLE, description="a name that sets the title", input_schema=OBJECT,
                   annotations=READ),
        types.Tool(name="fail", description="answers with a tool error", input_schema=OBJECT, annotations=READ),
        types.Tool(name="explode", description="answers with a protocol error", input_schema=OBJECT,
                   annotations=READ),
    ])


async def on_call_tool(ctx, params):
    if params.name == "fail":
        return types.CallToolResult(content=[types.TextContent(text="it failed " + EVIL)], is_error=True)
    if params.name == "explode":
        raise MCPError(code=-32603, message="boom " + EVIL)
    return types.CallToolResult(content=[types.TextContent(text="line one " + EVIL + "\\nline two\\tend")])


async def main():
    server = Server("evil", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""


@pytest.fixture
def evil(sandbox: Sandbox) -> Sandbox:
    server = sandbox.root / "evil_upstream.py"
    server.write_text(UPSTREAM, encoding="utf-8")
    sandbox.write_config(
        f"[servers.evil]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(server))}]\n"
    )
    return sandbox


def assert_no_raw_escapes(result: subprocess.CompletedProcess[str]) -> None:
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        for raw in RAW:
            assert raw not in text, f"{raw!r} reached {stream}: {text!r}"


def test_tools_shows_descriptions_and_names_escaped(evil: Sandbox) -> None:
    result = mcphost(evil, "tools")
    assert result.returncode == 0, result.stderr
    assert_no_raw_escapes(result)
    assert "Read the notes \\x1b]0;pwned\\x07\\x1b]8;;http://x" in result.stdout
    assert "evil:read_notes" in result.stdout and "evil:fail" in result.stdout


def test_tools_json_keeps_the_exact_text(evil: Sandbox) -> None:
    result = mcphost(evil, "tools", "-o", "json")
    assert result.returncode == 0, result.stderr
    tools = {t["name"]: t for t in json.loads(result.stdout)["tools"]}
    assert tools["evil:read_notes"]["description"] == "Read the notes " + EVIL + "\nsecond line"


@pytest.mark.parametrize(
    ("tool", "code", "shown"),
    [
        ("read_notes", 0, "line one \\x1b]0;pwned\\x07\\x1b]8;;http://x\\x1b\\click here"),
        ("fail", 1, "it failed \\x1b]0;pwned\\x07"),
        ("explode", 1, "boom \\x1b]0;pwned\\x07"),
        ("nosuch" + TITLE, 1, "nosuch\\x1b]0;pwned\\x07"),
    ],
)
def test_call_shows_results_and_errors_escaped(evil: Sandbox, tool: str, code: int, shown: str) -> None:
    result = mcphost(evil, "call", "tool-read", f"evil:{tool}", "--in-process")
    assert result.returncode == code, result.stderr
    assert_no_raw_escapes(result)
    assert shown in (result.stdout if code == 0 else result.stderr)


def test_call_keeps_the_lines_and_tabs_of_a_result(evil: Sandbox) -> None:
    result = mcphost(evil, "call", "tool-read", "evil:read_notes")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == "line two\tend"


def test_call_json_keeps_the_exact_text(evil: Sandbox) -> None:
    result = mcphost(evil, "call", "tool-read", "evil:read_notes", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["content"][0]["text"] == "line one " + EVIL + "\nline two\tend"


async def test_calls_through_a_daemon_show_results_and_errors_escaped(evil: Sandbox) -> None:
    async with daemon(evil):
        for tool, code in (("read_notes", 0), ("fail", 1), ("explode", 1), ("nosuch" + TITLE, 1)):
            result = await anyio.to_thread.run_sync(lambda t=tool: mcphost(evil, "call", "tool-read", f"evil:{t}"))
            assert "calling through the daemon" in result.stderr
            assert result.returncode == code, result.stderr
            assert_no_raw_escapes(result)
            assert "\\x1b]0;pwned\\x07" in (result.stdout if code == 0 else result.stderr)


@pytest.mark.parametrize("output", ["text", "json"])
def test_call_in_process_shows_an_answer_holding_a_lone_surrogate_as_the_daemon_does(
    sandbox: Sandbox, output: str
) -> None:
    # Valid JSON that is no Unicode ("\ud800"): the SDK's model will not write it, and the command failed with a
    # traceback after the call had run (and was on record as a success).
    sandbox.write_config(
        '[permissions]\nwrite = "allow"\n\n[servers.h]\n'
        f"command = {json.dumps(sys.executable)}\nargs = {json.dumps([str(HOSTILE)])}\n"
    )
    args = json.dumps({"result": {"content": []}, "unpaired": "structured"})
    result = mcphost(sandbox, "call", "tool-write", "h:malformed", "--args", args, "--in-process", "-o", output)
    assert result.returncode == 0, result.stderr[-500:]
    assert "Traceback" not in result.stderr
    assert "done \\ud800 here" in result.stdout
    if output == "json":
        assert json.loads(result.stdout)["structuredContent"] == {"\ud800k": "\udfff"}
    assert [r["status"] for r in sandbox.tool_calls()] == ["success"]
