"""Discovery files: how agents and tools find a running daemon (its URL and token), readable by the user only."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcphost import __version__
from mcphost.paths import ensure_private_dir, runtime_dir


def write(*, url: str, token: str, config_path: str, editor_socket: str | None = None) -> Path:
    directory = ensure_private_dir(runtime_dir())
    path = directory / f"daemon-{os.getpid()}.json"
    info: dict[str, Any] = {
        "pid": os.getpid(),
        "version": __version__,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "mcp": {"url": url, "headers": {"Authorization": f"Bearer {token}"}},
        "config_path": config_path,
        "editor_socket": editor_socket,
    }
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
    tmp.replace(path)
    return path


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def running() -> list[dict[str, Any]]:
    """Daemons whose process is alive; files left by dead ones are removed."""
    found: list[dict[str, Any]] = []
    directory = runtime_dir()
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("daemon-*.json")):
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid):
            info["discovery_file"] = str(path)
            found.append(info)
        else:
            _clean_after(info)
            remove(path)
    return found


def _clean_after(info: dict[str, Any]) -> None:
    """A killed daemon leaves its editor socket behind too; remove it (and its private dir, if it had one)."""
    socket_path = info.get("editor_socket")
    if not isinstance(socket_path, str):
        return
    path = Path(socket_path)
    with contextlib.suppress(OSError):
        if path.is_socket() and path.stat().st_uid == os.getuid():
            path.unlink()
            if path.parent.name.startswith("mcphost-") and path.parent != runtime_dir():
                path.parent.rmdir()


def for_config(config_path: Path) -> dict[str, Any] | None:
    """The running daemon serving this config file (the newest, if several), for `mcphost mcp` to relay to."""
    wanted = _same_file_key(config_path)
    matching = [info for info in running() if _same_file_key(Path(str(info.get("config_path", "")))) == wanted]
    matching.sort(key=lambda info: str(info.get("started_at", "")))
    return matching[-1] if matching else None


def _same_file_key(path: Path) -> str:
    try:
        return str(path.expanduser().resolve())
    except OSError:
        return str(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
