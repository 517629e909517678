"""Fixtures shared by every test; the plumbing itself lives in tests/helpers.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Sandbox


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path)
    for key, value in box.env().items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)
    yield box
