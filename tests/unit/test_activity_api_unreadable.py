"""`GET /api/v1/activity` over a log that is there but cannot be read: a 503 that says why, as the OpenAPI
document describes it, never the bare 500 of a crash (nor a worker thread stuck opening a FIFO)."""

from __future__ import annotations

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
