"""Where mcphost keeps its files: config, data (activity log, demo database), runtime (discovery)."""

from __future__ import annotations

import errno
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
    """`$MCPHOST_RUNTIME_DIR`, else the platform's user runtime dir. Raises UnsafeDirectory when platformdirs
    refuses its own fallback (XDG_RUNTIME_DIR unset, and /tmp/runtime-UID made by another user)."""
    env = os.environ.get("MCPHOST_RUNTIME_DIR")
    if env:
        return Path(env).expanduser()
    # platformdirs warns (and falls back to /tmp/runtime-UID) when XDG_RUNTIME_DIR is unset; the fallback is fine.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return Path(platformdirs.user_runtime_dir(APP_NAME))
        except PermissionError as exc:
            raise UnsafeDirectory(
                f"refusing the runtime dir: {exc}; or set MCPHOST_RUNTIME_DIR to a directory only you can use"
                " (mode 0700)"
            ) from None


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


def writable_by_others(info: os.stat_result, *, group: bool = True) -> str | None:
    """Why a file with this `stat` may hold what another user wrote, or None: it must be this user's, and no one
    else's to write (with `group` False, its group may: a user's private group, as umask 002 gives)."""
    if info.st_uid != os.geteuid():
        return f"it belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})"
    if info.st_mode & (0o022 if group else 0o002):
        return f"it has mode {stat.S_IMODE(info.st_mode):04o}, so other users can write it"
    return None


def data_dir_fix(place: Path, problem: str) -> str:
    """What to do about a place of the activity log's that `writable_by_others` found a `problem` with."""
    fix = f"`chmod o-w {place}`, or " if problem.startswith("it has mode") else ""
    return f"{fix}set MCPHOST_DATA_DIR to a directory only you can write"


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
    swap = swappable_by_others(path)
    if swap is not None:
        raise UnsafeDirectory(swap)
    return path


def swappable_by_others(path: Path) -> str | None:
    """Why another user could put a directory of their own in `path`'s place, or None. A private directory is only
    as private as the way to it: in a parent that is another user's, or that anyone may write without the sticky
    bit (which /tmp has), they may rename it away and put theirs there."""
    me = os.geteuid()
    for parent in Path(os.path.realpath(path)).parents:
        try:
            info = parent.stat()
        except OSError:
            continue
        if info.st_uid not in (0, me):
            why = f"it belongs to uid {info.st_uid}"
        elif info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX:
            why = f"it has mode {stat.S_IMODE(info.st_mode):04o}: anyone may rename what it holds"
        else:
            continue
        return (
            f"refusing the runtime dir {path}: another user can swap it for one of theirs, through {parent} ({why}); "
            "set MCPHOST_RUNTIME_DIR to a directory only you can use (mode 0700), on a path only you and root own"
        )
    return None


def activity_log_path() -> Path:
    return data_dir() / "activity.jsonl"


def ensure_private_dir(path: Path) -> Path:
    """Create a directory readable only by the user (it holds the audit log, tokens, the demo database)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def kind_of(mode: int) -> str:
    """What a file of this mode is, in words, for one that is not the regular file expected."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o600, *, devices: bool = False) -> int:
    """A descriptor of the regular file at `path` (`flags` as for os.open). A FIFO put in a file's place would hold
    an open for reading, and then every read and write, until another process opened its other end: a daemon stuck
    there ignores SIGTERM. So the open does not block, and anything but a regular file is refused with an OSError
    whose strerror says what it is (FileNotFoundError as os.open raises it). `devices`: a character device is taken
    too, for a writer (/dev/full writes fail at once, as a full disk's do); a reader of /dev/zero would never end."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        found = os.fstat(fd).st_mode
        if not (stat.S_ISREG(found) or (devices and stat.S_ISCHR(found))):
            raise OSError(errno.EINVAL, f"it is {kind_of(found)}, not a regular file", str(path))
        os.set_blocking(fd, True)  # what a plain open gives: the flag was for the open only
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at `path` (`open_regular`'s refusals, or any OSError of the read)."""
    return read_regular_as_found(path)[0]


def read_regular_as_found(path: Path) -> tuple[bytes, os.stat_result]:
    """`read_regular`, and the file's `fstat` (whose it is, its mode) from the same descriptor."""
    fd = open_regular(path)
    with open(fd, "rb", closefd=True) as f:  # noqa: PTH123 (an fd, not a path)
        return f.read(), os.fstat(fd)
