"""Remembered approvals: which grant covers a call, when a grant goes stale, and the state file they live in."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mcphost.approval.grants import (
    Grant,
    GrantStore,
    arguments_digest,
    find_grant,
    pattern_problem,
    revoke_in_file,
    select,
    tool_fingerprint,
)
from mcphost.approval.prompt import GrantMatch
from mcphost.config.state import read_state
from tests.helpers import give_to_another_user

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


@pytest.mark.parametrize("planted", ["writable by others", "another user's"])
def test_always_grants_count_only_from_a_state_file_of_the_users_own(
    tmp_path: Path, planted: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A grant's fingerprint is made from public tool definitions: anyone who can put a state file in the data dir
    # (one shared by mistake) could let calls through unasked.
    path = tmp_path / "state.toml"
    GrantStore(path).add(grant("always"))
    if planted == "writable by others":
        path.chmod(0o666)
    else:
        give_to_another_user(path)
    store = GrantStore(path)
    assert store.lookup(None, "todo", "add", "call_tool_write", FP).grant is None
    assert store.all() == []
    assert f"ignoring the state file {path}" in caplog.text and "chmod 600" in caplog.text
    # The next grant made here replaces the file with one of the user's own.
    store.add(grant("always", tool="other"))
    assert [g.tool for g in GrantStore(path).all()] == ["other"]
    assert path.stat().st_uid == os.geteuid() and stat.S_IMODE(path.stat().st_mode) == 0o600


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


@pytest.mark.parametrize("value", ["5", '"all"', '{ server = "todo" }'])
def test_grants_that_are_not_a_list_are_ignored_not_a_crash(tmp_path: Path, value: str) -> None:
    # A hand edit: the hook read it on every tool call, and fell over (TypeError) before deciding.
    path = tmp_path / "state.toml"
    path.write_text(f"grants = {value}\n", encoding="utf-8")
    assert GrantStore(path).all() == []


# ---- grants narrowed to arguments


def exact(arguments: dict[str, object], scope: str = "always") -> Grant:
    salt = "00" * 8
    return Grant(
        scope=scope,  # type: ignore[arg-type]
        server="todo",
        tool="add",
        variant="call_tool_write",
        fingerprint=FP,
        session_id="s1" if scope == "session" else None,
        match=GrantMatch.ARGUMENTS,
        digest=arguments_digest(arguments, salt),
        salt=salt,
        arguments_preview="{...}",
    )


def pattern(globs: dict[str, str]) -> Grant:
    return Grant(
        scope="always", server="todo", tool="add", variant="call_tool_write", fingerprint=FP,
        match=GrantMatch.PATTERN, pattern=globs,
    )  # fmt: skip


def covered(g: Grant, arguments: dict[str, object], fp: str = FP) -> bool:
    return find_grant([g], "s1", "todo", "add", "call_tool_write", fp, arguments).grant is not None


def test_a_grant_for_exact_arguments_covers_those_json_values_only() -> None:
    g = exact({"title": "Buy milk", "n": 1, "tags": ["a"]})
    assert covered(g, {"tags": ["a"], "n": 1, "title": "Buy milk"})  # key order is no difference
    assert covered(g, {"title": "Buy milk", "n": 1.0, "tags": ["a"]})  # nor is 1 against 1.0
    assert not covered(g, {"title": "Buy milk", "n": True, "tags": ["a"]})  # true is not 1
    assert not covered(g, {"title": "Buy milk", "n": 1, "tags": ["a", "b"]})
    assert not covered(g, {"title": "Buy milk", "n": 1})
    assert not covered(g, {"title": "Buy milk", "n": 1, "tags": ["a"], "extra": None})


def test_a_pattern_grant_covers_arguments_matching_every_glob_and_looks_at_nothing_else() -> None:
    g = pattern({"path": "/work/src/*", "mode": "w"})
    assert covered(g, {"path": "/work/src/a.py", "mode": "w", "content": "anything"})
    assert covered(g, {"path": "/work/src/deep/b.py", "mode": "w"})  # * crosses "/", as the rules' glob does
    assert not covered(g, {"path": "/work/other.py", "mode": "w"})
    assert not covered(g, {"path": "/work/src/a.py", "mode": "a"})
    assert not covered(g, {"path": "/work/src/a.py"})  # a named argument that is missing
    assert not covered(g, {"path": ["/work/src/a.py"], "mode": "w"})  # not a string


def test_a_narrowed_grant_for_a_changed_tool_is_stale_whatever_arguments_it_covered() -> None:
    old = tool_fingerprint("Add a task", {"type": "object"}, {"readOnlyHint": True})
    found = find_grant([pattern({"path": "/x/*"})], "s1", "todo", "add", "call_tool_write", old, {"path": "/y"})
    assert found.grant is None and len(found.stale) == 1


def test_pattern_problems_are_named() -> None:
    assert pattern_problem({"path": "/x/*"}) is None
    for bad in ({}, None, {"": "*"}, {"path": ""}, {"path": 3}, ["path"], {"p": "x" * 1001}):
        assert pattern_problem(bad) is not None, bad


def test_narrowed_grants_persist_without_their_argument_values(tmp_path: Path) -> None:
    store = GrantStore(tmp_path / "state.toml")
    secret = "hunter2-very-secret-value"
    store.add(exact({"password": secret}))
    store.add(pattern({"path": "/work/*"}))
    text = (tmp_path / "state.toml").read_text()
    assert secret not in text
    again = GrantStore(tmp_path / "state.toml").all()
    assert {g.match for g in again} == {GrantMatch.ARGUMENTS, GrantMatch.PATTERN}
    assert covered(next(g for g in again if g.match is GrantMatch.ARGUMENTS), {"password": secret})
    assert len({g.id for g in again}) == 2


def test_a_grant_of_a_kind_this_version_does_not_know_is_skipped_never_read_as_any_arguments() -> None:
    entry = {"server": "todo", "tool": "add", "variant": "call_tool_write", "fingerprint": FP}
    assert Grant.from_state({**entry, "match": "future-kind"}) is None
    assert Grant.from_state({**entry, "match": "pattern"}) is None  # no pattern
    assert Grant.from_state({**entry, "match": "arguments", "digest": "d"}) is None  # no salt
    assert Grant.from_state(entry) is not None


def test_an_always_grant_the_state_file_cannot_take_is_not_held(tmp_path: Path) -> None:
    # Held before it was written, a grant whose text no file could take (a lone surrogate) was in force unsaved:
    # calls went through on it with nothing on disk to show or revoke.
    store = GrantStore(tmp_path / "state.toml")
    store.add(grant("always"))
    unwritable = Grant(
        scope="always", server="todo", tool="add", variant="call_tool_write", fingerprint=FP, approver="nvim-\udc80"
    )
    with pytest.raises(ValueError):
        store.add(unwritable)
    assert [g.approver for g in store.all()] == [None]
    assert [g["tool"] for g in read_state(tmp_path / "state.toml")["grants"]] == ["add"]


def test_a_pattern_of_no_text_is_no_grant() -> None:
    assert pattern_problem({"text": "[!\udfff]*"}) is not None
    assert pattern_problem({"\ud800": "*"}) is not None
    assert pattern_problem({"text": "src/*"}) is None
