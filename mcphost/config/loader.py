"""Reading config.toml: tomllib for the syntax, the pydantic models for the meaning, errors a person can act on."""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mcphost.config.models import Config
from mcphost.paths import config_path

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    path: str  # dotted key path, "" for the file as a whole
    message: str
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based

    def __str__(self) -> str:
        where = f"line {self.line}, column {self.column}: " if self.line is not None else ""
        key = f"{self.path}: " if self.path else ""
        return f"{where}{key}{self.message}"


@dataclass
class ConfigError(Exception):
    file: Path
    issues: list[ConfigIssue] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"{self.file}: invalid config ({len(self.issues)} problem{'s' if len(self.issues) != 1 else ''})"]
        lines += [f"  {issue}" for issue in self.issues]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: Config
    path: Path
    exists: bool  # False: the file is absent and the embedded default is in force


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def parse_config(text: str, file: Path) -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POSITION.search(str(exc))
        message = _TOML_POSITION.sub("", str(exc)).strip()
        line, col = (int(match.group(1)), int(match.group(2))) if match else (None, None)
        raise ConfigError(file, [ConfigIssue("", f"TOML syntax error: {message}", line, col)]) from None
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(file, [_issue(error, text) for error in exc.errors()]) from None


def _issue(error: Any, text: str) -> ConfigIssue:
    loc = tuple(str(part) for part in error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        message = f"unknown key '{loc[-1]}'"
    elif kind in ("enum", "literal_error"):
        message = f"{error['msg']} (got {error['input']!r})"
    else:
        message = str(error["msg"]).removeprefix("Value error, ")
    line, col = locate(text, loc)
    return ConfigIssue(".".join(loc), message, line, col)


def locate(text: str, loc: tuple[str, ...]) -> tuple[int | None, int | None]:
    """Best-effort position of a key path in the TOML text: the key's line, else its table's header."""
    if not loc:
        return None, None
    table: tuple[str, ...] = ()
    best: tuple[int | None, int | None] = (None, None)
    best_depth = -1
    header = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+")
    key_line = re.compile(r"^(\s*)([A-Za-z0-9_\-\"'.]+)\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if m := header.match(line):
            table = tuple(part.strip().strip("\"'") for part in m.group(1).split("."))
            depth = _common_prefix(table, loc)
            if depth == len(table) and depth > best_depth:
                best, best_depth = (number, line.index("[") + 1), depth
            continue
        if m := key_line.match(line):
            key = tuple(part.strip().strip("\"'") for part in m.group(2).split("."))
            full = table + key
            depth = _common_prefix(full, loc)
            if depth == len(full) and depth > best_depth:
                best, best_depth = (number, len(m.group(1)) + 1), depth
    return best


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def load_config(override: str | Path | None = None, *, default: Callable[[], Config] = Config) -> LoadedConfig:
    """The config in force: the file if it exists, else `default()` (the commands pass the embedded default of
    `mcphost.demo.default`, built only when no file exists). Raises ConfigError."""
    path = config_path(override)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        logger.debug("no config file at %s; using the embedded default", path)
        return LoadedConfig(default(), path, exists=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, [ConfigIssue("", f"cannot read the file: {exc}")]) from None
    return LoadedConfig(parse_config(text, path), path, exists=True)
