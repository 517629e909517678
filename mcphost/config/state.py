"""The host's own state file (remembered approvals and the like), beside the person's config, never in it.

Written atomically: a temporary file in the same directory, fsynced, then renamed over the old one, so a crash
leaves either the old state or the new one, never half of either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from mcphost.paths import data_dir, read_regular_as_found, writable_by_others

logger = logging.getLogger(__name__)

HEADER = "# Written by mcphost: remembered approvals and other state. Edit config.toml instead of this file.\n"


def state_path() -> Path:
    return data_dir() / "state.toml"


def read_state(path: Path | None = None) -> dict[str, Any]:
    """The state as a dict; a missing file is empty state, an unreadable one is reported and treated as empty, and
    so is one another user wrote or could have written: its "always" grants would let calls through unasked (a
    grant's fingerprint is made from public tool definitions), so they count only from a file of this user's own."""
    target = path or state_path()
    try:
        data, found = read_regular_as_found(target)
        problem = writable_by_others(found)
        if problem is not None:
            logger.warning(
                "ignoring the state file %s: %s; the approvals remembered in it are not applied (remove the file,"
                " or make it yours alone: chmod 600)",
                target,
                problem,
            )
            return {}
        return tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        # RecursionError: values nested hundreds deep, which tomllib cannot read.
        logger.warning("ignoring the unreadable state file %s: %s", target, exc)
        return {}


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
