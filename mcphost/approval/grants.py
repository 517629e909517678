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
from mcphost.activity.writer import LockHeld, flock_within, lock_holder
from mcphost.approval.prompt import GrantInfo, GrantMatch
from mcphost.config.state import read_state, set_aside, state_path, state_to_update, write_state
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
        """The `always` grant an entry of the state file's `grants` is, or None for one `grant_problem` refuses."""
        if grant_problem(entry) is not None:
            return None
        match = GrantMatch(entry.get("match", GrantMatch.TOOL.value))
        return cls(
            scope="always",
            server=entry["server"],
            tool=entry["tool"],
            variant=entry["variant"],
            fingerprint=entry["fingerprint"],
            granted_at=entry.get("granted_at", ""),
            approver=entry.get("approver"),
            match=match,
            pattern=dict(entry["pattern"]) if match is GrantMatch.PATTERN else None,
            digest=entry["digest"] if match is GrantMatch.ARGUMENTS else None,
            salt=entry["salt"] if match is GrantMatch.ARGUMENTS else None,
            arguments_preview=entry.get("arguments_preview"),
        )


# An entry of the state file's `grants`: the keys it must have, and those it may have, all strings (`pattern` aside).
# A hand edit that gives one another type (`approver = 5`, an unquoted date) is no grant: taken as it was, it failed
# every call to its tool, `mcphost grants list` and `revoke`, far from the file.
GRANT_TEXT = ("server", "tool", "variant", "fingerprint")
GRANT_OPTIONAL_TEXT = ("scope", "match", "granted_at", "session_id", "approver", "digest", "salt", "arguments_preview")


def _a(name: str) -> str:
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def _text_table(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def grant_problem(entry: Any) -> str | None:
    """Why an entry of the state file's `grants` is no grant this version can hold to, or None. Strict: a value of
    another type is never converted (5 is not "5", true is not a string)."""
    if not isinstance(entry, dict):
        return f"{_a(type(entry).__name__)}, not a table"
    for key in GRANT_TEXT:
        if key not in entry:
            return f"it has no {key}"
    for key in (*GRANT_TEXT, *GRANT_OPTIONAL_TEXT):
        if key in entry and not isinstance(entry[key], str):
            return f"its {key} is {_a(type(entry[key]).__name__)}, not a string"
    if entry.get("scope", "always") != "always":
        return f'its scope is "{entry["scope"][:50]}": the state file holds "always" grants only'
    try:
        match = GrantMatch(entry.get("match", GrantMatch.TOOL.value))
    except ValueError:
        # A kind this version does not know: never read as "any arguments".
        return f'its match "{entry["match"][:50]}" is a kind this version of mcphost does not know'
    pattern = entry.get("pattern")
    if "pattern" in entry and not _text_table(pattern):
        return "its pattern is not a table of argument names and globs (strings)"
    if match is GrantMatch.PATTERN:
        problem = pattern_problem(pattern)
        if problem is not None:
            return f"match = pattern, and {problem}"
    if match is GrantMatch.ARGUMENTS:
        if "digest" not in entry or "salt" not in entry:
            return "match = arguments needs both digest and salt"
        if not entry["salt"].isascii():
            return "its salt is not ASCII"
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

    def __init__(self, path: Path | None = None, lock_wait: float | None = None) -> None:
        self.path = path or state_path()
        # How long a change waits for another process to let go of the state file's lock. None: LOOP_LOCK_WAIT_S,
        # as the daemon's store (host.py) takes it on its event loop.
        self.lock_wait = lock_wait
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
        with lock_state(self.path, LOOP_LOCK_WAIT_S if self.lock_wait is None else self.lock_wait):
            self._signature = None  # another process may have written since we last looked
            self._refresh()
            yield

    def _save_always(self, grants: list[Grant]) -> None:
        """Write `grants` as the remembered ones, then hold them: a list the file could not take is not kept, for a
        grant in force must be one on record there. What the file holds that cannot be read is never written over:
        a file that cannot be used is moved aside first (state_to_update), and entries of `grants` that are no
        grant (a hand edit's typo, a kind a later version wrote) stay as they are, ignored."""
        state = state_to_update(self.path)
        entries = state.get("grants", [])
        if not isinstance(entries, list):
            set_aside(self.path, f"its grants are a {type(entries).__name__}, not a list of grants")
            state, entries = {}, []
        unread = [entry for entry in entries if Grant.from_state(entry) is None]
        state["grants"] = [g.to_state() for g in grants] + unread
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
            try:
                self.remove(found.stale)
            except OSError as exc:
                # A stale grant covers nothing (its fingerprint is not the tool's): the call goes on, and the next
                # lookup drops it again. Its lock held by a stopped process failed every call to the tool.
                logger.warning(
                    "could not drop %d stale remembered approval(s) from %s (%s); they are not used",
                    len(found.stale),
                    self.path,
                    exc.strerror or exc,
                )
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
    for index, entry in enumerate(entries):
        grant = Grant.from_state(entry)
        if grant is None:
            # Named by its place and its tool, not printed whole: a hand edit's value may be megabytes long.
            tool = ""
            if isinstance(entry, dict) and isinstance(entry.get("server"), str) and isinstance(entry.get("tool"), str):
                tool = f" ({entry['server'][:100]}:{entry['tool'][:100]})"
            logger.warning(
                "ignoring a malformed grant in %s: grants[%d]%s: %s; it is not in force, and stays in the file as it"
                " is (fix or delete it there)",
                path,
                index,
                tool,
                grant_problem(entry),
            )
        else:
            grants.append(grant)
    return grants


# How long a change to the grants waits for another process to let go of the state file (its holders keep it for
# one read and one atomic write): in a process of its own (`mcphost grants revoke`)...
STATE_LOCK_WAIT_S = 3.0
# ... and in the daemon, which takes it on its event loop: every agent and editor waits as long. A process stopped
# while it held the lock (Ctrl-Z on a `mcphost grants revoke`) froze them all for the 3 s, at every change.
LOOP_LOCK_WAIT_S = 0.1


class StateLocked(LockHeld):
    """The state file's lock held by another process past the wait: the lock file, and who holds it."""

    def __init__(self, fd: int, waited: float, lock: Path) -> None:
        super().__init__(fd, waited)
        holder = lock_holder(fd)
        self.lock = lock
        self.waited = waited
        self.holder_pid = holder[0] if holder else None
        self.who = f"process {holder[0]} ({holder[1]})" if holder else "another process"
        self.strerror = f"its lock {lock.name} is held by {self.who}, which has not let go of it for {waited:g} s"
        self.filename = str(lock)
        self.remedy = (
            f"resume or end {'that process' if holder else 'it'} (a process stopped with Ctrl-Z or held in a"
            " debugger keeps the lock), then try again"
        )


@contextlib.contextmanager
def lock_state(path: Path, wait: float = STATE_LOCK_WAIT_S) -> Iterator[None]:
    """One read-modify-write of the state file at a time, across processes (the daemon, `mcphost grants`).
    StateLocked when another process holds it for longer than `wait` seconds."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        # Bounded: a process stopped while it held it would hold up this one for good.
        if not flock_within(fd, wait):
            raise StateLocked(fd, wait, lock)
        yield
    finally:
        os.close(fd)


def revoke_in_file(path: Path, ids: list[str], tool: str | None, everything: bool) -> list[Grant]:
    """`mcphost grants revoke` with no daemon to ask: edit the state file directly (a process of its own, which
    may wait longer for the lock than the daemon)."""
    store = GrantStore(path, lock_wait=STATE_LOCK_WAIT_S)
    return store.revoke(ids, tool, everything)
