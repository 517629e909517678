"""Saves as they really happen, on a real file system: symlinked dotfiles, and editors that write in two steps."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcphost.config import dirwatch, watcher
from mcphost.config.watcher import ConfigEvent, ConfigWatcher, Missing, Rejected, Reloaded
from tests.helpers import Sandbox, agent, daemon, error_of, http_agent, records_of, timers_due_within
from tests.helpers import poll as wait_for

BASE = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "allow"\n'
ECHO = {"name": "probe:plain_echo", "args": {"text": "x"}, "intent": {"operation_type": "write"}}


def with_write(verdict: str, text: str) -> str:
    return text.replace('write = "allow"', f'write = "{verdict}"')


# ---- a symlinked config.toml


async def test_saves_to_the_target_of_a_symlinked_config_are_applied(sandbox: Sandbox) -> None:
    dotfiles = sandbox.root / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "mcphost.toml"
    probe = sandbox.probe_server()
    target.write_text(BASE + probe, encoding="utf-8")
    sandbox.config.symlink_to(target)
    async with agent(sandbox) as client:
        assert not (await client.call_tool("call_tool_write", ECHO)).is_error

        target.write_text(with_write("deny", BASE + probe), encoding="utf-8")  # in place
        await wait_for(lambda: records_of(sandbox, "config_reload"), "the reload after a save in place")
        assert error_of(await client.call_tool("call_tool_write", ECHO))["code"] == "PERMISSION_DENIED"

        # An editor's save: a temporary file in the target's directory, renamed over the target.
        temp = dotfiles / ".mcphost.toml.swp"
        temp.write_text(BASE + probe, encoding="utf-8")
        temp.replace(target)
        await wait_for(lambda: len(records_of(sandbox, "config_reload")) == 2, "the reload after a rename")
        assert not (await client.call_tool("call_tool_write", ECHO)).is_error

        # The dotfile manager points the link somewhere else: the new target is followed, and saves to it apply.
        elsewhere = sandbox.root / "other-dotfiles"
        elsewhere.mkdir()
        second = elsewhere / "work.toml"
        second.write_text(BASE + "# the work machine's\n" + probe, encoding="utf-8")
        relinked = sandbox.root / "config.toml.new"
        relinked.symlink_to(second)
        relinked.replace(sandbox.config)
        await wait_for(lambda: len(records_of(sandbox, "config_reload")) == 3, "the reload after re-linking")
        second.write_text(with_write("deny", BASE + "# the work machine's\n" + probe), encoding="utf-8")
        await wait_for(lambda: len(records_of(sandbox, "config_reload")) == 4, "the reload of the new target")
        assert error_of(await client.call_tool("call_tool_write", ECHO))["code"] == "PERMISSION_DENIED"
    assert len(records_of(sandbox, "upstream_connected")) == 1, "no save restarted the upstream"


async def test_a_chain_of_links_with_relative_targets_is_followed_to_the_end(tmp_path: Path) -> None:
    (tmp_path / "home" / ".config").mkdir(parents=True)
    (tmp_path / "dotfiles" / "mcphost").mkdir(parents=True)
    real = tmp_path / "dotfiles" / "mcphost" / "config.toml"
    real.write_text(with_write("confirm", BASE), encoding="utf-8")
    middle = tmp_path / "dotfiles" / "current.toml"
    middle.symlink_to(Path("mcphost") / "config.toml")
    path = tmp_path / "home" / ".config" / "config.toml"
    path.write_text(BASE, encoding="utf-8")  # a plain file at first
    async with watching(path, path.read_bytes()) as events:
        await prove_live(path, events, with_write("ask", BASE))
        link = path.with_name(".config.toml.new")
        link.symlink_to(Path("..") / ".." / "dotfiles" / "current.toml")
        link.replace(path)  # the dotfile manager takes over
        await wait_for(lambda: events, "the switch to the link")
        events.clear()
        real.write_text(with_write("deny", BASE), encoding="utf-8")
        (event,) = await wait_for(lambda: events, "the save to the end of the chain")
    assert isinstance(event, Reloaded) and event.loaded.config.permissions.write.value == "deny"


async def test_a_loop_of_links_is_an_error_until_the_link_is_fixed(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(BASE, encoding="utf-8")
    async with watching(path, path.read_bytes()) as events:
        await prove_live(path, events, with_write("ask", BASE))
        loop = tmp_path / "loop.toml"
        loop.symlink_to("config.toml")
        looped = tmp_path / ".config.toml.new"
        looped.symlink_to("loop.toml")
        looped.replace(path)  # config.toml -> loop.toml -> config.toml
        (broken,) = await wait_for(lambda: events, "the error")
        real = tmp_path / "real.toml"
        real.write_text(with_write("deny", BASE), encoding="utf-8")
        loop.unlink()
        loop.symlink_to("real.toml")  # config.toml -> loop.toml -> real.toml
        await wait_for(lambda: len(events) == 2, "the fixed link")
    assert isinstance(broken, Rejected) and "cannot read the file" in str(broken.error)
    assert isinstance(events[1], Reloaded) and events[1].loaded.config.permissions.write.value == "deny"


# ---- changes on the way to the file, told as they happen


@pytest.fixture
def no_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """A watch that would look again only a minute later: what the tests below see, the kernel told."""
    if dirwatch._INOTIFY is None:
        pytest.skip("the kernel tells of changes on the way only through inotify (Linux)")
    monkeypatch.setattr(watcher, "PARENT_POLL_S", 60.0)


async def test_a_config_directory_renamed_and_made_again_is_followed_at_once(tmp_path: Path, no_polling: None) -> None:
    config_dir = tmp_path / "home" / ".config" / "mcphost"
    config_dir.mkdir(parents=True)
    path = config_dir / "config.toml"
    path.write_text(BASE, encoding="utf-8")
    async with watching(path, path.read_bytes()) as events:
        await prove_live(path, events, with_write("ask", BASE))
        (tmp_path / "home" / ".config").rename(tmp_path / "home" / ".config.bak")  # two levels up
        (event,) = await wait_for(lambda: events, "the config gone with its directory")
        assert isinstance(event, Missing)
        config_dir.mkdir(parents=True)
        path.write_text(with_write("deny", BASE), encoding="utf-8")
        await wait_for(lambda: len(events) == 2, "the config in the new directory")
    assert isinstance(events[1], Reloaded) and events[1].loaded.config.permissions.write.value == "deny"


async def test_a_symlinked_config_directory_re_pointed_is_followed_at_once(tmp_path: Path, no_polling: None) -> None:
    # GNU Stow's way: ~/.config/mcphost is a link to a directory in the dotfiles.
    for machine, verdict in (("home", "ask"), ("work", "deny")):
        (tmp_path / "dotfiles" / machine).mkdir(parents=True)
        (tmp_path / "dotfiles" / machine / "config.toml").write_text(with_write(verdict, BASE), encoding="utf-8")
    (tmp_path / ".config").mkdir()
    linked = tmp_path / ".config" / "mcphost"
    linked.symlink_to(Path("..") / "dotfiles" / "home")
    path = linked / "config.toml"
    async with watching(path, path.read_bytes()) as events:
        await prove_live(path, events, with_write("confirm", BASE))
        (tmp_path / "dotfiles" / "home" / "config.toml").write_text(with_write("ask", BASE), encoding="utf-8")
        await wait_for(lambda: events, "a save to the file the directory link leads to")
        events.clear()
        relinked = tmp_path / ".config" / ".mcphost.new"
        relinked.symlink_to(Path("..") / "dotfiles" / "work")
        relinked.replace(linked)
        (event,) = await wait_for(lambda: events, "the re-pointed directory link")
    assert isinstance(event, Reloaded) and event.loaded.config.permissions.write.value == "deny"


async def test_a_config_directory_made_after_the_start_is_watched_for(tmp_path: Path, no_polling: None) -> None:
    path = tmp_path / "home" / ".config" / "mcphost" / "config.toml"
    (tmp_path / "home").mkdir()
    async with watching(path, None) as events:
        await anyio.sleep(0.1)  # the watch in place, on the nearest directory there is
        path.parent.mkdir(parents=True)
        path.write_text(with_write("deny", BASE), encoding="utf-8")
        (event,) = await wait_for(lambda: events, "the new config")
    assert isinstance(event, Reloaded) and event.loaded.config.permissions.write.value == "deny"


async def test_a_watch_nobody_saves_under_leaves_no_timer_on_the_loop(tmp_path: Path) -> None:
    if dirwatch._INOTIFY is None:
        pytest.skip("without inotify the watch looks for itself once a second")
    (tmp_path / ".config").mkdir()
    (tmp_path / "dotfiles").mkdir()
    (tmp_path / "dotfiles" / "mcphost.toml").write_text(BASE, encoding="utf-8")
    path = tmp_path / ".config" / "config.toml"
    path.symlink_to(Path("..") / "dotfiles" / "mcphost.toml")
    async with watching(path, path.read_bytes()) as events:
        await prove_live(tmp_path / "dotfiles" / "mcphost.toml", events, with_write("ask", BASE))
        await anyio.sleep(0.2)  # the report settled
        assert timers_due_within(5) == []  # asleep until the kernel tells of a change


async def test_a_save_is_read_parsed_and_its_rules_compiled_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Thousands of rules take seconds to parse and compile: on the loop, every call would wait for them.
    loop_thread = threading.get_ident()
    parsed_on: list[int] = []
    parse = watcher.parse_config_bytes

    def parse_noting_the_thread(data: bytes, file: Path) -> Any:
        parsed_on.append(threading.get_ident())
        return parse(data, file)

    monkeypatch.setattr(watcher, "parse_config_bytes", parse_noting_the_thread)
    path = tmp_path / "config.toml"
    path.write_text(BASE, encoding="utf-8")
    rules = "".join(
        f'[[rules]]\ntool = "s:t{i}*"\nargs = {{ x = {{ regex = "^{i}$" }} }}\naction = "deny"\n' for i in range(3)
    )
    async with watching(path, path.read_bytes()) as events:
        await prove_live(path, events, with_write("ask", BASE) + rules)
        path.write_text(with_write("deny", BASE) + rules, encoding="utf-8")
        await wait_for(lambda: events, "the save")
    (event,) = events
    assert isinstance(event, Reloaded)
    assert "compiled_rules" in vars(event.loaded.config)  # compiled with the parse, not at the first call
    assert len(event.loaded.config.compiled_rules) == 3
    assert parsed_on and loop_thread not in parsed_on


# ---- half-written saves


@asynccontextmanager
async def watching(path: Path, initial: bytes | None) -> AsyncIterator[list[ConfigEvent]]:
    """The watcher on `path`, collecting what it reports."""
    events: list[ConfigEvent] = []
    watcher = ConfigWatcher(path, events.append, initial)
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        try:
            yield events
        finally:
            watcher.stop.set()
            tg.cancel_scope.cancel()


async def prove_live(path: Path, events: list[ConfigEvent], text: str) -> None:
    """Save once and see it reported, so that what follows happens under a watch already running."""
    path.write_text(text, encoding="utf-8")
    await wait_for(lambda: events, "the first save")
    events.clear()


def truncate(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(0)


def write_in_place(path: Path, data: bytes) -> None:
    # What a truncate-then-write editor does: same file, same inode, no rename.
    with path.open("r+b") as f:
        f.seek(0)
        f.write(data)
        f.truncate()


async def test_a_file_truncated_and_written_40ms_later_is_read_once_whole(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    first = (BASE + "[servers.a]\ncommand = 'x'\n").encode()
    path.write_bytes(first)
    async with watching(path, first) as events:
        await prove_live(path, events, with_write("ask", first.decode()))
        final = with_write("deny", first.decode()).encode()
        truncate(path)
        await anyio.sleep(0.04)  # the editor's gap between emptying the file and writing it
        write_in_place(path, final)
        await wait_for(lambda: events, "the save")
        await anyio.sleep(0.3)  # a late report of the empty file would come within this
    assert len(events) == 1, events
    (event,) = events
    assert isinstance(event, Reloaded) and list(event.loaded.config.servers) == ["a"]


async def test_a_file_written_in_two_pieces_is_read_once_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A longer quiet period than the real one, so that the gap below fits in it with room to spare on a busy machine.
    monkeypatch.setattr(watcher, "SETTLE_S", 0.3, raising=False)
    path = tmp_path / "config.toml"
    servers = "".join(f"[servers.s{i}]\ncommand = 'x'\n" for i in range(4))
    text = BASE + servers
    path.write_text(text, encoding="utf-8")
    async with watching(path, text.encode()) as events:
        await prove_live(path, events, with_write("ask", text))
        final = with_write("deny", text).encode()
        cut = final.index(b"[servers.s2]")  # a valid TOML prefix: as a config it would drop s2 and s3
        with path.open("wb") as f:
            f.write(final[:cut])
            f.flush()
            await anyio.sleep(0.1)  # a slow writer (a shell pipeline, a network file system)
            f.write(final[cut:])
        await wait_for(lambda: events, "the save")
        await anyio.sleep(0.3)
    assert len(events) == 1, events
    (event,) = events
    assert isinstance(event, Reloaded) and list(event.loaded.config.servers) == ["s0", "s1", "s2", "s3"]


async def test_a_file_left_empty_is_applied_after_a_longer_wait(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    text = BASE + "[servers.a]\ncommand = 'x'\n"
    path.write_text(text, encoding="utf-8")
    async with watching(path, text.encode()) as events:
        await prove_live(path, events, with_write("ask", text))
        started = time.monotonic()
        path.write_text("  \n", encoding="utf-8")
        (event,) = await wait_for(lambda: events, "the emptied file")
        waited = time.monotonic() - started
    assert isinstance(event, Reloaded) and event.loaded.config.servers == {}
    assert waited >= 0.5, "an emptied file is not taken at once"


async def test_deleting_the_file_is_still_reported_and_recreating_it_applies(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(BASE, encoding="utf-8")
    async with watching(path, path.read_bytes()) as events:
        await prove_live(path, events, with_write("ask", BASE))
        path.unlink()
        await wait_for(lambda: events, "the deletion")
        path.write_text("[permissions\n", encoding="utf-8")
        await wait_for(lambda: len(events) == 2, "the broken recreation")
    assert isinstance(events[0], Missing)
    assert isinstance(events[1], Rejected) and events[1].error.issues[0].line == 1


async def test_a_busy_directory_is_not_looked_through_again_at_every_change_of_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ~/.config holds every application's settings; some write there all the time.
    plans = 0
    plan_of = watcher._WatchPlan.of

    def counted(path: Path) -> watcher._WatchPlan:
        nonlocal plans
        plans += 1
        return plan_of(path)

    monkeypatch.setattr(watcher._WatchPlan, "of", counted)
    path = tmp_path / "config.toml"
    path.write_text(BASE, encoding="utf-8")
    async with watching(path, path.read_bytes()) as events:
        await prove_live(path, events, with_write("ask", BASE))
        before = plans
        for i in range(50):
            (tmp_path / f"other-{i}.json").write_text("{}", encoding="utf-8")
            await anyio.sleep(0.002)  # each its own batch of events
        looked = plans - before
        path.write_text(with_write("deny", BASE), encoding="utf-8")
        (event,) = await wait_for(lambda: events, "the save after the others")
    assert looked <= 3, f"{looked} plans for 50 changes of other files"
    assert isinstance(event, Reloaded) and event.loaded.config.permissions.write.value == "deny"


async def test_a_truncate_then_write_save_never_applies_the_empty_file_to_a_running_daemon(sandbox: Sandbox) -> None:
    probe = sandbox.probe_server()
    sandbox.write_config(BASE + probe)
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as client:
        assert not (await client.call_tool("call_tool_write", ECHO)).is_error
        answers: list[Any] = []
        done = anyio.Event()

        async def keep_calling() -> None:
            while not done.is_set():
                answers.append(await client.call_tool("call_tool_write", ECHO))

        final = (BASE + "# saved by a truncate-then-write editor\n" + probe).encode()
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_calling)
            truncate(sandbox.config)
            await anyio.sleep(0.04)
            write_in_place(sandbox.config, final)
            await wait_for(lambda: records_of(sandbox, "config_reload"), "the reload of the save")
            await anyio.sleep(0.3)
            done.set()
        reloads = records_of(sandbox, "config_reload")
        assert [r["details"]["servers_removed"] for r in reloads] == [[]], reloads
        assert reloads[0]["details"]["sha256"] is not None
        assert sandbox.config.stat().st_size == len(final)
    failed = [a for a in answers if a.is_error]
    assert answers and not failed, failed[:1]
    assert len(records_of(sandbox, "upstream_connected")) == 1, "the upstream was never stopped"
