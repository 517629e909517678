"""An editor that spawns the daemon on a broken config gets diagnostics, not a dead daemon."""

from __future__ import annotations

import os
import sys

from tests.editor_client import allow, init_params, make_client
from tests.helpers import Sandbox


async def test_a_broken_config_at_start_is_shown_in_the_editor_and_picked_up_once_fixed(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "maybe"\n' + sandbox.probe_server())
    client, ed = make_client(allow(), name="spawning-editor")
    env = {**os.environ, **sandbox.env()}
    await client.start_io(sys.executable, "-m", "mcphost", "serve", "--port", "0", "--stdio", env=env)
    try:
        await client.initialize_session(init_params("spawning-editor"))
        uri = sandbox.config.resolve().as_uri()
        await ed.wait_for(lambda: bool(client.diagnostics.get(uri)), timeout=20)
        [diagnostic] = client.diagnostics[uri]
        assert diagnostic.range.start.line == 1
        assert "permissions.write" in diagnostic.message
        status = await ed.request("mcphost/status")
        assert status["servers"] == []  # nothing started from a file that did not load
        assert "permissions.write" in status["config_error"]

        sandbox.write_config('[permissions]\nwrite = "ask"\n' + sandbox.probe_server())
        await ed.wait_for(lambda: len(client.diagnostics[uri]) == 0, timeout=20)
        await ed.wait_for(
            lambda: any(
                s.get("config_error") is None and [u["name"] for u in s["servers"]] == ["probe"] for s in ed.statuses
            ),
            timeout=20,
        )
    finally:
        await client.shutdown_session()
        await client.stop()
