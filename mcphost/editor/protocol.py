"""The editor channel's method names and payloads: the one source of truth for the daemon, `mcphost approve`,
the VS Code extension and any other editor integration (their JSON Schemas are generated into schemas/).

Framing is the LSP base protocol (Content-Length headers, JSON-RPC 2.0). Besides the standard `initialize` /
`initialized` / `shutdown` / `exit` handshake and `textDocument/publishDiagnostics`, the channel has these
methods; docs/editor-protocol.md describes the exchange.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mcphost.approval.prompt import (
    GrantInfo,
    Payload,
    PendingPrompt,
    PermissionBatch,
    PermissionBatchResult,
    PermissionRequest,
    PermissionResponse,
)

# server -> client request: a call waits for a person's decision
PERMISSION_REQUEST = "mcphost/permissionRequest"
# server -> client request, to clients that set initializationOptions.batch: calls from one agent session that asked
# within [permissions] batch_window, for one answer (allow all / deny all) or one by one
PERMISSION_BATCH = "mcphost/permissionBatch"
# server -> client notification: one activity record (as written to activity.jsonl)
ACTIVITY = "mcphost/activity"
# server -> client notification on change, and client -> server request: the daemon's state
STATUS = "mcphost/status"
# client -> server requests: remembered approvals
GRANTS_LIST = "mcphost/grants"
GRANTS_REVOKE = "mcphost/revokeGrants"
# client -> server request: the config in force, as `mcphost config show` prints it (secrets masked)
CONFIG = "mcphost/config"
# client -> server request: an agent's hook (`mcphost hook`, `mcphost permission-server`) asks about one of the
# agent's own tool calls; answered once decided (a person may be asked first) and on record
AUTHORIZE = "mcphost/authorize"
# standard JSON-RPC cancellation, sent when a prompt is answered elsewhere, expires, or its call ends
CANCEL_REQUEST = "$/cancelRequest"

PROTOCOL_VERSION = 1


class UpstreamStatus(Payload):
    name: str
    transport: str = Field(description="stdio | http")
    state: str = Field(description="connecting | connected | reconnecting | closed")
    tools: int
    error: str | None = None
    protocol: str | None = Field(
        default=None, description="The MCP revision the connection speaks (e.g. 2026-07-28), while connected."
    )


class EditorInfo(Payload):
    id: str
    name: str = Field(description="The client's name and version from `initialize`, or a placeholder.")
    transport: Literal["stdio", "socket"]
    attached_at: str


class McpEndpoint(Payload):
    url: str | None = Field(description="The agent endpoint (streamable HTTP on 127.0.0.1).")
    headers: dict[str, str] = Field(default_factory=dict, description="Headers an agent must send: the token.")


class ExportStatus(Payload):
    """The activity stream's export to an OpenTelemetry collector (`[export.otlp]`)."""

    endpoint: str = Field(description="The collector's base URL (a password in it is masked).")
    queued: int = Field(description="Records waiting to be sent, or being sent.")
    exported: int = Field(description="Records the collector accepted since the daemon started.")
    dropped: int = Field(
        description="Records given up on: the queue was full, the collector refused them or stayed unreachable "
        "past the timeout, or rejected them in a partial success."
    )
    last_error: str | None = Field(default=None, description="The last problem, which may be over by now.")
    last_error_at: str | None = Field(default=None, description="When it happened (RFC 3339, UTC).")
    last_export_at: str | None = Field(default=None, description="When the collector last accepted a batch.")


class StatusPayload(Payload):
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
    export: ExportStatus | None = Field(
        default=None, description="The OTLP export of the activity stream, when `[export.otlp]` is configured."
    )


class GrantsResult(Payload):
    """`mcphost/grants` result."""

    grants: list[GrantInfo]


class RevokeGrantsParams(Payload):
    """`mcphost/revokeGrants` params: grant ids, every grant of one `server:tool`, or all of them."""

    ids: list[str] = Field(default_factory=list)
    tool: str | None = Field(default=None, description="server:tool")
    all: bool = False


class RevokeGrantsResult(Payload):
    revoked: list[GrantInfo]


class ConfigResult(Payload):
    """`mcphost/config` result: the config in force, every key with its default filled in, secrets masked."""

    path: str
    exists: bool = Field(description="False: there is no file, and the built-in default is in force.")
    sha256: str | None = Field(
        default=None, description="SHA-256 of the file's bytes the config in force was read from (null: no file)."
    )
    config: dict[str, Any]


class AuthorizeParams(Payload):
    """`mcphost/authorize` params: one tool call of the agent's own, as its hook described it."""

    agent: str = Field(description="claude-code | vscode | codex | copilot-cli")
    event: str = Field(description="The hook that asks: PreToolUse | PermissionRequest | permission-prompt-tool")
    tool_name: str = Field(description="The tool as the agent names it: Bash, Edit, mcp__github__create_issue, ...")
    tool_input: dict[str, Any] = Field(default_factory=dict, description="The tool's input as the agent sent it.")
    session_id: str | None = Field(default=None, description="The agent's session id (records show a derived name).")
    tool_use_id: str | None = None
    cwd: str | None = None


class AuthorizeResult(Payload):
    """`mcphost/authorize` result."""

    decision: Literal["allow", "deny", "ask", "pass"] = Field(
        description="ask: nobody is attached here, the agent's own prompt should ask; pass: no opinion"
    )
    reason: str
    variant: str | None = Field(default=None, description="How the call was judged: call_tool_read | ...")
    record_id: str | None = Field(default=None, description="Its hook_decision record.")


# For schemas.py: every payload the channel carries, under the name its schema file gets.
PAYLOADS: dict[str, type[BaseModel]] = {
    "permission-request": PermissionRequest,
    "permission-response": PermissionResponse,
    "permission-batch": PermissionBatch,
    "permission-batch-result": PermissionBatchResult,
    "status": StatusPayload,
    "grants-result": GrantsResult,
    "revoke-grants-params": RevokeGrantsParams,
    "revoke-grants-result": RevokeGrantsResult,
    "config-result": ConfigResult,
    "authorize-params": AuthorizeParams,
    "authorize-result": AuthorizeResult,
}
