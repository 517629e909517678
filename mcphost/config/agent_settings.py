"""mcphost's hook entry in an agent's own settings file: where each agent reads its hooks, and how the entry is
merged in and taken out again. The merge is pure (a dict in, a dict out); the file is changed only when the entry
changes, atomically, with the previous content kept beside it, and never when the file cannot be read as JSON.

Formats and locations: tests/fixtures/hooks/README.md (§1.1 Claude Code, §2.1-2.2 VS Code, §3.1 Codex).
"""

from __future__ import annotations

import copy
import json
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcphost.config.state import write_atomically
from mcphost.paths import read_regular

# Seconds an agent waits for the hook: long enough for a person to answer an editor prompt (VS Code's own default,
# 30 s, would cut the prompt short and let the call through).
HOOK_TIMEOUT = 600
BACKUP_SUFFIX = ".mcphost-backup"


class SettingsError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class HookTarget:
    agent: str
    scope: str  # user | project
    path: Path
    events: tuple[str, ...]
    grouped: bool  # Claude-style {"matcher", "hooks": [...]} groups, else VS Code's flat list of commands


def hook_target(agent: str, scope: str, home: Path, project: Path) -> HookTarget:
    if agent == "claude-code":
        base = home if scope == "user" else project
        return HookTarget(agent, scope, base / ".claude" / "settings.json", ("PreToolUse",), grouped=True)
    if agent == "vscode":
        # VS Code reads every *.json in these folders: a file of mcphost's own, merged all the same.
        folder = home / ".copilot" / "hooks" if scope == "user" else project / ".github" / "hooks"
        return HookTarget(agent, scope, folder / "mcphost.json", ("PreToolUse",), grouped=False)
    if agent == "codex":
        # Codex's PreToolUse can only deny; when it then asks for approval, PermissionRequest takes the answer.
        base = home if scope == "user" else project
        return HookTarget(agent, scope, base / ".codex" / "hooks.json", ("PreToolUse", "PermissionRequest"), True)
    raise SettingsError(f"unknown agent {agent!r}: claude-code, vscode or codex")


def is_ours(handler: Any, command: str) -> bool:
    return isinstance(handler, dict) and handler.get("command") == command


def any_mcphost(agent: str) -> Callable[[Any], bool]:
    """A handler that runs some mcphost's hook for `agent`: one installed from another path is mcphost's too."""

    def ours(handler: Any) -> bool:
        command = handler.get("command") if isinstance(handler, dict) else None
        return isinstance(command, str) and "mcphost" in command and command.endswith(f" hook --agent {agent}")

    return ours


def merge_hook(settings: dict[str, Any], target: HookTarget, command: str) -> dict[str, Any]:
    """`settings` with mcphost's hook for every event of `target`, everything else kept as it was."""
    merged = copy.deepcopy(settings)
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError(f'"hooks" in {target.path} is not an object; fix it by hand, mcphost will not guess')
    handler = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}
    for event in target.events:
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise SettingsError(f'"hooks.{event}" in {target.path} is not a list; fix it by hand')
        if any(_holds(entry, command) for entry in entries):
            continue
        entries.append({"hooks": [handler]} if target.grouped else handler)
    return merged


def remove_hook(settings: dict[str, Any], target: HookTarget, command: str | Callable[[Any], bool]) -> dict[str, Any]:
    """`settings` without mcphost's hook: exactly the handlers with its command (or that `command` picks), and the
    groups and event lists left empty by their removal."""
    ours = command if callable(command) else lambda handler: is_ours(handler, command)
    merged = copy.deepcopy(settings)
    hooks = merged.get("hooks")
    if not isinstance(hooks, dict):
        return merged
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept = []
        for entry in entries:
            if ours(entry):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("hooks"), list) and any(map(ours, entry["hooks"])):
                entry["hooks"] = [h for h in entry["hooks"] if not ours(h)]
                if not entry["hooks"]:
                    continue
            kept.append(entry)
        if kept:
            hooks[event] = kept
        elif entries:
            del hooks[event]
    if not hooks:
        del merged["hooks"]
    return merged


def _holds(entry: Any, command: str) -> bool:
    if is_ours(entry, command):
        return True
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("hooks"), list)
        and any(is_ours(h, command) for h in entry["hooks"])
    )


def read_settings(path: Path) -> dict[str, Any]:
    try:
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return {}
    try:
        settings = json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = exc if isinstance(exc, ValueError) else "nested too deep to read"
        raise SettingsError(f"{path} is not valid JSON ({why}); fix it first, mcphost will not overwrite it") from None
    if not isinstance(settings, dict):
        raise SettingsError(f"{path} does not hold a JSON object; fix it first, mcphost will not overwrite it")
    return settings


@dataclass(frozen=True, slots=True)
class Change:
    path: Path
    changed: bool
    backup: Path | None = None


def apply(target: HookTarget, command: str | Callable[[Any], bool], *, install: bool) -> Change:
    """Install or uninstall mcphost's hook in `target`'s file. A symlinked file is changed where it points; the
    previous content is kept as `<file>.mcphost-backup`."""
    path = target.path.resolve() if target.path.is_symlink() else target.path
    before = read_settings(path)
    if install:
        assert isinstance(command, str)
        after = merge_hook(before, target, command)
    else:
        after = remove_hook(before, target, command)
    if after == before:
        return Change(path, False)
    backup = None
    mode = 0o600
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        shutil.copy2(path, backup)
    elif not install:
        return Change(path, False)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not after and target.agent == "vscode" and not install:
        path.unlink()  # the file was mcphost's own, and nothing else is left in it
        return Change(path, True, backup)
    write_atomically(path, (json.dumps(after, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), mode)
    return Change(path, True, backup)
