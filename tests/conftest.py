"""Fixtures shared by every test; the plumbing itself lives in tests/helpers.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Sandbox

# pytest-xdist's workers are given COLUMNS=80 and LINES=24 for their own terminal writer, and the CLI processes the
# tests start inherit the environment: their tables would be cut to 80 columns, where a serial run's (a pipe, no
# COLUMNS) keep every cell whole, as a script reading them wants.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path)
    for key, value in box.env().items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)
    yield box
