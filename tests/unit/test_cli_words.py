"""What the CLI tells a person in the words of the command line, while the agent keeps its own: the gateway's
messages (a contract, unchanged in records and `-o json`) translated for the terminal, the config in force named
as it is, and host events in a listing saying what happened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcphost.activity import display
from mcphost.cli.call import _pretty
from mcphost.cli.common import config_in_force, for_terminal, print_json
from mcphost.errors import GatewayError
from mcphost.gateway.arguments import parse_args, split_name
from mcphost.intent import Annotations, ToolVariant, check_annotations


def refusal(call: Any) -> str:
    with pytest.raises(GatewayError) as caught:
        call()
    return caught.value.message


def test_the_gateways_messages_name_the_commands_a_person_types() -> None:
    mismatch = refusal(
        lambda: check_annotations(ToolVariant.READ, "todo:delete_task", Annotations(destructive=True), strict=True)
    )
    assert mismatch.endswith("use call_tool_destructive")  # the agent's words stay the agent's
    assert for_terminal(mismatch) == (
        "Tool 'todo:delete_task' is marked destructive by server, use `mcphost call tool-destructive`"
    )
    (warning,) = check_annotations(ToolVariant.WRITE, "t:x", Annotations(read_only=True), strict=True).warnings
    assert "`mcphost call tool-read` is enough" in for_terminal(warning)

    bad_json = refusal(lambda: parse_args({"args_json": "{oops"}, ToolVariant.WRITE))
    assert for_terminal(bad_json).startswith("--args is not valid JSON")
    no_name = refusal(lambda: split_name("nocolon", ToolVariant.READ))
    assert for_terminal(no_name).endswith("(find them with `mcphost tools`)")
    assert for_terminal("Closest matches: a:b. Use retrieve_tools to search.") == (
        "Closest matches: a:b. Use `mcphost tools` to search."
    )


def test_advice_to_the_agent_about_its_user_is_left_out_for_that_user() -> None:
    denied = (
        "Permission denied by the user (mcphost approve 0.1.0 (editor-2)): they did not approve this call_tool_write "
        "call to 'todo:add_task'. Do not retry it as is; ask the user how to proceed."
    )
    assert for_terminal(denied) == (
        "Permission denied by the user (mcphost approve 0.1.0 (editor-2)): they did not approve this "
        "`mcphost call tool-write` call to 'todo:add_task'."
    )


def test_names_that_only_contain_the_words_are_left_alone() -> None:
    for text in ("Tool 'a:call_tool_read' not found", "my_retrieve_tools_2", "x.args_json", "'call_tool_write'"):
        assert for_terminal(text) == text


def test_the_config_in_force_is_named_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert config_in_force(path) == (
        f"none at {path}; using the built-in default (`mcphost config init` writes a commented starter there)"
    )
    path.write_text("", encoding="utf-8")
    assert config_in_force(path) == str(path)


def test_host_events_say_what_happened() -> None:
    rejected = {
        "type": "config_error",
        "details": {
            "file": "c.toml",
            "errors": [
                {"path": "permissions.wrte", "message": "unknown key 'wrte'", "line": 2, "column": 1},
                {"path": "log.keep", "message": "must be a number", "line": 9, "column": 1},
            ],
        },
    }
    assert display.detail_cell(rejected) == "permissions.wrte: unknown key 'wrte' (line 2, column 1) (+1 more)"
    assert "unknown key 'wrte'" in display.line(rejected)
    assert display.detail_cell({"type": "upstream_connected", "server": "todo", "details": {"tools": 5}}) == "5 tools"
    assert display.detail_cell({"type": "upstream_lost", "details": {"reason": "exit 1"}}) == "exit 1"
    # A call with no decision (refused before one) shows why it was refused.
    refused = {"type": "tool_call", "status": "rejected", "error": {"code": "SERVER_MISMATCH", "message": "use X"}}
    assert display.detail_cell(refused) == "use X"


def test_json_output_escapes_what_a_terminal_would_act_on_and_stays_the_same_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # An upstream's result or a tool's name may hold a C1 CSI, a bidi override or a lone surrogate: `-o json` goes
    # to terminals too.
    value = {"text": "a\x9b31mred\u202eevil\u2066\u200b ok é ✓", "name\u2028": ["\udfff"], "n": 1}
    print_json(value)
    out = capsys.readouterr().out
    assert json.loads(out) == value
    assert out.isascii() is False and "é ✓" in out  # readable text stays as it is
    assert not any(c in out for c in "\x9b\u202e\u2066\u200b\u2028\udfff")
    assert out.encode("utf-8")  # no lone surrogate left to fail a stream


def test_a_result_nested_past_what_python_can_walk_is_printed_as_it_came() -> None:
    deep = "[" * 5000 + "]" * 5000
    assert _pretty(deep) == deep
    assert _pretty('{"a": [1]}') == '{\n  "a": [\n    1\n  ]\n}'
