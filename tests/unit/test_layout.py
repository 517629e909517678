"""The floor plan holds: imports point down or sideways, the CLI imports only the command it runs, and the policy is
built from the config by name with one set of defaults."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcphost.cli import COMMANDS, build_parser, command_name
from mcphost.config.models import PermissionsConfig
from mcphost.policy import Action, NoEditor, Policy, Remember

ROOT = Path(__file__).resolve().parents[2]
FLOORS = ROOT.parent / "shared" / "tools" / "floors.py"


@pytest.mark.skipif(not FLOORS.exists(), reason="../shared/tools/floors.py is not beside this checkout")
def test_every_import_points_down_or_sideways() -> None:
    done = subprocess.run([sys.executable, str(FLOORS), str(ROOT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_permissions_table_and_the_policy_have_the_same_keys_and_defaults() -> None:
    assert set(PermissionsConfig.model_fields) == {f.name for f in dataclasses.fields(Policy)}
    assert PermissionsConfig().to_policy() == Policy()


def test_each_permissions_key_lands_on_the_policy_field_of_its_name() -> None:
    table = PermissionsConfig(
        read=Action.DENY,
        write=Action.CONFIRM,
        destructive=Action.DENY,
        prompt_timeout=7,
        no_editor=NoEditor.ELICIT,
        remember_read=Remember.ONCE,
        remember_write=Remember.SESSION,
        remember_destructive=Remember.ALWAYS,
    )
    policy = table.to_policy()
    for name in PermissionsConfig.model_fields:
        assert getattr(policy, name) == getattr(table, name), name


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["tools", "query"], "tools"),
        (["--config", "tools", "status"], "status"),  # a config file named `tools`
        (["-v", "--config=x.toml", "log", "tail"], "log"),
        (["--version"], None),
        (["nonsense"], None),
        ([], None),
    ],
)
def test_the_command_is_the_first_word_that_is_not_an_option(argv: list[str], expected: str | None) -> None:
    assert command_name(argv) == expected


def test_help_lists_every_command_without_importing_them() -> None:
    listing = build_parser(None).format_help()
    for name in COMMANDS:
        assert name in listing


# What the slow commands need and a reading command must never pay for.
HEAVY = ["mcphost.host", "mcphost.gateway.service", "mcphost.serve.mcp_server", "mcphost.editor.client"]
HEAVY += ["mcp", "mcp_types", "pygls", "lsprotocol", "uvicorn", "httpx2", "starlette"]


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        (["log", "tail", "-n", "1"], []),
        (["activity", "list", "--limit", "1"], []),
        (["activity", "summary"], ["msgspec"]),  # it reads every record of the window
        (["config", "path"], []),
        (["config", "show"], ["pydantic"]),  # the config models are what it shows
        (["config", "validate"], ["pydantic"]),
        (["status"], []),
        (["grants", "list"], []),
    ],
)
def test_a_reading_command_imports_only_what_it_runs(argv: list[str], allowed: list[str], tmp_path: Path) -> None:
    # With a daemon to ask, `status`, `grants`, `call` and `tools`: tests/integration/test_cli_through_daemon.py.
    heavy = [*HEAVY, "anyio", "pydantic", "asyncio", "msgspec"]
    probe = (
        "import json, sys\n"
        "from mcphost.cli import main\n"
        f"code = main({argv!r})\n"
        f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]), file=sys.stderr)\n"
    )
    (tmp_path / "config.toml").write_text('[permissions]\nwrite = "ask"\n', encoding="utf-8")
    env = {
        "MCPHOST_DATA_DIR": str(tmp_path),
        "MCPHOST_CONFIG": str(tmp_path / "config.toml"),
        "MCPHOST_RUNTIME_DIR": str(tmp_path / "run"),
        "PATH": "/usr/bin",
    }
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert [m for m in loaded if m not in allowed] == [], f"{argv} imported {loaded}"
