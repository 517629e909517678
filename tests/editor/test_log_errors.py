"""A log that cannot be written is shown to the editor (status `log_error`), and cleared once it can be again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.editor.support import assert_ok, call
from tests.editor_client import allow, editor
from tests.helpers import Sandbox, daemon, error_of, http_agent


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to simulate a full disk")
async def test_a_full_disk_reaches_the_editor_status_and_clears_when_space_returns(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    sandbox.data.mkdir(parents=True)
    sandbox.log.symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    async with daemon(sandbox) as d, editor(d.editor_socket, allow()) as ed, http_agent(d.url, d.headers) as agent:
        # [log] on_failure defaults to "refuse": no result leaves the host without its record on disk.
        refused = error_of(await call(agent, "read", "read_notes", {}))
        assert refused["code"] == "AUDIT_UNAVAILABLE" and "Free space" in refused["message"]
        await ed.wait_for(
            lambda: any(
                "No space left" in (s.get("log_error") or "") and "refused" in s["log_error"] for s in ed.statuses
            )
        )

        sandbox.log.unlink()  # space is back
        seen = len(ed.statuses)
        assert_ok(await call(agent, "read", "read_notes", {}))
        await ed.wait_for(lambda: any(s.get("log_error") is None for s in ed.statuses[seen:]))
    # The refused call is on record too, written once space returned.
    assert len(sandbox.tool_calls()) == 2
