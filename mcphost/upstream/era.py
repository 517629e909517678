"""Which protocol era mcphost speaks to an upstream under `protocol = "auto"`.

Over HTTP, 2026-07-28 first (the SDK's own `auto`: `server/discover`, the handshake as fallback): a stateless
revision is what HTTP gains from, and a request that names its version needs no session on the server.

Over stdio, the handshake first. A pipe to a child of mcphost's own is one session whatever the era, so the 2026
era's statelessness buys nothing there, while its per-request envelope costs the server on every call: a Python SDK
server spent 0.1-0.2 ms more CPU a tool call in that era than after `initialize` (same server, same calls, measured
side by side). A server that refuses the handshake with -32022 (as a 2026-only server must, naming the revisions it
speaks) or any other JSON-RPC error is then asked `server/discover` on the same connection: no second process, no
second start-up.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import mcp_types as types
from mcp import Client
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError


async def negotiate_handshake_first(session: ClientSession) -> None:
    """`initialize`; if the server refuses it, `server/discover` at a revision both sides speak. Raises the
    handshake's error when the server answers neither (what it said about the handshake is the more telling)."""
    try:
        await session.initialize()
        return
    except MCPError as refused:
        version = _modern_version(refused)
        if version is None:
            raise
        try:
            discovered = types.DiscoverResult.model_validate(await session.send_discover(version))
            session.adopt(discovered)
        except (MCPError, ValidationError, RuntimeError):
            raise refused from None


def _modern_version(refused: MCPError) -> str | None:
    """The 2026-era revision to ask for after the handshake was refused: the newest both sides speak when the
    refusal names the server's revisions (-32022), else this client's newest; None when it names only older ones."""
    data = refused.error.data
    supported = data.get("supported") if isinstance(data, dict) else None
    # Read as it comes: a refusal of `initialize` has no `requested` revision for the SDK's model to demand.
    if refused.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(supported, list):
        return LATEST_MODERN_VERSION
    mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in supported]
    return mutual[-1] if mutual else None


class HandshakeFirstClient(Client):
    """The SDK's `Client`, whose `auto` asks for the handshake first (`negotiate_handshake_first`); every other mode
    is the SDK's own.

    Its `__aenter__` is the SDK's, with that negotiation where the SDK runs its own (the SDK takes no negotiation of
    the caller's). `tests/integration/test_protocol_eras.py` holds it to the SDK's behaviour: servers of either era
    connect, a 2026-only one on its first process."""

    async def __aenter__(self) -> Client:
        if self.mode != "auto":
            return await super().__aenter__()
        if self._entered:
            raise RuntimeError("Client is already entered; cannot reenter")
        self._entered = True
        async with AsyncExitStack() as exit_stack:
            session: ClientSession = await exit_stack.enter_async_context(await self._build_session(exit_stack))
            await negotiate_handshake_first(session)
            # Published only once negotiated, as the SDK does: a failure above unwinds the transport.
            self._session = session
            self._exit_stack = exit_stack.pop_all()
            return self
