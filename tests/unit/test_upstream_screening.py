"""Which upstream tools mcphost offers: a malformed one is dropped with a reason, never its whole server."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from mcphost.upstream.screening import (
    MAX_DESCRIPTION_CHARS,
    page_is_valid,
    protocol_problem,
    screen_page,
    shown_name,
    tool_problem,
)

OBJECT: dict[str, Any] = {"type": "object"}
VERSION = "2025-06-18"


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"name": "t", "inputSchema": "not a schema"}, "inputSchema"),
        ({"name": "t", "inputSchema": {"type": "array"}}, "inputSchema"),
        ({"name": "t"}, "inputSchema"),
        ({"inputSchema": OBJECT}, "name"),
        ({"name": 5, "inputSchema": OBJECT}, "name"),
        ({"name": "t", "inputSchema": OBJECT, "description": ["not", "text"]}, "description"),
        ("a string where a tool should be", "tool"),
    ],
)
def test_a_tool_the_sdk_would_reject_is_named_with_where_it_is_wrong(raw: Any, where: str) -> None:
    problem = protocol_problem(raw, VERSION)
    assert problem is not None and problem.startswith(where)


@pytest.mark.parametrize("value", ["yes", 1, "false", 0, {"a": 1}, [True]])
@pytest.mark.parametrize("hint", ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"])
def test_a_hint_that_is_no_boolean_drops_the_tool_which_the_sdk_read_as_one(hint: str, value: Any) -> None:
    # The SDK's model reads "yes" and 1 as true, "false" and 0 as false: a tool marked readOnlyHint "yes" passed as a
    # read, one marked destructiveHint "false" as no destructive one.
    raw = {"name": "t", "inputSchema": OBJECT, "annotations": {hint: value}}
    problem = protocol_problem(raw, VERSION)
    assert problem is not None and problem.startswith(f"annotations.{hint}: must be true or false")
    page = [{"name": "ok", "inputSchema": OBJECT, "annotations": {hint: True, "title": None}}, raw]
    assert not page_is_valid({"tools": page}, VERSION)
    kept, dropped = screen_page(page, VERSION)
    assert [t["name"] for t in kept] == ["ok"] and [name for name, _ in dropped] == ["t"]
    assert page_is_valid({"tools": kept}, VERSION)


def test_a_well_formed_tool_has_no_protocol_problem_in_any_version() -> None:
    raw = {"name": "t", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}}
    for version in (None, "2024-11-05", VERSION, "2025-11-25", "1999-01-01"):
        assert protocol_problem(raw, version) is None


def test_a_page_keeps_its_good_tools_in_order_and_names_the_bad_ones() -> None:
    page = [
        {"name": "a", "inputSchema": OBJECT},
        {"inputSchema": OBJECT},
        {"name": "b", "inputSchema": OBJECT},
        {"name": "c\x1b[2J", "inputSchema": 3},
    ]
    assert not page_is_valid({"tools": page}, VERSION)
    kept, dropped = screen_page(page, VERSION)
    assert [t["name"] for t in kept] == ["a", "b"]
    assert [name for name, _ in dropped] == ["<tool #1 without a name>", "c\\x1b[2J"]
    assert page_is_valid({"tools": kept}, VERSION)


def test_a_made_up_name_is_shown_escaped_and_cut() -> None:
    assert shown_name({"name": "x" * 10_000}, 0).endswith("…")
    assert len(shown_name({"name": "x" * 10_000}, 0)) == 200
    assert shown_name({"name": ""}, 4) == "<tool #4 without a name>"


def _tool(name: str = "t", description: str | None = None, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or OBJECT)


@pytest.mark.parametrize(
    ("tool", "says"),
    [
        (_tool(name="server:tool"), "':'"),
        (_tool(name="bell\x07"), "control"),
        (_tool(name="rtl\u202eevil"), "control"),
        (_tool(name=""), "empty"),
        (_tool(name="n" * 129), "129 characters"),
        (_tool(description="d" * (MAX_DESCRIPTION_CHARS + 1)), f"{MAX_DESCRIPTION_CHARS + 1} characters"),
        (_tool(schema={"type": "object", "description": "s" * 300_000}), "inputSchema"),
    ],
)
def test_a_tool_mcphost_cannot_offer_says_why(tool: types.Tool, says: str) -> None:
    problem = tool_problem(tool)
    assert problem is not None and says in problem


def test_ordinary_tools_pass() -> None:
    for name in ("read_file", "get-issue", "v2.search", "Tool With Spaces", "n" * 128):
        assert tool_problem(_tool(name=name, description="d" * 5000)) is None
