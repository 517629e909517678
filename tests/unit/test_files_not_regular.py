"""A FIFO (or a directory, or a device) where mcphost expects one of its files: every reader and the log's writer
say what is there, at once. Opened for reading, a FIFO holds the process until something opens its other end; in
the daemon that was every call, `mcphost status` and SIGTERM too."""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcphost.activity.record import ActivityRecord
from mcphost.activity.writer import ActivityLog
from mcphost.cli.config import run_validate
from mcphost.config import ConfigError, load_config
from mcphost.config.agent_settings import SettingsError, read_settings
from mcphost.config.state import read_state
from mcphost.config.watcher import Rejected, read_config_file
from tests.helpers import give_to_another_user

WITHIN_S = 10


@contextlib.contextmanager
def fifo_at(path: Path) -> Iterator[Path]:
    """A FIFO at `path`; afterwards its other end is opened once, which lets go of a reader stuck on it (so that a
    regression fails its test instead of holding the run)."""
    os.mkfifo(path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def returns_within(action: Callable[[], Any]) -> Any:
    """What `action` returns or raises, or a failure when it has done neither within WITHIN_S."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("returned", action()))
        except BaseException as exc:
            outcome.append(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WITHIN_S)
    assert outcome, f"still blocked after {WITHIN_S} s"
    kind, value = outcome[0]
    if kind == "raised":
        raise value
    return value


def test_a_fifo_as_the_config_is_an_error_that_names_it(tmp_path: Path) -> None:
    with fifo_at(tmp_path / "config.toml") as path, pytest.raises(ConfigError) as info:
        returns_within(lambda: load_config(path))
    assert "named pipe (FIFO), not a regular file" in str(info.value)


def test_a_fifo_saved_over_a_watched_config_is_rejected_and_the_last_good_config_stays(tmp_path: Path) -> None:
    with fifo_at(tmp_path / "config.toml") as path:
        data, event = returns_within(lambda: read_config_file(path))
    assert data == b"" and isinstance(event, Rejected)
    assert "named pipe (FIFO)" in str(event.error)


def test_config_validate_says_a_fifo_is_no_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with fifo_at(tmp_path / "config.toml") as path:
        code = returns_within(lambda: run_validate(argparse.Namespace(file=str(path), config=None)))
    assert code == 1 and "named pipe (FIFO)" in capsys.readouterr().err


def test_a_fifo_as_the_state_file_is_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with fifo_at(tmp_path / "state.toml") as path:
        assert returns_within(lambda: read_state(path)) == {}
    assert "named pipe (FIFO)" in caplog.text


def test_a_fifo_as_an_agents_settings_file_is_an_error(tmp_path: Path) -> None:
    with fifo_at(tmp_path / "settings.json") as path, pytest.raises(SettingsError, match="named pipe"):
        returns_within(lambda: read_settings(path))


def test_a_device_is_no_config_either(tmp_path: Path) -> None:
    # /dev/zero would be read for ever.
    link = tmp_path / "config.toml"
    link.symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="it is a device, not a regular file"):
        returns_within(lambda: load_config(link))


def test_a_fifo_as_the_activity_log_refuses_records_and_says_what_is_there(tmp_path: Path) -> None:
    with fifo_at(tmp_path / "activity.jsonl") as path:
        log = ActivityLog(path)
        # More than a pipe holds: the writer once blocked on the first write past 64 KiB.
        for _ in range(200):
            assert returns_within(lambda: log.append(ActivityRecord(server="s", tool="t" * 1000))) is None
        log.close()
    assert log.last_error is not None and "named pipe (FIFO), not a regular file" in log.last_error
    assert "not a directory or a named pipe" in log.remedy


@pytest.mark.parametrize("planted", ["writable by everyone", "another user's"])
def test_a_config_another_user_could_rewrite_is_loaded_with_a_warning(
    tmp_path: Path, planted: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[permissions]\nwrite = "allow"\n', encoding="utf-8")
    if planted == "writable by everyone":
        path.chmod(0o666)
    else:
        give_to_another_user(path)
    assert load_config(path).exists
    assert "another user could change what your agents may do" in caplog.text, caplog.text


def test_a_config_of_the_users_own_group_is_loaded_without_a_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config.toml"
    path.write_text("", encoding="utf-8")
    path.chmod(0o664)  # umask 002, as on systems that give each user a group of their own
    load_config(path)
    assert "another user" not in caplog.text
