"""What `mcphost call` says while its call waits on the daemon (mcphost.cli.waiting)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from mcphost.cli import waiting
from mcphost.cli.waiting import WaitWatch, waiting_for
from mcphost.discovery import NoDaemon

STATUS = {
    "prompts": [
        {"id": "1", "variant": "call_tool_write", "server": "other", "tool": "x", "expires_at": "2026-01-01T00:00:00Z"},
        {"id": "2", "variant": "call_tool_write", "server": "gh", "tool": "push", "expires_at": "2026-01-01T10:00:00Z"},
    ],
    "editors": [{"name": "Visual Studio Code 1.99"}, {"name": "evil\x1b]0;owned\x07"}],
    "servers": [{"name": "gh", "state": "connected"}],
}


def test_a_prompt_for_the_call_names_where_to_answer_it_and_when_it_expires() -> None:
    said = waiting_for(7, "gh", "push", status=STATUS)
    assert said.startswith("waiting for a person to answer the prompt for gh:push in Visual Studio Code 1.99, evil")
    assert "\x1b" not in said and "\x07" not in said  # an editor names itself: its name is shown escaped
    assert "; it expires at " in said and said.endswith("; Ctrl-C withdraws the call")


def test_a_prompt_with_no_editor_attached_is_answered_with_approve() -> None:
    said = waiting_for(7, "gh", "push", status={**STATUS, "editors": []})
    assert "the prompt for gh:push with `mcphost approve`" in said


def test_without_a_prompt_for_the_call_the_upstream_is_at_work_or_still_connecting() -> None:
    assert waiting_for(7, "other", "y", status=STATUS).startswith("waiting for the upstream other to answer;")
    connecting = {"servers": [{"name": "gh", "state": "reconnecting", "error": "exited with code 1"}]}
    said = waiting_for(7, "gh", "push", status=connecting)
    assert said.startswith("waiting for the upstream gh (reconnecting: exited with code 1);")


def test_a_stopped_or_silent_daemon_is_named_with_what_to_do() -> None:
    assert "`kill -CONT 7`" in waiting_for(7, "gh", "push", stopped=True)
    said = waiting_for(7, "gh", "push", unanswered="timed out")
    assert said.startswith("the daemon 7 answers neither the call nor a status request (timed out): it may be stuck")


def test_the_watch_says_what_it_sees_once_and_nothing_after_it_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    asked = threading.Semaphore(0)

    def silent(*_args: Any, **_kwargs: Any) -> Any:
        asked.release()
        raise NoDaemon("daemon 1 did not answer mcphost/status: timed out")

    monkeypatch.setattr(waiting, "ask", silent)
    monkeypatch.setattr(waiting, "STOPPED_EVERY_S", 0.001)
    watch = WaitWatch({"pid": os.getpid()}, "gh:push", said.append, first_look=0, status_every=0)
    with watch:
        for _ in range(3):
            assert asked.acquire(timeout=10)
    watch._thread.join(5)
    assert not watch._thread.is_alive()
    assert len(said) == 1, said  # the same thing seen again is not said again
    assert said[0].startswith(f"the daemon {os.getpid()} answers neither the call nor a status request")


def test_an_answer_within_the_first_look_gets_no_word(tmp_path: Path) -> None:
    said: list[str] = []
    info = {"pid": os.getpid(), "editor_socket": str(tmp_path / "gone.sock")}
    watch = WaitWatch(info, "gh:push", said.append, first_look=5)
    with watch:
        pass
    watch._thread.join(5)
    assert said == []
