"""`GET /api/v1/activity`: the activity log over the daemon's HTTP endpoint, for scripts and dashboards.

The handler parses and validates the query with the same functions as `mcphost activity list`, reads in a
worker thread (the log can be large), and answers JSON. Described in schemas/activity-api.openapi.json.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcphost.activity.query import (
    FILTER_PARAMETERS,
    FilterError,
    Page,
    RecordFilter,
    parse_cursor,
    parse_filter,
    parse_limit,
    select,
)
from mcphost.activity.reader import UnreadableLog, not_records, read_failure

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
            page, skipped = await anyio.to_thread.run_sync(_select, log_path, flt, limit, cursor)
        except (UnreadableLog, OSError) as exc:
            # The log is there but not readable (replaced by a directory, its mode changed, the disk failing):
            # said as such, not as the bare 500 of a crash.
            return JSONResponse({"error": "log_unreadable", "message": read_failure(exc)}, status_code=503)
        body = b'{"records":[%b],"count":%d,"next_cursor":%b,"skipped":%d}' % (
            b",".join(map(_record_json, page.records)),
            len(page.records),
            orjson.dumps(page.next_cursor),
            skipped,
        )
        return Response(body, media_type="application/json")

    return endpoint


def _select(log_path: Path, flt: RecordFilter, limit: int | None, cursor: str | None) -> tuple[Page, int]:
    """The page, and how many lines that hold no record its reading met (counted per thread: this one's alone)."""
    before = not_records()
    page = select(log_path, flt, limit, cursor)
    return page, not_records() - before


def _record_json(record: dict[str, Any]) -> bytes:
    """One record as JSON, whatever a line damaged on disk or by hand made of it: the CLI's readers show such a record,
    and one of them made every page holding it a bare 500 here. NaN and the infinities (`1e400` read back) are written
    as null, as JSON has no spelling for them; a lone surrogate as its escape; an integer of any size whole."""
    try:
        return orjson.dumps(record)
    except (orjson.JSONEncodeError, TypeError):
        pass
    try:
        return json.dumps(_finite(record), ensure_ascii=True, separators=(",", ":"), default=str).encode()
    except (RecursionError, ValueError) as exc:
        stub = {"id": record.get("id"), "unreadable": f"this record cannot be written as JSON: {type(exc).__name__}"}
        return json.dumps(stub, ensure_ascii=True, default=str).encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
