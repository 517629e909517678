"""Configs that start the same servers are no change (issue 15): the built-in default is what `config init`
writes, and servers are compared by how they are started."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcphost.cli.serve import config_line
from mcphost.config import Config, LoadedConfig, ServerConfig, parse_config
from mcphost.config.diff import diff_configs
from mcphost.config.models import launch_spec
from mcphost.config.starter import embedded_default, starter_config

SERVER = '[servers."{name}"]\ncommand = "{command}"\n'


def config(text: str) -> Config:
    return parse_config(text, Path("config.toml"))


def test_the_built_in_default_is_what_config_init_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPHOST_DATA_DIR", str(tmp_path / "data"))
    default = embedded_default()
    diff = diff_configs(default, config(starter_config(sys.executable)))
    assert diff.empty and not diff.servers_restarted, diff
    assert default == config(starter_config(sys.executable))
    # No token minted into it: loading the default touches none of the todo server's secrets.
    assert "TODO_TOKEN" not in default.servers["todo"].env
    assert not (tmp_path / "data").exists()


def test_a_stdio_server_is_started_with_the_data_dir_unless_it_names_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPHOST_DATA_DIR", str(tmp_path))
    plain = ServerConfig(command="x", env={"A": "1"})
    assert launch_spec(plain).env == {"A": "1", "MCPHOST_DATA_DIR": str(tmp_path)}
    own = ServerConfig(command="x", env={"MCPHOST_DATA_DIR": "elsewhere"})
    assert launch_spec(own) is own
    remote = ServerConfig(url="http://127.0.0.1:9/mcp")
    assert launch_spec(remote) is remote
    assert launch_spec(ServerConfig(command="x", env={"MCPHOST_DATA_DIR": str(tmp_path)})) == launch_spec(
        ServerConfig(command="x")
    )


def test_naming_the_data_dir_a_server_gets_anyway_is_no_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPHOST_DATA_DIR", str(tmp_path))
    old = config(SERVER.format(name="a", command="x"))
    new = config(SERVER.format(name="a", command="x") + f'env = {{ MCPHOST_DATA_DIR = "{tmp_path}" }}\n')
    diff = diff_configs(old, new)
    assert diff.empty and diff.servers_restarted == [] and diff.summary() == "no change in effect"


def test_servers_whose_names_share_a_prefix_are_told_apart() -> None:
    old = config(SERVER.format(name="a", command="x") + SERVER.format(name="a.b", command="y"))
    new = config(
        SERVER.format(name="a", command="x")
        + 'env = { MCPHOST_DATA_DIR = "z" }\n'
        + SERVER.format(name="a.b", command="w")
    )
    diff = diff_configs(old, new)
    assert diff.servers_restarted == ["a", "a.b"]
    assert "servers.a.b.command" in diff.keys and "servers.a.env.MCPHOST_DATA_DIR" in diff.keys
    unchanged_a = diff_configs(
        old, config(SERVER.format(name="a", command="x") + SERVER.format(name="a.b", command="w"))
    )
    assert unchanged_a.keys == ["servers.a.b.command"] and unchanged_a.servers_restarted == ["a.b"]


def test_the_banner_says_when_no_file_is_in_force(tmp_path: Path) -> None:
    path = tmp_path / "my config.toml"
    absent = LoadedConfig(Config(), path, exists=False)
    assert config_line(absent, None) == (
        f"no config file at {path}; the built-in default is in force; `mcphost config init` writes it"
    )
    # Given on the command line, the file is named to `config init` too (quoted for the shell).
    assert f"`mcphost config init '{path}'` writes it" in config_line(absent, str(path))
    assert config_line(LoadedConfig(Config(), path, exists=True), None) == f"config {path}"
