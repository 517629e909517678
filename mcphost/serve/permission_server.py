"""`mcphost permission-server`: a stdio MCP server with one tool, `approve`, for Claude Code's headless
`--permission-prompt-tool` (`claude -p --permission-prompt-tool mcp__<name>__approve`). Claude Code calls it
whenever its settings did not already decide a tool call; the answer is one text block holding
`{"behavior": "allow", "updatedInput": ...}` or `{"behavior": "deny", "message": ...}`.

The decision is made the way `mcphost hook` makes it (handed in as `decide`): the daemon's when one runs, its
editors asked, else from the config file. There is no agent prompt to fall back on here: a call that needs a person
nobody is attached to answer is denied, saying how to attach one.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from mcphost import __version__
from mcphost.intent import PERMISSION_PROMPT_EVENT, AgentToolUse

TOOL = "approve"
EVENT = PERMISSION_PROMPT_EVENT

Decide = Callable[[AgentToolUse], Awaitable[dict[str, Any]]]

INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "tool_name": {"type": "string", "description": "The tool Claude Code wants to run (Bash, Edit, mcp__...)."},
        "input": {"type": "object", "description": "Its input, as Claude Code would run it."},
        "tool_use_id": {"type": "string", "description": "Claude Code's id for the tool call."},
    },
    "required": ["tool_name", "input"],
}


def answer(decision: str, reason: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """The prompt tool's answer for a verdict: only allow and deny exist here."""
    if decision == "allow":
        # The input goes back unchanged: Claude Code requires `updatedInput` with every allow.
        return {"behavior": "allow", "updatedInput": tool_input}
    if decision == "pass":
        # A tool mcphost leaves to the agent's user (a question, a plan to approve): allowed here, a plan nobody saw
        # would be approved and a question nobody read answered with itself.
        reason = (
            f"mcphost: {reason.removeprefix('mcphost: ')}, and nobody can answer it in a headless run: go on without "
            "asking, or run Claude Code where its user can answer"
        )
    elif decision == "ask":
        reason = (
            f"{reason.removesuffix(', so the agent asks you itself')}. Nobody can be asked in a headless run: "
            "open VS Code with the mcphost extension or run `mcphost approve`, then retry."
        )
    return {"behavior": "deny", "message": reason or "mcphost: denied"}


def build(decide: Decide) -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=TOOL,
                    description="mcphost decides whether Claude Code may run a tool call (its policy, remembered "
                    "approvals, or the person in their editor), and records the decision.",
                    input_schema=INPUT_SCHEMA,
                )
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        name, tool_input = args.get("tool_name"), args.get("input", {})
        if params.name != TOOL or not isinstance(name, str) or not name or not isinstance(tool_input, dict):
            problem = f"unknown tool {params.name!r}" if params.name != TOOL else "tool_name and input are required"
            body = {"behavior": "deny", "message": f"mcphost: {problem}"}
            return types.CallToolResult(content=[types.TextContent(text=json.dumps(body))], is_error=True)
        use_id = args.get("tool_use_id")
        use = AgentToolUse(
            agent="claude-code",
            event=EVENT,
            tool_name=name,
            tool_input=tool_input,
            tool_use_id=use_id if isinstance(use_id, str) else None,
        )
        try:
            verdict = await decide(use)
            body = answer(str(verdict.get("decision")), str(verdict.get("reason") or ""), tool_input)
        except Exception as exc:  # never let a call through because the decision failed
            body = {"behavior": "deny", "message": f"mcphost could not decide ({exc}); the call is blocked"}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(body, ensure_ascii=False))])

    return Server(
        "mcphost-permissions",
        version=__version__,
        instructions="Claude Code's permission prompt tool: mcphost decides and records each tool call.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
