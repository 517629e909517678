"""Remembered approvals: a person's "allow for this session" or "always allow" for one server:tool and variant.

A grant is bound to a fingerprint of the tool's definition (description, input schema, the annotations mcphost
acts on): when the server changes any of them, the grant no longer matches and is dropped, so an approval given
to a harmless tool never carries over to what it became. Session grants live in memory for the daemon's life;
`always` grants live in the state file, where `mcphost grants revoke` (another process) may remove them, so the
store rereads the file whenever it changed on disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcphost.activity.record import utc_now
from mcphost.approval.prompt import GrantInfo
from mcphost.config.state import read_state, state_path, write_state

logger = logging.getLogger(__name__)

Scope = Literal["session", "always"]


def tool_fingerprint(description: str, input_schema: dict[str, Any], annotations: dict[str, Any]) -> str:
    canonical = json.dumps(
        {"description": description, "inputSchema": input_schema, "annotations": annotations},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Grant:
    scope: Scope
    server: str
    tool: str
    variant: str
    fingerprint: str
    granted_at: str = field(default_factory=utc_now)
    session_id: str | None = None  # session grants only
    approver: str | None = None

    @property
    def id(self) -> str:
        key = f"{self.scope}|{self.server}|{self.tool}|{self.variant}|{self.session_id or ''}"
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:10]

    @property
    def qualified(self) -> str:
        return f"{self.server}:{self.tool}"

    def covers(self, session_id: str | None, server: str, tool: str, variant: str) -> bool:
        """Same server:tool and variant, and for a session grant the same agent session (fingerprint aside)."""
        if (self.server, self.tool, self.variant) != (server, tool, variant):
            return False
        return self.scope == "always" or (session_id is not None and self.session_id == session_id)

    def info(self) -> GrantInfo:
        return GrantInfo(
            id=self.id,
            scope=self.scope,
            server=self.server,
            tool=self.tool,
            variant=self.variant,
            granted_at=self.granted_at,
            session_id=self.session_id,
            approver=self.approver,
        )

    def to_state(self) -> dict[str, Any]:
        entry = {
            "server": self.server,
            "tool": self.tool,
            "variant": self.variant,
            "fingerprint": self.fingerprint,
            "granted_at": self.granted_at,
        }
        if self.approver:
            entry["approver"] = self.approver
        return entry

    @classmethod
    def from_state(cls, entry: Any) -> Grant | None:
        if not isinstance(entry, dict):
            return None
        try:
            return cls(
                scope="always",
                server=str(entry["server"]),
                tool=str(entry["tool"]),
                variant=str(entry["variant"]),
                fingerprint=str(entry["fingerprint"]),
                granted_at=str(entry.get("granted_at", "")),
                approver=entry.get("approver"),
            )
        except KeyError:
            return None


@dataclass(frozen=True, slots=True)
class Lookup:
    grant: Grant | None  # the grant that lets the call through
    stale: list[Grant]  # grants for this call whose tool changed since; the caller drops them


def find_grant(grants: list[Grant], session_id: str | None, server: str, tool: str, variant: str, fp: str) -> Lookup:
    """Pure: the grant covering this call, preferring a session grant, and the stale ones in the way."""
    found: Grant | None = None
    stale: list[Grant] = []
    for grant in grants:
        if not grant.covers(session_id, server, tool, variant):
            continue
        if grant.fingerprint != fp:
            stale.append(grant)
        elif found is None or (found.scope == "always" and grant.scope == "session"):
            found = grant
    return Lookup(found, stale)


def select(grants: list[Grant], ids: list[str], tool: str | None, everything: bool) -> list[Grant]:
    """Pure: which grants a revoke names."""
    if everything:
        return list(grants)
    wanted = set(ids)
    return [g for g in grants if g.id in wanted or (tool is not None and g.qualified == tool)]


class GrantStore:
    """Session grants in memory, `always` grants in the state file (shared with `mcphost grants`)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_path()
        self._session: list[Grant] = []
        self._always: list[Grant] = []
        self._signature: tuple[int, int, int] | None = None

    # ---- the state file

    def _file_signature(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _refresh(self) -> None:
        signature = self._file_signature()
        if signature == self._signature:
            return
        self._signature = signature
        self._always = read_always(self.path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with lock_state(self.path):
            self._signature = None  # another process may have written since we last looked
            self._refresh()
            yield

    def _save_always(self) -> None:
        state = read_state(self.path)
        state["grants"] = [g.to_state() for g in self._always]
        if not state["grants"]:
            del state["grants"]
        write_state(state, self.path)
        self._signature = self._file_signature()

    # ---- what the broker and the channel use

    def all(self) -> list[Grant]:
        self._refresh()
        return [*self._session, *self._always]

    def lookup(self, session_id: str | None, server: str, tool: str, variant: str, fp: str) -> Lookup:
        found = find_grant(self.all(), session_id, server, tool, variant, fp)
        if found.stale:
            self.remove(found.stale)
        return found

    def add(self, grant: Grant) -> None:
        if grant.scope == "session":
            self._session = [g for g in self._session if g.id != grant.id] + [grant]
            return
        with self._locked():
            self._always = [g for g in self._always if g.id != grant.id] + [grant]
            self._save_always()

    def remove(self, grants: list[Grant]) -> list[Grant]:
        ids = {g.id for g in grants}
        removed = [g for g in self._session if g.id in ids]
        self._session = [g for g in self._session if g.id not in ids]
        if any(g.scope == "always" for g in grants):
            with self._locked():
                removed += [g for g in self._always if g.id in ids]
                kept = [g for g in self._always if g.id not in ids]
                if len(kept) != len(self._always):
                    self._always = kept
                    self._save_always()
        return removed

    def revoke(self, ids: list[str], tool: str | None = None, everything: bool = False) -> list[Grant]:
        return self.remove(select(self.all(), ids, tool, everything))


def read_always(path: Path) -> list[Grant]:
    grants: list[Grant] = []
    for entry in read_state(path).get("grants", []):
        grant = Grant.from_state(entry)
        if grant is None:
            logger.warning("ignoring a malformed grant in %s: %r", path, entry)
        else:
            grants.append(grant)
    return grants


@contextlib.contextmanager
def lock_state(path: Path) -> Iterator[None]:
    """One read-modify-write of the state file at a time, across processes (the daemon, `mcphost grants`)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def revoke_in_file(path: Path, ids: list[str], tool: str | None, everything: bool) -> list[Grant]:
    """`mcphost grants revoke` with no daemon to ask: edit the state file directly."""
    store = GrantStore(path)
    return store.revoke(ids, tool, everything)
