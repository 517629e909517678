"""Watching config.toml: every save becomes one event carrying the new config, or the errors that stop it.

It watches the file's directory, not the file, because editors save by writing a temporary file and renaming
it over the original (a new inode a file watch would lose), and people delete and recreate files. Each batch
of filesystem events ends with one read of the file as it is then, so a burst of saves ends on the last one.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import watchfiles

from mcphost.config.loader import ConfigError, ConfigIssue, LoadedConfig, parse_config

logger = logging.getLogger(__name__)

# watchfiles yields once no new event came for STEP_MS; a save is 1-3 events within a few milliseconds.
STEP_MS = 15
DEBOUNCE_MS = 200
PARENT_POLL_S = 1.0


@dataclass(frozen=True, slots=True)
class Reloaded:
    loaded: LoadedConfig
    sha256: str | None = None  # of the file's bytes: which version of the file is in force, for the record


@dataclass(frozen=True, slots=True)
class Rejected:
    error: ConfigError
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Missing:
    path: Path


ConfigEvent = Reloaded | Rejected | Missing


def read_config_file(path: Path) -> tuple[bytes | None, ConfigEvent]:
    """The file's bytes (None when absent) and what they mean."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, Missing(path)
    except OSError as exc:
        return b"", Rejected(ConfigError(path, [ConfigIssue("", f"cannot read the file: {exc.strerror or exc}")]))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return data, Rejected(ConfigError(path, [ConfigIssue("", f"the file is not UTF-8 text: {exc.reason}")]))
    digest = _digest(data)
    try:
        return data, Reloaded(LoadedConfig(parse_config(text, path), path, exists=True), digest)
    except ConfigError as exc:
        return data, Rejected(exc, digest)


class ConfigWatcher:
    """Calls `on_event` for each change of the file's content (not for a save that left it byte-identical)."""

    def __init__(self, path: Path, on_event: Callable[[ConfigEvent], None], initial: bytes | None) -> None:
        self.path = path
        self._on_event = on_event
        self._digest = _digest(initial)
        self.stop = anyio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            directory = self.path.parent
            if not directory.is_dir():
                # Nothing to watch until the directory exists (a person may create it later).
                with anyio.move_on_after(PARENT_POLL_S):
                    await self.stop.wait()
                continue
            self.check()  # whatever happened while we were not watching
            try:
                async for _changes in watchfiles.awatch(
                    directory,
                    watch_filter=self._concerns_us,
                    step=STEP_MS,
                    debounce=DEBOUNCE_MS,
                    stop_event=self.stop,
                    recursive=False,
                    ignore_permission_denied=True,
                ):
                    self.check()
                    if not directory.is_dir():
                        break
            except (FileNotFoundError, OSError, RuntimeError) as exc:
                # The directory went away under the watch; wait for it to come back.
                logger.info("config watch on %s stopped (%s); retrying", directory, exc)
                with anyio.move_on_after(PARENT_POLL_S):
                    await self.stop.wait()

    def _concerns_us(self, _change: watchfiles.Change, changed: str) -> bool:
        return Path(changed).name == self.path.name

    def check(self) -> None:
        """Read the file now and report it if its content differs from the last content reported."""
        data, event = read_config_file(self.path)
        digest = _digest(data)
        if digest == self._digest:
            return
        self._digest = digest
        try:
            self._on_event(event)
        except Exception:
            logger.exception("applying the config change failed")


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()
