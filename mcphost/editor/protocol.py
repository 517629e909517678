"""The editor channel's method names and payloads: the one source of truth for the daemon, `mcphost approve`,
the VS Code extension and any other editor integration (their JSON Schemas are generated into schemas/).

Framing is the LSP base protocol (Content-Length headers, JSON-RPC 2.0). Besides the standard `initialize` /
`initialized` / `shutdown` / `exit` handshake and `textDocument/publishDiagnostics`, the channel has these
methods; docs/editor-protocol.md describes the exchange.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcphost.policy import Remember

# server -> client request: a call waits for a person's decision
PERMISSION_REQUEST = "mcphost/permissionRequest"
# server -> client notification: one activity record (as written to activity.jsonl)
ACTIVITY = "mcphost/activity"
# server -> client notification on change, and client -> server request: the daemon's state
STATUS = "mcphost/status"
# client -> server requests: remembered approvals
GRANTS_LIST = "mcphost/grants"
GRANTS_REVOKE = "mcphost/revokeGrants"
# standard JSON-RPC cancellation, sent when a prompt is answered elsewhere, expires, or its call ends
CANCEL_REQUEST = "$/cancelRequest"

PROTOCOL_VERSION = 1


class Answer(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


class _Payload(BaseModel):
    # Newer daemons may add fields; integrations must ignore what they do not know.
    model_config = ConfigDict(extra="allow")


class PromptIntent(_Payload):
    operation_type: str = Field(description="read | write | destructive, as the agent declared it.")
    data_sensitivity: str | None = Field(default=None, description="public | internal | private | unknown")
    reason: str | None = Field(
        default=None, description="The agent's own words: untrusted text, show it as plain text, never as markup."
    )


class PermissionRequest(_Payload):
    """`mcphost/permissionRequest` params: everything a person needs to decide on one call."""

    id: str = Field(description="The prompt's id, the same for every editor it is sent to.")
    variant: str = Field(description="call_tool_read | call_tool_write | call_tool_destructive")
    operation: Literal["read", "write", "destructive"] = Field(description="The variant's kind of operation.")
    action: Literal["ask", "confirm"] = Field(
        description="What the policy asks for: ask (a quick yes or no) or confirm (a deliberate confirmation, the "
        "default for destructive calls)."
    )
    server: str
    tool: str
    arguments: dict[str, Any] | None = Field(
        default=None, description="The tool's arguments after redaction (secrets replaced), when small enough."
    )
    arguments_preview: str | None = Field(
        default=None, description="The start of the redacted arguments' JSON, when they were too large to send."
    )
    intent: PromptIntent
    annotations: dict[str, Any] = Field(
        default_factory=dict, description="The hints mcphost acts on: the server's, after config overrides."
    )
    call_with: str = Field(description="The variant mcphost recommends for this tool from its annotations.")
    warnings: list[str] = Field(
        default_factory=list,
        description="Things the person should know: a write on a read-only tool, annotations that changed, "
        "a remembered approval dropped because the tool changed.",
    )
    expires_at: str = Field(description="When the call stops waiting and ends as expired (RFC 3339, UTC).")
    remember_options: list[Remember] = Field(
        description="The remember scopes this daemon accepts for this call; `always` is left out for destructive "
        "calls unless the config allows it."
    )
    session_id: str | None = Field(default=None, description="The agent session the call came from.")
    client: str | None = Field(default=None, description="The agent's MCP client, as it named itself.")


class PermissionResponse(_Payload):
    """`mcphost/permissionRequest` result."""

    decision: Answer
    remember: Remember = Field(default=Remember.ONCE, description="Ignored for deny.")


class UpstreamStatus(_Payload):
    name: str
    transport: str = Field(description="stdio | http")
    state: str = Field(description="connecting | connected | reconnecting | closed")
    tools: int
    error: str | None = None


class EditorInfo(_Payload):
    id: str
    name: str = Field(description="The client's name and version from `initialize`, or a placeholder.")
    transport: Literal["stdio", "socket"]
    attached_at: str


class PendingPrompt(_Payload):
    id: str
    variant: str
    server: str
    tool: str
    expires_at: str


class McpEndpoint(_Payload):
    url: str | None = Field(description="The agent endpoint (streamable HTTP on 127.0.0.1).")
    headers: dict[str, str] = Field(default_factory=dict, description="Headers an agent must send: the token.")


class StatusPayload(_Payload):
    """`mcphost/status`: notification params on every change, and the result of the request."""

    version: str
    protocol: int = PROTOCOL_VERSION
    pid: int
    mcp: McpEndpoint
    config_path: str
    log_path: str
    editor_socket: str | None = None
    servers: list[UpstreamStatus]
    pending: int = Field(description="Prompts waiting for an answer.")
    prompts: list[PendingPrompt] = Field(default_factory=list)
    editors: list[EditorInfo] = Field(
        default_factory=list,
        description="Attached approvers (clients that only watch, like `mcphost status`, are not listed).",
    )
    config_error: str | None = Field(default=None, description="Why the last save of the config was not applied.")
    log_error: str | None = Field(default=None, description="Why the activity log cannot be written right now.")


class GrantInfo(_Payload):
    id: str
    scope: Literal["session", "always"]
    server: str
    tool: str
    variant: str
    granted_at: str
    session_id: str | None = None
    approver: str | None = None


class GrantsResult(_Payload):
    """`mcphost/grants` result."""

    grants: list[GrantInfo]


class RevokeGrantsParams(_Payload):
    """`mcphost/revokeGrants` params: grant ids, every grant of one `server:tool`, or all of them."""

    ids: list[str] = Field(default_factory=list)
    tool: str | None = Field(default=None, description="server:tool")
    all: bool = False


class RevokeGrantsResult(_Payload):
    revoked: list[GrantInfo]


# For schemas.py: every payload the channel carries, under the name its schema file gets.
PAYLOADS: dict[str, type[BaseModel]] = {
    "permission-request": PermissionRequest,
    "permission-response": PermissionResponse,
    "status": StatusPayload,
    "grants-result": GrantsResult,
    "revoke-grants-params": RevokeGrantsParams,
    "revoke-grants-result": RevokeGrantsResult,
}
