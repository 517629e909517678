"""The claim one daemon holds on its config file (issue 15): one holder at a time, named by the resolved path, and
let go of when the holder's fd closes (the kernel does that when a process ends, however it ends)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mcphost import discovery

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no flock")


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MCPHOST_RUNTIME_DIR", str(tmp_path / "run"))
    path = tmp_path / "config.toml"
    path.write_text("", encoding="utf-8")
    return path


def test_one_holder_at_a_time_and_the_claim_goes_with_its_fd(config: Path) -> None:
    held = discovery.claim(config)
    assert held is not None
    try:
        # flock belongs to the open file, not the process: a second claim is refused even from here.
        assert discovery.claim(config) is None
        assert discovery.claimant(config) == os.getpid()
    finally:
        os.close(held)
    again = discovery.claim(config)
    assert again is not None
    os.close(again)


def test_two_names_for_one_file_are_one_claim_and_other_files_are_free(config: Path) -> None:
    alias = config.parent / "alias.toml"
    alias.symlink_to(config)
    held = discovery.claim(config)
    assert held is not None
    try:
        assert discovery.claim(alias) is None
        other = discovery.claim(config.parent / "other.toml")
        assert other is not None
        os.close(other)
    finally:
        os.close(held)


def test_a_pid_an_earlier_holder_left_names_no_one(config: Path) -> None:
    held = discovery.claim(config)
    assert held is not None
    os.close(held)
    lock = next((config.parent / "run").glob("serve-*.lock"))
    assert lock.stat().st_mode & 0o077 == 0
    lock.write_text("999999999\n", encoding="ascii")  # no such process
    assert discovery.claimant(config) is None
