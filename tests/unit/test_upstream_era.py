"""`auto` over stdio: the handshake first, `server/discover` on the same connection when the server refuses it."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import LATEST_MODERN_VERSION

from mcphost.upstream.era import negotiate_handshake_first


class ScriptedSession:
    """Answers `initialize` and `server/discover` as told, and notes what was asked."""

    def __init__(self, initialize: MCPError | None = None, discover: dict[str, Any] | MCPError | None = None) -> None:
        self._initialize, self._discover = initialize, discover
        self.asked: list[str] = []
        self.adopted: types.DiscoverResult | None = None

    async def initialize(self) -> None:
        self.asked.append("initialize")
        if self._initialize is not None:
            raise self._initialize

    async def send_discover(self, version: str) -> dict[str, Any]:
        self.asked.append(f"server/discover {version}")
        if isinstance(self._discover, MCPError) or self._discover is None:
            raise self._discover or MCPError(METHOD_NOT_FOUND, "Method not found")
        return self._discover

    def adopt(self, result: types.DiscoverResult) -> None:
        self.adopted = result


def modern_only(*supported: str) -> MCPError:
    return MCPError(UNSUPPORTED_PROTOCOL_VERSION, "the handshake is not served", {"supported": list(supported)})


def discover_result(*versions: str) -> dict[str, Any]:
    return {"supportedVersions": list(versions), "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}


async def test_a_server_that_takes_the_handshake_is_never_probed() -> None:
    session = ScriptedSession()
    await negotiate_handshake_first(session)  # type: ignore[arg-type]
    assert session.asked == ["initialize"]
    assert session.adopted is None


async def test_a_2026_only_server_is_asked_server_discover_at_the_revision_it_names() -> None:
    session = ScriptedSession(modern_only(LATEST_MODERN_VERSION), discover_result(LATEST_MODERN_VERSION))
    await negotiate_handshake_first(session)  # type: ignore[arg-type]
    assert session.asked == ["initialize", f"server/discover {LATEST_MODERN_VERSION}"]
    assert session.adopted is not None and session.adopted.supported_versions == [LATEST_MODERN_VERSION]


async def test_a_refusal_that_names_no_revision_is_followed_by_discover_at_the_newest() -> None:
    refusal = MCPError(-32600, "no handshake here")
    session = ScriptedSession(refusal, discover_result(LATEST_MODERN_VERSION))
    await negotiate_handshake_first(session)  # type: ignore[arg-type]
    assert session.asked == ["initialize", f"server/discover {LATEST_MODERN_VERSION}"]


async def test_a_server_that_speaks_only_revisions_unknown_here_fails_with_its_own_refusal() -> None:
    refusal = modern_only("2099-01-01")
    session = ScriptedSession(refusal)
    with pytest.raises(MCPError) as raised:
        await negotiate_handshake_first(session)  # type: ignore[arg-type]
    assert raised.value is refusal
    assert session.asked == ["initialize"]


async def test_a_server_that_refuses_both_fails_with_what_it_said_of_the_handshake() -> None:
    refusal = MCPError(-32603, "initialize exploded")
    session = ScriptedSession(refusal, MCPError(METHOD_NOT_FOUND, "Method not found"))
    with pytest.raises(MCPError) as raised:
        await negotiate_handshake_first(session)  # type: ignore[arg-type]
    assert raised.value is refusal
    assert session.adopted is None


async def test_a_discover_answer_that_is_not_one_fails_with_the_handshake_refusal() -> None:
    refusal = modern_only(LATEST_MODERN_VERSION)
    session = ScriptedSession(refusal, {"not": "a discover result"})
    with pytest.raises(MCPError) as raised:
        await negotiate_handshake_first(session)  # type: ignore[arg-type]
    assert raised.value is refusal
