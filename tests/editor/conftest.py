"""One daemon with the default policy and the probe upstream, shared by the editor tests that neither change its
config nor leave anything behind for other agent sessions (session grants stay with the session that got them).
Tests of `always` grants, of other config, or of config errors start their own daemon."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.helpers import Daemon, Sandbox, daemon


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Daemon]:
    box = Sandbox(tmp_path_factory.mktemp("shared"))
    box.write_config(box.probe_server())
    async with daemon(box) as d:
        yield d
