"""Watching config.toml: every save becomes one event carrying the new config, or the errors that stop it.

It watches directories, not the file, because editors save by writing a temporary file and renaming it over the
original (a new inode a file watch would lose), and people delete and recreate files. When config.toml is a
symlink (dotfile managers: ~/.config/mcphost/config.toml -> ~/dotfiles/mcphost.toml), the directory of each file
the link leads to is watched too, so a save to the target, in place or by a rename in its own directory, is seen.
Every directory above them is watched for names coming and going, so a link re-pointed or a directory renamed
anywhere on the way is told as it happens (the path is walked again, and the watch moves along), and a daemon whose
config nobody touches is never woken for it.

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
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from mcphost.config import dirwatch
from mcphost.config.loader import ConfigError, LoadedConfig, dangling_link, parse_config_bytes, unreadable
from mcphost.paths import read_regular

logger = logging.getLogger(__name__)

# A save is 1-3 events within a few milliseconds. It is taken once nothing touched the file for SETTLE_S: editors
# write a file within a millisecond or two; this is the margin for slower writers, and what every save pays in
# reload latency.
SETTLE_S = 0.055
# An emptied file waits this long for the content that usually follows a truncation.
BLANK_SETTLE_S = 1.0
# How often the watch looks again at the path where the OS cannot tell it of every change on the way (no inotify,
# or a directory on the way that cannot be watched); and the least time between two looks prompted by changes of
# other files (a busy ~/.config).
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
        return read_regular(path)
    except FileNotFoundError:
        dangling = dangling_link(path)
        return None if dangling is None else _Unreadable(dangling)
    except OSError as exc:
        return _Unreadable(str(exc.strerror or exc))


def _event(path: Path, snapshot: _Snapshot, digest: str | None = None) -> ConfigEvent:
    """What `snapshot` of the file means; `digest`, its sha256 when the caller has it already."""
    if snapshot is None:
        return Missing(path)
    if isinstance(snapshot, _Unreadable):
        return Rejected(unreadable(path, snapshot.reason))
    digest = digest or _digest(snapshot)
    try:
        config = parse_config_bytes(snapshot, path)
    except ConfigError as exc:
        return Rejected(exc, digest)
    config.compiled_rules  # noqa: B018 (compiled here, off the loop, not at the first call that needs them)
    return Reloaded(LoadedConfig(config, path, exists=True, sha256=digest))


def _read_digested(path: Path) -> tuple[_Snapshot, str | None]:
    snapshot = _read(path)
    return snapshot, _digest_of(snapshot)


def read_config_file(path: Path) -> tuple[bytes | None, ConfigEvent]:
    """The file's bytes (None when absent, b"" when unreadable) and what they mean, read once, now."""
    snapshot = _read(path)
    return (b"" if isinstance(snapshot, _Unreadable) else snapshot), _event(path, snapshot)


@dataclass
class _Walk:
    """What a walk along a path asked of the file system: the names looked up in each directory (real paths), which
    of those directories hold a file (the path's last name, a link's, the end of the chain), and the links taken."""

    looked: dict[Path, set[str]] = field(default_factory=dict)
    files: set[Path] = field(default_factory=set)
    links: int = 0

    def along(self, base: Path, rest: Path, to_a_file: bool = True) -> Path | None:
        """The real path `rest` leads to from the real directory `base`, as the kernel walks it, each link followed
        where it stands; None where it ends early (a name not there, a loop of links). `to_a_file`: its last name is
        a file's (the path's, or a link's to it), not a directory's on the way."""
        parts = rest.parts
        if rest.is_absolute():
            base, parts = Path(rest.anchor), parts[1:]
        for i, part in enumerate(parts):
            if part == "..":
                base = base.parent  # `base` is real: its parent is what ".." is
                continue
            self.looked.setdefault(base, set()).add(part)
            last = i == len(parts) - 1
            if last and to_a_file:
                self.files.add(base)
            here = base / part
            try:
                is_link = stat.S_ISLNK(here.lstat().st_mode)
                target = here.readlink() if is_link else None
            except OSError:
                return None  # not there (yet): the directory it would appear in is watched for it
            if target is not None:
                self.links += 1
                if self.links > MAX_LINKS:
                    return None
                resolved = self.along(base, target, last and to_a_file)
                if resolved is None:
                    return None
                here = resolved
            base = here
        return base


@dataclass(frozen=True, slots=True)
class _WatchPlan:
    """Where a change to what `path` opens would show: the directories holding a file on the way (the path itself, the
    links it leads through, the file at the end), watched for every change of their files, and every directory above
    them and above each link, watched for names coming and going (a directory renamed, a link re-pointed). A directory
    on the way not there yet is a name looked for in the one above it."""

    directories: tuple[Path, ...]
    entries: tuple[Path, ...]
    names: frozenset[str]  # the names that matter in them

    @classmethod
    def of(cls, path: Path) -> _WatchPlan:
        walk = _Walk()
        # A relative path is looked up from the working directory itself, whatever becomes of its name; gone, there is
        # nothing to watch for now.
        with contextlib.suppress(OSError):
            walk.along(path if path.is_absolute() else Path.cwd(), path)
        return cls(
            tuple(sorted(walk.files)),
            tuple(sorted(walk.looked.keys() - walk.files)),
            frozenset(name for names in walk.looked.values() for name in names),
        )


class ConfigWatcher:
    """Calls `on_event` for each settled change of the file's content (not for a save that left it byte-identical).

    `initial` is the content in force (None: no file). What the file holds when the watch starts is compared with it,
    so it must be what was loaded, not a second read: a save that landed between the load and the watch (a daemon
    takes a second or so to start its upstreams) would be taken for the content in force, and never applied.
    `for_loaded` makes one from the config in force, by its digest."""

    def __init__(self, path: Path, on_event: Callable[[ConfigEvent], None], initial: bytes | None) -> None:
        self.path = path
        self._on_event = on_event
        self._digest: str | None = _digest(initial)
        # Whether the content last seen was blank: emptying a file that had content is the suspicious case.
        self._blank = initial is not None and not initial.strip()
        self._changed = anyio.Event()
        self.stop = anyio.Event()

    @classmethod
    def for_loaded(cls, loaded: LoadedConfig, on_event: Callable[[ConfigEvent], None]) -> ConfigWatcher:
        """A watcher on `loaded.path` whose baseline is the version `loaded` was read from (its sha256), so that
        any other content found once the watch is in place is reported. A config with no digest of its file (made
        by hand rather than read) takes what the file holds now, read as the watch reads it (a named pipe or a
        device there is refused, never opened for reading)."""
        watcher = cls(loaded.path, on_event, None)
        if loaded.exists and loaded.sha256 is None:
            snapshot = _read(loaded.path)
            watcher._digest = _digest_of(snapshot)
            watcher._blank = isinstance(snapshot, bytes) and not snapshot.strip()
        elif loaded.exists:
            watcher._digest = loaded.sha256
            watcher._blank = loaded.sha256 == _EMPTY
        return watcher

    def seen(self, sha256: str) -> None:
        """The version of the file with this digest has been dealt with (applied, or reported as invalid) by someone
        else (a daemon that started on a broken file reports it itself): not reported again, unless the file changes
        to it from something else."""
        self._digest = sha256

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
            if not plan.directories and not plan.entries:
                # Nothing to watch (not even the root?); look again later.
                await anyio.sleep(PARENT_POLL_S)
                continue
            try:
                batches = dirwatch.changes(plan.directories, entries=plan.entries, every=PARENT_POLL_S)
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
        # The file is read, hashed, parsed and its rules compiled on a worker thread: a config of megabytes, or of
        # thousands of rules, takes seconds of that, which on the loop would hold every call meanwhile.
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            snapshot, digest = await anyio.to_thread.run_sync(_read_digested, self.path)
            if digest == self._digest:
                continue  # touched, or saved unchanged: nothing to settle
            settled = await self._settled(snapshot)
            if settled is not snapshot:  # it changed again meanwhile: hashed once more, for what it is now
                snapshot, digest = settled, await anyio.to_thread.run_sync(_digest_of, settled)
                if digest == self._digest:
                    continue
            self._digest = digest
            if isinstance(snapshot, bytes):
                self._blank = not snapshot.strip()
            event = await anyio.to_thread.run_sync(_event, self.path, snapshot, digest)
            try:
                self._on_event(event)
            except Exception:
                logger.exception("applying the config change failed")

    async def _settled(self, snapshot: _Snapshot) -> _Snapshot:
        """The file's content once it has stopped changing, starting from what a read just found."""
        while True:
            blank = isinstance(snapshot, bytes) and not snapshot.strip()
            with anyio.move_on_after(BLANK_SETTLE_S if blank and not self._blank else SETTLE_S):
                await self._changed.wait()
            changed = self._changed.is_set()
            # A fresh event before the read: a change after the read sets it, and gets another round.
            self._changed = anyio.Event()
            again = await anyio.to_thread.run_sync(_read, self.path)
            if not changed and again == snapshot:
                return snapshot
            snapshot = again


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


_EMPTY = hashlib.sha256(b"").hexdigest()


def _digest_of(snapshot: _Snapshot) -> str | None:
    if isinstance(snapshot, _Unreadable):
        return f"unreadable: {snapshot.reason}"
    return _digest(snapshot)
