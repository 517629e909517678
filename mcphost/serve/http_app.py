"""The daemon's HTTP endpoint on loopback: MCP for agents and the REST API for scripts, each behind its own bearer
token, every route behind Host and Origin checks."""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from mcphost.serve.activity_api import API_PATH, activity_endpoint

MCP_PATH = "/mcp"


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


def _refuse(status: int, error: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status, headers=headers)


class BearerTokenGuard:
    """Rejects any request without `Authorization: Bearer <token>`: other local users and web pages get 401.

    `wrong_door` names the daemon's other token and where this route's is, so that a script holding the agents'
    token (or the reverse) is told which one to use instead of only "wrong".
    """

    def __init__(self, app: ASGIApp, token: str, wrong_door: tuple[str, str] | None = None) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._other = f"Bearer {wrong_door[0]}".encode() if wrong_door else None
        self._hint = wrong_door[1] if wrong_door else ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            supplied = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(supplied, self._expected):
                message = "missing or wrong bearer token: see `mcphost status`"
                if self._other is not None and hmac.compare_digest(supplied, self._other):
                    message = self._hint
                response = _refuse(401, "unauthorized", message, {"WWW-Authenticate": 'Bearer realm="mcphost"'})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class LoopbackOnly:
    """DNS-rebinding defence for every route, unknown ones included: a Host header that is not this daemon's
    loopback address gets 421, a browser Origin other than a loopback page of this port gets 403, before any
    routing or token check (a page that rebinds a name to 127.0.0.1 must learn nothing, not even a 404)."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self.app = app
        self.settings = security_settings(port)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            host = headers.get("host")
            origin = headers.get("origin")
            if host not in self.settings.allowed_hosts:
                await _refuse(421, "misdirected", "this daemon answers only at its loopback address")(
                    scope, receive, send
                )
                return
            if origin is not None and origin not in self.settings.allowed_origins:
                await _refuse(403, "forbidden_origin", "requests from web pages of other origins are refused")(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


def security_settings(port: int) -> TransportSecuritySettings:
    # Only loopback Host headers, and browser Origins of loopback pages only.
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"],
    )


def build_http_app(server: Server[Any], secrets_: Secrets, port: int, activity_path: Path | None = None) -> ASGIApp:
    manager = StreamableHTTPSessionManager(app=server, security_settings=security_settings(port))
    mcp_endpoint = BearerTokenGuard(
        StreamableHTTPASGIApp(manager),
        secrets_.agent_token,
        (
            secrets_.api_token,
            f"this is the REST API's token; {MCP_PATH} takes the agents' (`mcp.headers` in the discovery file)",
        ),
    )
    routes = [Route(MCP_PATH, endpoint=mcp_endpoint)]
    if activity_path is not None:
        api = BearerTokenGuard(
            request_response(activity_endpoint(activity_path)),
            secrets_.api_token,
            (
                secrets_.agent_token,
                "this is the agents' token, which opens /mcp only; the REST API takes its own: "
                "`api.token` in the discovery file, also in `mcphost status -o json`",
            ),
        )
        routes.append(Route(API_PATH, endpoint=api, methods=["GET"]))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return LoopbackOnly(Starlette(routes=routes, lifespan=lifespan), port)
