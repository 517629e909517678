"""A permission prompt as data: what a person is asked about one call, and what they answer. The broker, the
terminal approver and every editor integration speak these; their JSON Schemas are generated into schemas/editor/.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcphost.policy import Remember

# The client name `mcphost call` gives itself (mcphost.cli.daemon_client.CALL_CLIENT; a test keeps them equal).
ONE_SHOT_CLIENT = "mcphost call"


def one_shot_client(client: str | None) -> bool:
    """The call came from `mcphost call`: its session is that one command, gone when it ends, so a session grant
    would be a promise that means nothing. (The name is the client's own word; what it changes only takes an option
    away.)"""
    name = client or ""
    return name == ONE_SHOT_CLIENT or name.startswith(ONE_SHOT_CLIENT + " ")


class Answer(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


class Payload(BaseModel):
    # Newer daemons may add fields; integrations must ignore what they do not know.
    model_config = ConfigDict(extra="allow")


class PromptIntent(Payload):
    operation_type: str = Field(description="read | write | destructive, as the agent declared it.")
    data_sensitivity: str | None = Field(default=None, description="public | internal | private | unknown")
    reason: str | None = Field(
        default=None, description="The agent's own words: untrusted text, show it as plain text, never as markup."
    )


class PermissionRequest(Payload):
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


class PermissionResponse(Payload):
    """`mcphost/permissionRequest` result."""

    decision: Answer
    remember: Remember = Field(default=Remember.ONCE, description="Ignored for deny.")


class PendingPrompt(Payload):
    id: str
    variant: str
    server: str
    tool: str
    expires_at: str


class GrantInfo(Payload):
    id: str
    scope: Literal["session", "always"]
    server: str
    tool: str
    variant: str
    granted_at: str
    session_id: str | None = None
    approver: str | None = None
