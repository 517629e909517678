"""Reading config.toml: tomllib for the syntax, the pydantic models for the meaning, errors a person can act on."""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mcphost.config.models import Config
from mcphost.paths import config_path, read_regular_as_found, writable_by_others

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    path: str  # dotted key path, "" for the file as a whole
    message: str
    # 1-based. Always set: an editor or a person needs a place to go, so the file's start stands in when the text
    # gives no better one (an unreadable file, a key path found nowhere in the text).
    line: int = 1
    column: int = 1

    def __str__(self) -> str:
        key = f"{self.path}: " if self.path else ""
        return f"line {self.line}, column {self.column}: {key}{self.message}"


@dataclass
class ConfigError(Exception):
    file: Path
    issues: list[ConfigIssue] = field(default_factory=list)
    # The text the issues were found in ("" for a file that could not be read; None: not known): what an editor's
    # diagnostics place the issues in. Carried, so that nothing opens the file again to show them (a daemon that did,
    # on its event loop, hung for good on a named pipe put in the file's place), and it is the text as it was read.
    text: str | None = field(default=None, repr=False, compare=False)
    # SHA-256 of the bytes read (None: none were): which version of the file the errors are about.
    sha256: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        lines = [f"{self.file}: invalid config ({len(self.issues)} problem{'s' if len(self.issues) != 1 else ''})"]
        lines += [f"  {issue}" for issue in self.issues]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: Config
    path: Path
    exists: bool  # False: the file is absent and the embedded default is in force
    # SHA-256 of the bytes it was read from (None: no file): which version of the file is in force, so that a command
    # can tell whether a daemon runs on the file as it is now.
    sha256: str | None = None


# Arrays and tables inside each other past this depth are no config a person wrote. Refused, with where, before they
# reach what walks a value level by level: tomllib gives up near 490 levels (a RecursionError, which came out as a
# traceback from `config validate` and a failed reload), tomli-w in `config show`, the rules' comparisons.
MAX_NESTING = 64

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)")
# tomllib says this, without a line, when the text ends inside a construct: a file cut short, or saved half-way.
_TOML_AT_END = re.compile(r"\s*\(at end of document\)")


def decode_config(data: bytes, file: Path) -> str:
    """The file's bytes as text; a file that is not UTF-8 is a ConfigError at its first bad byte. A UTF-8 byte order
    mark at the start is taken off: Windows editors (Notepad before 2019, "UTF-8 with BOM" elsewhere) write one, TOML
    has no place for it (tomllib calls it an "Invalid statement"), and an editor shows nothing there to fix."""
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Everything before the first bad byte decodes, so the position counts characters as an editor does.
        line, column = _position_after(data[: exc.start].decode("utf-8", "replace"))
        utf16 = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
        what = "; it starts with a UTF-16 byte order mark" if utf16 else ""
        message = f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x}: {exc.reason}{what}); save it as UTF-8"
        issue = ConfigIssue("", message, line, column)
        raise ConfigError(file, [issue], text=data.decode("utf-8", "replace")) from None


def parse_config(text: str, file: Path) -> Config:
    """The config `text` holds (a byte order mark at its start aside, as `decode_config` takes it off); raises
    ConfigError, carrying `text`."""
    text = text.removeprefix("\ufeff")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, [_syntax_issue(str(exc), text)], text=text) from None
    except RecursionError:
        offset = _brackets_nest_past(text, MAX_NESTING)
        line, column = (1, 1) if offset is None else _position_after(text[:offset])
        raise ConfigError(file, [ConfigIssue("", _TOO_DEEP, line, column)], text=text) from None
    deep = _nested_past(data, MAX_NESTING)
    if deep is not None:
        shown = ".".join(deep[:8]) + (".…" if len(deep) > 8 else "")  # sixty-odd ".0"s tell no one more
        raise ConfigError(file, [ConfigIssue(shown, _TOO_DEEP, *locate(text, deep))], text=text)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(file, [_issue(error, text) for error in exc.errors()], text=text) from None


def parse_config_bytes(data: bytes, file: Path) -> Config:
    """The config in the file's bytes; raises ConfigError, carrying the text and the bytes' SHA-256."""
    try:
        return parse_config(decode_config(data, file), file)
    except ConfigError as exc:
        exc.sha256 = hashlib.sha256(data).hexdigest()
        raise


def unreadable(file: Path, reason: str) -> ConfigError:
    """The error for a config file that could not be read: no text, so its diagnostics stand at the file's start."""
    return ConfigError(file, [ConfigIssue("", f"cannot read the file: {reason}")], text="")


def _syntax_issue(error: str, text: str) -> ConfigIssue:
    if match := _TOML_POSITION.search(error):
        line, column = int(match.group(1)), int(match.group(2))
    else:
        line, column = _position_after(text)
    message = _TOML_AT_END.sub("", _TOML_POSITION.sub("", error)).strip()
    if _TOML_AT_END.search(error):
        message += " (the file ends here: was it saved completely?)"
    return ConfigIssue("", f"TOML syntax error: {message}", line, column)


_TOO_DEEP = f"arrays and tables nested more than {MAX_NESTING} levels deep; a config needs far fewer"


def _nested_past(data: dict[str, Any], limit: int) -> tuple[str, ...] | None:
    """The key path of the first table or array (in the file's order) that lies more than `limit` levels deep."""
    stack: list[tuple[tuple[str, ...], Any, int]] = [((), data, 0)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, dict):
            children = [(str(key), item) for key, item in value.items()]
        elif isinstance(value, list):
            children = [(str(index), item) for index, item in enumerate(value)]
        else:
            continue
        if depth > limit:
            return path
        stack.extend(((*path, key), item, depth + 1) for key, item in reversed(children))
    return None


def _brackets_nest_past(text: str, limit: int) -> int | None:
    """Where in `text` brackets and braces first nest more than `limit` deep (an offset), those in strings and
    comments aside: the place to show for a file too deep for tomllib to read at all."""
    depth, i, end = 0, 0, len(text)
    while i < end:
        char = text[i]
        if char in "\"'":
            quote = char * 3 if text.startswith(char * 3, i) else char
            i += len(quote)
            while i < end and not text.startswith(quote, i):
                if len(quote) == 1 and text[i] == "\n":
                    break  # a one-line string left open ends with its line
                i += 2 if char == '"' and text[i] == "\\" else 1
            i += len(quote)
        elif char == "#":
            newline = text.find("\n", i)
            i = end if newline < 0 else newline
        else:
            if char in "[{":
                depth += 1
                if depth > limit:
                    return i
            elif char in "]}":
                depth = max(depth - 1, 0)
            i += 1
    return None


def _position_after(text: str) -> tuple[int, int]:
    """Line and column just past the end of `text`; a final newline ends the last line rather than starting one."""
    lines = text.removesuffix("\n").split("\n")
    return len(lines), len(lines[-1]) + 1


# What a strict key wanted, said in TOML's words.
_EXPECTED = {
    "bool_type": "must be true or false (a TOML boolean, without quotes)",
    "int_type": "must be an integer (a whole number, without quotes)",
    "float_type": "must be a number (without quotes)",
    "string_type": "must be a string (in quotes)",
    "list_type": "must be an array",
    "dict_type": "must be a table",
    "model_type": "must be a table",
}


def _issue(error: Any, text: str) -> ConfigIssue:
    loc = tuple(str(part) for part in error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        message = f"unknown key '{loc[-1]}'"
    elif kind in ("enum", "literal_error"):
        message = f"{error['msg']} (got {error['input']!r})"
    elif kind in _EXPECTED:
        message = f"{_EXPECTED[kind]}, got {_toml_value(error['input'])}"
    else:
        message = str(error["msg"]).removeprefix("Value error, ")
    line, col = locate(text, loc)
    return ConfigIssue(".".join(loc), message, line, col)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:59] + "…"
        return f"the string {json.dumps(shown, ensure_ascii=False)}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


_BARE_KEY = r"[A-Za-z0-9_-]+"
_BASIC_KEY = r'"(?:[^"\\]|\\.)*"'
_LITERAL_KEY = r"'[^']*'"
_KEY_PART = rf"{_BARE_KEY}|{_BASIC_KEY}|{_LITERAL_KEY}"
_DOTTED_KEY = rf"\s*(?:{_KEY_PART})\s*(?:\.\s*(?:{_KEY_PART})\s*)*"
_HEADER = re.compile(rf"^\s*(\[\[?)({_DOTTED_KEY})\]")
_KEY_LINE = re.compile(rf"^(\s*)({_DOTTED_KEY})=")


def locate(text: str, loc: tuple[str, ...]) -> tuple[int, int]:
    """Best-effort position of a key path in the TOML text: the line that defines the deepest part of it (a key,
    an inline table holding it, its table's header, or the first line inside it); the file's start if none does."""
    best, best_depth = (1, 1), 0
    table: tuple[str, ...] = ()
    arrays: dict[tuple[str, ...], int] = {}  # array-of-tables path -> how many of its tables so far
    for number, line in enumerate(text.split("\n"), start=1):
        if m := _HEADER.match(line):
            table = _table_path(_key_parts(m.group(2)), m.group(1) == "[[", arrays)
            path, column = table, m.start(1) + 1
        elif m := _KEY_LINE.match(line):
            path, column = table + _key_parts(m.group(2)), len(m.group(1)) + 1
        else:
            continue
        depth = _common_prefix(path, loc)
        # The line holds a part of the path (a table or key on the way to it), or lies inside it.
        if (depth == len(path) or depth == len(loc)) and depth > best_depth:
            best, best_depth = (number, column), depth
    return best


def _key_parts(key: str) -> tuple[str, ...]:
    parts = []
    for m in re.finditer(_KEY_PART, key):
        part = m.group(0)
        if part.startswith('"'):
            try:
                part = json.loads(part)
            except json.JSONDecodeError:
                part = part[1:-1]
        elif part.startswith("'"):
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


def _table_path(parts: tuple[str, ...], is_array: bool, arrays: dict[tuple[str, ...], int]) -> tuple[str, ...]:
    """The path pydantic reports for a table header: each array of tables on the way adds its current index."""
    path: tuple[str, ...] = ()
    for i, part in enumerate(parts):
        path += (part,)
        last = i == len(parts) - 1
        if last and is_array:
            arrays[path] = arrays.get(path, 0) + 1
        if path in arrays:
            path += (str(arrays[path] - 1),)
    return path


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def dangling_link(path: Path) -> str | None:
    """Why `path`, which cannot be opened as there is no such file, is no missing config all the same: a symlink
    whose target is gone (a dotfiles checkout moved or not mounted). Read as "no config", it put the built-in
    default in force in place of the person's own policy, without a word. None for a path that is simply absent."""
    for link in (path, *path.parents):  # the config's own directory may be the link (a dotfiles checkout)
        try:
            target = link.readlink()
        except OSError:
            continue
        if not link.exists():
            named = "it is" if link == path else f"{link} is"
            return f"{named} a symlink to {target}, which does not exist (restore it, or point the link at the config)"
    return None


def load_config(override: str | Path | None = None, *, default: Callable[[], Config] = Config) -> LoadedConfig:
    """The config in force: the file if it exists, else `default()`, built only when no file exists (the hosts,
    `serve` and `mcp`, pass `mcphost.config.starter.embedded_default`, what `config init` writes; other commands
    `mcphost.demo.default`'s). Raises ConfigError."""
    path = config_path(override)
    try:
        data, found = read_regular_as_found(path)
    except FileNotFoundError:
        dangling = dangling_link(path)
        if dangling is not None:
            raise ConfigError(path, [ConfigIssue("", dangling)], text="") from None
        logger.debug("no config file at %s; the built-in default is in force", path)
        return LoadedConfig(default(), path, exists=False)
    except OSError as exc:
        raise unreadable(path, str(exc.strerror or exc)) from None
    _warn_if_others_can_change(path, found)
    return LoadedConfig(parse_config_bytes(data, path), path, exists=True, sha256=hashlib.sha256(data).hexdigest())


def _warn_if_others_can_change(path: Path, found: os.stat_result) -> None:
    """Say so when another user could rewrite the config: the policy of what agents may do would be theirs to set.
    Said, not refused: a shared machine is the person's to judge (and a group of one, as umask 002 gives, is fine)."""
    problem = writable_by_others(found, group=False)
    if problem is not None:
        logger.warning(
            "%s: %s; another user could change what your agents may do (chmod 600 %s, and own it)", path, problem, path
        )
