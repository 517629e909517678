"""Where mcphost keeps its files: config, data (activity log, demo database), runtime (discovery)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

APP_NAME = "mcphost"


def config_path(override: str | os.PathLike[str] | None = None) -> Path:
    """`--config PATH` wins, then `$MCPHOST_CONFIG`, then the platform's user config dir."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get("MCPHOST_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def data_dir() -> Path:
    env = os.environ.get("MCPHOST_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME))


def runtime_dir() -> Path:
    env = os.environ.get("MCPHOST_RUNTIME_DIR")
    if env:
        return Path(env).expanduser()
    # platformdirs warns (and falls back to /tmp/runtime-UID) when XDG_RUNTIME_DIR is unset; the fallback is fine.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir(APP_NAME))


class UnsafeDirectory(Exception):
    """A directory mcphost would trust with tokens and sockets is open to other users; the message says the fix."""


def private_dir_problem(info: os.stat_result) -> str | None:
    """Why a directory with this `lstat` is no place for secrets, or None: it must be a real directory of this user
    that no one else may enter or write."""
    if stat.S_ISLNK(info.st_mode):
        return "it is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if info.st_uid != os.geteuid():
        return f"it belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})"
    if info.st_mode & 0o077:
        return f"it has mode {stat.S_IMODE(info.st_mode):04o}, so other users can plant or swap files in it"
    return None


def refusal(path: Path, problem: str) -> str:
    """The message for a runtime dir that cannot be trusted, with the fix that applies."""
    elsewhere = "set MCPHOST_RUNTIME_DIR to a directory only you can use (mode 0700)"
    if problem.startswith("it has mode"):
        return f"refusing the runtime dir {path}: {problem}; run `chmod 700 {path}`, or {elsewhere}"
    return f"refusing the runtime dir {path}: {problem}; {elsewhere}"


def private_runtime_dir() -> Path:
    """The runtime dir, created 0700 if missing; raises UnsafeDirectory when another user could write in it.

    Discovery files name the endpoint an agent's session is relayed to: in a directory others can write (the /tmp
    fallback when XDG_RUNTIME_DIR is unset, a shared MCPHOST_RUNTIME_DIR), a planted file would send it to them.
    """
    path = ensure_private_dir(runtime_dir())
    problem = private_dir_problem(os.lstat(path))
    if problem is not None:
        raise UnsafeDirectory(refusal(path, problem))
    return path


def activity_log_path() -> Path:
    return data_dir() / "activity.jsonl"


def ensure_private_dir(path: Path) -> Path:
    """Create a directory readable only by the user (it holds the audit log, tokens, the demo database)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
