"""Where mcphost keeps its files: config, data (activity log, demo database), runtime (discovery)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "mcphost"


def config_path(override: str | os.PathLike[str] | None = None) -> Path:
    """`--config PATH` wins, then `$MCPHOST_CONFIG`, then the platform's user config dir."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get("MCPHOST_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def data_dir() -> Path:
    env = os.environ.get("MCPHOST_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME))


def runtime_dir() -> Path:
    env = os.environ.get("MCPHOST_RUNTIME_DIR")
    if env:
        return Path(env).expanduser()
    # platformdirs warns (and falls back to /tmp/runtime-UID) when XDG_RUNTIME_DIR is unset; the fallback is fine.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir(APP_NAME))


def activity_log_path() -> Path:
    return data_dir() / "activity.jsonl"


def ensure_private_dir(path: Path) -> Path:
    """Create a directory readable only by the user (it holds the audit log, tokens, the demo database)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
