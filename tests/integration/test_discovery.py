"""How agents and editors find a daemon: the discovery file and the editor socket, and what a dead daemon leaves."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from mcphost import discovery
from tests.helpers import Sandbox, daemon, give_to_another_user, mcphost, raw_agent


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
    assert d.info["api"]["url"] in result.stdout and d.info["api"]["token"] not in result.stdout
    [report] = json.loads(as_json.stdout)["daemons"]
    assert report["pid"] == d.process.pid
    assert report["mcp"]["url"] == d.url
    assert report["editors"] == []  # `mcphost status` itself only looks: it is no approver
    assert report["api"] == d.info["api"] and report["api"]["url"] == d.url.removesuffix("/mcp") + "/api/v1/activity"
    assert report["api"]["token"] not in (d.token, "")
    assert [s["name"] for s in report["servers"]] == ["probe"]


def test_status_with_no_daemon_says_how_to_start_one(sandbox: Sandbox) -> None:
    result = mcphost(sandbox, "status")
    assert result.returncode == 0
    assert "mcphost serve" in result.stdout


# ---- what `mcphost` trusts in the runtime dir (issue 13): only the user's own private files, naming a process of
# theirs and an endpoint on loopback. A planted file must never send an agent's session to someone else's listener.


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), as the daemon records it beside its pid."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return None
    return int(stat_line.rsplit(")", 1)[1].split()[19])


def plant(
    box: Sandbox, pid: int, url: str, *, mode: int = 0o600, config: Path | None = None, started: int | None = None
) -> Path:
    """A discovery file as a daemon writes it, for `pid` (that started at `started`), naming `url` as its agent
    endpoint."""
    run = box.root / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    path = run / f"daemon-{pid}.json"
    info = {
        "pid": pid,
        "pid_start": process_start(pid) if started is None else started,
        "version": "0.1.0",
        "started_at": "2026-01-01T00:00:00Z",
        "mcp": {"url": url, "headers": {"Authorization": "Bearer planted"}},
        "config_path": str(config or box.config),
        "editor_socket": None,
    }
    path.write_text(json.dumps(info), encoding="utf-8")
    path.chmod(mode)
    return path


@contextmanager
def sleeper() -> Iterator[int]:
    """A live process of this user, to stand for a daemon that wrote a file."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


@contextmanager
def listener() -> Iterator[tuple[str, list[object]]]:
    """Someone's HTTP listener on loopback; records every connection it gets."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    seen: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            seen.append(conn)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", seen
    finally:
        stop.set()
        thread.join(5)
        sock.close()


def status_json(box: Sandbox) -> tuple[list[dict[str, object]], str]:
    result = mcphost(box, "status", "-o", "json")
    daemons: list[dict[str, object]] = json.loads(result.stdout)["daemons"]
    # 1 when a daemon it found could not be asked (a planted file's process serves no editor socket).
    assert result.returncode == (1 if any("error" in d for d in daemons) else 0), result.stderr
    return daemons, result.stderr


def test_a_well_formed_discovery_file_of_a_live_process_is_trusted(sandbox: Sandbox) -> None:
    # The control for the tests below: the same file, nothing wrong with it, is taken for a daemon.
    sandbox.write_config("")
    with sleeper() as pid, listener() as (url, _seen):
        plant(sandbox, pid, url)
        daemons, _ = status_json(sandbox)
    assert [d["pid"] for d in daemons] == [pid]
    assert "no editor socket" in str(daemons[0]["error"])


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("group-readable", "mode 0640"),
        ("symlink", "symlink"),
        ("foreign-pid", "process 1"),
        ("remote-url", "not on loopback"),
    ],
)
def test_a_planted_discovery_file_is_ignored_with_a_message(sandbox: Sandbox, kind: str, reason: str) -> None:
    sandbox.write_config("")
    with sleeper() as pid, listener() as (url, seen):

        def planted() -> Path:
            if kind == "group-readable":
                return plant(sandbox, pid, url, mode=0o640)
            if kind == "symlink":
                link = sandbox.root / "run" / f"daemon-{pid}.json"
                if not link.is_symlink():
                    target = plant(sandbox, pid, url).rename(sandbox.root / "elsewhere.json")
                    link.symlink_to(target)
                return link
            if kind == "foreign-pid":
                # The daemon that wrote it is gone; pid 1 now names init, never a daemon of this user's.
                return plant(sandbox, 1, url, started=process_start(pid))
            return plant(sandbox, pid, "http://192.0.2.7:8000/mcp")

        path = planted()
        daemons, stderr = status_json(sandbox)
        planted()  # a stale file is removed once reported: put it back for `mcphost mcp` to find
        with anyio.from_thread.start_blocking_portal() as portal:
            relay_stderr = portal.call(_mcp_session_stderr, sandbox)
    assert daemons == []
    assert f"ignoring {path}" in stderr and reason in stderr, stderr
    assert "relaying" not in relay_stderr and f"ignoring {path}" in relay_stderr, relay_stderr
    assert seen == [], "nothing may connect to a listener named by a planted file"


async def _mcp_session_stderr(box: Sandbox) -> str:
    """`mcphost mcp` answers an agent's handshake; what it said on stderr meanwhile."""
    async with raw_agent(box) as raw:
        answer = await raw.initialize()
        assert answer["result"]["serverInfo"]["name"] == "mcphost"
    return raw.stderr


def test_a_pid_of_another_user_is_not_a_daemon(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    with sleeper() as pid, listener() as (url, _seen):
        plant(sandbox, pid, url)
        real_kill = os.kill

        def kill(target: int, sig: int) -> None:
            if target == pid:
                raise PermissionError(1, "Operation not permitted")  # what signalling another user's process gives
            real_kill(target, sig)

        monkeypatch.setattr(os, "kill", kill)
        found = discovery.running()
        monkeypatch.undo()
    assert found == []
    assert f"process {pid} belongs to another user" in capsys.readouterr().err


@pytest.mark.parametrize("problem", ["open-to-others", "group-writable", "foreign-owner"])
def test_a_runtime_dir_others_can_write_is_refused_with_how_to_fix_it(sandbox: Sandbox, problem: str) -> None:
    sandbox.write_config("")
    run = sandbox.root / "run"
    with sleeper() as pid, listener() as (url, seen):
        plant(sandbox, pid, url)
        if problem == "open-to-others":
            run.chmod(0o777)
        elif problem == "group-writable":
            run.chmod(0o770)
        else:
            give_to_another_user(run)
        daemons, stderr = status_json(sandbox)
        with anyio.from_thread.start_blocking_portal() as portal:
            relay_stderr = portal.call(_mcp_session_stderr, sandbox)
        try:
            serve = mcphost(sandbox, "serve", "--port", "0", timeout=20)
            serve_code, serve_stderr = serve.returncode, serve.stderr
        except subprocess.TimeoutExpired:
            serve_code, serve_stderr = None, "(still running after 20 s)"
    assert daemons == []
    assert f"refusing the runtime dir {run}" in stderr, stderr
    fix = "MCPHOST_RUNTIME_DIR" if problem == "foreign-owner" else f"chmod 700 {run}"
    assert fix in stderr and "MCPHOST_RUNTIME_DIR" in stderr
    assert "relaying" not in relay_stderr and "refusing the runtime dir" in relay_stderr
    assert seen == []
    assert serve_code == 1 and f"refusing the runtime dir {run}" in serve_stderr, serve_stderr


@pytest.mark.parametrize("parent", ["anyone-may-write", "another-users"])
def test_a_runtime_dir_another_user_can_swap_through_its_parent_is_refused(sandbox: Sandbox, parent: str) -> None:
    # The runtime dir itself is 0700 and this user's; its parent is not safe: whoever may rename in it can move the
    # dir away and put theirs, with a planted discovery file, in its place between two looks.
    sandbox.write_config("")
    shared = sandbox.root / "shared"
    run = shared / "run"
    run.mkdir(parents=True, mode=0o700)
    env = {**os.environ, **sandbox.env(), "MCPHOST_RUNTIME_DIR": str(run)}

    def said(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "mcphost", *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20, check=False)

    shared.chmod(0o1777)  # the sticky bit, as /tmp has: only a file's owner may rename it
    assert "refusing" not in said("status").stderr
    if parent == "anyone-may-write":
        shared.chmod(0o777)
        why = f"through {shared} (it has mode 0777: anyone may rename what it holds)"
    else:
        shared.chmod(0o755)
        give_to_another_user(shared)
        why = f"through {shared} (it belongs to uid {shared.stat().st_uid})"
    status = said("status")
    assert f"refusing the runtime dir {run}: another user can swap it for one of theirs, {why}" in status.stderr
    assert "MCPHOST_RUNTIME_DIR" in status.stderr
    serve = said("serve", "--port", "0")
    assert serve.returncode == 1 and f"refusing the runtime dir {run}" in serve.stderr, serve.stderr


def _hostile(box: Sandbox, pid: int, url: str, kind: str) -> Path:
    """A discovery file whose values would break whatever reads them, unless they are checked first."""
    if kind == "pid past a C int":
        path = plant(box, pid, url)
        pid = 2**31
        target = path.with_name(f"daemon-{pid}.json")
        path.rename(target)
        target.write_text(json.dumps({**json.loads(target.read_text(encoding="utf-8")), "pid": pid}), "utf-8")
        return target
    path = plant(box, pid, url)
    info = json.loads(path.read_text(encoding="utf-8"))
    if kind == "nested 3000 deep":
        path.write_text(f'{{"pid": {pid}, "x": {"[" * 3000}{"]" * 3000}}}', encoding="utf-8")
        return path
    if kind == "NUL in config_path":
        info["config_path"] = str(box.config) + "\0x"
    elif kind == "NUL in editor_socket":
        info["editor_socket"] = "/tmp/x\0y"
    elif kind == "lone surrogate in editor_socket":
        info["editor_socket"] = "/tmp/x\udfff"
    elif kind == "line break in a header":
        info["mcp"]["headers"] = {"Authorization": "Bearer x\r\nX-Evil: 1"}
    path.write_text(json.dumps(info), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "kind",
    [
        "pid past a C int",
        "nested 3000 deep",
        "NUL in config_path",
        "NUL in editor_socket",
        "lone surrogate in editor_socket",
        "line break in a header",
    ],
)
def test_a_discovery_file_with_hostile_values_is_ignored_not_a_crash(sandbox: Sandbox, kind: str) -> None:
    # Every command reads these files first, the hook on every tool call of an agent: none may fall over on one.
    sandbox.write_config("")
    with sleeper() as pid, listener() as (url, seen):
        path = _hostile(sandbox, pid, url, kind)
        daemons, stderr = status_json(sandbox)
        _hostile(sandbox, pid, url, kind)
        hook = subprocess.run(
            [sys.executable, "-m", "mcphost", "hook", "--agent", "claude-code"],
            input=json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "a"}}),
            env={**os.environ, **sandbox.env()},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert daemons == [] and f"ignoring {path}" in stderr and "Traceback" not in stderr, stderr
    assert hook.returncode == 0 and "Traceback" not in hook.stderr, hook.stderr
    assert json.loads(hook.stdout)["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert seen == []


def test_a_stale_discovery_file_removes_only_its_own_daemons_sockets(sandbox: Sandbox, tmp_path: Path) -> None:
    sandbox.write_config("")
    with sleeper() as pid:
        path = plant(sandbox, pid, "http://127.0.0.1:9/mcp")
    own = sandbox.root / "run" / f"daemon-{pid}.sock"
    other = tmp_path / "someone-elses.sock"
    sockets = []
    for where in (own, other):
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(where))
        sockets.append(sock)
    info = json.loads(path.read_text(encoding="utf-8"))
    info["editor_socket"], info["relay"] = str(own), {"socket": str(other)}
    path.write_text(json.dumps(info), encoding="utf-8")
    try:
        daemons, _ = status_json(sandbox)
    finally:
        for sock in sockets:
            sock.close()
    assert daemons == [] and not path.exists()
    assert not own.exists(), "the dead daemon's own socket is cleaned up"
    assert other.is_socket(), "a socket the file names elsewhere is not the file's to remove"


def test_grants_list_and_revoke_say_which_daemon_could_not_be_asked(sandbox: Sandbox) -> None:
    # Session approvals live only inside daemons: one that cannot be asked makes the answer incomplete, and a
    # revoke that could not reach it leaves its approvals in force.
    sandbox.write_config("")
    dead_end = sandbox.root / "run" / "dead-end.sock"
    with sleeper() as pid, listener() as (url, _seen), socket.socket(socket.AF_UNIX) as unheard:
        path = plant(sandbox, pid, url)
        unheard.bind(str(dead_end))  # bound, never listening: connecting is refused
        dead_end.chmod(0o600)
        info = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**info, "editor_socket": str(dead_end)}), encoding="utf-8")
        listed = mcphost(sandbox, "grants", "list")
        as_json = mcphost(sandbox, "grants", "list", "-o", "json")
        revoked = mcphost(sandbox, "grants", "revoke", "--all", "-o", "json")
    assert listed.returncode == 1 and "No remembered approvals." in listed.stdout
    assert f"daemon {pid}" in listed.stderr and "its session approvals are not listed" in listed.stderr
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["unanswered"][0]["pid"] == pid
    assert revoked.returncode == 1 and "may still be in force" in revoked.stderr
    assert json.loads(revoked.stdout)["unanswered"][0]["pid"] == pid


def test_a_runtime_dir_platformdirs_will_not_give_is_refused_with_the_fix_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # XDG_RUNTIME_DIR unset (ssh without a login manager, cron, a container), and /tmp/runtime-UID made by another
    # user first: platformdirs refuses its own fallback, and every command once died of it with a traceback.
    import platformdirs

    from mcphost.paths import UnsafeDirectory, private_runtime_dir

    def refuse(*_: Any, **__: Any) -> str:
        raise PermissionError("runtime directory /tmp/runtime-1000 is owned by uid 1002; set XDG_RUNTIME_DIR instead")

    monkeypatch.delenv("MCPHOST_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(platformdirs, "user_runtime_dir", refuse)
    assert discovery.running() == []
    said = capsys.readouterr().err
    assert "refusing the runtime dir: runtime directory /tmp/runtime-1000 is owned by uid 1002" in said, said
    assert "MCPHOST_RUNTIME_DIR" in said
    with pytest.raises(UnsafeDirectory, match="set XDG_RUNTIME_DIR instead; or set MCPHOST_RUNTIME_DIR"):
        private_runtime_dir()
    assert discovery.claimant(Path("config.toml")) is None


def test_the_discovery_file_is_not_written_into_a_runtime_dir_swapped_after_its_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The path is checked, then opened: a directory others can write that took its place in between gets nothing.
    from mcphost.paths import UnsafeDirectory

    swapped = tmp_path / "run"
    swapped.mkdir(mode=0o700)
    swapped.chmod(0o777)
    monkeypatch.setattr(discovery, "private_runtime_dir", lambda: swapped)
    with pytest.raises(UnsafeDirectory, match="other users can plant or swap files in it"):
        discovery.write(url="http://127.0.0.1:1/mcp", token="secret-token", config_path=str(tmp_path / "c.toml"))
    assert list(swapped.iterdir()) == []
