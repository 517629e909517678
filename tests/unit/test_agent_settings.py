"""`mcphost hook install|uninstall`: mcphost's entry merged into an agent's settings and taken out again, exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcphost.config.agent_settings import BACKUP_SUFFIX, SettingsError, apply, hook_target, merge_hook, remove_hook

COMMAND = "/opt/mcphost/bin/mcphost hook --agent claude-code"


def target(tmp_path: Path, agent: str = "claude-code", scope: str = "project"):  # type: ignore[no-untyped-def]
    return hook_target(agent, scope, tmp_path / "home", tmp_path / "project")


def test_each_agent_and_scope_has_its_documented_file(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    assert hook_target("claude-code", "user", home, project).path == home / ".claude/settings.json"
    assert hook_target("claude-code", "project", home, project).path == project / ".claude/settings.json"
    assert hook_target("vscode", "project", home, project).path == project / ".github/hooks/mcphost.json"
    assert hook_target("vscode", "user", home, project).path == home / ".copilot/hooks/mcphost.json"
    assert hook_target("codex", "user", home, project).path == home / ".codex/hooks.json"
    assert hook_target("codex", "user", home, project).events == ("PreToolUse", "PermissionRequest")


def test_the_merge_keeps_everything_else_and_adds_the_entry_once(tmp_path: Path) -> None:
    theirs = {
        "model": "opus",
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}]},
    }
    merged = merge_hook(theirs, target(tmp_path), COMMAND)
    assert merged["model"] == "opus" and merged["permissions"] == theirs["permissions"]
    assert merged["hooks"]["PreToolUse"][0] == theirs["hooks"]["PreToolUse"][0]
    assert merged["hooks"]["PreToolUse"][1] == {"hooks": [{"type": "command", "command": COMMAND, "timeout": 600}]}
    assert merge_hook(merged, target(tmp_path), COMMAND) == merged
    assert theirs["hooks"]["PreToolUse"][1:] == []  # the input is not changed


def test_uninstall_removes_exactly_mcphosts_handler(tmp_path: Path) -> None:
    shared_group = {"matcher": "*", "hooks": [{"type": "command", "command": "./guard.sh"}, {"command": COMMAND}]}
    settings = {"hooks": {"PreToolUse": [shared_group, {"hooks": [{"command": COMMAND}]}], "Stop": [{"hooks": []}]}}
    removed = remove_hook(settings, target(tmp_path), COMMAND)
    assert removed == {
        "hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "./guard.sh"}]}],
            "Stop": [{"hooks": []}],
        }
    }
    only_ours = merge_hook({}, target(tmp_path), COMMAND)
    assert remove_hook(only_ours, target(tmp_path), COMMAND) == {}


def test_vscode_gets_its_flat_list_of_commands(tmp_path: Path) -> None:
    merged = merge_hook({}, target(tmp_path, "vscode"), "mcphost hook --agent vscode")
    assert merged == {
        "hooks": {"PreToolUse": [{"type": "command", "command": "mcphost hook --agent vscode", "timeout": 600}]}
    }


def test_install_then_uninstall_restores_the_file_and_keeps_backups(tmp_path: Path) -> None:
    t = target(tmp_path)
    t.path.parent.mkdir(parents=True)
    original = {"env": {"A": "1"}}
    t.path.write_text(json.dumps(original), encoding="utf-8")
    t.path.chmod(0o640)
    change = apply(t, COMMAND, install=True)
    assert change.changed and change.backup == t.path.with_name("settings.json" + BACKUP_SUFFIX)
    assert json.loads(change.backup.read_text()) == original
    assert oct(t.path.stat().st_mode & 0o777) == "0o640"
    assert not apply(t, COMMAND, install=True).changed
    assert apply(t, COMMAND, install=False).changed
    assert json.loads(t.path.read_text()) == original


def test_a_settings_file_that_is_not_json_is_never_overwritten(tmp_path: Path) -> None:
    t = target(tmp_path)
    t.path.parent.mkdir(parents=True)
    t.path.write_text('{"hooks": {', encoding="utf-8")
    with pytest.raises(SettingsError, match="not valid JSON"):
        apply(t, COMMAND, install=True)
    assert t.path.read_text() == '{"hooks": {'
    t.path.write_text('{"hooks": []}', encoding="utf-8")
    with pytest.raises(SettingsError, match="not an object"):
        apply(t, COMMAND, install=True)
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"  # past the parser's recursion: was a traceback
    t.path.write_text(deep, encoding="utf-8")
    with pytest.raises(SettingsError, match="not valid JSON"):
        apply(t, COMMAND, install=True)
    assert t.path.read_text() == deep


def test_a_symlinked_settings_file_is_changed_where_it_points(tmp_path: Path) -> None:
    t = target(tmp_path)
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text("{}", encoding="utf-8")
    t.path.parent.mkdir(parents=True)
    t.path.symlink_to(real)
    apply(t, COMMAND, install=True)
    assert t.path.is_symlink()
    assert "PreToolUse" in json.loads(real.read_text())["hooks"]


def test_uninstalling_the_vscode_file_of_mcphosts_own_removes_it(tmp_path: Path) -> None:
    t = target(tmp_path, "vscode")
    apply(t, "mcphost hook --agent vscode", install=True)
    assert t.path.exists()
    apply(t, "mcphost hook --agent vscode", install=False)
    assert not t.path.exists()
