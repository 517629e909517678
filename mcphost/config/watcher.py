"""Watching config.toml: every save becomes one event carrying the new config, or the errors that stop it.

It watches directories, not the file, because editors save by writing a temporary file and renaming it over the
original (a new inode a file watch would lose), and people delete and recreate files. When config.toml is a
symlink (dotfile managers: ~/.config/mcphost/config.toml -> ~/dotfiles/mcphost.toml), the directory of each file
the link leads to is watched too, so a save to the target, in place or by a rename in its own directory, is seen;
the link is resolved again after every change, so re-pointing it moves the watch along.

A change is reported once the file has settled: the same bytes at both ends of a quiet period with no event in
between. Without it, an editor that truncates the file and writes it a few tens of milliseconds later, or a shell
writing it in pieces, would have its half-written file applied, and an empty file is a valid config with no
servers: every upstream would be stopped, and restarted a moment later. An empty (or blank) file that replaced
a config with content must stay so for longer before it counts as what the person saved.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from mcphost.config import dirwatch
from mcphost.config.loader import ConfigError, ConfigIssue, LoadedConfig, parse_config_bytes

logger = logging.getLogger(__name__)

# A save is 1-3 events within a few milliseconds. It is taken once nothing touched the file for SETTLE_S: editors
# write a file within a millisecond or two; this is the margin for slower writers, and what every save pays in
# reload latency.
SETTLE_S = 0.055
# An emptied file waits this long for the content that usually follows a truncation.
BLANK_SETTLE_S = 1.0
# How often the watch looks again at what it cannot be told about: a missing directory that may appear, a symlink
# whose directory is not watched.
PARENT_POLL_S = 1.0
MAX_LINKS = 40  # the kernel's own limit on a chain of symlinks


@dataclass(frozen=True, slots=True)
class Reloaded:
    loaded: LoadedConfig

    @property
    def sha256(self) -> str | None:
        """Of the file's bytes: which version of the file is in force, for the record."""
        return self.loaded.sha256


@dataclass(frozen=True, slots=True)
class Rejected:
    error: ConfigError
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Missing:
    path: Path


ConfigEvent = Reloaded | Rejected | Missing


@dataclass(frozen=True, slots=True)
class _Unreadable:
    reason: str


# What one read of the path found: its bytes, nothing (no such file), or why it could not be read.
_Snapshot = bytes | None | _Unreadable


def _read(path: Path) -> _Snapshot:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _Unreadable(str(exc.strerror or exc))


def _event(path: Path, snapshot: _Snapshot) -> ConfigEvent:
    if snapshot is None:
        return Missing(path)
    if isinstance(snapshot, _Unreadable):
        return Rejected(ConfigError(path, [ConfigIssue("", f"cannot read the file: {snapshot.reason}")]))
    digest = _digest(snapshot)
    try:
        return Reloaded(LoadedConfig(parse_config_bytes(snapshot, path), path, exists=True, sha256=digest))
    except ConfigError as exc:
        return Rejected(exc, digest)


def read_config_file(path: Path) -> tuple[bytes | None, ConfigEvent]:
    """The file's bytes (None when absent, b"" when unreadable) and what they mean, read once, now."""
    snapshot = _read(path)
    return (b"" if isinstance(snapshot, _Unreadable) else snapshot), _event(path, snapshot)


def followed_files(path: Path) -> list[Path]:
    """`path`, then each file its symlinks lead to, in order; the last one is what a read of `path` opens."""
    files = [path]
    current = path
    for _ in range(MAX_LINKS):
        try:
            target = current.readlink()
        except OSError:  # not a link, or not there
            break
        current = current.parent / target
        files.append(current)
    return files


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a loop of links leads nowhere; the read reports it
        return None


@dataclass(frozen=True, slots=True)
class _WatchPlan:
    directories: tuple[Path, ...]  # the existing directories that hold the path or a file it leads to
    names: frozenset[str]  # the file names that matter in them

    @classmethod
    def of(cls, path: Path) -> _WatchPlan:
        files = followed_files(path)
        if (resolved := _resolved(path)) is not None:
            files.append(resolved)  # symlinked directories on the way lead elsewhere still
        directories: dict[Path, None] = {}
        for file in files:
            directory = _resolved(file.parent)
            if directory is not None and directory.is_dir():
                directories[directory] = None
        return cls(tuple(directories), frozenset(file.name for file in files))


class ConfigWatcher:
    """Calls `on_event` for each settled change of the file's content (not for a save that left it byte-identical)."""

    def __init__(self, path: Path, on_event: Callable[[ConfigEvent], None], initial: bytes | None) -> None:
        self.path = path
        self._on_event = on_event
        self._digest = _digest(initial)
        # Whether the content last seen was blank: emptying a file that had content is the suspicious case.
        self._blank = initial is not None and not initial.strip()
        self._changed = anyio.Event()
        self.stop = anyio.Event()

    async def run(self) -> None:
        """Watch until `stop` is set."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._report_changes)
            tg.start_soon(self._watch)
            await self.stop.wait()
            tg.cancel_scope.cancel()

    async def _watch(self) -> None:
        while True:
            plan = _WatchPlan.of(self.path)
            if not plan.directories:
                # Nothing to watch until a directory exists (a person may create it later).
                await anyio.sleep(PARENT_POLL_S)
                continue
            try:
                batches = dirwatch.changes(plan.directories, every=PARENT_POLL_S)
                # aclosing: leaving the loop releases the OS watches at once, not whenever the generator is collected.
                async with contextlib.aclosing(batches):
                    first, planned = True, anyio.current_time()
                    async for names in batches:
                        # The first batch: the watch is in place, and whatever happened before it is read now.
                        # None: the kernel lost track (a directory went, events were dropped); the next plan reads.
                        ours = first or names is None or bool(names & plan.names)
                        if ours:
                            self._changed.set()
                        first = False
                        # Planned again on a change of ours (a link re-pointed), and now and then for what no event
                        # here announces; not on every change of other files (a busy ~/.config).
                        if not ours and anyio.current_time() - planned < PARENT_POLL_S:
                            continue
                        planned = anyio.current_time()
                        if names is None or _WatchPlan.of(self.path) != plan:
                            break  # a link re-pointed, a directory came or went: watch where the path leads now
            except (FileNotFoundError, OSError, RuntimeError) as exc:
                # A directory went away under the watch; wait for it to come back.
                logger.info("config watch on %s stopped (%s); retrying", plan.directories, exc)
                await anyio.sleep(PARENT_POLL_S)

    async def _report_changes(self) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            snapshot = _read(self.path)
            if _digest_of(snapshot) == self._digest:
                continue  # touched, or saved unchanged: nothing to settle
            self._report(await self._settled(snapshot))

    async def _settled(self, snapshot: _Snapshot) -> _Snapshot:
        """The file's content once it has stopped changing, starting from what a read just found."""
        while True:
            blank = isinstance(snapshot, bytes) and not snapshot.strip()
            with anyio.move_on_after(BLANK_SETTLE_S if blank and not self._blank else SETTLE_S):
                await self._changed.wait()
            changed = self._changed.is_set()
            # A fresh event before the read: a change after the read sets it, and gets another round.
            self._changed = anyio.Event()
            again = _read(self.path)
            if not changed and again == snapshot:
                return snapshot
            snapshot = again

    def _report(self, snapshot: _Snapshot) -> None:
        digest = _digest_of(snapshot)
        if digest == self._digest:
            return
        self._digest = digest
        if isinstance(snapshot, bytes):
            self._blank = not snapshot.strip()
        try:
            self._on_event(_event(self.path, snapshot))
        except Exception:
            logger.exception("applying the config change failed")


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _digest_of(snapshot: _Snapshot) -> str | None:
    if isinstance(snapshot, _Unreadable):
        return f"unreadable: {snapshot.reason}"
    return _digest(snapshot)
