"""Which of an upstream's tools mcphost can offer: one malformed tool is dropped with a reason, never the server.

Two passes. `protocol_problem` runs on the raw JSON of a tools/list page, before the SDK parses it, because the
SDK validates the page whole and one bad tool would fail all of it. `tool_problem` runs on the parsed tool, for
what the protocol allows but mcphost cannot use: a name that cannot be addressed as `server:tool` or shown safely,
a definition too large to index and hand to an agent.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp_types import methods
from pydantic import ValidationError
from pydantic_core import to_json

from mcphost.activity.reader import nests_deeper
from mcphost.console import safe
from mcphost.pipes import holds_lone_surrogate, holds_non_finite

# SEP-986: tool names SHOULD be 1 to 128 characters.
MAX_NAME_CHARS = 128
# Generous for real servers (their longest descriptions run to a few KB); a megabyte is abuse, not documentation.
MAX_DESCRIPTION_CHARS = 64 * 1024
MAX_SCHEMA_BYTES = 256 * 1024
# Far deeper than a real tool's definition nests (its schema's objects two levels each); deeper, the SDK's models and
# their serializers give up (pydantic stops at a depth limit), and with them the whole page.
MAX_TOOL_DEPTH = 100
# How much of a made-up name a diagnostic repeats.
SHOWN_NAME_CHARS = 200

Dropped = tuple[str, str]  # (the tool's name as shown, why it was dropped)


def shown_name(raw: Any, position: int) -> str:
    """The name a diagnostic gives a raw tool: its own, escaped and cut, or its position in the page."""
    name = raw.get("name") if isinstance(raw, dict) else None
    if isinstance(name, str) and name:
        return safe(name, SHOWN_NAME_CHARS)
    return f"<tool #{position} without a name>"


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    # The location inside one tool, without the ("tools", 0) of the one-tool page it was checked in.
    loc = [str(part) for part in error["loc"]]
    if loc[:2] == ["tools", "0"]:
        loc = loc[2:]
    where = ".".join(loc) or "tool"
    return safe(f"{where}: {error['msg']}", 300)


def _validate(result: dict[str, Any], version: str | None) -> None:
    """What the SDK's session checks a tools/list result against: the negotiated version's wire shape, then its
    own model. Raises ValidationError."""
    if version is not None:
        try:
            methods.validate_server_result("tools/list", version, result)
        except ValidationError:
            raise
        except (KeyError, ValueError):
            pass  # a version this SDK has no wire shape for: the model check still applies
    types.ListToolsResult.model_validate(result, by_name=False)


# The hints the policy reads. The protocol makes each a boolean; the SDK's model turns "yes", 1 or "false" into one
# (pydantic's lax mode), and a tool a server marks readOnlyHint "yes" would pass as a read.
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _hint_problem(raw: Any) -> str | None:
    annotations = raw.get("annotations") if isinstance(raw, dict) else None
    if not isinstance(annotations, dict):
        return None  # absent, or not an object: the SDK's own check names that
    for hint in HINTS:
        value = annotations.get(hint)
        if value is not None and type(value) is not bool:
            return safe(f"annotations.{hint}: must be true or false, not {json.dumps(value)[:60]}", 300)
    return None


def protocol_problem(raw: Any, version: str | None) -> str | None:
    """Why the SDK would reject this raw tool (and with it the whole page), or read it other than as sent, or
    None."""
    if nests_deeper(raw, MAX_TOOL_DEPTH + 1):
        return f"the tool's definition nests deeper than {MAX_TOOL_DEPTH} levels"
    hint = _hint_problem(raw)
    if hint is not None:
        return hint
    if holds_lone_surrogate(raw):
        return 'the definition holds text that is not Unicode (a lone UTF-16 surrogate such as "\\udfff")'
    if holds_non_finite(raw):
        return "the definition holds NaN or Infinity, which is no JSON (an agent given it could not read it)"
    try:
        _validate({"tools": [raw]}, version)
    except ValidationError as exc:
        return _first_error(exc)
    except (ValueError, RecursionError) as exc:  # what the SDK's models meet besides a shape they refuse
        return safe(f"the SDK cannot read it ({exc})", 300)
    return None


def screen_page(tools: list[Any], version: str | None) -> tuple[list[Any], list[Dropped]]:
    """Split a raw tools/list page into the tools the SDK can parse and the dropped ones with their reasons."""
    kept: list[Any] = []
    dropped: list[Dropped] = []
    for position, raw in enumerate(tools):
        problem = protocol_problem(raw, version)
        if problem is None:
            kept.append(raw)
        else:
            dropped.append((shown_name(raw, position), problem))
    return kept, dropped


def page_is_valid(result: dict[str, Any], version: str | None) -> bool:
    """The common case, one check for the whole page: only a page that fails is screened tool by tool."""
    tools = result.get("tools")
    if isinstance(tools, list) and nests_deeper(tools, MAX_TOOL_DEPTH + 2):  # the page's list is one level
        return False
    if isinstance(tools, list) and any(_hint_problem(raw) is not None for raw in tools):
        return False
    if holds_lone_surrogate(tools):  # only a page read past pydantic's parser can (`stdio._response_as_read`)
        return False
    if holds_non_finite(tools):  # pydantic's parser takes NaN and Infinity
        return False
    try:
        _validate(result, version)
    except (ValidationError, ValueError, RecursionError):
        return False
    return True


def tool_problem(tool: types.Tool) -> str | None:
    """Why mcphost cannot offer a tool the protocol accepted, or None."""
    name = tool.name
    if not name:
        return "the name is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"the name is {len(name)} characters long (at most {MAX_NAME_CHARS})"
    if ":" in name:
        return "the name contains ':', which separates server and tool in mcphost"
    if safe(name) != name:
        return "the name contains control or invisible characters"
    if tool.description is not None and len(tool.description) > MAX_DESCRIPTION_CHARS:
        return f"the description is {len(tool.description)} characters long (at most {MAX_DESCRIPTION_CHARS})"
    schema_bytes = len(to_json(tool.input_schema))
    if schema_bytes > MAX_SCHEMA_BYTES:
        return f"the inputSchema is {schema_bytes} bytes of JSON (at most {MAX_SCHEMA_BYTES})"
    return None
