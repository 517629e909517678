"""Remembered approvals: which grant covers a call, when a grant goes stale, and the state file they live in."""

from __future__ import annotations

import stat
from pathlib import Path

from mcphost.approval.grants import Grant, GrantStore, find_grant, revoke_in_file, select, tool_fingerprint
from mcphost.config.state import read_state

FP = tool_fingerprint("Add a task", {"type": "object"}, {"readOnlyHint": False})


def grant(scope: str = "session", *, session: str | None = "s1", tool: str = "add", fp: str = FP) -> Grant:
    return Grant(
        scope=scope,  # type: ignore[arg-type]
        server="todo",
        tool=tool,
        variant="call_tool_write",
        fingerprint=fp,
        session_id=session if scope == "session" else None,
    )


def test_the_fingerprint_changes_with_description_schema_or_annotations() -> None:
    base = tool_fingerprint("d", {"type": "object"}, {"readOnlyHint": True})
    assert base == tool_fingerprint("d", {"type": "object"}, {"readOnlyHint": True})
    assert base != tool_fingerprint("d2", {"type": "object"}, {"readOnlyHint": True})
    assert base != tool_fingerprint("d", {"type": "object", "required": ["x"]}, {"readOnlyHint": True})
    assert base != tool_fingerprint("d", {"type": "object"}, {"readOnlyHint": False})


def test_a_session_grant_covers_only_its_own_session() -> None:
    grants = [grant(session="s1")]
    assert find_grant(grants, "s1", "todo", "add", "call_tool_write", FP).grant is not None
    assert find_grant(grants, "s2", "todo", "add", "call_tool_write", FP).grant is None
    assert find_grant(grants, None, "todo", "add", "call_tool_write", FP).grant is None


def test_a_grant_covers_one_tool_and_one_variant() -> None:
    grants = [grant("always")]
    assert find_grant(grants, None, "todo", "add", "call_tool_write", FP).grant is not None
    assert find_grant(grants, None, "todo", "other", "call_tool_write", FP).grant is None
    assert find_grant(grants, None, "todo", "add", "call_tool_destructive", FP).grant is None
    assert find_grant(grants, None, "todo2", "add", "call_tool_write", FP).grant is None


def test_a_grant_for_a_changed_tool_does_not_match_and_is_reported_stale() -> None:
    old = grant("always", fp="0" * 16)
    found = find_grant([old], None, "todo", "add", "call_tool_write", FP)
    assert found.grant is None
    assert found.stale == [old]


def test_select_by_id_by_tool_or_everything() -> None:
    a, b = grant("always"), grant("session", tool="other")
    assert select([a, b], [a.id], None, False) == [a]
    assert select([a, b], [], "todo:other", False) == [b]
    assert select([a, b], [], None, True) == [a, b]
    assert select([a, b], ["nope"], None, False) == []


def test_always_grants_persist_in_an_owner_only_state_file(tmp_path: Path) -> None:
    path = tmp_path / "data" / "state.toml"
    store = GrantStore(path)
    store.add(grant("always"))
    store.add(grant("session"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [g["tool"] for g in read_state(path)["grants"]] == ["add"]
    # A new daemon sees the always grant, not the other daemon's session grant.
    fresh = GrantStore(path)
    assert [(g.scope, g.tool) for g in fresh.all()] == [("always", "add")]


def test_a_revoke_by_another_process_is_seen_at_the_next_lookup(tmp_path: Path) -> None:
    path = tmp_path / "state.toml"
    daemon = GrantStore(path)
    daemon.add(grant("always"))
    assert daemon.lookup(None, "todo", "add", "call_tool_write", FP).grant is not None
    revoked = revoke_in_file(path, [], "todo:add", False)  # `mcphost grants revoke todo:add`
    assert [g.tool for g in revoked] == ["add"]
    assert daemon.lookup(None, "todo", "add", "call_tool_write", FP).grant is None


def test_a_stale_grant_is_dropped_from_the_state_file(tmp_path: Path) -> None:
    path = tmp_path / "state.toml"
    store = GrantStore(path)
    store.add(grant("always", fp="0" * 16))
    found = store.lookup(None, "todo", "add", "call_tool_write", FP)
    assert found.grant is None and len(found.stale) == 1
    assert "grants" not in read_state(path)


def test_other_state_survives_grant_changes(tmp_path: Path) -> None:
    path = tmp_path / "state.toml"
    path.write_text('seen = "yes"\n', encoding="utf-8")
    store = GrantStore(path)
    store.add(grant("always"))
    store.revoke([], None, True)
    assert read_state(path) == {"seen": "yes"}


def test_a_malformed_grant_in_the_file_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "state.toml"
    path.write_text('[[grants]]\nserver = "todo"\n', encoding="utf-8")
    assert GrantStore(path).all() == []
