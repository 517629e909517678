"""The host's own state file (remembered approvals and the like), beside the person's config, never in it.

Written atomically: a temporary file in the same directory, fsynced, then renamed over the old one, so a crash
leaves either the old state or the new one, never half of either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from mcphost.paths import data_dir, read_regular_as_found, writable_by_others

logger = logging.getLogger(__name__)

HEADER = "# Written by mcphost: remembered approvals and other state. Edit config.toml instead of this file.\n"


def state_path() -> Path:
    return data_dir() / "state.toml"


class UnreadableState(Exception):
    """A state file that is there and cannot be used: not a regular file, not readable, not UTF-8 TOML, or one
    another user wrote or could have written."""

    def __init__(self, path: Path, why: str, *, others: bool = False) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why
        self.others = others  # another user's, or anyone's to write: readable, and not trusted


def load_state(path: Path | None = None) -> dict[str, Any]:
    """The state as a dict; a missing file is empty state. UnreadableState for a file that is there and cannot be
    used, and for one another user wrote or could have written: its "always" grants would let calls through unasked
    (a grant's fingerprint is made from public tool definitions), so they count only from a file of this user's own."""
    target = path or state_path()
    try:
        data, found = read_regular_as_found(target)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UnreadableState(target, exc.strerror or str(exc)) from None
    problem = writable_by_others(found)
    if problem is not None:
        raise UnreadableState(target, problem, others=True)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        # RecursionError: values nested hundreds deep, which tomllib cannot read.
        raise UnreadableState(target, str(exc) or type(exc).__name__) from None


def read_state(path: Path | None = None) -> dict[str, Any]:
    """`load_state`, with a file that cannot be used reported and treated as empty."""
    try:
        return load_state(path)
    except UnreadableState as exc:
        if exc.others:
            logger.warning(
                "ignoring the state file %s: %s; the approvals remembered in it are not applied (remove the file,"
                " or make it yours alone: chmod 600)",
                exc.path,
                exc.why,
            )
        else:
            logger.warning("ignoring the unreadable state file %s: %s", exc.path, exc.why)
        return {}


def state_to_update(path: Path | None = None) -> dict[str, Any]:
    """The state, to change and write back: a file that is there and cannot be used is moved aside first (never
    written over: it may hold remembered approvals a typo hid), and said so on stderr. OSError when it cannot be
    moved: then nothing may be written."""
    target = path or state_path()
    try:
        return load_state(target)
    except UnreadableState as exc:
        set_aside(target, exc.why)
        return {}


ASIDE_MARK = ".unreadable-"


def set_aside(target: Path, why: str) -> Path:
    """Move the state file that could not be used to `state.toml.unreadable-<UTC time>` beside it, and say where and
    why; OSError (saying both) when it cannot be moved. The caller holds the state lock: no other mcphost moves
    one at the same time."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = target.with_name(f"{target.name}{ASIDE_MARK}{stamp}")
    try:
        n = 1
        while _taken(aside):
            n += 1
            aside = target.with_name(f"{target.name}{ASIDE_MARK}{stamp}-{n}")
        target.rename(aside)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"{target.name} cannot be used ({why}) and could not be moved aside to {aside.name}"
            f" ({exc.strerror or exc}); it is left as it is",
        ) from None
    logger.warning(
        "the state file %s could not be used (%s), so it was moved to %s rather than written over: the approvals"
        " remembered in it are not in force; to keep them, fix that file and copy its [[grants]] into %s, else"
        " delete it",
        target,
        why,
        aside,
        target.name,
    )
    return aside


def _taken(path: Path) -> bool:
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    return True


def write_state(state: dict[str, Any], path: Path | None = None) -> Path:
    target = path or state_path()
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # 0600: state can hold what a person approved, for the user's eyes only.
    return write_atomically(target, (HEADER + tomli_w.dumps(state)).encode("utf-8"))


def write_atomically(target: Path, data: bytes, mode: int = 0o600) -> Path:
    """Replace `target` with `data` all at once: a temporary file beside it, fsynced, renamed over it. A crash
    leaves the old file or the new one, never half of either."""
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        Path(temp).replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(temp).unlink()
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return target
