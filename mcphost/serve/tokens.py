"""The daemon's tokens, made before anything of the MCP SDK or the web stack is imported (`mcphost serve` spawns
its upstreams before it imports those)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass


@dataclass(frozen=True)
class Secrets:
    """What the daemon's discovery file (0600) holds: the agents' token for /mcp and the scripts' token for the REST
    API. Separate, so that holding one opens nothing else: an agent cannot read every agent's history, and a script
    cannot act as an agent."""

    agent_token: str
    api_token: str

    @classmethod
    def for_daemon(cls) -> Secrets:
        # A pinned token (MCPHOST_TOKEN, MCPHOST_API_TOKEN) can go into an agent's or a script's config once; by
        # default every daemon gets fresh ones.
        made = cls(
            agent_token=os.environ.get("MCPHOST_TOKEN") or secrets.token_urlsafe(32),
            api_token=os.environ.get("MCPHOST_API_TOKEN") or secrets.token_urlsafe(32),
        )
        if made.api_token == made.agent_token:
            raise ValueError(
                "MCPHOST_API_TOKEN and MCPHOST_TOKEN are the same: the agents' token would read every "
                "agent's history; give the REST API a token of its own"
            )
        return made
