"""The config watcher's notice of changes, on real directories: inotify read on the event loop (Linux), and
watchfiles where there is none (run here too, with inotify hidden)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import shutil
import threading
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import anyio
import pytest

from mcphost.config import dirwatch, watcher
from mcphost.config.watcher import ConfigEvent, ConfigWatcher, Reloaded

pytestmark = pytest.mark.anyio

INOTIFY = dirwatch._INOTIFY is not None
needs_inotify = pytest.mark.skipif(not INOTIFY, reason="inotify is Linux's")


@pytest.fixture(params=["inotify", "watchfiles"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "inotify":
        if not INOTIFY:
            pytest.skip("inotify is Linux's")
    else:
        monkeypatch.setattr(dirwatch, "_INOTIFY", None)
    return str(request.param)


@contextlib.asynccontextmanager
async def watching(directory: Path, every: float = 0.5) -> AsyncIterator[AsyncGenerator[dirwatch.Batch]]:
    batches = dirwatch.changes([directory], every=every)
    async with contextlib.aclosing(batches):
        with anyio.fail_after(10):
            await anext(batches)  # the watch is in place
        yield batches


async def next_naming(batches: AsyncGenerator[dirwatch.Batch], name: str) -> None:
    with anyio.fail_after(10):
        async for names in batches:
            if names and name in names:
                return


async def test_a_file_renamed_over_the_watched_one_is_named(tmp_path: Path, backend: str) -> None:
    (tmp_path / "config.toml").write_text("a", encoding="utf-8")
    async with watching(tmp_path) as batches:
        (tmp_path / ".config.toml.swp").write_text("b", encoding="utf-8")
        (tmp_path / ".config.toml.swp").rename(tmp_path / "config.toml")  # how editors save
        await next_naming(batches, "config.toml")


async def test_a_write_in_place_is_named(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a", encoding="utf-8")
    async with watching(tmp_path) as batches:
        with path.open("a", encoding="utf-8") as f:
            f.write("b")
        await next_naming(batches, "config.toml")


async def quiet_for(batches: AsyncGenerator[dirwatch.Batch], seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        await anext(batches)
        return False
    return True


@needs_inotify
async def test_a_quiet_directory_the_kernel_watches_whole_yields_nothing(tmp_path: Path) -> None:
    async with watching(tmp_path, every=0.05) as batches:
        assert await quiet_for(batches, 0.3)  # six periods: told of everything, it has no reason to look


async def test_without_inotify_a_quiet_directory_yields_an_empty_batch_each_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dirwatch, "_INOTIFY", None)
    async with watching(tmp_path, every=0.05) as batches:
        with anyio.fail_after(10):
            assert await anext(batches) == frozenset()


@needs_inotify
async def test_a_directory_the_kernel_will_not_watch_gets_an_empty_batch_each_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert dirwatch._INOTIFY is not None
    real = dirwatch._INOTIFY
    refused = tmp_path / "refused"
    refused.mkdir()

    def add_watch(fd: int, path: bytes, mask: int) -> int:
        if path == bytes(refused):
            ctypes.set_errno(errno.EACCES)
            return -1
        return real.add_watch(fd, path, mask)

    monkeypatch.setattr(dirwatch, "_INOTIFY", dirwatch._Inotify(real.init1, add_watch))
    batches = dirwatch.changes([tmp_path], entries=[refused], every=0.05)
    async with contextlib.aclosing(batches):
        with anyio.fail_after(10):
            assert await anext(batches) == frozenset()  # in place
            assert await anext(batches) == frozenset()  # a period later: look, something goes untold


@needs_inotify
async def test_a_directory_on_the_way_tells_names_coming_and_going_not_writes(tmp_path: Path) -> None:
    (tmp_path / "history").write_text("a", encoding="utf-8")
    batches = dirwatch.changes([], entries=[tmp_path], every=0.05)
    async with contextlib.aclosing(batches):
        with anyio.fail_after(10):
            await anext(batches)
        with (tmp_path / "history").open("a", encoding="utf-8") as f:
            f.write("b")  # a shell's history in the home directory: no wake-up for it
        assert await quiet_for(batches, 0.3)
        (tmp_path / "mcphost").mkdir()
        await next_naming(batches, "mcphost")
        (tmp_path / "mcphost").rename(tmp_path / "mcphost.old")
        await next_naming(batches, "mcphost")


@needs_inotify
async def test_a_removed_directory_is_a_batch_that_says_look_again(tmp_path: Path) -> None:
    watched = tmp_path / "conf"
    watched.mkdir()
    async with watching(watched) as batches:
        shutil.rmtree(watched)
        with anyio.fail_after(10):
            async for names in batches:
                if names is None:
                    break


def open_fds() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


@needs_inotify
async def test_the_inotify_watch_runs_on_the_loop_with_no_thread_and_lets_go_of_its_fd(tmp_path: Path) -> None:
    threads, fds = threading.active_count(), open_fds()
    async with watching(tmp_path) as batches:
        assert open_fds() == fds + 1
        (tmp_path / "config.toml").write_text("a", encoding="utf-8")
        await next_naming(batches, "config.toml")
        assert threading.active_count() == threads
    assert open_fds() == fds


@needs_inotify
async def test_a_missing_directory_is_an_os_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="gone"):
        async with watching(tmp_path / "gone") as batches:
            await anext(batches)


@needs_inotify
async def test_with_the_users_inotify_watches_spent_a_save_is_still_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def spent(inotify: object, watches: object) -> tuple[int, bool]:
        raise OSError(errno.ENOSPC, "inotify: No space left on device")

    monkeypatch.setattr(dirwatch, "_watch", spent)
    monkeypatch.setattr(dirwatch, "_warned", set())
    monkeypatch.setattr(watcher, "PARENT_POLL_S", 0.05)
    path = tmp_path / "config.toml"
    path.write_text('[permissions]\nwrite = "ask"\n', encoding="utf-8")
    events: list[ConfigEvent] = []
    reported = anyio.Event()

    def on_event(event: ConfigEvent) -> None:
        events.append(event)
        reported.set()

    config_watcher = ConfigWatcher(path, on_event, path.read_bytes())
    async with anyio.create_task_group() as tg:
        tg.start_soon(config_watcher.run)
        path.write_text('[permissions]\nwrite = "deny"\n', encoding="utf-8")
        with anyio.fail_after(10):
            await reported.wait()
        config_watcher.stop.set()
    (event,) = events
    assert isinstance(event, Reloaded) and event.loaded.config.permissions.write.value == "deny"
    warnings = [r.getMessage() for r in caplog.records if r.name == dirwatch.__name__]
    assert len(warnings) == 1 and "fs.inotify.max_user_watches" in warnings[0], warnings
