"""`GET /api/v1/activity`: the activity log over the daemon's HTTP endpoint, for scripts and dashboards.

The handler parses and validates the query with the same functions as `mcphost activity list`, reads in a
worker thread (the log can be large), and answers JSON. Described in schemas/activity-api.openapi.json.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcphost.activity.query import (
    FILTER_PARAMETERS,
    FilterError,
    Page,
    parse_cursor,
    parse_filter,
    parse_limit,
    select,
)
from mcphost.activity.reader import UnreadableLog, read_failure

API_PATH = "/api/v1/activity"
QUERY_PARAMETERS = (*FILTER_PARAMETERS, "limit", "cursor")


def bad_request(parameter: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": "invalid_parameter", "parameter": parameter, "message": f"{parameter}: {message}"},
        status_code=400,
    )


def activity_endpoint(log_path: Path) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        query = request.query_params
        for name in query:
            if name not in QUERY_PARAMETERS:
                return bad_request(name, f"unknown parameter; use: {', '.join(QUERY_PARAMETERS)}")
        for name in QUERY_PARAMETERS:
            if len(query.getlist(name)) > 1:
                return bad_request(name, "given more than once")
        try:
            flt = parse_filter({name: query.get(name) for name in FILTER_PARAMETERS})
            limit = parse_limit(query.get("limit"))
            cursor = parse_cursor(query.get("cursor"))
        except FilterError as exc:
            return bad_request(exc.parameter, exc.message)
        try:
            page: Page = await anyio.to_thread.run_sync(select, log_path, flt, limit, cursor)
        except (UnreadableLog, OSError) as exc:
            # The log is there but not readable (replaced by a directory, its mode changed, the disk failing):
            # said as such, not as the bare 500 of a crash.
            return JSONResponse({"error": "log_unreadable", "message": read_failure(exc)}, status_code=503)
        return JSONResponse({"records": page.records, "count": len(page.records), "next_cursor": page.next_cursor})

    return endpoint
