"""The agent-facing MCP server: four tools, thin handlers over `Gateway`."""

from __future__ import annotations

import json
import logging
import uuid
import weakref
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcphost import __version__
from mcphost.approval.approvals import Elicit
from mcphost.errors import ErrorCode, GatewayError
from mcphost.gateway.service import CallContext, CallOutcome, Gateway
from mcphost.gateway.tools import LEGACY_CALL_TOOL, LEGACY_CALL_TOOL_MESSAGE, RETRIEVE_TOOLS, tool_definitions
from mcphost.intent import ToolVariant

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "mcphost gives you the tools of several MCP servers behind a permission check. Find a tool with "
    "retrieve_tools, then call it with the variant its call_with field names (call_tool_read, call_tool_write or "
    "call_tool_destructive), repeating that intent in intent.operation_type."
)

_VARIANTS = {variant.value: variant for variant in ToolVariant}
# Sent by `mcphost mcp` when it relays to a daemon: one agent process is one session, whatever the protocol
# version's idea of sessions.
RELAY_SESSION_HEADER = "x-mcphost-relay-session"
WARNING_PREFIX = "mcphost warning: "


def error_result(err: GatewayError) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=err.message)], structured_content=err.to_payload(), is_error=True
    )


def outcome_result(outcome: CallOutcome) -> types.CallToolResult:
    if outcome.error is not None:
        result = error_result(outcome.error)
    else:
        assert outcome.result is not None
        result = outcome.result
    if outcome.warnings:
        # A warning the agent cannot see is no warning: it rides along as its own text block.
        warning = types.TextContent(text=WARNING_PREFIX + "; ".join(outcome.warnings))
        result = result.model_copy(update={"content": [*result.content, warning]})
    return result


class _Sessions:
    """A stable id per agent connection, so the activity log can tell concurrent agents apart.

    SDK 2.x hands each request a fresh `ServerSession`, so the id hangs off what outlives a request: the
    process for stdio (one agent per `mcphost mcp`), the transport's session id for HTTP, else the handshake
    connection. Stateless 2026-era HTTP requests have none.
    """

    def __init__(self, fixed: str | None = None) -> None:
        self._fixed = fixed
        self._ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    def session_id(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        if self._fixed is not None:
            return self._fixed
        connection = getattr(ctx.session, "_connection", None)
        transport_id = getattr(connection, "session_id", None)
        if transport_id:
            return str(transport_id)
        if ctx.request is not None:
            header = ctx.request.headers.get("mcp-session-id") or ctx.request.headers.get(RELAY_SESSION_HEADER)
            if header:
                return str(header)
        if connection is None or getattr(connection, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            # 2026-era HTTP is one exchange per request: there is no session to name, and a fresh id per call
            # would only pretend there were.
            return None
        try:
            found = self._ids.get(connection)
            if found is None:
                found = self._ids[connection] = uuid.uuid4().hex[:12]
        except TypeError:
            return None
        return found

    def context(self, ctx: ServerRequestContext[Any, Any]) -> CallContext:
        client = None
        info = getattr(getattr(ctx.session, "client_params", None), "client_info", None)
        if info is not None:
            client = f"{info.name} {info.version}".strip()
        return CallContext(session_id=self.session_id(ctx), client=client, elicit=_elicitation(ctx))


def _elicitation(ctx: ServerRequestContext[Any, Any]) -> Elicit | None:
    """A yes/no question through the agent's client, when that client declared form elicitation."""
    capabilities = getattr(ctx.session, "client_capabilities", None)
    if capabilities is None or getattr(capabilities, "elicitation", None) is None:
        return None
    if not getattr(ctx.session, "can_send_request", True):
        # Declared, but this transport cannot carry a server-initiated request (2026-era stateless HTTP):
        # asking would fail and read as the user's "no"; nobody can be asked, so the call ends as NO_APPROVER.
        return None
    session, request_id = ctx.session, ctx.request_id

    async def ask(message: str, schema: dict[str, Any]) -> bool:
        result = await session.elicit_form(message, schema, related_request_id=request_id)
        content = result.content or {}
        return result.action == "accept" and content.get("approve") is True

    return ask


def build_server(gateway: Gateway, *, stdio: bool = False) -> Server[Any]:
    """The MCP server over `gateway`; `stdio=True` when the process serves exactly one agent."""
    tools = [types.Tool.model_validate(tool) for tool in tool_definitions()]
    sessions = _Sessions(fixed=f"stdio-{uuid.uuid4().hex[:12]}" if stdio else None)

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = params.arguments or {}
        try:
            if params.name == RETRIEVE_TOOLS:
                answer = await gateway.retrieve_tools(arguments)
                return types.CallToolResult(content=[types.TextContent(text=json.dumps(answer, indent=1))])
            variant = _VARIANTS.get(params.name)
            if variant is not None:
                return outcome_result(await gateway.call(variant, arguments, sessions.context(ctx)))
            if params.name == LEGACY_CALL_TOOL:
                return error_result(
                    GatewayError(ErrorCode.TOOL_NOT_FOUND, LEGACY_CALL_TOOL_MESSAGE, {"tool": "call_tool"})
                )
            return error_result(
                GatewayError(
                    ErrorCode.TOOL_NOT_FOUND,
                    f"Tool '{params.name}' not found. mcphost offers retrieve_tools, call_tool_read, call_tool_write "
                    "and call_tool_destructive; upstream tools are called through them as name='server:tool'.",
                    {"tool": params.name},
                )
            )
        except GatewayError as err:
            return error_result(err)
        except Exception as exc:  # the session outlives any one bad call
            logger.exception("tool %s failed", params.name)
            return error_result(GatewayError(ErrorCode.UPSTREAM_ERROR, f"mcphost failed: {type(exc).__name__}: {exc}"))

    return Server(
        "mcphost",
        version=__version__,
        title="mcphost",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
