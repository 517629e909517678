"""Starting an upstream's process without the MCP SDK: the environment it inherits, and processes spawned before the
host is up (`EarlyStarts`), handed once to the connection that would start the same process, the rest stopped."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from mcp.client import stdio as sdk_stdio

from mcphost.config.models import ServerConfig
from mcphost.upstream import spawn
from mcphost.upstream.spawn import INHERITED_ENV_VARS, EarlyStarts, Launch, default_environment, own_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups and pdeathsig are POSIX")

# Waits for its stdin to close, as an MCP server on stdio does.
_WAITS = "import sys; sys.stdin.read()"


def test_the_inherited_variables_are_the_sdks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert list(INHERITED_ENV_VARS) == list(sdk_stdio.DEFAULT_INHERITED_ENV_VARS)
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("SHELL", "() { echo a shell function; }")  # left out, as the SDK leaves it out
    monkeypatch.delenv("TERM", raising=False)
    monkeypatch.setenv("NOT_INHERITED", "x")
    assert default_environment() == sdk_stdio.get_default_environment()
    assert default_environment()["HOME"] == "/home/someone"
    assert "SHELL" not in default_environment() and "NOT_INHERITED" not in default_environment()


def test_a_launch_is_the_servers_command_args_cwd_and_whole_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPHOST_DATA_DIR", "/data/of/the/host")
    config = ServerConfig(command="srv", args=["--flag"], env={"TOKEN": "t"}, cwd="/work")
    launch = Launch.of(config)
    assert launch == Launch(
        "srv", ("--flag",), {**default_environment(), "TOKEN": "t", "MCPHOST_DATA_DIR": "/data/of/the/host"}, "/work"
    )
    assert own_env(ServerConfig(command="srv", env={"MCPHOST_DATA_DIR": "/its/own"}))["MCPHOST_DATA_DIR"] == "/its/own"
    assert Launch.of(ServerConfig(url="http://127.0.0.1:1/mcp")) is None
    assert Launch.of(config) != Launch.of(ServerConfig(command="srv", args=["--flag"], env={"TOKEN": "u"}, cwd="/work"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_an_early_process_is_handed_once_to_a_connection_that_would_start_the_same() -> None:
    early = EarlyStarts()
    config = ServerConfig(command=sys.executable, args=["-c", _WAITS])
    await early.start({"a": config, "remote": ServerConfig(url="http://127.0.0.1:1/mcp")})
    assert early.waiting == ["a"]
    launch = Launch.of(config)
    assert launch is not None
    other = Launch.of(ServerConfig(command=sys.executable, args=["-c", _WAITS], env={"X": "1"}))
    assert other is not None
    try:
        assert early.take("a", other) is None  # the config changed since: not this process
        assert early.take("b", launch) is None
        spawned = early.take("a", launch)
        assert spawned is not None and _alive(spawned.process.pid)
        assert early.take("a", launch) is None  # once
        assert early.waiting == []
    finally:
        await early.stop_left()
    assert _alive(spawned.process.pid)  # taken: its connection owns it, not the early starts
    assert spawned.process.stdin is not None
    spawned.process.stdin.close()
    assert await spawned.process.wait() == 0
    spawned.pipes.close()


async def test_an_early_process_no_connection_took_is_stopped_with_its_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spawn, "EXIT_GRACE", 0.2)
    monkeypatch.setattr(spawn, "TERM_GRACE", 0.2)
    # Ignores the end of its stdin and SIGTERM, and leaves a child of its own in its group.
    stubborn = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "sys.stdin.read()\n"
        "time.sleep(60)\n"
    )
    early = EarlyStarts()
    await early.start({"left": ServerConfig(command=sys.executable, args=["-c", stubborn])})
    assert early.waiting == ["left"]
    process = early._waiting["left"][1].process
    assert process.stdout is not None
    grandchild = int(await process.stdout.readline())
    await early.stop_left()
    assert early.waiting == []
    assert process.returncode == -signal.SIGKILL
    assert not _alive(grandchild) or _zombie(grandchild)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return False


async def test_a_server_that_cannot_be_spawned_early_is_left_to_its_connection(tmp_path: Path) -> None:
    early = EarlyStarts()
    await early.start(
        {
            "missing": ServerConfig(command=str(tmp_path / "no-such-server")),
            "nowhere": ServerConfig(command=sys.executable, cwd=str(tmp_path / "no-such-dir")),
        }
    )
    assert early.waiting == []
    await early.stop_left()


async def test_a_server_that_exits_at_once_is_spawned_all_the_same() -> None:
    # Its pipes may be closed before the spawn returns (70% of the time here with `sh`): the spawn must not look at
    # them then (it did, and every attempt to connect such a server failed with "I/O operation on closed file",
    # its exit status and its stderr never shown).
    launch = Launch("/bin/sh", ("-c", "echo gone >&2; exit 3"), default_environment(), None)
    for _ in range(20):
        started = await spawn.spawn(launch)
        assert started.process.pid > 0
        await spawn.stop(started)
        assert started.process.returncode == 3
