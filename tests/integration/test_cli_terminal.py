"""What a person sees at the terminal from the reading commands: the config in force named as it is, listings that
line up with a header, host events that say what happened, and cells cut at word boundaries to fit the terminal.
Each runs `mcphost` as a subprocess, as a person would (stdout a pipe, so `COLUMNS` stands for the terminal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from typing import Any

from mcphost.console import cell_width
from tests.helpers import Sandbox, screen_starts

MARK = "…"


def run(box: Sandbox, *args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **box.env(), "PYTHONIOENCODING": "utf-8"}
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "mcphost", *args],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def cut_at_a_word(shown: str, full: str) -> bool:
    """`shown` is `full`, or its start ended after a whole word and marked as cut."""
    if shown == full:
        return True
    head = shown.removesuffix(MARK)
    return shown.endswith(MARK) and full.startswith(head) and full[len(head) :][:1] in (" ", ",", ";", ":", "")


# ---------------------------------------------------------------------------------------------- the config


def test_without_a_config_file_the_built_in_default_is_valid_and_shown_as_toml(sandbox: Sandbox) -> None:
    assert not sandbox.config.exists()
    validate = run(sandbox, "config", "validate")
    # The documented normal state of a new install: no error, and what is in force instead.
    assert validate.returncode == 0, validate.stderr
    assert validate.stdout.strip() == (
        f"{sandbox.config}: no config file; the built-in default is in force, and valid "
        "(`mcphost config init` writes a commented starter there)"
    )
    missing = run(sandbox, "config", "validate", str(sandbox.root / "other.toml"))
    assert missing.returncode == 1 and "other.toml: no such file" in missing.stderr

    shown = run(sandbox, "config", "show")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"# no config file at {sandbox.config}: this is the built-in default")
    config = tomllib.loads(shown.stdout)
    assert config["servers"]["todo"]["args"][:2] == ["-m", "mcphost.demo.todo"]
    assert config["permissions"]["write"] == "ask"
    assert "cwd" not in config["servers"]["todo"], "TOML has no null: an unset key is left out"
    as_json = json.loads(run(sandbox, "config", "show", "-o", "json").stdout)
    assert as_json["exists"] is False and as_json["config"]["servers"]["todo"]["cwd"] is None

    # `config init` writes what the messages promise, and the file then is the config shown.
    assert run(sandbox, "config", "init").returncode == 0
    written = run(sandbox, "config", "show")
    assert written.stdout.startswith(f"# the config in force: {sandbox.config}")
    assert tomllib.loads(written.stdout)["permissions"]["destructive"] == "confirm"


# ---------------------------------------------------------------------------------------------- the activity log


def records() -> list[dict[str, Any]]:
    def call(n: int, op: str, server: str, tool: str, status: str, **extra: Any) -> dict[str, Any]:
        return {
            "id": f"01KAE4{n:020d}",
            "timestamp": f"2026-11-21T10:0{n}:00.000Z",
            "type": "tool_call",
            "server": server,
            "tool": tool,
            "status": status,
            "duration_ms": 12.5 * n,
            "metadata": {"intent": {"operation_type": op}, "tool_variant": f"call_tool_{op}"},
            **extra,
        }

    by_policy = {"by": "policy", "action": "allow", "outcome": "allow"}
    by_person = {"by": "editor", "action": "ask", "outcome": "deny", "wait_ms": 2300}
    mismatch = {"code": "SERVER_MISMATCH", "message": "Tool 'todo:delete_task' is marked destructive by server"}
    return [
        call(1, "read", "todo", "list_tasks", "success", decision=by_policy),
        call(2, "write", "中文", "添加任务", "denied", decision=by_person, error={"code": "PERMISSION_DENIED"}),
        call(3, "read", "todo", "delete_task\x1b[2J", "rejected", error=mismatch),
        {
            "id": "01KAE4CONFIGERROR000000000",
            "timestamp": "2026-11-21T10:04:00.000Z",
            "type": "config_error",
            "details": {
                "file": "config.toml",
                "errors": [{"path": "permissions.wrte", "message": "unknown key 'wrte'", "line": 2, "column": 1}],
            },
        },
    ]


def write_log(box: Sandbox) -> list[dict[str, Any]]:
    written = records()
    box.data.mkdir(parents=True, exist_ok=True)
    box.log.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in written), encoding="utf-8")
    return written


def test_log_tail_and_activity_list_line_up_and_say_what_a_config_error_was(sandbox: Sandbox) -> None:
    written = write_log(sandbox)
    tail = run(sandbox, "log", "tail")
    listed = run(sandbox, "activity", "list")
    assert tail.returncode == 0 and listed.returncode == 0, (tail.stderr, listed.stderr)
    rows = tail.stdout.splitlines()
    header, *table = listed.stdout.splitlines()
    assert header.split() == ["TIME", "INTENT", "TOOL", "STATUS", "DURATION", "DETAIL", "ID"]
    assert table == list(reversed(rows)), "the same rows: the tail oldest first, the list newest first, with a header"
    assert "permissions.wrte: unknown key 'wrte' (line 2, column 1)" in rows[3]
    assert "deny by person after 2.3s" in rows[1] and "\x1b" not in tail.stdout and "\\x1b[2J" in rows[2]
    # Every id starts at the same screen column, whatever the wide characters before it (📝, 中文).
    ids = [r["id"] for r in written]
    assert len({screen_starts(line, [ident])[0] for line, ident in zip(rows, ids, strict=True)}) == 1
    assert screen_starts(header, ["ID"]) == screen_starts(table[0], [ids[-1]])
    # `-o json` is the records, unchanged.
    as_json = [json.loads(line) for line in run(sandbox, "log", "tail", "-o", "json").stdout.splitlines()]
    assert as_json == written
    assert json.loads(run(sandbox, "activity", "list", "-o", "json").stdout) == list(reversed(written))


def test_listings_fit_a_narrow_terminal_unless_wide(sandbox: Sandbox) -> None:
    write_log(sandbox)
    for argv in (("log", "tail"), ("activity", "list")):
        narrow = run(sandbox, *argv, columns=80)
        lines = narrow.stdout.splitlines()
        assert all(cell_width(line) <= 80 for line in lines), narrow.stdout
        # The error is cut (its first word is long: mid-word), and says it was cut.
        (config_error,) = [line for line in lines if "10:04:00" in line]
        detail = config_error.split("  ")[-1].strip()
        assert detail.endswith(MARK) and "permissions.wrte: unknown key 'wrte'".startswith(detail[:-1]), detail
        wide = run(sandbox, *argv, "--wide", columns=80)
        assert "permissions.wrte: unknown key 'wrte' (line 2, column 1)" in wide.stdout
        assert "01KAE4CONFIGERROR000000000" in wide.stdout


# ---------------------------------------------------------------------------------------------- tools


def test_tools_has_a_header_and_cuts_descriptions_after_a_whole_word(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    found = run(sandbox, "tools", "-o", "json")
    assert found.returncode == 0, found.stderr
    described = {t["name"]: t["description"] for t in json.loads(found.stdout)["tools"]}
    shown = run(sandbox, "tools", columns=72)
    assert shown.returncode == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert header.split() == ["SCORE", "TOOL", "CALL", "WITH", "DESCRIPTION"]
    assert len(rows) == len(described)
    at = screen_starts(header, ["DESCRIPTION"])[0]
    cut = 0
    for row in rows:
        assert cell_width(row) <= 72, row
        name = row.split()[1]
        assert row.split()[2] in ("tool-read", "tool-write", "tool-destructive")  # what a person types
        description = row[at:]  # ASCII rows: the description starts where its header does
        assert cut_at_a_word(description, described[name]), (description, described[name])
        cut += description != described[name]
    assert cut, "some description was long enough to be cut"


def test_activity_summary_counts_line_up_after_the_icons(sandbox: Sandbox) -> None:
    write_log(sandbox)
    shown = run(sandbox, "activity", "summary", "--since", "3650d")
    assert shown.returncode == 0, shown.stderr
    (block,) = [b for b in shown.stdout.split("\n\n") if "BY INTENT" in b]
    header, *rows = block.splitlines()
    assert [row.split()[1:] for row in rows] == [["read", "2"], ["write", "1"]]
    # Right-aligned counts end in the same screen column as their header, the emoji counted two wide.
    assert {cell_width(row) for row in rows} == {cell_width(header)}
