"""How agents and editors find a daemon: the discovery file and the editor socket, and what a dead daemon leaves."""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import anyio
import anyio.to_thread

from tests.helpers import Sandbox, daemon, mcphost


def discovery_info(box: Sandbox) -> dict[str, object]:
    [path] = list((box.root / "run").glob("daemon-*.json"))
    info: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return info


async def test_the_editor_socket_is_owner_only_and_named_in_the_discovery_file(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        info = discovery_info(sandbox)
        socket_path = Path(str(info["editor_socket"]))
        mode = socket_path.stat().st_mode
        assert stat.S_ISSOCK(mode)
        assert stat.S_IMODE(mode) & 0o077 == 0
        assert info["pid"] == d.process.pid
        d.process.terminate()
        await anyio.to_thread.run_sync(d.process.wait, 15)
    assert not socket_path.exists()


async def test_a_killed_daemons_files_are_ignored_and_cleaned(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        info = discovery_info(sandbox)
        d.process.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(d.process.wait, 15)
        socket_path = Path(str(info["editor_socket"]))
        assert socket_path.exists()  # nothing ran to remove it

        result = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "status", "-o", "json"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"daemons": []}
    assert not list((sandbox.root / "run").glob("daemon-*"))
    assert not socket_path.exists()


async def test_status_describes_the_running_daemon(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        result = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "status"))
        as_json = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "status", "-o", "json"))
    assert result.returncode == 0, result.stderr
    assert f"daemon {d.process.pid}" in result.stdout
    assert d.url in result.stdout
    assert d.token not in result.stdout  # the text view points at the file, it never prints the token
    [report] = json.loads(as_json.stdout)["daemons"]
    assert report["pid"] == d.process.pid
    assert report["mcp"]["url"] == d.url
    assert report["editors"] == []  # `mcphost status` itself only looks: it is no approver
    assert [s["name"] for s in report["servers"]] == ["probe"]


def test_status_with_no_daemon_says_how_to_start_one(sandbox: Sandbox) -> None:
    result = mcphost(sandbox, "status")
    assert result.returncode == 0
    assert "mcphost serve" in result.stdout
