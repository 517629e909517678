"""One daemon per config file (issue 15). Two would split the agents: `approve`, `call` and `mcp` go to the newer,
so the other one's agents get NO_APPROVER. A second `mcphost serve` for the same file says which daemon has it and
exits with status 3, unless `--allow-second`; what a dead daemon left behind never stops the next one, and two
started at the same moment cannot both get it."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from tests.helpers import Sandbox, daemon, mcphost

EXIT_ANOTHER_DAEMON = 3
BANNER = "bearer token in"


class Serve:
    """`mcphost serve` as a process whose stderr is read as it comes, for what `helpers.daemon` cannot do (a second
    daemon beside the first, a process meant to be refused)."""

    def __init__(self, box: Sandbox, *args: str, stdin: Any = subprocess.DEVNULL) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mcphost", "serve", "--port", "0", *args],
            env={**os.environ, **box.env()},
            stdin=stdin,
            stderr=subprocess.PIPE,
        )
        self._lines: list[str] = []
        self._announced = threading.Event()
        self._ended = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in iter(self.process.stderr.readline, b""):
            self._lines.append(line.decode("utf-8", "replace"))
            if BANNER.encode() in line:
                self._announced.set()
        self._ended.set()
        self._announced.set()

    @property
    def stderr(self) -> str:
        return "".join(self._lines)

    def announced(self, timeout: float = 30) -> bool:
        """Whether it came up (its banner), rather than ending first."""
        self._announced.wait(timeout)
        return BANNER in self.stderr

    def ended(self, timeout: float = 30) -> int:
        """Its exit status, once it has ended and said all it had to say."""
        code = self.process.wait(timeout)
        self._ended.wait(timeout)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def serving(box: Sandbox, *args: str, stdin: Any = subprocess.DEVNULL) -> Iterator[Serve]:
    serve = Serve(box, *args, stdin=stdin)
    try:
        yield serve
    finally:
        serve.stop()


def refused(stderr: str) -> bool:
    """Whether a daemon said another one has its config."""
    return "another daemon already serves" in stderr or "is starting for" in stderr


def discovery_files(box: Sandbox) -> list[Path]:
    return sorted((box.root / "run").glob("daemon-*.json"))


async def test_a_second_daemon_for_the_same_config_says_which_one_serves_it_and_refuses(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    # The same file under another name: a symlink to it is the same config.
    alias = sandbox.root / "alias.toml"
    alias.symlink_to(sandbox.config)
    async with daemon(sandbox) as first:
        second = await anyio.to_thread.run_sync(lambda: mcphost(sandbox, "serve", "--port", "0", timeout=30))
        aliased = await anyio.to_thread.run_sync(
            lambda: mcphost(sandbox, "serve", "--port", "0", "--config", str(alias), timeout=30)
        )
        files = discovery_files(sandbox)
        assert first.process.poll() is None, "the first daemon is left alone"
    pid = first.process.pid
    for run in (second, aliased):
        assert run.returncode == EXIT_ANOTHER_DAEMON, run.stderr
        said = run.stderr
        assert "mcphost: another daemon already serves " in said, said
        assert f"pid {pid}, since {first.info['started_at']}, agents at {first.url}" in said, said
        assert f"editors attach at {first.editor_socket}" in said
        assert f"`kill {pid}`" in said and "`mcphost serve --allow-second`" in said
        assert "agent endpoint" not in said, "it never listened"
    assert files == [sandbox.root / "run" / f"daemon-{pid}.json"]


async def test_allow_second_starts_a_second_daemon_and_says_beside_which(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as first:
        with serving(sandbox, "--allow-second") as second:
            assert await anyio.to_thread.run_sync(second.announced), second.stderr
            assert len(discovery_files(sandbox)) == 2
        assert f"pid {first.process.pid}" in second.stderr
        assert "starting a second daemon anyway (--allow-second)" in second.stderr


async def test_a_daemon_for_another_config_file_starts_beside_the_first(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    other = sandbox.root / "other.toml"
    other.write_text(sandbox.probe_server(), encoding="utf-8")
    async with daemon(sandbox):
        with serving(sandbox, "--config", str(other)) as second:
            assert await anyio.to_thread.run_sync(second.announced), second.stderr
    assert not refused(second.stderr)


def test_serve_help_names_allow_second(sandbox: Sandbox) -> None:
    result = mcphost(sandbox, "serve", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # as wrapped for whatever width the terminal has
    assert "--allow-second start even when another daemon serves the same config file" in text
    assert "exits with status 3" in text


async def test_what_a_killed_daemon_left_behind_never_stops_the_next(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as first:
        first.process.kill()  # nothing of its own runs: its discovery file and its lock file stay
        await anyio.to_thread.run_sync(first.process.wait, 15)
    assert [p.name for p in discovery_files(sandbox)] == [f"daemon-{first.process.pid}.json"]
    # `daemon` insists on exactly one discovery file once it runs: the dead one's was removed on the way.
    async with daemon(sandbox) as second:
        assert not refused(second.stderr)
    assert second.process.pid != first.process.pid


async def test_a_discovery_file_whose_pid_now_names_another_process_never_stops_a_daemon(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # noqa: ASYNC220 (forks)
    try:
        run = sandbox.root / "run"
        run.mkdir(mode=0o700)
        planted = run / f"daemon-{stranger.pid}.json"
        info = {
            "pid": stranger.pid,
            "pid_start": 1,  # the daemon that wrote it started long ago; its pid went to `stranger` since
            "started_at": "2026-01-01T00:00:00Z",
            "mcp": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer old"}},
            "config_path": str(sandbox.config),
            "editor_socket": None,
        }
        planted.write_text(json.dumps(info), encoding="utf-8")
        planted.chmod(0o600)
        async with daemon(sandbox) as d:
            assert not refused(d.stderr)
    finally:
        stranger.kill()
        stranger.wait()


def test_of_two_daemons_started_at_the_same_moment_one_serves_and_the_other_refuses(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    with serving(sandbox) as a, serving(sandbox) as b, concurrent.futures.ThreadPoolExecutor(2) as pool:
        # Neither waited for the other: whichever ends first was refused, the other one serves.
        exits = {pool.submit(a.ended, 60): a, pool.submit(b.ended, 60): b}
        done, _ = concurrent.futures.wait(exits, timeout=60, return_when=concurrent.futures.FIRST_COMPLETED)
        assert done, "neither was refused"
        loser = exits[next(iter(done))]
        winner = b if loser is a else a
        assert winner.announced(), winner.stderr
        assert loser.process.returncode == EXIT_ANOTHER_DAEMON, loser.stderr
        # The loser names the winner, or (if it looked in the instant before the winner wrote its pid) says one starts.
        assert f"pid {winner.process.pid}" in loser.stderr or "another `mcphost serve` is starting" in loser.stderr
        assert winner.process.poll() is None
        assert [p.name for p in discovery_files(sandbox)] == [f"daemon-{winner.process.pid}.json"]
        winner.stop()
        loser.stop()


async def test_a_second_editor_window_gets_the_refusal_and_where_to_attach(sandbox: Sandbox) -> None:
    # VS Code spawns `mcphost serve --stdio` per window: the second window's process says where the running
    # daemon's editor socket is, on stderr (the extension's output), and exits 3 without speaking on stdout.
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as first:
        with serving(sandbox, "--stdio", stdin=subprocess.PIPE) as window:
            code = await anyio.to_thread.run_sync(window.ended)
    assert code == EXIT_ANOTHER_DAEMON, window.stderr
    assert f"editors attach at {first.editor_socket}" in window.stderr


# ---- which config is in force, said plainly


async def test_a_daemon_without_a_config_file_says_the_built_in_default_is_in_force(sandbox: Sandbox) -> None:
    assert not sandbox.config.exists()
    async with daemon(sandbox) as d:
        said = d.stderr
    expected = (
        f"mcphost: no config file at {sandbox.config}; the built-in default is in force; "
        f"`mcphost config init {sandbox.config}` writes it"
    )
    assert expected in said, said


async def test_a_daemon_names_the_config_file_it_runs_on(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d:
        said = d.stderr
    assert f"mcphost: config {sandbox.config}\n" in said and "built-in default" not in said
