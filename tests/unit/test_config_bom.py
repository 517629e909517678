"""A config saved with a byte order mark (Notepad, "UTF-8 with BOM"), and what a config error carries for those
who show it."""

from __future__ import annotations

import codecs
import hashlib
import os
from pathlib import Path

import pytest

from mcphost.config import ConfigError, load_config, parse_config
from mcphost.config.loader import parse_config_bytes
from mcphost.config.watcher import Reloaded, read_config_file

DENY = '[permissions]\nwrite = "deny"\n'


def test_a_config_saved_with_a_utf8_byte_order_mark_is_read_by_the_loader_and_the_watch_alike(tmp_path: Path) -> None:
    # tomllib refuses the mark as an "Invalid statement" at line 1, column 1, and an editor shows nothing there.
    path = tmp_path / "config.toml"
    data = codecs.BOM_UTF8 + DENY.encode()
    path.write_bytes(data)
    loaded = load_config(path)
    assert loaded.config.permissions.write.value == "deny"
    assert loaded.sha256 == hashlib.sha256(data).hexdigest()  # of the file as it is, as `config show` compares
    _, event = read_config_file(path)
    assert isinstance(event, Reloaded) and event.loaded.config.permissions.write.value == "deny"
    assert event.sha256 == loaded.sha256
    assert parse_config("\ufeff" + DENY, path).permissions.write.value == "deny"


def test_positions_after_a_byte_order_mark_count_as_an_editor_does(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config_bytes(codecs.BOM_UTF8 + b"bogus = 1\n", tmp_path / "config.toml")
    [issue] = raised.value.issues
    assert (issue.line, issue.column) == (1, 1) and "unknown key 'bogus'" in issue.message


def test_a_utf16_file_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"it starts with a UTF-16 byte order mark\); save it as UTF-8"):
        parse_config_bytes(DENY.encode("utf-16"), tmp_path / "config.toml")


def test_a_config_error_carries_the_text_and_the_version_it_was_found_in(tmp_path: Path) -> None:
    # What an editor's diagnostics are placed in, without anyone opening the file again (a FIFO there held the daemon).
    data = b"[permissions\n"
    with pytest.raises(ConfigError) as raised:
        parse_config_bytes(data, tmp_path / "config.toml")
    assert raised.value.text == "[permissions\n"
    assert raised.value.sha256 == hashlib.sha256(data).hexdigest()
    path = tmp_path / "fifo.toml"
    os.mkfifo(path)
    with pytest.raises(ConfigError, match="named pipe") as unreadable:
        load_config(path)
    assert unreadable.value.text == ""
