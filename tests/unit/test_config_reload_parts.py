"""The pure parts of reloading: what changed between two configs, the watcher's reading, the state file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcphost.config import parse_config
from mcphost.config.diff import diff_configs
from mcphost.config.state import read_state, write_state
from mcphost.config.watcher import Missing, Rejected, Reloaded, read_config_file

SERVER = '[servers.{name}]\ncommand = "{command}"\n'


def config(text: str):  # type: ignore[no-untyped-def]
    return parse_config(text, Path("config.toml"))


def test_the_diff_names_changed_keys_and_servers_to_add_remove_or_restart() -> None:
    old = config(SERVER.format(name="a", command="x") + SERVER.format(name="b", command="y"))
    new = config(
        '[permissions]\nwrite = "deny"\n'
        + SERVER.format(name="a", command="x")
        + SERVER.format(name="b", command="z")
        + SERVER.format(name="c", command="w")
    )
    diff = diff_configs(old, new)
    assert "permissions.write" in diff.keys and "servers.b.command" in diff.keys
    assert (diff.servers_added, diff.servers_removed, diff.servers_restarted) == (["c"], [], ["b"])
    assert diff.summary() == "servers added: c; restarted: b; changed: permissions.write"


def test_spelling_out_a_default_is_no_change() -> None:
    diff = diff_configs(config(""), config("[intent_declaration]\nstrict_server_validation = true\n"))
    assert diff.empty and diff.summary() == "no change in effect"


def test_disabling_a_server_removes_it() -> None:
    diff = diff_configs(
        config(SERVER.format(name="a", command="x")), config(SERVER.format(name="a", command="x") + "enabled = false\n")
    )
    assert diff.servers_removed == ["a"] and diff.keys == ["servers.a.enabled"]


def test_reading_the_file_tells_valid_invalid_and_missing_apart(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert isinstance(read_config_file(path)[1], Missing)
    path.write_text("[permissions]\nwrite = 'deny'\n", encoding="utf-8")
    data, event = read_config_file(path)
    assert isinstance(event, Reloaded) and event.loaded.config.permissions.write.value == "deny"
    assert event.sha256 and data == path.read_bytes()
    path.write_bytes(b"\xff\xfe not text")
    _, bad = read_config_file(path)
    assert isinstance(bad, Rejected) and "not UTF-8" in str(bad.error)


def test_the_state_file_is_written_whole_private_and_apart_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "state" / "state.toml"
    assert read_state(path) == {}
    write_state({"grants": [{"tool": "todo:add_task", "variant": "call_tool_write"}]}, path)
    assert read_state(path) == {"grants": [{"tool": "todo:add_task", "variant": "call_tool_write"}]}
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text(encoding="utf-8").startswith("# Written by mcphost")
    assert [p.name for p in path.parent.iterdir()] == ["state.toml"], "no temporary file left behind"
    path.write_text("not = [valid", encoding="utf-8")
    assert read_state(path) == {}, "a damaged state file is ignored, not fatal"


def test_a_config_symlinked_to_a_file_that_is_gone_is_an_error_not_the_built_in_default(tmp_path: Path) -> None:
    # Read as "no config", a dotfiles link whose checkout moved put the built-in default in force silently.
    from mcphost.config import ConfigError, load_config

    path = tmp_path / "config.toml"
    path.symlink_to(tmp_path / "dotfiles" / "mcphost.toml")
    with pytest.raises(ConfigError, match=r"symlink to .*dotfiles.*which does not exist"):
        load_config(path)
    _, event = read_config_file(path)
    assert isinstance(event, Rejected) and "which does not exist" in str(event.error)
    # The config's directory as the link is the same case.
    linked_dir = tmp_path / "config-dir"
    linked_dir.symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match="config-dir is a symlink to"):
        load_config(linked_dir / "config.toml")
    assert load_config(tmp_path / "absent.toml").exists is False  # a path that is simply absent stays the default
