"""What changed between two configs, as plain data: which keys, which servers to add, remove or restart."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcphost.config.models import Config, launch_spec


@dataclass(frozen=True, slots=True)
class ConfigDiff:
    keys: list[str] = field(default_factory=list)  # dotted paths whose value changed, added or removed
    servers_added: list[str] = field(default_factory=list)
    servers_removed: list[str] = field(default_factory=list)
    servers_restarted: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.keys

    def to_dict(self) -> dict[str, Any]:
        return {
            "changed": self.keys,
            "servers_added": self.servers_added,
            "servers_removed": self.servers_removed,
            "servers_restarted": self.servers_restarted,
        }

    def summary(self) -> str:
        parts = []
        if self.servers_added:
            parts.append(f"servers added: {', '.join(self.servers_added)}")
        if self.servers_removed:
            parts.append(f"removed: {', '.join(self.servers_removed)}")
        if self.servers_restarted:
            parts.append(f"restarted: {', '.join(self.servers_restarted)}")
        others = [k for k in self.keys if not k.startswith("servers.")]
        if others:
            parts.append(f"changed: {', '.join(others)}")
        return "; ".join(parts) or "no change in effect"


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def diff_configs(old: Config, new: Config) -> ConfigDiff:
    """Compare the effective configs (defaults filled in), so adding a key with its default value is no change;
    and servers by their launch spec, so a server that would start the same way is no change either (the todo
    server of the embedded default and of the file `config init` writes, say)."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _flatten(old.model_dump(mode="json", exclude={"servers"}), "", before)
    _flatten(new.model_dump(mode="json", exclude={"servers"}), "", after)
    # Server by server: a name may hold dots, so one server's keys cannot be told from another's by prefix.
    for name in sorted(old.servers.keys() | new.servers.keys()):
        was, now = old.servers.get(name), new.servers.get(name)
        if was is not None and now is not None and launch_spec(was) == launch_spec(now):
            continue
        if was is not None:
            _flatten(was.model_dump(mode="json"), f"servers.{name}", before)
        if now is not None:
            _flatten(now.model_dump(mode="json"), f"servers.{name}", after)
    keys = sorted(k for k in before.keys() | after.keys() if before.get(k, _MISSING) != after.get(k, _MISSING))
    old_servers, new_servers = old.enabled_servers(), new.enabled_servers()
    kept = old_servers.keys() & new_servers.keys()
    return ConfigDiff(
        keys=keys,
        servers_added=sorted(new_servers.keys() - old_servers.keys()),
        servers_removed=sorted(old_servers.keys() - new_servers.keys()),
        servers_restarted=sorted(n for n in kept if launch_spec(old_servers[n]) != launch_spec(new_servers[n])),
    )


_MISSING = object()
