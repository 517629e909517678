"""The agent-facing MCP server: four tools, thin handlers over `Gateway`."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
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
WARNING_PREFIX = "mcphost warning: "

# Sent by `mcphost mcp` when it relays to a daemon, so that one agent process is one session whatever the protocol
# version's idea of sessions: `<session>.<proof>`, where the proof is an HMAC of the session under the daemon's
# relay key. The key is only in the daemon's discovery file (0600), which relays read and agents are never given:
# a session id seen in a record or a prompt cannot be replayed, and without a valid proof a stateless request is a
# session of one call.
RELAY_SESSION_HEADER = "x-mcphost-relay-session"
_RELAY_SESSION = re.compile(r"[0-9a-f]{32}")


def relay_proof(key: str, session: str) -> str:
    """The header value that proves `session` to the daemon holding `key`."""
    mac = hmac.new(key.encode(), b"mcphost relay session\0" + session.encode(), hashlib.sha256).hexdigest()
    return f"{session}.{mac}"


def new_relay_session() -> str:
    return uuid.uuid4().hex


def proven_relay_session(key: str | None, header: str | None) -> str | None:
    """The session a relay header proves under `key`, or None when it proves nothing."""
    if not key or not header:
        return None
    session, _, _mac = header.partition(".")
    if not _RELAY_SESSION.fullmatch(session):
        return None
    if not hmac.compare_digest(relay_proof(key, session).encode(), header.encode("utf-8", "replace")):
        return None
    return session


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
    """A stable id per agent session, for the activity log and for "allow for this session".

    The id must be one the agent cannot choose, or copying another agent's id (it shows in records and prompts)
    would take over that agent's session approvals. So it is, in order: the process for stdio (one agent per
    `mcphost mcp`); a relay's session proven with the daemon's relay key; the transport's session, which the
    daemon's session manager minted (only sessions it knows reach the server), under a name derived from its id;
    else the handshake connection. Stateless 2026-era HTTP requests without a proof have none: a header such as
    `mcp-session-id` names nothing the daemon gave out.
    """

    def __init__(self, fixed: str | None = None, relay_key: str | None = None) -> None:
        self._fixed = fixed
        self._relay_key = relay_key
        self._ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._naming_key = secrets.token_bytes(32)

    def _name_of(self, transport_id: str) -> str:
        """What records and prompts call a transport session: derived from its id, never the id itself. The id is
        what a request names to be served inside the session; whoever read it in a record could do just that."""
        digest = hmac.new(self._naming_key, transport_id.encode(), hashlib.sha256).hexdigest()
        return f"http-{digest[:24]}"

    def session_id(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        if self._fixed is not None:
            return self._fixed
        if ctx.request is not None:
            relayed = proven_relay_session(self._relay_key, ctx.request.headers.get(RELAY_SESSION_HEADER))
            if relayed is not None:
                return f"relay-{relayed}"
        connection = getattr(ctx.session, "_connection", None)
        transport_id = getattr(connection, "session_id", None)
        if transport_id:
            return self._name_of(str(transport_id))
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


def build_server(gateway: Gateway, *, stdio: bool = False, relay_key: str | None = None) -> Server[Any]:
    """The MCP server over `gateway`; `stdio=True` when the process serves exactly one agent; `relay_key` checks
    the session proofs of `mcphost mcp` relays."""
    tools = [types.Tool.model_validate(tool) for tool in tool_definitions()]
    sessions = _Sessions(fixed=f"stdio-{uuid.uuid4().hex[:12]}" if stdio else None, relay_key=relay_key)

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
