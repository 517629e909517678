"""The remembered grants' state file when it is not what mcphost wrote: a file that cannot be read is moved aside,
never written over; an entry of the wrong types is no grant, alike for the daemon, `grants list` and `grants
revoke`; its lock held by a stopped process is an error that names it, and the daemon hardly waits for it."""

from __future__ import annotations

import datetime
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from mcphost.approval import grants as grants_module
from mcphost.approval.grants import (
    LOOP_LOCK_WAIT_S,
    STATE_LOCK_WAIT_S,
    Grant,
    GrantStore,
    StateLocked,
    revoke_in_file,
    tool_fingerprint,
)
from mcphost.cli import grants as grants_cli
from mcphost.config import state as state_module
from mcphost.config.state import read_state
from mcphost.policy import Remember
from tests.helpers import Sandbox, lock_held_by_another_process, mcphost
from tests.pipeline.conftest import ScriptedApprover, allow
from tests.pipeline.test_approvals import approvals, config, facts

FP = tool_fingerprint("Add a task", {"type": "object"}, {"readOnlyHint": False})
GOOD = {"server": "todo", "tool": "add", "variant": "call_tool_write", "fingerprint": FP, "granted_at": "2026-01-01"}


def always(tool: str = "add", fp: str = FP) -> Grant:
    return Grant(scope="always", server="todo", tool=tool, variant="call_tool_write", fingerprint=fp)


def state_file(path: Path, *entries: dict[str, Any], extra: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps({"grants": list(entries)}) + extra, encoding="utf-8")
    path.chmod(0o600)
    return path


def aside(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".unreadable-*"))


# ---- 1. a state file that cannot be read is moved aside, never written over


@pytest.mark.parametrize("fault", ["typo", "not utf-8", "writable by others", "grants not a list"])
def test_an_always_grant_never_writes_over_a_state_file_that_cannot_be_read(
    tmp_path: Path, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A hand edit's typo hid every grant in the file, and the next "always" wrote a file of that one grant over it:
    # the others were gone, with no copy and no word.
    path = state_file(tmp_path / "state.toml", GOOD, {**GOOD, "tool": "other"})
    if fault == "typo":
        path.write_text(path.read_text(encoding="utf-8") + "oops = \n", encoding="utf-8")
    elif fault == "not utf-8":
        path.write_bytes(path.read_bytes() + b'note = "\xff"\n')
    elif fault == "writable by others":
        path.chmod(0o666)
    else:
        path.write_text(f"grants = {{ server = 'todo', fingerprint = '{FP}' }}\n", encoding="utf-8")
    before = path.read_bytes()
    store = GrantStore(path)
    assert store.all() == []  # not in force: the file cannot be trusted as it is
    store.add(always("third"))
    (moved,) = aside(path)
    assert moved.read_bytes() == before, "the file that could not be read is kept as it was"
    assert [g.tool for g in GrantStore(path).all()] == ["third"]
    said = " ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert f"moved to {moved}" in said and "rather than written over" in said


def test_a_directory_in_the_state_files_place_is_moved_aside_too(tmp_path: Path) -> None:
    path = tmp_path / "state.toml"
    path.mkdir()
    (path / "keep").write_text("mine", encoding="utf-8")
    GrantStore(path).add(always())
    (moved,) = aside(path)
    assert (moved / "keep").read_text(encoding="utf-8") == "mine"
    assert [g.tool for g in GrantStore(path).all()] == ["add"]


def test_a_state_file_that_cannot_be_moved_aside_is_left_alone_and_the_grant_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = state_file(tmp_path / "state.toml", GOOD, extra="oops = \n")
    before = path.read_bytes()

    def refuse(self: Path, target: Path) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "rename", refuse)
    store = GrantStore(path)
    with pytest.raises(OSError, match=r"state.toml cannot be used .* could not be moved aside .* left as it is"):
        store.add(always("third"))
    assert path.read_bytes() == before
    assert store.all() == []


def test_entries_that_are_no_grant_stay_in_the_file_when_it_is_written(tmp_path: Path) -> None:
    # Ignored is not deleted: a grant with a typo, or of a kind a later version wrote, survives another grant's save.
    hand_edit = {**GOOD, "tool": "typo", "approver": 5}
    later = {**GOOD, "tool": "later", "match": "future-kind"}
    path = state_file(tmp_path / "state.toml", GOOD, hand_edit, later)
    store = GrantStore(path)
    store.add(always("third"))
    store.revoke([], None, True)
    assert read_state(path)["grants"] == [hand_edit, later]


def test_the_cli_names_the_aside_mark_the_state_file_uses() -> None:
    assert grants_cli.ASIDE_MARK == state_module.ASIDE_MARK


def test_grants_list_names_a_state_file_set_aside(sandbox: Sandbox) -> None:
    path = state_file(sandbox.data / "state.toml", GOOD, extra="oops = \n")
    GrantStore(path).add(always("third"))
    (moved,) = aside(path)
    done = mcphost(sandbox, "grants", "list")
    assert done.returncode == 0, done.stderr
    assert "todo:third" in done.stdout
    assert str(moved) in done.stderr and "not in force" in done.stderr


# ---- 2. a grant of the wrong types is no grant


WRONG = [
    ("server", 5),
    ("tool", True),
    ("variant", 1.5),
    ("fingerprint", [FP]),
    ("granted_at", datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)),
    ("session_id", 7),
    ("approver", 5),
    ("approver", {"name": "nvim"}),
    ("approver", True),
    ("match", 1),
    ("scope", "session"),
    ("scope", 1),
    ("arguments_preview", 5),
    ("pattern", ["*"]),
    ("pattern", {"path": 5}),
]


@pytest.mark.parametrize(("key", "value"), WRONG, ids=[f"{k}={v!r}" for k, v in WRONG])
def test_an_entry_with_a_field_of_the_wrong_type_is_no_grant(key: str, value: Any) -> None:
    assert Grant.from_state(GOOD) is not None
    assert Grant.from_state({**GOOD, key: value}) is None


def test_a_narrowed_entry_with_fields_of_the_wrong_type_is_no_grant() -> None:
    args = {**GOOD, "match": "arguments", "digest": "ab", "salt": "00" * 8}
    assert Grant.from_state(args) is not None
    assert Grant.from_state({**args, "digest": 5}) is None
    assert Grant.from_state({**args, "salt": 5}) is None
    assert Grant.from_state({**args, "salt": "sel-é"}) is None  # no digest could be made with it: every call failed
    globs = {**GOOD, "match": "pattern", "pattern": {"path": "/work/*"}}
    assert Grant.from_state(globs) is not None
    assert Grant.from_state({**globs, "pattern": {"path": True}}) is None


def test_a_grant_of_the_wrong_types_is_ignored_by_the_daemon_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = state_file(tmp_path / "state.toml", {**GOOD, "approver": 5}, {**GOOD, "tool": "other"})
    store = GrantStore(path)
    assert [g.tool for g in store.all()] == ["other"]
    assert store.lookup(None, "todo", "add", "call_tool_write", FP).grant is None
    assert [g.info().tool for g in store.all()] == ["other"]  # what `grants list` asks of the daemon
    assert "ignoring a malformed grant" in caplog.text
    assert "grants[0] (todo:add): its approver is an int, not a string" in caplog.text


async def test_a_call_to_a_tool_whose_grant_has_the_wrong_types_is_asked_not_failed(tmp_path: Path) -> None:
    # It failed every call to the tool, as UPSTREAM_ERROR (a pydantic error building the decision's approver).
    person = ScriptedApprover(script=[allow(Remember.ONCE)])
    gate = approvals(tmp_path, person)
    call = facts()
    entry = {**GOOD, "server": call.server, "tool": call.tool, "variant": call.variant.value}
    state_file(gate.grants.path, {**entry, "fingerprint": call.fingerprint, "approver": 5})
    result = await gate.authorize(config(tmp_path), call)
    assert result.error is None and result.decision.by == "editor"
    assert len(person.asked) == 1


def test_grants_list_and_revoke_ignore_a_grant_of_the_wrong_types_alike(sandbox: Sandbox) -> None:
    path = state_file(sandbox.data / "state.toml", {**GOOD, "approver": 5}, {**GOOD, "tool": "other"})
    listed = mcphost(sandbox, "grants", "list")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr and "ignoring a malformed grant" in listed.stderr
    assert "todo:other" in listed.stdout and "todo:add" not in listed.stdout
    # Not listed, so not revoked, and said so: the file keeps it as it was.
    revoked = mcphost(sandbox, "grants", "revoke", "todo:add")
    assert revoked.returncode == 1 and "No remembered approval matched" in revoked.stdout
    assert "Traceback" not in revoked.stderr
    assert tomllib.loads(path.read_text(encoding="utf-8"))["grants"][0]["approver"] == 5


# ---- 3. the state file's lock held by a stopped process


def test_grants_revoke_with_the_lock_held_says_which_lock_and_who_holds_it(sandbox: Sandbox) -> None:
    path = state_file(sandbox.data / "state.toml", GOOD)
    before = path.read_bytes()
    with lock_held_by_another_process(path.with_name("state.toml.lock")) as holder:
        done = mcphost(sandbox, "grants", "revoke", "--all")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"its lock {path}.lock is held by process {holder.pid}" in done.stderr
    assert "still in force" in done.stderr
    assert "No remembered approval matched" not in done.stdout
    assert path.read_bytes() == before


def test_the_daemons_store_waits_only_briefly_for_the_lock(tmp_path: Path) -> None:
    # The daemon takes the lock on its event loop: 3 s there froze every agent and editor, at every change.
    path = tmp_path / "state.toml"
    store = GrantStore(path)
    with lock_held_by_another_process(path.with_name("state.toml.lock")) as holder:
        started = time.monotonic()
        with pytest.raises(StateLocked) as info:
            store.add(always())
        waited = time.monotonic() - started
    assert waited < LOOP_LOCK_WAIT_S + 0.5 < STATE_LOCK_WAIT_S
    assert info.value.holder_pid == holder.pid and info.value.lock == path.with_name("state.toml.lock")
    assert f"process {holder.pid}" in (info.value.strerror or "")


def test_revoke_in_file_waits_the_longer_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grants_module, "STATE_LOCK_WAIT_S", 0.6)
    path = state_file(tmp_path / "state.toml", GOOD)
    with lock_held_by_another_process(path.with_name("state.toml.lock")):
        started = time.monotonic()
        with pytest.raises(StateLocked):
            revoke_in_file(path, [], None, True)
        assert time.monotonic() - started >= 0.5


def test_a_stale_grant_that_cannot_be_dropped_for_the_lock_fails_no_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.toml"
    store = GrantStore(path)
    store.add(always(fp="0" * 16))
    with lock_held_by_another_process(path.with_name("state.toml.lock")):
        found = store.lookup(None, "todo", "add", "call_tool_write", FP)
    assert found.grant is None and len(found.stale) == 1
    assert "could not drop 1 stale remembered approval" in caplog.text
    assert store.lookup(None, "todo", "add", "call_tool_write", FP).stale  # dropped at the next lookup
    assert "grants" not in read_state(path)


def test_a_second_file_set_aside_gets_a_name_of_its_own(tmp_path: Path) -> None:
    # Two in the same second: the second is never moved over the first.
    path = tmp_path / "state.toml"
    for n in range(2):
        state_file(path, GOOD, extra=f"oops{n} = \n")
        GrantStore(path).add(always())
    moved = aside(path)
    assert sorted(m.read_text(encoding="utf-8").splitlines()[-1] for m in moved) == ["oops0 = ", "oops1 = "]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
