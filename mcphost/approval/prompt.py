"""A permission prompt as data: what a person is asked about one call, and what they answer. The broker, the
terminal approver and every editor integration speak these; their JSON Schemas are generated into schemas/editor/.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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


class GrantMatch(StrEnum):
    """What a remembered allow covers besides the tool and variant (the person picks it with the scope)."""

    TOOL = "tool"  # any arguments
    ARGUMENTS = "arguments"  # exactly these argument values
    PATTERN = "pattern"  # arguments matching the globs the person confirmed


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
    rule: str | None = Field(
        default=None,
        description="What asks for the person: the config key (permissions.write) or rule (rules[2]) that decided.",
    )
    rule_reason: str | None = Field(
        default=None, description="That rule's `reason`, from the person's own config (plain text)."
    )
    match_options: list[GrantMatch] = Field(
        default_factory=list,
        description="What a remembered allow (session or always) may be narrowed to: tool (any arguments), "
        "arguments (exactly these values), pattern (arguments matching globs the person confirms). Empty when "
        "nothing can be remembered.",
    )
    suggested_pattern: dict[str, str] | None = Field(
        default=None,
        description="A starting point for a pattern grant, made from the redacted arguments: argument name -> glob "
        "(fnmatch: * matches any run of characters, / included). For the person to edit and confirm, never to apply "
        "unseen.",
    )


class PermissionResponse(Payload):
    """`mcphost/permissionRequest` result."""

    decision: Answer
    remember: Remember = Field(default=Remember.ONCE, description="Ignored for deny.")
    match: GrantMatch = Field(
        default=GrantMatch.TOOL,
        description="What the remembered allow covers (session or always only; one of the request's match_options).",
    )
    pattern: dict[str, str] | None = Field(
        default=None,
        description="match = pattern: argument name -> glob, as the person confirmed it. Every named argument must be "
        "a string matching its glob, in this call too; arguments not named are not looked at.",
    )


class BatchAnswer(PermissionResponse):
    """One call's answer in a `mcphost/permissionBatch` result."""

    id: str = Field(description="The id of the request in the batch this answers.")
    confirmed: str | None = Field(
        default=None,
        description="server:tool, as the person saw it named: required to allow a destructive call in a batch (an "
        "allow without it, or with another name, counts as deny).",
    )


class PermissionBatch(Payload):
    """`mcphost/permissionBatch` params: calls from one agent session that asked within a short window
    (`[permissions] batch_window`), for one answer or one by one. Sent only to clients that set
    initializationOptions.batch = true; others get each call as its own `mcphost/permissionRequest`."""

    id: str = Field(description="The batch's id.")
    session_id: str | None = None
    client: str | None = Field(default=None, description="The agent's MCP client, as it named itself.")
    requests: list[PermissionRequest] = Field(description="The calls, in the order they asked (two or more).")
    expires_at: str = Field(description="When the first of them stops waiting (RFC 3339, UTC).")


class PermissionBatchResult(Payload):
    """`mcphost/permissionBatch` result: one answer per request; a request left unanswered is denied."""

    answers: list[BatchAnswer] = Field(description="At most one per request: a result answering one twice is invalid.")

    @field_validator("answers")
    @classmethod
    def _once_each(cls, answers: list[BatchAnswer]) -> list[BatchAnswer]:
        # Two answers to one call (a deny, then an allow) would leave the call to whichever was read last.
        ids = [answer.id for answer in answers]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"answers {', '.join(twice)} more than once")
        return answers


def batch_response(request: PermissionRequest, answer: BatchAnswer | None) -> tuple[PermissionResponse, str | None]:
    """What one call's answer in a batch counts as, and why it was turned into a deny (else None): a call the batch
    left unanswered is denied, and so is a destructive call allowed without being named (`confirmed`), so that no
    editor can let one through with a single "allow all"."""
    if answer is None:
        return PermissionResponse(decision=Answer.DENY), "the batch's answer left this call out"
    if (
        answer.decision is Answer.ALLOW
        and request.operation == "destructive"
        and answer.confirmed != f"{request.server}:{request.tool}"
    ):
        return PermissionResponse(decision=Answer.DENY), (
            "a destructive call in a batch is allowed only when the person confirms it by name, and this answer did "
            "not name it"
        )
    return PermissionResponse(
        decision=answer.decision, remember=answer.remember, match=answer.match, pattern=answer.pattern
    ), None


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
    match: GrantMatch = Field(default=GrantMatch.TOOL, description="What the grant covers besides the tool.")
    pattern: dict[str, str] | None = Field(default=None, description="match = pattern: argument name -> glob.")
    arguments_preview: str | None = Field(
        default=None, description="match = arguments: the start of the (redacted) arguments it was given for."
    )
