"""Fixtures shared by every test; the plumbing itself lives in tests/helpers.py."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Sandbox

# pytest-xdist's workers are given COLUMNS=80 and LINES=24 for their own terminal writer, and the CLI processes the
# tests start inherit the environment: their tables would be cut to 80 columns, where a serial run's (a pipe, no
# COLUMNS) keep every cell whole, as a script reading them wants.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# A test that forgets its sandbox must not read the person's config, attach to their daemon or write to their
# activity log: every path mcphost takes from the environment points at an empty directory of this run's own.
_NOWHERE = Path(tempfile.mkdtemp(prefix="mcphost-tests-"))
os.environ["MCPHOST_CONFIG"] = str(_NOWHERE / "config.toml")
os.environ["MCPHOST_DATA_DIR"] = str(_NOWHERE / "data")
os.environ["MCPHOST_RUNTIME_DIR"] = str(_NOWHERE / "run")


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path)
    for key, value in box.env().items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)
    yield box
