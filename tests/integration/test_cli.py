"""The CLI as a person uses it: real `mcphost` processes, exit codes, stdout for results, stderr for errors."""

from __future__ import annotations

import json
import stat
import tomllib

from mcphost import __version__
from tests.helpers import Sandbox, mcphost


def test_new_user_with_no_config_gets_the_todo_server(sandbox: Sandbox) -> None:
    assert not sandbox.config.exists()
    tools = mcphost(sandbox, "tools", "-o", "json")
    assert tools.returncode == 0, tools.stderr
    names = {t["name"]: t["call_with"] for t in json.loads(tools.stdout)["tools"]}
    assert names == {
        "todo:add_task": "call_tool_write",
        "todo:list_tasks": "call_tool_read",
        "todo:update_task": "call_tool_write",
        "todo:complete_task": "call_tool_write",
        "todo:delete_task": "call_tool_destructive",
    }
    listed = mcphost(sandbox, "call", "tool-read", "todo:list_tasks")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["items"] == []


def test_call_fills_the_intent_from_the_command_and_records_it(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "allow"\n' + sandbox.probe_server())
    result = mcphost(
        sandbox,
        "call",
        "tool-write",
        "probe:plain_echo",
        "--args",
        '{"text": "hey"}',
        "--reason",
        "testing",
        "--sensitivity",
        "internal",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "plain_echo: hey"
    record = sandbox.tool_calls()[-1]
    assert record["metadata"]["intent"] == {
        "operation_type": "write",
        "data_sensitivity": "internal",
        "reason": "testing",
    }
    assert record["metadata"]["tool_variant"] == "call_tool_write"
    assert record["client"] == f"mcphost call {__version__}"


def test_rejected_call_exits_nonzero_with_the_message_on_stderr(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    result = mcphost(sandbox, "call", "tool-read", "probe:wipe_notes")
    assert result.returncode == 1
    assert result.stdout == ""
    # In the words of the command line; the record keeps the agent-facing message, which is a contract.
    assert "Tool 'probe:wipe_notes' is marked destructive by server, use `mcphost call tool-destructive`" in (
        result.stderr
    )
    assert "call_tool_destructive" not in result.stderr
    record = sandbox.tool_calls()[-1]
    assert record["status"] == "rejected"
    assert record["error"]["message"].endswith("use call_tool_destructive")


def test_bad_args_json_is_explained(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    result = mcphost(sandbox, "call", "tool-read", "probe:read_notes", "--args", "{oops")
    assert result.returncode == 1
    assert "INVALID_ARGS" in result.stderr and "not valid JSON" in result.stderr


def test_json_output_is_the_raw_result(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    result = mcphost(sandbox, "call", "tool-read", "probe:read_notes", "--args", '{"text": "j"}', "-o", "json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["structuredContent"] == {"tool": "read_notes", "text": "j"}
    assert payload["content"][0]["text"] == "read_notes: j"


def test_tool_error_from_upstream_exits_nonzero(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "allow"\n' + sandbox.probe_server())
    result = mcphost(sandbox, "call", "tool-write", "probe:fail")
    assert result.returncode == 1
    assert "the tool failed on purpose" in result.stderr


def test_tools_query_ranks_the_best_match_first(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    result = mcphost(sandbox, "tools", "erase notes")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[1].split()
    assert first[1] == "probe:wipe_notes" and first[2] == "tool-destructive"


def test_invalid_config_names_the_key_and_line(sandbox: Sandbox) -> None:
    sandbox.write_config("[intent_declaration]\nstrict_server_validaton = true\n")
    result = mcphost(sandbox, "tools")
    assert result.returncode == 1
    assert "unknown key 'strict_server_validaton'" in result.stderr
    assert "line 2, column 1" in result.stderr
    validate = mcphost(sandbox, "config", "validate")
    assert validate.returncode == 1 and "strict_server_validaton" in validate.stderr


def test_config_show_masks_secrets(sandbox: Sandbox) -> None:
    sandbox.write_config('[servers.r]\nurl = "http://127.0.0.1:1/mcp"\nheaders = { Authorization = "Bearer abc123" }\n')
    result = mcphost(sandbox, "config", "show", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert "abc123" not in result.stdout
    assert json.loads(result.stdout)["config"]["servers"]["r"]["headers"]["Authorization"] == "[REDACTED]"
    as_toml = mcphost(sandbox, "config", "show")
    assert as_toml.returncode == 0 and "abc123" not in as_toml.stdout
    assert tomllib.loads(as_toml.stdout)["servers"]["r"]["headers"]["Authorization"] == "[REDACTED]"


def test_unknown_variant_is_a_usage_error(sandbox: Sandbox) -> None:
    result = mcphost(sandbox, "call", "tool-delete", "todo:delete_task")
    assert result.returncode == 2
    assert "tool-read" in result.stderr


def test_unknown_and_disabled_servers_are_named(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server() + sandbox.probe_server("off", "enabled = false"))
    unknown = mcphost(sandbox, "call", "tool-read", "nosuch:read_notes")
    assert unknown.returncode == 1
    assert "there is no server 'nosuch' (servers: probe)" in unknown.stderr
    disabled = mcphost(sandbox, "call", "tool-read", "off:read_notes")
    assert disabled.returncode == 1 and "server 'off' is disabled" in disabled.stderr


def test_config_init_writes_a_valid_commented_starter_that_runs_the_todo_server(sandbox: Sandbox) -> None:
    init = mcphost(sandbox, "config", "init")
    assert init.returncode == 0, init.stderr
    text = sandbox.config.read_text(encoding="utf-8")
    assert text.startswith("#:schema ./config.schema.json") and "# A stdio server:" in text
    schema = json.loads((sandbox.root / "config.schema.json").read_text(encoding="utf-8"))
    assert schema["$id"].endswith("config.schema.json")
    # Where an upstream's token goes (its env, its Authorization header): the person's alone.
    assert stat.S_IMODE(sandbox.config.stat().st_mode) == 0o600
    assert mcphost(sandbox, "config", "validate").returncode == 0
    listed = mcphost(sandbox, "call", "tool-read", "todo:list_tasks")
    assert listed.returncode == 0, listed.stderr  # no token in the file: the server acts for the local user
    again = mcphost(sandbox, "config", "init")
    assert again.returncode == 1 and "already exists" in again.stderr
    assert sandbox.config.read_text(encoding="utf-8") == text, "init never overwrites the person's file"


def test_a_config_link_that_leads_nowhere_is_neither_valid_nor_written_through(sandbox: Sandbox) -> None:
    # What every other command refuses (the person's policy is gone, not absent) validate called valid, and init
    # died of with a traceback.
    sandbox.config.symlink_to(sandbox.root / "dotfiles" / "mcphost.toml")
    for command in ("validate", "init"):
        result = mcphost(sandbox, "config", command)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "is a symlink to" in result.stderr and "which does not exist" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and "valid" not in result.stdout
    assert not (sandbox.root / "dotfiles").exists()


def test_config_schema_prints_the_published_schema(sandbox: Sandbox) -> None:
    from mcphost.schemas import CONFIG_FILE, schemas_dir

    printed = mcphost(sandbox, "config", "schema")
    assert printed.returncode == 0
    assert printed.stdout == (schemas_dir() / CONFIG_FILE).read_text(encoding="utf-8")


def test_validate_names_line_and_column_of_a_file_cut_short_or_not_utf8(sandbox: Sandbox) -> None:
    sandbox.config.write_bytes(b'[permissions]\nwrite = "ask"\n# caf\xe9\n')
    not_utf8 = mcphost(sandbox, "config", "validate")
    assert not_utf8.returncode == 1
    assert "line 3, column 6: the file is not UTF-8 text (byte 0xe9: invalid continuation byte)" in not_utf8.stderr
    sandbox.write_config('[permissions]\nwrite = "as')
    cut_short = mcphost(sandbox, "config", "validate")
    assert cut_short.returncode == 1
    assert "line 2, column 12: TOML syntax error: Unterminated string" in cut_short.stderr
    daemonless = mcphost(sandbox, "tools")
    assert daemonless.returncode == 1 and "line 2, column 12" in daemonless.stderr


def test_validate_says_where_a_file_nests_too_deep_to_read_instead_of_a_traceback(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "ask"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    result = mcphost(sandbox, "config", "validate")
    assert result.returncode == 1
    assert "line 3, column 69: arrays and tables nested more than 64 levels deep" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr) < 1000


def test_validate_names_the_key_and_type_of_a_quoted_boolean(sandbox: Sandbox) -> None:
    sandbox.write_config('[intent_declaration]\nstrict_server_validation = "no"\n')
    result = mcphost(sandbox, "config", "validate")
    assert result.returncode == 1
    assert (
        "line 2, column 1: intent_declaration.strict_server_validation: must be true or false (a TOML boolean, "
        'without quotes), got the string "no"'
    ) in result.stderr


def test_a_call_whose_command_line_is_not_utf8_is_refused_before_anything_is_called(sandbox: Sandbox) -> None:
    # A byte that is not UTF-8 (0xff: a Latin-1 terminal, a file's bytes) reaches Python as a lone surrogate.
    for args in (
        ("todo:list_tasks", "--args", '{"title": "caf\udce9"}'),
        ("todo:list_t\udce9sks",),
        ("todo:list_tasks", "--reason", "\udcff"),
    ):
        result = mcphost(sandbox, "call", "tool-read", *args)
        assert result.returncode == 2, result.stderr
        assert "is not UTF-8 text" in result.stderr and "Traceback" not in result.stderr
    searched = mcphost(sandbox, "tools", "task\udcff")
    assert searched.returncode == 2 and "QUERY is not UTF-8 text" in searched.stderr
    assert not sandbox.log.exists()
