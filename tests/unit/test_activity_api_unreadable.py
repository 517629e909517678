"""`GET /api/v1/activity` over a log that is there but cannot be read: a 503 that says why, as the OpenAPI
document describes it, never the bare 500 of a crash (nor a worker thread stuck opening a FIFO)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from jsonschema import Draft202012Validator
from starlette.applications import Starlette
from starlette.routing import Route

from mcphost.schemas import openapi_component_schema
from mcphost.serve.activity_api import API_PATH, activity_endpoint

OPENAPI = json.loads(
    (Path(__file__).resolve().parents[2] / "schemas" / "activity-api.openapi.json").read_text(encoding="utf-8")
)


def as_directory(path: Path) -> None:
    path.mkdir()


def as_fifo(path: Path) -> None:
    os.mkfifo(path)


def as_rotated_directory(path: Path) -> None:
    path.write_text("{}\n", encoding="utf-8")
    path.with_name(path.name + ".1").mkdir()


@pytest.mark.parametrize(
    ("breaking", "said"),
    [
        (as_directory, "it is a directory"),
        (as_fifo, "it is not a regular file"),
        (as_rotated_directory, "activity.jsonl.1: it is a directory"),
    ],
)
async def test_an_unreadable_log_is_a_503_that_names_the_file(
    tmp_path: Path, breaking: Callable[[Path], None], said: str
) -> None:
    log = tmp_path / "activity.jsonl"
    breaking(log)
    app = Starlette(routes=[Route(API_PATH, activity_endpoint(log))])
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://x") as http:
        answer = await http.get(API_PATH, params={"limit": "5"})
    assert answer.status_code == 503, answer.text
    body = answer.json()
    Draft202012Validator(openapi_component_schema(OPENAPI, "LogUnreadable")).validate(body)
    assert body["error"] == "log_unreadable" and said in body["message"] and str(tmp_path) in body["message"]
    assert "503" in OPENAPI["paths"][API_PATH]["get"]["responses"]


async def test_records_a_damaged_line_made_are_served_with_the_rest_not_a_500(tmp_path: Path) -> None:
    # One line written by hand or damaged on disk made every page that held it a bare 500 (a lone surrogate has no
    # UTF-8; `1e400` is read back as an infinity, which JSON cannot spell); the CLI's readers show those records.
    lines = [
        '{"id":"01A","timestamp":"2026-11-29T20:00:00.000Z","type":"tool_call","server":"s","status":"success"}',
        '{"id":"01B","timestamp":"2026-11-29T20:00:01.000Z","type":"tool_call","server":"s\\udfff","status":"success"}',
        '{"id":"01C","timestamp":"2026-11-29T20:00:02.000Z","type":"tool_call","server":"s","duration_ms":1e400}',
        '{"id":"01D","timestamp":"2026-11-29T20:00:03.000Z","type":"tool_call","server":"s","n":' + "9" * 40 + "}",
    ]
    log = tmp_path / "activity.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log.chmod(0o600)
    app = Starlette(routes=[Route(API_PATH, activity_endpoint(log))])
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://x") as http:
        answer = await http.get(API_PATH)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    by_id = {record["id"]: record for record in body["records"]}
    assert list(by_id) == ["01D", "01C", "01B", "01A"] and body["count"] == 4
    assert by_id["01B"]["server"] == "s\udfff"  # its escape, as it was on disk
    assert by_id["01C"]["duration_ms"] is None
    assert by_id["01D"]["n"] == int("9" * 40)


async def test_a_page_counts_the_lines_it_met_that_hold_no_record_each_request_its_own(tmp_path: Path) -> None:
    log = tmp_path / "activity.jsonl"
    good = '{"id":"01KB000000000000000000000%d","type":"tool_call","timestamp":"2026-11-28T17:18:02.000Z"}'
    lines = [good % 1, "[1,2,3]", '{"id":"01KB00000000000000000000D1","type":"tool_ca', good % 2, "null"]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    app = Starlette(routes=[Route(API_PATH, activity_endpoint(log))])
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://x") as http:
        answers = await asyncio.gather(*(http.get(API_PATH, params={"limit": "5"}) for _ in range(4)))
        pages = [answer.json() for answer in answers]
    assert "skipped" in OPENAPI["components"]["schemas"]["ActivityPage"]["required"]
    for page in pages:
        assert page["count"] == 2 and page["skipped"] == 3, page  # not the count of the other requests too
