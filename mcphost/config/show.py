"""The config in force as `mcphost config show` prints it: every key, defaults filled in, secrets masked. A daemon
gives the same to `config show` on its editor channel (`mcphost/config`), so that the command need not load the
models when the daemon runs on the file as it is."""

from __future__ import annotations

from typing import Any

from mcphost.activity.redact import REDACTED, redact
from mcphost.config.loader import LoadedConfig


def shown_config(loaded: LoadedConfig) -> dict[str, Any]:
    """`{"path", "exists", "sha256", "config"}`: `config` with every secret masked."""
    config = redact(loaded.config.model_dump(mode="json"))
    otlp = config.get("export", {}).get("otlp")
    if otlp and otlp.get("headers"):
        # A backend's key is a credential whatever its header is called (x-honeycomb-team names no secret).
        otlp["headers"] = dict.fromkeys(otlp["headers"], REDACTED)
    return {"path": str(loaded.path), "exists": loaded.exists, "sha256": loaded.sha256, "config": config}
