"""The config file as a running daemon must take it: a named pipe in its place, a save made while the daemon starts,
the file deleted under it, and a byte order mark at its start."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from mcphost.config import ConfigError, LoadedConfig, load_config
from mcphost.config.models import Config
from mcphost.host import Host
from tests.editor_client import allow, editor, init_params, make_client
from tests.helpers import Sandbox, daemon, error_of, http_agent, mcphost, records_of
from tests.helpers import poll as wait_for

BASE = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'
DENY = BASE.replace('write = "allow"', 'write = "deny"')
ECHO = {"name": "probe:plain_echo", "args": {"text": "x"}, "intent": {"operation_type": "write"}}
# Ample for an answer from a daemon that works, on a busy machine; one that hangs never answers.
PROMPT_S = 10
# A daemon's start, as the `daemon` helper allows it.
START_S = 30


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def ended_by_sigterm(process: subprocess.Popen[bytes]) -> bool:
    """SIGTERM, and whether the daemon is gone within a few seconds (the `daemon` helper kills one that is not)."""
    process.terminate()
    try:
        await anyio.to_thread.run_sync(process.wait, 5)
    except subprocess.TimeoutExpired:
        return False
    return True


# ---- a named pipe where config.toml should be


async def test_a_named_pipe_put_in_place_of_the_config_is_shown_to_an_attached_editor_and_the_daemon_serves_on(
    sandbox: Sandbox,
) -> None:
    # An attached editor is told of every config error at once: the daemon read the file again, on its event loop,
    # for the diagnostics' text. A FIFO held that open (and the daemon with it, SIGTERM too) until a writer came.
    sandbox.write_config(DENY + sandbox.probe_server())
    async with daemon(sandbox) as d:
        uri = sandbox.config.resolve().as_uri()
        async with editor(d.editor_socket, name="attached") as ed:
            sandbox.config.unlink()
            os.mkfifo(sandbox.config)
            await ed.wait_for(lambda: bool(ed.client.diagnostics.get(uri)), PROMPT_S)
            [diagnostic] = ed.client.diagnostics[uri]
            assert "named pipe" in diagnostic.message
            assert (diagnostic.range.start.line, diagnostic.range.start.character) == (0, 0)
        # A command attaching now (as `mcphost status`, `approve`, a second editor do) is answered.
        shown = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "status", timeout=PROMPT_S + 5))
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "named pipe" in shown.stdout
        async with http_agent(d.url, d.headers) as client:
            with anyio.fail_after(PROMPT_S):
                denied = error_of(await client.call_tool("call_tool_write", ECHO))
        assert denied["code"] == "PERMISSION_DENIED", "the config in force before the pipe still decides"
        assert await ended_by_sigterm(d.process), "SIGTERM did not end the daemon"


async def test_a_daemon_an_editor_spawns_on_a_named_pipe_starts_shows_why_and_takes_the_file_once_it_is_one(
    sandbox: Sandbox,
) -> None:
    # `serve --stdio` stays up on a config that does not load; its watch then read the file for a baseline, which
    # for a FIFO never returned: the editor's `initialize` was never answered.
    os.mkfifo(sandbox.config)
    client, ed = make_client(allow(), name="spawning-editor")
    env = {**os.environ, **sandbox.env()}
    await client.start_io(sys.executable, "-m", "mcphost", "serve", "--port", "0", "--stdio", env=env)
    try:
        async with asyncio.timeout(START_S):
            await client.initialize_session(init_params("spawning-editor"))
        uri = sandbox.config.resolve().as_uri()
        await ed.wait_for(lambda: bool(client.diagnostics.get(uri)), PROMPT_S)
        [diagnostic] = client.diagnostics[uri]
        assert "named pipe" in diagnostic.message

        sandbox.config.unlink()
        sandbox.write_config(DENY + sandbox.probe_server())
        await ed.wait_for(lambda: len(client.diagnostics[uri]) == 0, PROMPT_S)
        await ed.wait_for(
            lambda: any(
                s.get("config_error") is None and [u["name"] for u in s["servers"]] == ["probe"] for s in ed.statuses
            ),
            PROMPT_S,
        )
    finally:
        server = client._server
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await client.shutdown_session()
        if server is not None and server.returncode is None:
            server.kill()
        await client.stop()


# ---- a save made while the daemon starts


async def test_a_save_made_between_the_load_and_the_watch_is_applied(sandbox: Sandbox) -> None:
    # `mcphost serve` loads the file, starts its upstreams and web stack (a second or so), and only then watches.
    # The watch took its baseline from a second read of the file: a save in between was taken as the config in
    # force, and never applied (writes allowed by a policy the file no longer had, and nothing said so).
    sandbox.write_config(BASE)
    loaded = load_config(sandbox.config)
    sandbox.write_config(DENY)  # saved during the start
    async with Host(loaded, watch=True) as host:
        assert host.loaded.config.permissions.write.value == "allow"
        await wait_for(lambda: host.loaded.config.permissions.write.value == "deny", "the save applied", limit=5)
    [reload] = records_of(sandbox, "config_reload")
    assert reload["details"]["sha256"] == sha256(DENY)
    assert reload["details"]["changed"] == ["permissions.write"]


async def test_a_broken_save_made_during_the_start_is_reported(sandbox: Sandbox) -> None:
    sandbox.write_config(BASE)
    loaded = load_config(sandbox.config)
    sandbox.write_config(BASE + "[permissions\n")
    async with Host(loaded, watch=True) as host:
        await wait_for(lambda: host.config_error is not None, "the error reported", limit=5)
        assert host.loaded is loaded
    [error] = records_of(sandbox, "config_error")
    assert error["details"]["sha256"] == sha256(BASE + "[permissions\n")


async def test_a_daemon_started_on_a_broken_file_applies_a_fix_saved_during_its_start_and_reports_once(
    sandbox: Sandbox,
) -> None:
    # What `serve --stdio` does with a file that does not load: an empty config in force, the error reported.
    broken = DENY.replace('"deny"', '"maybe"')
    sandbox.write_config(broken)
    with pytest.raises(ConfigError) as raised:
        load_config(sandbox.config)
    placeholder = LoadedConfig(Config(), sandbox.config, exists=True)

    async with Host(placeholder, watch=True) as host:
        host.reject(raised.value)
        # Unchanged since the load: reported once, not again by the watch (whose first look comes within this).
        await anyio.sleep(0.3)
        assert len(records_of(sandbox, "config_error")) == 1
        sandbox.write_config(BASE)
        await wait_for(lambda: host.config_error is None, "the fixed file applied", limit=5)
    assert len(records_of(sandbox, "config_error")) == 1
    assert records_of(sandbox, "config_error")[0]["details"]["sha256"] == sha256(broken)

    sandbox.write_config(broken)
    with pytest.raises(ConfigError) as raised:
        load_config(sandbox.config)
    sandbox.write_config(DENY)  # fixed while the daemon starts
    async with Host(placeholder, watch=True) as host:
        host.reject(raised.value)
        await wait_for(lambda: host.config_error is None, "the fix saved during the start applied", limit=5)
        assert host.loaded.config.permissions.write.value == "deny"


# ---- the file deleted while the daemon runs


async def test_status_says_the_deleted_config_stays_in_force_not_the_built_in_default(sandbox: Sandbox) -> None:
    sandbox.write_config(DENY + sandbox.probe_server())
    async with daemon(sandbox) as d:
        sandbox.config.unlink()
        await wait_for(lambda: "was removed" in d.stderr, "the daemon seeing the deletion")
        shown, as_json = await anyio.to_thread.run_sync(
            lambda: (mcphost(sandbox, "status", timeout=20), mcphost(sandbox, "status", "-o", "json", timeout=20))
        )
        async with http_agent(d.url, d.headers) as client:
            denied = error_of(await client.call_tool("call_tool_write", ECHO))
    assert denied["code"] == "PERMISSION_DENIED", "the config read before stays in force (README: Configuration)"
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if line.strip().startswith("config ")]
    assert "built-in default" not in line
    assert "is gone; the config last read from it stays in force until the file is back" in line
    [report] = json.loads(as_json.stdout)["daemons"]
    assert report["config_file"] == "removed"


def test_status_tells_a_removed_file_from_none_at_all() -> None:
    from mcphost.cli.status import _describe

    def config_line(**report: object) -> str:
        text = _describe({"pid": 1, "config_path": "/home/u/.config/mcphost/config.toml", **report})
        [line] = [line for line in text.splitlines() if line.strip().startswith("config ")]
        return line

    assert "using the built-in default" in config_line(config_file="none")
    assert "stays in force until the file is back" in config_line(config_file="removed")
    assert "did not say" in config_line(config_file="unknown")
    assert config_line(config_file="present").endswith(" /home/u/.config/mcphost/config.toml")


# ---- a byte order mark


def test_every_command_reads_a_config_saved_with_a_byte_order_mark_as_the_daemon_does(sandbox: Sandbox) -> None:
    data = b"\xef\xbb\xbf" + DENY.encode()
    sandbox.config.write_bytes(data)
    validated = mcphost(sandbox, "config", "validate", timeout=30)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    shown = mcphost(sandbox, "config", "show", timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert 'write = "deny"' in shown.stdout.splitlines()
    assert load_config(sandbox.config).sha256 == hashlib.sha256(data).hexdigest()


async def test_approve_says_the_deleted_config_stays_in_force_as_status_does(tmp_path: Path) -> None:
    from mcphost.cli.approve import _config_file
    from mcphost.cli.common import config_in_force

    class Client:
        def __init__(self, exists: object) -> None:
            self.exists = exists

        async def request(self, method: str) -> object:
            return {"exists": self.exists}

    path = str(tmp_path / "config.toml")
    assert "stays in force" in config_in_force(path, await _config_file(Client(True), path))
    assert "built-in default" in config_in_force(path, await _config_file(Client(False), path))
    assert "did not say" in config_in_force(path, await _config_file(Client("yes"), path))
    (tmp_path / "config.toml").write_text("", encoding="utf-8")
    assert config_in_force(path, await _config_file(Client(False), path)) == path
