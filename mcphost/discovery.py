"""Discovery files: how agents and tools find a running daemon (its URL and tokens), readable by the user only.

A discovery file decides where `mcphost mcp` sends an agent's whole session, so only files that can only have come
from one of the user's own daemons are trusted: in a runtime dir no one else can write, a regular file (no
symlink) of the user's, readable by them alone, naming a live process of theirs (the very process that wrote it,
not a later one with the same pid) and endpoints on loopback. Anything else is ignored, with a message on stderr.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import struct
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcphost import __version__
from mcphost.paths import (
    UnsafeDirectory,
    private_dir_problem,
    private_runtime_dir,
    refusal,
    runtime_dir,
    swappable_by_others,
)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
# A daemon's file is a few hundred bytes; anything much larger was not written by one.
MAX_FILE_BYTES = 64 * 1024
# The largest pid a signal can be sent to (a C int): a file naming a larger one names no process.
MAX_PID = 2**31 - 1

_warned: set[str] = set()


class NoDaemon(Exception):
    """No running daemon to attach to or ask; the message says why, or how to start one."""


def _warn(message: str) -> None:
    # Every command that looks repeats the checks; one notice per process is enough.
    if message not in _warned:
        _warned.add(message)
        print(f"mcphost: {message}", file=sys.stderr, flush=True)


def write(
    *,
    url: str,
    token: str,
    config_path: str,
    editor_socket: str | None = None,
    api_url: str | None = None,
    api_token: str | None = None,
    relay_socket: str | None = None,
) -> Path:
    """Announce this daemon. Raises UnsafeDirectory when the runtime dir is open to other users."""
    directory = private_runtime_dir()
    pid = os.getpid()
    info: dict[str, Any] = {
        "pid": pid,
        "pid_start": process_start(pid),
        "version": __version__,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "mcp": {"url": url, "headers": {"Authorization": f"Bearer {token}"}},
        "config_path": config_path,
        "editor_socket": editor_socket,
    }
    if api_url is not None and api_token is not None:
        info["api"] = {"url": api_url, "token": api_token}
    if relay_socket is not None:
        # Where `mcphost mcp` relays its agent's session: one connection per session, MCP as on stdio; a relay may
        # hand over its stdout with the first line (mcphost.serve.handoff), and its stdin too where the daemon can look
        # into a pipe without taking from it.
        from mcphost.pipes import PIPE_PEEK  # only the daemon writes this file: no command pays for ctypes

        info["relay"] = {"socket": relay_socket, "handoff": True, "stdin": PIPE_PEEK}
    name, tmp = f"daemon-{pid}.json", f"daemon-{pid}.tmp"
    dir_fd = _open_dir(directory)
    try:
        # The directory checked by path above may have been swapped since: what is written to is checked again.
        problem = private_dir_problem(os.fstat(dir_fd))
        if problem is not None:
            raise UnsafeDirectory(refusal(directory, problem))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return directory / name


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def running() -> list[dict[str, Any]]:
    """Daemons whose files can be trusted and whose process is alive; files left by dead ones are removed."""
    found: list[dict[str, Any]] = []
    try:
        directory = runtime_dir()
        dir_fd = _open_dir(directory)
    except FileNotFoundError:
        return found
    except UnsafeDirectory as exc:
        _warn(str(exc))
        return found
    except OSError as exc:
        _warn(f"cannot read the runtime dir {directory}: {exc.strerror or exc}")
        return found
    try:
        problem = private_dir_problem(os.fstat(dir_fd))
        if problem is not None:
            _warn(refusal(directory, problem))
            return found
        swap = swappable_by_others(directory)
        if swap is not None:
            _warn(swap)
            return found
        # Listed through the fd that was checked, not by path: a swapped directory cannot slip in between.
        for name in sorted(os.listdir(dir_fd)):  # noqa: PTH208
            if name.startswith("daemon-") and name.endswith(".json"):
                info = _trusted(dir_fd, directory / name)
                if info is not None:
                    found.append(info)
    finally:
        os.close(dir_fd)
    return found


def _open_dir(directory: Path) -> int:
    """An fd on the directory itself (never through a final symlink), so what is checked is what is read."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeDirectory(refusal(directory, "it is a symlink")) from None
        if exc.errno == errno.ENOTDIR:
            raise UnsafeDirectory(refusal(directory, "it is not a directory")) from None
        raise


def _trusted(dir_fd: int, path: Path) -> dict[str, Any] | None:
    """The file's content if it can only be a live daemon of this user's, else None (with a message why)."""
    data = _read_private(dir_fd, path)
    if data is None:
        return None
    try:
        info = json.loads(data)
    except (ValueError, RecursionError):
        # A daemon writes its file by rename, whole: a half-written one is not ours to interpret.
        _warn(f"ignoring {path}: it is not JSON")
        return None
    problem = _malformed(info, path.name)
    if problem is not None:
        _warn(f"ignoring {path}: {problem}")
        return None
    pid = int(info["pid"])
    if info.get("pid_start") is None and process_start(pid) is not None:
        # Without the start time, a live pid proves nothing: it may have been reused by any process since.
        _warn(f"ignoring {path}: it does not say when process {pid} started (written by an older mcphost?)")
        return None
    state = _process_state(pid, info.get("pid_start"))
    if state is not None:
        if state:
            _warn(f"ignoring {path}: {state}; removed it")
        _clean_after(info)
        with contextlib.suppress(OSError):
            os.unlink(path.name, dir_fd=dir_fd)
        return None
    info["discovery_file"] = str(path)
    return dict(info)


def _read_private(dir_fd: int, path: Path) -> bytes | None:
    # O_NONBLOCK: a FIFO planted under a daemon's name must not hang every command that looks.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path.name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None  # its daemon removed it while we looked
    except OSError as exc:
        reason = "it is a symlink (a daemon writes a regular file)" if exc.errno == errno.ELOOP else exc.strerror
        _warn(f"ignoring {path}: {reason}")
        return None
    try:
        info = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(info.st_mode):
            problem = "it is not a regular file"
        elif info.st_uid != os.geteuid():
            problem = f"it belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})"
        elif info.st_mode & 0o077:
            problem = f"it has mode {stat.S_IMODE(info.st_mode):04o} (a daemon writes its file 0600, yours alone)"
        elif info.st_size > MAX_FILE_BYTES:
            problem = f"it holds {info.st_size} bytes, far more than a daemon writes"
        if problem is not None:
            _warn(f"ignoring {path}: {problem}")
            return None
        return os.read(fd, MAX_FILE_BYTES + 1)
    except OSError as exc:
        _warn(f"ignoring {path}: {exc.strerror or exc}")
        return None
    finally:
        os.close(fd)


def _malformed(info: Any, name: str) -> str | None:
    if not isinstance(info, dict):
        return "it is not a JSON object"
    pid = info.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= MAX_PID:
        return "it names no pid"
    if name != f"daemon-{pid}.json":
        return f"it names pid {pid}, not the one in its file name"
    mcp = info.get("mcp")
    if not isinstance(mcp, dict) or not isinstance(mcp.get("url"), str):
        return "it names no agent endpoint"
    headers = mcp.get("headers") or {}
    if not isinstance(headers, dict) or not all(_header_text(k) and _header_text(v) for k, v in headers.items()):
        return "its agent headers are not one-line text"
    relay = info.get("relay")
    for key, value in (
        ("config_path", info.get("config_path")),
        ("editor_socket", info.get("editor_socket")),
        ("relay socket", relay.get("socket") if isinstance(relay, dict) else None),
    ):
        if value is not None and not _path_text(value):
            return f"its {key} is not a path"
    if not is_loopback_url(mcp["url"]):
        return f"its agent URL {mcp['url']!r} is not on loopback (http://127.0.0.1, http://[::1] or http://localhost)"
    api = info.get("api")
    if api is not None and not (isinstance(api, dict) and is_loopback_url(str(api.get("url", "")))):
        return "its REST API URL is not on loopback"
    return None


def _header_text(value: Any) -> bool:
    # What http.client would refuse to send (a line break would start a header of the file's choosing).
    return isinstance(value, str) and value.isprintable() and value.isascii()


def _path_text(value: Any) -> bool:
    if not isinstance(value, str) or "\0" in value:
        return False
    try:
        os.fsencode(value)
    except UnicodeEncodeError:  # a lone surrogate that JSON's "\udfff" makes
        return False
    return True


def is_loopback_url(url: str) -> bool:
    """An http URL on this machine's loopback interface, without credentials in it: where a daemon listens."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "http"
        and parts.hostname in LOOPBACK_HOSTS
        and port is not None
        and parts.username is None
        and parts.password is None
    )


def _process_state(pid: int, recorded_start: Any) -> str | None:
    """None when `pid` is the live process that wrote the file; "" when it is gone; else why it is not ours."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ""
    except PermissionError:
        # Our daemons run as us: a process we may not signal belongs to someone else, whatever the file says.
        return f"process {pid} belongs to another user, so it is no daemon of yours"
    proc = _proc_stat(pid)
    if proc is None:
        return None  # no /proc here: the signal check is all there is
    state, start = proc
    if state in ("Z", "X"):
        return ""  # killed, not yet reaped by its parent: it serves nobody
    if recorded_start != start:
        return f"process {pid} is not the daemon that wrote it (that one is gone and its pid was reused)"
    return None


def process_alive(pid: int) -> bool:
    """Whether `pid` is a live process of this user's (a killed one not yet reaped is not)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    proc = _proc_stat(pid)
    return proc is None or proc[0] not in ("Z", "X")


def process_stopped(pid: int) -> bool:
    """Whether `pid` is stopped (SIGSTOP, Ctrl-Z, a debugger): alive, and answering nobody until it is resumed."""
    proc = _proc_stat(pid)
    return proc is not None and proc[0] in ("T", "t")


def unless_stopped(info: dict[str, Any] | None, instead: str) -> dict[str, Any] | None:
    """`info`, unless its daemon is stopped (it answers nobody until resumed: a command would wait on it without
    end); then None, and a message saying so and that the command goes on `instead`."""
    if info is None or not process_stopped(int(info["pid"])):
        return info
    pid = info["pid"]
    print(
        f"mcphost: the daemon {pid} is stopped (Ctrl-Z or SIGSTOP; `fg` in its terminal or `kill -CONT {pid}` resumes "
        f"it); {instead}",
        file=sys.stderr,
        flush=True,
    )
    return None


def process_start(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (Linux); with the pid, it names one process for good."""
    proc = _proc_stat(pid)
    return None if proc is None else proc[1]


def _proc_stat(pid: int) -> tuple[str, int] | None:
    try:
        line = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after it start at the last ')'.
    fields = line.rsplit(")", 1)[-1].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def editor_socket_name(pid: int) -> str:
    """The editor channel's socket of daemon `pid`, in the runtime dir (or a private temp dir when that is too long)."""
    return f"daemon-{pid}.sock"


def agent_socket_name(pid: int) -> str:
    """The socket relays (`mcphost mcp`) hand their agents to, of daemon `pid`; where the editor's is."""
    return f"daemon-{pid}.mcp.sock"


def _clean_after(info: dict[str, Any]) -> None:
    """A killed daemon leaves its sockets behind too (the editor's, the relays'); remove them (and their private
    dir, if they had one). Only where and by the names a daemon of that pid binds them: the file is not trusted to
    name a socket of some other program's for removal."""
    import tempfile

    pid, relay = info["pid"], info.get("relay")
    names = (editor_socket_name(pid), agent_socket_name(pid))
    for socket_path in (info.get("editor_socket"), relay.get("socket") if isinstance(relay, dict) else None):
        if not isinstance(socket_path, str):
            continue
        path = Path(socket_path)
        private = path.parent.name.startswith("mcphost-") and path.parent.parent == Path(tempfile.gettempdir())
        if path.name not in names or not (private or path.parent == runtime_dir()):
            continue
        with contextlib.suppress(OSError):
            if path.is_socket() and path.stat().st_uid == os.getuid():
                path.unlink()
                if private:
                    path.parent.rmdir()


def for_config(config_path: Path) -> dict[str, Any] | None:
    """The running daemon serving this config file (the newest, if several), for `mcphost mcp` to relay to."""
    return newest(running(), config_path)


def newest(daemons: list[dict[str, Any]], config_path: Path) -> dict[str, Any] | None:
    """Of `daemons`, the newest serving this config file."""
    matching = serving(daemons, config_path)
    return matching[-1] if matching else None


def serving(daemons: list[dict[str, Any]], config_path: Path) -> list[dict[str, Any]]:
    """Of `daemons`, those serving this config file, oldest first."""
    wanted = _same_file_key(config_path)
    matching = [info for info in daemons if _same_file_key(Path(str(info.get("config_path", "")))) == wanted]
    return sorted(matching, key=lambda info: str(info.get("started_at", "")))


# ---- one daemon per config file
#
# Two daemons on one config split its agents: `approve` and `call` pick the newer, so agents relayed to the other
# get NO_APPROVER. A daemon holds an flock on a file named after its config for its whole life: the kernel drops
# it when the process ends, however it ends, so a daemon that was killed never blocks the next, and two started at
# the same moment cannot both get it. The file is never removed: unlinking a lock file lets a third process lock a
# new file while the second still holds the old one.


def claim(config_path: Path) -> int | None:
    """Claim `config_path` for this daemon: the lock's fd, to keep open while the daemon runs, or None when another
    process holds the claim. Raises UnsafeDirectory when the runtime dir is open to other users."""
    if sys.platform == "win32":  # pragma: no cover - no flock; the discovery files are all there is to go by
        return -1
    import fcntl

    dir_fd = _open_dir(private_runtime_dir())
    try:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(_lock_name(config_path), flags, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    # Whose claim it is, for a second daemon to name; a daemon announces the rest in its discovery file.
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def claimant(config_path: Path) -> int | None:
    """The pid of the process holding the claim on `config_path`, as it wrote it (None before it has)."""
    try:
        dir_fd = _open_dir(runtime_dir())
    except (OSError, UnsafeDirectory):
        return None
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(_lock_name(config_path), flags, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        text = os.read(fd, 32).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    # A pid left by an earlier holder (the new one has yet to write its own) names a process that is gone.
    return int(text) if text.isdigit() and process_alive(int(text)) else None


def _lock_name(config_path: Path) -> str:
    # Named by the resolved path, as daemons are matched to a config: two spellings of one file are one config.
    import hashlib  # loads OpenSSL: only the commands that take or look for the lock pay for it

    digest = hashlib.sha256(_same_file_key(config_path).encode("utf-8", "surrogateescape")).hexdigest()
    return f"serve-{digest[:16]}.lock"


def _same_file_key(path: Path) -> str:
    try:
        return str(path.expanduser().resolve())
    except OSError:
        return str(path)


# Before a command trusts a daemon's socket: the ones it connects to are its user's own (here, not in pipes, so that a
# command asking the editor socket loads no asyncio).
def same_user(sock: socket.socket) -> bool:
    """The peer of a connected Unix socket runs as this user (SO_PEERCRED)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the socket file's 0600 mode is the guard where peer credentials are not available
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", creds)[1]
    return uid == os.getuid()


NOT_LISTED = -1  # `tcp_peer_uid`: the kernel's table is there and lists no such connection


def tcp_peer_uid(sock: socket.socket) -> int | None:
    """The uid that owns the other end of a connected loopback TCP socket, as the kernel's socket tables say
    (/proc/net/tcp, tcp6): the entry whose local address is our peer and whose remote address is us is the end the
    listener accepted, which takes the listener's owner. NOT_LISTED when the table has no such entry; None where
    there is no table to ask (not Linux).

    A port on loopback proves nothing of who listens there: once a daemon lets go of its port (it stops, it dies),
    any local user may bind it, and a command that still trusts the daemon's file would hand that listener the
    agents' token and the call. A Unix socket says as much through SO_PEERCRED (`same_user`); TCP says it here."""
    family = sock.family
    table = "/proc/net/tcp6" if family == socket.AF_INET6 else "/proc/net/tcp"
    peer, here = sock.getpeername(), sock.getsockname()
    theirs, ours = _proc_net_address(family, peer[0], peer[1]), _proc_net_address(family, here[0], here[1])
    try:
        with open(table, encoding="ascii", errors="replace") as entries:  # noqa: PTH123 (one read)
            next(entries, None)  # the header
            for line in entries:
                fields = line.split()
                if len(fields) > 7 and fields[1] == theirs and fields[2] == ours:
                    return int(fields[7]) if fields[7].isdigit() else NOT_LISTED
    except OSError:
        return None
    return NOT_LISTED


def _proc_net_address(family: int, host: str, port: int) -> str:
    """`host:port` as /proc/net/tcp writes it: the address's 32-bit words in the machine's byte order, in hex."""
    packed = socket.inet_pton(family, host)
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{word:08X}" for word in words) + f":{port:04X}"


def socket_is_ours(path: Path) -> bool:
    """A socket file owned by this user and closed to others: the only kind mcphost's own commands connect to."""
    try:
        st = path.stat()
    except OSError:
        return False
    return bool(stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077)
