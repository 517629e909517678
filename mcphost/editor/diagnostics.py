"""Config errors as LSP diagnostics: pure, from a ConfigError and the file's text to ranges an editor can show."""

from __future__ import annotations

from lsprotocol import types as lsp

from mcphost.config import ConfigError

SOURCE = "mcphost"


def _utf16(text: str) -> int:
    # LSP positions count UTF-16 code units by default; Python indexes code points.
    return len(text.encode("utf-16-le")) // 2


def issue_range(lines: list[str], line: int | None, column: int | None) -> lsp.Range:
    """From the issue's key (or table header) to the end of that line's content; the file's start if unknown."""
    if line is None or not 1 <= line <= len(lines):
        return lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
    text = lines[line - 1]
    start = min(max((column or 1) - 1, 0), len(text))
    end = len(text.rstrip())
    if end <= start:
        end = len(text)
    return lsp.Range(
        start=lsp.Position(line=line - 1, character=_utf16(text[:start])),
        end=lsp.Position(line=line - 1, character=_utf16(text[:end])),
    )


def config_diagnostics(error: ConfigError, text: str) -> list[lsp.Diagnostic]:
    lines = text.splitlines()
    diagnostics = []
    for issue in error.issues:
        message = f"{issue.path}: {issue.message}" if issue.path else issue.message
        diagnostics.append(
            lsp.Diagnostic(
                range=issue_range(lines, issue.line, issue.column),
                message=message + "\nThe last good config stays in force until this is fixed.",
                severity=lsp.DiagnosticSeverity.Error,
                source=SOURCE,
                code=issue.path or None,
            )
        )
    return diagnostics
