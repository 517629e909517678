"""The four tools mcphost offers agents: names, descriptions and input schemas, as plain data."""

from __future__ import annotations

from typing import Any

from mcphost.intent import MAX_REASON_LENGTH, DataSensitivity, OperationType, ToolVariant

RETRIEVE_TOOLS = "retrieve_tools"
LEGACY_CALL_TOOL = "call_tool"
DEFAULT_LIMIT = 10
MAX_LIMIT = 100

LEGACY_CALL_TOOL_MESSAGE = (
    "Tool 'call_tool' not found. Use call_tool_read, call_tool_write, or call_tool_destructive with matching "
    "intent.operation_type. See retrieve_tools for annotations and recommendations."
)

RETRIEVE_TOOLS_DESCRIPTION = (
    "Search for tools across all upstream servers. Results include annotations (readOnlyHint, destructiveHint) "
    "and recommended call_with variant. Use call_tool_read for read-only operations, call_tool_write for "
    "modifications, call_tool_destructive for deletions. Intent must match tool variant."
)

VARIANT_DESCRIPTIONS = {
    ToolVariant.READ: (
        "Execute a read-only tool discovered via retrieve_tools. Use for operations that query data without "
        "modifying state. Requires intent.operation_type='read'. Will be rejected if server marks tool as "
        "destructive."
    ),
    ToolVariant.WRITE: (
        "Execute a state-modifying tool discovered via retrieve_tools. Use for operations that create or update "
        "resources. Requires intent.operation_type='write'. Will be rejected if server marks tool as destructive."
    ),
    ToolVariant.DESTRUCTIVE: (
        "Execute a destructive tool discovered via retrieve_tools. Use for operations that delete or permanently "
        "modify resources. Requires intent.operation_type='destructive'. Most permissive - allowed regardless of "
        "server annotations."
    ),
}

USAGE_INSTRUCTIONS = (
    "Call a tool with the variant in its call_with field: call_tool_read for read-only tools, call_tool_write for "
    "tools that create or update, call_tool_destructive for tools that delete or cannot be undone. Pass "
    "name='server:tool', the tool's arguments as args (an object) or args_json (a JSON string), and intent="
    "{operation_type, data_sensitivity?, reason?} where operation_type repeats the variant (read, write, "
    "destructive). A variant that does not match intent.operation_type, or a read/write call to a tool its "
    "server marks destructive, is rejected. Write and destructive calls may wait for the person to approve them."
)


def retrieve_tools_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What you want to do, in a few words (e.g. 'list open tasks'). Empty lists all tools.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": f"Most results to return (1-{MAX_LIMIT}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def call_tool_schema(variant: ToolVariant) -> dict[str, Any]:
    operation = variant.operation.value
    return {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "The tool to call, as 'server:tool' exactly as retrieve_tools returned it.",
            },
            "args_json": {
                "type": "string",
                "description": "The tool's arguments as a JSON object in a string. Use this or args, not both.",
            },
            "args": {
                "type": "object",
                "description": "The tool's arguments as an object. Use this or args_json, not both.",
                "additionalProperties": True,
            },
            "intent": {
                "type": "object",
                "description": f"Your declared intent. operation_type must be '{operation}' for {variant.value}.",
                "properties": {
                    "operation_type": {
                        "type": "string",
                        "enum": [op.value for op in OperationType],
                        "description": f"Must be '{operation}' for {variant.value}.",
                    },
                    "data_sensitivity": {
                        "type": "string",
                        "enum": [s.value for s in DataSensitivity],
                        "description": "How sensitive the data touched is (optional).",
                    },
                    "reason": {
                        "type": "string",
                        "maxLength": MAX_REASON_LENGTH,
                        "description": "Why you make this call, for the person who approves it (optional).",
                    },
                },
                "required": ["operation_type"],
                "additionalProperties": False,
            },
        },
        # No additionalProperties: false here: the flat intent_* keys stay valid for models that cannot nest.
        "required": ["name", "intent"],
    }


def tool_definitions() -> list[dict[str, Any]]:
    """The agent-facing tool list, in MCP's wire shape (camelCase keys)."""
    tools: list[dict[str, Any]] = [
        {
            "name": RETRIEVE_TOOLS,
            "description": RETRIEVE_TOOLS_DESCRIPTION,
            "inputSchema": retrieve_tools_schema(),
            "annotations": {"title": "Search tools", "readOnlyHint": True, "openWorldHint": False},
        }
    ]
    for variant in ToolVariant:
        tools.append(
            {
                "name": variant.value,
                "description": VARIANT_DESCRIPTIONS[variant],
                "inputSchema": call_tool_schema(variant),
                "annotations": {
                    "title": f"Call a {variant.operation.value} tool",
                    "readOnlyHint": variant is ToolVariant.READ,
                    "destructiveHint": variant is ToolVariant.DESTRUCTIVE,
                    "openWorldHint": True,
                },
            }
        )
    return tools
