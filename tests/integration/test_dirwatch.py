"""The config watcher's notice of changes, on real directories: inotify read on the event loop (Linux), and
watchfiles where there is none (run here too, with inotify hidden)."""

from __future__ import annotations

import contextlib
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


async def test_a_quiet_directory_yields_an_empty_batch_each_period(tmp_path: Path, backend: str) -> None:
    async with watching(tmp_path, every=0.05) as batches:
        with anyio.fail_after(10):
            assert await anext(batches) == frozenset()


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
    def spent(inotify: object, directories: object) -> int:
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
