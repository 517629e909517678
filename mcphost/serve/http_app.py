"""The daemon's HTTP endpoint: MCP over streamable HTTP on loopback, behind a bearer token and an Origin check."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from mcphost.serve.activity_api import API_PATH, activity_endpoint

MCP_PATH = "/mcp"


class BearerTokenGuard:
    """Rejects any request without `Authorization: Bearer <token>`: other local users and web pages get 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            supplied = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(supplied, self._expected):
                response = JSONResponse(
                    {"error": "unauthorized", "message": "missing or wrong bearer token: see `mcphost status`"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="mcphost"'},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def security_settings(port: int) -> TransportSecuritySettings:
    # DNS-rebinding defence: only loopback Host headers, and browser Origins of loopback pages only.
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"],
    )


def build_http_app(server: Server[Any], token: str, port: int, activity_path: Path | None = None) -> Starlette:
    manager = StreamableHTTPSessionManager(app=server, security_settings=security_settings(port))
    mcp_endpoint = BearerTokenGuard(StreamableHTTPASGIApp(manager), token)
    routes = [Route(MCP_PATH, endpoint=mcp_endpoint)]
    if activity_path is not None:
        api = BearerTokenGuard(request_response(activity_endpoint(activity_path)), token)
        routes.append(Route(API_PATH, endpoint=api, methods=["GET"]))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=routes, lifespan=lifespan)
