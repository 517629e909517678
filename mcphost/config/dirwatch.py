"""Notice of changes in a few directories, for the config watcher: the names that changed, as they change.

On Linux the kernel's inotify queue is read by the event loop itself, so a daemon whose config nobody touches does
nothing at all for it. watchfiles, used elsewhere, polls its notifier from a worker thread every `step` ms and
takes the GIL at each poll: 65 wake-ups a second of an idle daemon at the step the watcher needs, and a GIL
hand-off in the middle of the calls an agent is waiting on.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import math
import os
import struct
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from mcphost.pipes import linux_libc, until_ready

logger = logging.getLogger(__name__)

# <sys/inotify.h>
_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ONLYDIR = 0x01000000
_IN_MASK_ADD = 0x20000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC

# Every way a file in the directory can get new content or a new inode (an editor's rename over it, a delete and
# re-create, a chmod that makes it unreadable), and the directory itself going away.
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
)
# A directory on the way to them: only names coming and going (a link re-pointed, a directory renamed or made), not
# every write to a file in it (a home directory's shell history).
_ENTRIES_MASK = _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR
# The kernel stopped telling about a directory (removed, moved, unmounted) or dropped events: look at everything.
_LOST = _IN_Q_OVERFLOW | _IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name
_READ_SIZE = 64 * 1024

# A batch of changes: the names changed (empty when `every` seconds passed with none), or None when the kernel lost
# track of something and the caller must look again at everything.
Batch = frozenset[str] | None


@dataclass(frozen=True, slots=True)
class _Inotify:
    init1: Callable[[int], int]
    add_watch: Callable[[int, bytes, int], int]


def _load() -> _Inotify | None:
    init1 = linux_libc("inotify_init1", [ctypes.c_int], ctypes.c_int)
    add_watch = linux_libc("inotify_add_watch", [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int)
    return None if init1 is None or add_watch is None else _Inotify(init1, add_watch)


_INOTIFY = _load()


def changes(directories: Sequence[Path], *, entries: Sequence[Path] = (), every: float) -> AsyncGenerator[Batch]:
    """Batches of changes in `directories` (not recursive) and of the names coming and going in `entries`, until
    cancelled. The first batch comes once the watch is in place: a change after it is seen. A directory that cannot be
    watched (no permission) is left out, not an error. Where a change could go untold (no inotify: only `directories`
    are watched; or a directory that could not be), an empty batch also comes after `every` seconds without one, for
    the caller to look for itself. Close it (or cancel its reader) to release the OS's watches."""
    if _INOTIFY is not None:
        return _inotify_changes(_INOTIFY, directories, entries, every)
    return _watchfiles_changes(directories, every)


async def _inotify_changes(
    inotify: _Inotify, directories: Sequence[Path], entries: Sequence[Path], every: float
) -> AsyncGenerator[Batch]:
    try:
        fd, whole = _watch(inotify, [(d, _MASK) for d in directories] + [(d, _ENTRIES_MASK) for d in entries])
    except OSError as exc:
        if exc.errno not in _SPENT:
            raise
        # The user's inotify instances or watches are used up (an editor watching a large workspace takes
        # thousands). Then the directories are looked at every `every` seconds instead, and inotify is tried again
        # now and then (a None batch makes the caller start over).
        _warn_spent(exc)
        seen = _listing(directories)
        yield frozenset()
        for _ in range(_POLLS_PER_RETRY):
            await anyio.sleep(every)
            now = _listing(directories)
            yield frozenset(name for name in seen.keys() | now.keys() if seen.get(name) != now.get(name))
            seen = now
        yield None
        return
    try:
        loop = asyncio.get_running_loop()
        yield frozenset()
        while True:
            # Told of everything: no timer at all, and a process asleep until a change.
            with anyio.move_on_after(math.inf if whole else every):
                await until_ready(loop.add_reader, loop.remove_reader, fd)
            yield _drain(fd)
    finally:
        os.close(fd)


# The kernel's per-user limits: instances (EMFILE), watches (ENOSPC), or its memory for them (ENOMEM).
_SPENT = (errno.EMFILE, errno.ENOSPC, errno.ENOMEM)
_warned: set[int] = set()


def _watch(inotify: _Inotify, watches: Sequence[tuple[Path, int]]) -> tuple[int, bool]:
    """An inotify fd watching each directory for its mask's events, and whether every watch took (a directory
    watched twice, as a parent and as a way, is told of both masks' events)."""
    fd = inotify.init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"inotify: {os.strerror(err)}")
    whole = True
    try:
        for directory, mask in watches:
            if inotify.add_watch(fd, os.fsencode(directory), mask | _IN_MASK_ADD) < 0:
                err = ctypes.get_errno()
                if err not in (errno.EACCES, errno.EPERM):
                    raise OSError(err, f"inotify: {os.strerror(err)}", str(directory))
                whole = False
    except BaseException:
        os.close(fd)
        raise
    return fd, whole


_POLLS_PER_RETRY = 30


def _listing(directories: Sequence[Path]) -> dict[str, tuple[int, int, int, int]]:
    """What a change to a file would change: its inode, size, and times, by name (the names of all directories
    together, as the batches give them)."""
    seen: dict[str, tuple[int, int, int, int]] = {}
    for directory in directories:
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    seen[entry.name] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return seen


def _warn_spent(exc: OSError) -> None:
    if exc.errno in _warned:
        return
    _warned.add(exc.errno or 0)
    limit = "max_user_instances" if exc.errno == errno.EMFILE else "max_user_watches"
    logger.warning(
        "config watch: %s; config.toml is read once a second instead (raise fs.inotify.%s with sysctl to get "
        "changes the moment they are saved)",
        exc,
        limit,
    )


def _drain(fd: int) -> Batch:
    """Everything queued on the inotify `fd` now, as one batch."""
    names: set[str] = set()
    lost = False
    while True:
        try:
            data = os.read(fd, _READ_SIZE)
        except (BlockingIOError, InterruptedError):
            break
        offset = 0
        while offset + _EVENT.size <= len(data):
            _wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            offset += _EVENT.size
            name = data[offset : offset + size].split(b"\0", 1)[0]
            offset += size
            if mask & _LOST:
                lost = True
            if name:
                names.add(os.fsdecode(name))
    return None if lost else frozenset(names)


async def _watchfiles_changes(directories: Sequence[Path], every: float) -> AsyncGenerator[Batch]:
    # Imported only where there is no inotify: its import and its thread cost the rest nothing.
    import watchfiles

    batches = watchfiles.awatch(
        *directories,
        # Its notifier is polled every `step` ms; a change is yielded once no new one came for a step.
        step=15,
        debounce=200,
        recursive=False,
        ignore_permission_denied=True,
        rust_timeout=int(every * 1000),
        yield_on_timeout=True,
    )
    async with contextlib.aclosing(batches):
        # Its notifier is made on the first step of `batches` and watches from then on; so the first batch, with
        # changes or after `every` seconds without, comes once the watch is in place.
        async for batch in batches:
            yield frozenset(Path(changed).name for _change, changed in batch)
