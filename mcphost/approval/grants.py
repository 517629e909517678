"""Remembered approvals: a person's "allow for this session" or "always allow" for one server:tool and variant,
for any arguments, for exactly the arguments they saw, or for arguments matching globs they confirmed.

A grant is bound to a fingerprint of the tool's definition (description, input schema, the annotations mcphost
acts on): when the server changes any of them, the grant no longer matches and is dropped, so an approval given
to a harmless tool never carries over to what it became. Session grants live in memory for the daemon's life;
`always` grants live in the state file, where `mcphost grants revoke` (another process) may remove them, so the
store rereads the file whenever it changed on disk.

A grant for exact arguments keeps no argument on disk: only a salted digest of them (and, for listing, the start of
their redacted JSON), so the state file never holds a secret an agent passed.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcphost.activity.record import utc_now
from mcphost.activity.redact import valid_text
from mcphost.activity.writer import LockHeld, flock_within
from mcphost.approval.prompt import GrantInfo, GrantMatch
from mcphost.config.state import read_state, state_path, write_state
from mcphost.policy import ArgCondition, ConditionKind

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


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)  # one JSON number, however it was written (bool is no float: true stays true)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def arguments_digest(arguments: Any, salt: str) -> str:
    """A salted digest of exact argument values (JSON values: 1 and 1.0 are the same number, true is not 1)."""
    canonical = json.dumps(
        _canonical(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hmac.new(salt.encode("ascii"), canonical.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def pattern_problem(pattern: Any) -> str | None:
    """Why a pattern a person confirmed cannot be a grant, or None: argument name -> glob, at least one."""
    if not isinstance(pattern, dict) or not pattern:
        return "a pattern grant needs at least one argument and its glob"
    for name, glob in pattern.items():
        if not isinstance(name, str) or not name or not isinstance(glob, str) or not glob:
            return "a pattern maps argument names to non-empty globs"
        if len(name) > 200 or len(glob) > 1000:
            return "a pattern's names and globs are at most 200 and 1000 characters"
        if not valid_text(name) or not valid_text(glob):
            # No state file could keep it: remembered anyway, it was in force and on record nowhere.
            return 'a pattern\'s names and globs are text (not a lone UTF-16 surrogate such as "\\udfff")'
    return None


def pattern_matches(pattern: dict[str, str], arguments: dict[str, Any]) -> bool:
    """Every named argument is present, a string, and matches its glob (the rules' `glob`: whole-string fnmatch)."""
    for name, glob in pattern.items():
        given = arguments.get(name)
        if not isinstance(given, str) or not ArgCondition.of(ConditionKind.GLOB, glob).holds(given, str):
            return False
    return True


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
    match: GrantMatch = GrantMatch.TOOL
    pattern: dict[str, str] | None = None  # match = pattern
    digest: str | None = None  # match = arguments: arguments_digest(arguments, salt)
    salt: str | None = None
    arguments_preview: str | None = None  # match = arguments: the start of their redacted JSON, for listings

    @property
    def id(self) -> str:
        narrowed = ""
        if self.match is GrantMatch.PATTERN:
            narrowed = "|pattern|" + json.dumps(self.pattern, sort_keys=True)
        elif self.match is GrantMatch.ARGUMENTS:
            narrowed = f"|arguments|{self.digest}"
        key = f"{self.scope}|{self.server}|{self.tool}|{self.variant}|{self.session_id or ''}{narrowed}"
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:10]

    @property
    def qualified(self) -> str:
        return f"{self.server}:{self.tool}"

    def covers(self, session_id: str | None, server: str, tool: str, variant: str) -> bool:
        """Same server:tool and variant, and for a session grant the same agent session (fingerprint and arguments
        aside: `find_grant` tells a stale grant from one that does not cover these arguments)."""
        if (self.server, self.tool, self.variant) != (server, tool, variant):
            return False
        return self.scope == "always" or (session_id is not None and self.session_id == session_id)

    def covers_arguments(self, arguments: dict[str, Any]) -> bool:
        if self.match is GrantMatch.PATTERN:
            return self.pattern is not None and pattern_matches(self.pattern, arguments)
        if self.match is GrantMatch.ARGUMENTS:
            return (
                self.digest is not None
                and self.salt is not None
                and hmac.compare_digest(arguments_digest(arguments, self.salt), self.digest)
            )
        return True

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
            match=self.match,
            pattern=self.pattern,
            arguments_preview=self.arguments_preview,
        )

    def to_state(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "server": self.server,
            "tool": self.tool,
            "variant": self.variant,
            "fingerprint": self.fingerprint,
            "granted_at": self.granted_at,
        }
        if self.approver:
            entry["approver"] = self.approver
        if self.match is not GrantMatch.TOOL:
            entry["match"] = self.match.value
        if self.pattern is not None:
            entry["pattern"] = dict(self.pattern)
        if self.digest is not None:
            entry["digest"], entry["salt"] = self.digest, self.salt
        if self.arguments_preview is not None:
            entry["arguments_preview"] = self.arguments_preview
        return entry

    @classmethod
    def from_state(cls, entry: Any) -> Grant | None:
        if not isinstance(entry, dict):
            return None
        try:
            match = GrantMatch(entry.get("match", GrantMatch.TOOL.value))
        except ValueError:
            return None  # a kind this version does not know: never read it as "any arguments"
        pattern = entry.get("pattern")
        if match is GrantMatch.PATTERN and pattern_problem(pattern) is not None:
            return None
        digest, salt = entry.get("digest"), entry.get("salt")
        if match is GrantMatch.ARGUMENTS and not (isinstance(digest, str) and isinstance(salt, str)):
            return None
        preview = entry.get("arguments_preview")
        try:
            return cls(
                scope="always",
                server=str(entry["server"]),
                tool=str(entry["tool"]),
                variant=str(entry["variant"]),
                fingerprint=str(entry["fingerprint"]),
                granted_at=str(entry.get("granted_at", "")),
                approver=entry.get("approver"),
                match=match,
                pattern=dict(pattern) if match is GrantMatch.PATTERN and isinstance(pattern, dict) else None,
                digest=digest if match is GrantMatch.ARGUMENTS else None,
                salt=salt if match is GrantMatch.ARGUMENTS else None,
                arguments_preview=preview if isinstance(preview, str) else None,
            )
        except KeyError:
            return None


@dataclass(frozen=True, slots=True)
class Lookup:
    grant: Grant | None  # the grant that lets the call through
    stale: list[Grant]  # grants for this call whose tool changed since; the caller drops them
    # Grants for this tool wider than this call may be covered by (a tool-wide one, for a shell command): kept, and
    # not used.
    too_wide: list[Grant] = field(default_factory=list)


def find_grant(
    grants: list[Grant],
    session_id: str | None,
    server: str,
    tool: str,
    variant: str,
    fp: str,
    arguments: dict[str, Any] | None = None,
    matches: frozenset[GrantMatch] | None = None,
) -> Lookup:
    """Pure: the grant covering this call, preferring a session grant, and the stale ones in the way (a grant for
    this tool whose definition changed is stale whatever arguments it covers). `matches`: the kinds of grant that
    may cover this call (None: any)."""
    found: Grant | None = None
    stale: list[Grant] = []
    too_wide: list[Grant] = []
    for grant in grants:
        if not grant.covers(session_id, server, tool, variant):
            continue
        if grant.fingerprint != fp:
            stale.append(grant)
        elif matches is not None and grant.match not in matches:
            too_wide.append(grant)
        elif not grant.covers_arguments(arguments or {}):
            continue
        elif found is None or (found.scope == "always" and grant.scope == "session"):
            found = grant
    return Lookup(found, stale, too_wide)


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

    def _save_always(self, grants: list[Grant]) -> None:
        """Write `grants` as the remembered ones, then hold them: a list the file could not take is not kept, for a
        grant in force must be one on record there."""
        state = read_state(self.path)
        state["grants"] = [g.to_state() for g in grants]
        if not state["grants"]:
            del state["grants"]
        write_state(state, self.path)
        self._always = grants
        self._signature = self._file_signature()

    # ---- what the broker and the channel use

    def all(self) -> list[Grant]:
        self._refresh()
        return [*self._session, *self._always]

    def lookup(
        self,
        session_id: str | None,
        server: str,
        tool: str,
        variant: str,
        fp: str,
        arguments: dict[str, Any] | None = None,
        matches: frozenset[GrantMatch] | None = None,
    ) -> Lookup:
        found = find_grant(self.all(), session_id, server, tool, variant, fp, arguments, matches)
        if found.stale:
            self.remove(found.stale)
        return found

    def add(self, grant: Grant) -> None:
        if grant.scope == "session":
            self._session = [g for g in self._session if g.id != grant.id] + [grant]
            return
        with self._locked():
            self._save_always([g for g in self._always if g.id != grant.id] + [grant])

    def remove(self, grants: list[Grant]) -> list[Grant]:
        ids = {g.id for g in grants}
        removed = [g for g in self._session if g.id in ids]
        self._session = [g for g in self._session if g.id not in ids]
        if any(g.scope == "always" for g in grants):
            with self._locked():
                removed += [g for g in self._always if g.id in ids]
                kept = [g for g in self._always if g.id not in ids]
                if len(kept) != len(self._always):
                    self._save_always(kept)
        return removed

    def revoke(self, ids: list[str], tool: str | None = None, everything: bool = False) -> list[Grant]:
        return self.remove(select(self.all(), ids, tool, everything))


def read_always(path: Path) -> list[Grant]:
    grants: list[Grant] = []
    entries = read_state(path).get("grants", [])
    if not isinstance(entries, list):
        # A hand edit (`grants = 5`): no grant can be read from it, and none is taken as given.
        logger.warning("ignoring grants in %s: a %s, not a list of grants", path, type(entries).__name__)
        entries = []
    for entry in entries:
        grant = Grant.from_state(entry)
        if grant is None:
            logger.warning("ignoring a malformed grant in %s: %r", path, entry)
        else:
            grants.append(grant)
    return grants


# How long a change to the grants waits for another process to let go of the state file (its holders keep it for
# one read and one atomic write).
STATE_LOCK_WAIT_S = 3.0


@contextlib.contextmanager
def lock_state(path: Path) -> Iterator[None]:
    """One read-modify-write of the state file at a time, across processes (the daemon, `mcphost grants`)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        # Bounded: the daemon takes it on its event loop, and a process stopped while it held it (Ctrl-Z on a
        # `mcphost grants revoke`) would freeze every agent and editor.
        if not flock_within(fd, STATE_LOCK_WAIT_S):
            raise LockHeld(fd, STATE_LOCK_WAIT_S)
        yield
    finally:
        os.close(fd)


def revoke_in_file(path: Path, ids: list[str], tool: str | None, everything: bool) -> list[Grant]:
    """`mcphost grants revoke` with no daemon to ask: edit the state file directly."""
    store = GrantStore(path)
    return store.revoke(ids, tool, everything)
