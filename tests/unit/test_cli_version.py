"""`mcphost --version`: the version, then the signature the VS Code extension checks before it launches what it
found (editor-extension/src/identity.ts), so that another program named mcphost is never taken for this one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcphost import __version__
from mcphost.cli import main

SIGNATURE = "local MCP agent host with intent checks"
IDENTITY_TS = Path(__file__).resolve().parents[2] / "editor-extension" / "src" / "identity.ts"


def test_version_names_the_version_then_the_signature(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"mcphost {__version__} ({SIGNATURE})\n"


def test_the_extension_checks_the_same_signature() -> None:
    match = re.search(r"export const VERSION_SIGNATURE = '([^']*)';", IDENTITY_TS.read_text(encoding="utf-8"))
    assert match is not None, f"no VERSION_SIGNATURE in {IDENTITY_TS}"
    assert match.group(1) == SIGNATURE


def test_python_m_mcphost_prints_it_too_in_a_narrow_terminal() -> None:
    # `mcphost.interpreter` runs `python -m mcphost --version`. argparse wraps the line to $COLUMNS; the extension
    # reads it with the whitespace folded, so wrapped or not it says the same.
    out = subprocess.run(
        [sys.executable, "-m", "mcphost", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "30"},
    ).stdout
    assert " ".join(out.split()) == f"mcphost {__version__} ({SIGNATURE})"
