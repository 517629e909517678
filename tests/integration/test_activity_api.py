"""`GET /api/v1/activity` on a real daemon: records of real calls made by the SDK client over HTTP, filtered and paged.

One daemon serves the whole module (starting one takes seconds). Records a test adds are appended as a second
process would, with `ActivityLog`; every expectation is computed from the log as it is when the test asks, so
the order the tests run in does not matter. Every answer is checked against schemas/activity-api.openapi.json.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from jsonschema import Draft202012Validator

from mcphost.activity.record import ActivityRecord, RecordMetadata, new_record_id
from mcphost.activity.writer import ActivityLog
from mcphost.schemas import openapi_component_schema
from tests.helpers import Daemon, Sandbox, daemon, http_agent, text_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPENAPI = json.loads(
    (Path(__file__).resolve().parents[2] / "schemas" / "activity-api.openapi.json").read_text(encoding="utf-8")
)
SCHEMA_FOR_STATUS = {
    200: Draft202012Validator(openapi_component_schema(OPENAPI, "ActivityPage")),
    400: Draft202012Validator(openapi_component_schema(OPENAPI, "InvalidParameter")),
    401: Draft202012Validator(openapi_component_schema(OPENAPI, "Unauthorized")),
}

# (label, variant, tool name, intent): the calls the agent makes, in order.
CALLS: list[tuple[str, str, str, dict[str, Any] | None]] = [
    ("read_ok", "call_tool_read", "probe:read_notes", {"operation_type": "read"}),
    ("read_wipe", "call_tool_read", "probe:wipe_notes", {"operation_type": "read"}),  # SERVER_MISMATCH
    ("write_echo", "call_tool_write", "probe:plain_echo", {"operation_type": "write"}),
    ("write_fail", "call_tool_write", "probe:fail", {"operation_type": "write"}),  # the tool errs
    ("destroy", "call_tool_destructive", "probe:wipe_notes", {"operation_type": "destructive"}),  # no approver
    ("mismatch", "call_tool_read", "probe:read_notes", {"operation_type": "write"}),  # INTENT_MISMATCH
    ("no_intent", "call_tool_read", "probe:read_notes", None),  # MISSING_INTENT
    ("other_read", "call_tool_read", "other:read_notes", {"operation_type": "read"}),
]
EXPECTED_STATUS = {
    "read_ok": "success",
    "read_wipe": "rejected",
    "write_echo": "success",
    "write_fail": "error",
    "destroy": "denied",
    "mismatch": "rejected",
    "no_intent": "rejected",
    "other_read": "success",
}


@dataclass
class World:
    box: Sandbox
    daemon: Daemon
    started: datetime
    labels: dict[str, str]  # label -> record id, for the records this module knows by construction

    @property
    def api(self) -> str:
        return self.daemon.url.removesuffix("/mcp") + "/api/v1/activity"

    @property
    def headers(self) -> dict[str, str]:
        return self.daemon.api_headers

    def newest_first(self) -> list[dict[str, Any]]:
        """The log as the API shows it: newest first, a call's start left out once its outcome names it."""
        records = list(reversed(self.box.records()))
        answered = {r["started_id"] for r in records if isinstance(r.get("started_id"), str)}
        return [r for r in records if not (r.get("type") == "tool_call_started" and r["id"] in answered)]

    def label_of(self, record_id: str) -> str | None:
        return next((label for label, rid in self.labels.items() if rid == record_id), None)


def stamp(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_at(when: datetime, **fields: Any) -> ActivityRecord:
    return ActivityRecord(id=new_record_id(int(when.timestamp() * 1000)), timestamp=stamp(when), **fields)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    box = Sandbox(tmp_path_factory.mktemp("activity-api"))
    box.write_config('[permissions]\nwrite = "allow"\n' + box.probe_server("probe") + box.probe_server("other"))
    now = datetime.now(UTC)
    # Older records, in time order, as an earlier daemon would have left them.
    seeded = {
        "old_error": record_at(now - timedelta(days=10), type="config_error", details={"message": "bad key"}),
        "old_reload": record_at(now - timedelta(hours=3), type="config_reload"),
        "archived": record_at(
            now - timedelta(minutes=30),
            server="archive",
            tool="read_notes",
            status="expired",
            metadata=RecordMetadata(tool_variant="call_tool_destructive"),  # intent from the variant alone
        ),
    }
    log = ActivityLog(box.log)
    for record in seeded.values():
        log.append(record)
    log.close()
    labels = {label: record.id for label, record in seeded.items()}
    async with daemon(box) as d:
        async with http_agent(d.url, d.headers) as client:
            for _label, variant, name, intent in CALLS:
                arguments: dict[str, Any] = {"name": name, "args": {"text": "hi"}}
                if intent is not None:
                    arguments["intent"] = intent
                result = await client.call_tool(variant, arguments)
                assert text_of(result)
        calls = [r for r in box.tool_calls() if r.get("server") in ("probe", "other")]
        assert [c["status"] for c in calls] == [EXPECTED_STATUS[label] for label, *_ in CALLS]
        labels.update({label: record["id"] for (label, *_), record in zip(CALLS, calls, strict=True)})
        yield World(box, d, now, labels)


async def get(
    world: World, params: Sequence[tuple[str, str]] | dict[str, str] = (), headers: dict[str, str] | None = None
) -> httpx2.Response:
    """One request; its answer must match the OpenAPI document whatever its status."""
    sent = world.headers if headers is None else headers
    async with httpx2.AsyncClient(timeout=15) as http:
        response = await http.get(world.api, params=params, headers=sent)
    assert response.status_code in SCHEMA_FOR_STATUS, response.text
    assert response.headers["content-type"].startswith("application/json")
    SCHEMA_FOR_STATUS[response.status_code].validate(response.json())
    return response


async def ok(world: World, params: Sequence[tuple[str, str]] | dict[str, str] = ()) -> dict[str, Any]:
    response = await get(world, params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["count"] == len(body["records"])
    return body


# ---- the token


async def test_requests_without_the_right_token_are_refused(world: World) -> None:
    token = world.headers["Authorization"].removeprefix("Bearer ")
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": token},
        {"Authorization": f"Basic {token}"},
        {"Authorization": f"Bearer {token}x"},
        {"Authorization": f"Bearer{token}"},
    ):
        response = await get(world, {"limit": "1"}, headers=headers)
        assert response.status_code == 401, headers
        assert response.json()["error"] == "unauthorized"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await get(world, {"limit": "1"})).status_code == 200
    # The scheme's name is case-insensitive (RFC 9110): a client that writes it otherwise holds the same credential.
    for scheme in ("bearer", "BEARER"):
        assert (await get(world, {"limit": "1"}, headers={"Authorization": f"{scheme} {token}"})).status_code == 200


async def test_the_agent_token_does_not_open_the_activity_api(world: World) -> None:
    # An agent holds the /mcp token; with it, it must not read every agent's history (issue 13).
    response = await get(world, {"limit": "1"}, headers=world.daemon.headers)
    assert response.status_code == 401
    assert "api.token" in response.json()["message"]
    assert world.daemon.api_url == world.api
    assert world.headers != world.daemon.headers


async def test_the_api_token_does_not_open_the_agent_endpoint(world: World) -> None:
    async with httpx2.AsyncClient(timeout=15) as http:
        response = await http.post(
            world.daemon.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**world.headers, "Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 401


# ---- filters

VARIANT_INTENT = {"call_tool_read": "read", "call_tool_write": "write", "call_tool_destructive": "destructive"}


def intent_of(record: dict[str, Any]) -> str | None:
    """What the agent declared, else what the variant it called implies (design.md, activity records)."""
    metadata = record.get("metadata") or {}
    declared = (metadata.get("intent") or {}).get("operation_type")
    if declared in VARIANT_INTENT.values():
        return str(declared)
    return VARIANT_INTENT.get(metadata.get("tool_variant", ""))


def at_or_after(bound: datetime) -> Callable[[dict[str, Any]], bool]:
    return lambda r: datetime.fromisoformat(r["timestamp"]) >= bound


ALL_CALLS = {label for label, *_ in CALLS} | {"archived"}

# (query, the records it must return, the labelled records among them)
FILTERS: list[tuple[dict[str, str], Callable[[dict[str, Any]], bool], set[str]]] = [
    ({"intent_type": "read"}, lambda r: intent_of(r) == "read", {"read_ok", "read_wipe", "no_intent", "other_read"}),
    ({"intent_type": "write"}, lambda r: intent_of(r) == "write", {"write_echo", "write_fail", "mismatch"}),
    ({"intent_type": "destructive"}, lambda r: intent_of(r) == "destructive", {"destroy", "archived"}),
    ({"status": "success"}, lambda r: r.get("status") == "success", {"read_ok", "write_echo", "other_read"}),
    ({"status": "rejected"}, lambda r: r.get("status") == "rejected", {"read_wipe", "mismatch", "no_intent"}),
    ({"status": "error"}, lambda r: r.get("status") == "error", {"write_fail"}),
    ({"status": "denied"}, lambda r: r.get("status") == "denied", {"destroy"}),
    ({"status": "expired"}, lambda r: r.get("status") == "expired", {"archived"}),
    ({"server": "other"}, lambda r: r.get("server") == "other", {"other_read"}),
    ({"server": "archive"}, lambda r: r.get("server") == "archive", {"archived"}),
    (
        {"tool": "read_notes"},
        lambda r: r.get("tool") == "read_notes",
        {"read_ok", "mismatch", "no_intent", "other_read", "archived"},
    ),
    (
        {"tool": "wipe_notes", "status": "rejected", "server": "probe"},
        lambda r: (r.get("tool"), r.get("status"), r.get("server")) == ("wipe_notes", "rejected", "probe"),
        {"read_wipe"},
    ),
    ({"type": "tool_call"}, lambda r: r.get("type", "tool_call") == "tool_call", ALL_CALLS),
    ({"type": "config_reload"}, lambda r: r.get("type") == "config_reload", {"old_reload"}),
    ({"type": "config_error"}, lambda r: r.get("type") == "config_error", {"old_error"}),
    ({"server": "", "status": ""}, lambda r: True, ALL_CALLS | {"old_reload", "old_error"}),  # empty: no filter
]


@pytest.mark.parametrize(
    ("query", "matches", "labelled"), FILTERS, ids=["&".join(f"{k}={v}" for k, v in q.items()) for q, *_ in FILTERS]
)
async def test_each_filter_returns_exactly_the_matching_records(
    world: World, query: dict[str, str], matches: Callable[[dict[str, Any]], bool], labelled: set[str]
) -> None:
    expected = [r["id"] for r in world.newest_first() if matches(r)]
    body = await ok(world, {**query, "limit": "1000"})
    assert [r["id"] for r in body["records"]] == expected
    assert {world.label_of(r["id"]) for r in body["records"]} - {None} == labelled
    assert body["next_cursor"] is None


async def test_since_takes_a_time_or_an_age(world: World) -> None:
    now = datetime.now(UTC)
    cases: list[tuple[str, datetime, set[str]]] = [
        ("1h", now - timedelta(hours=1), ALL_CALLS),
        ("90m", now - timedelta(minutes=90), ALL_CALLS),
        (stamp(world.started - timedelta(hours=5)), world.started - timedelta(hours=5), ALL_CALLS | {"old_reload"}),
        ("30d", now - timedelta(days=30), ALL_CALLS | {"old_reload", "old_error"}),
        # Year 1: overflowed into a 500 before query.py compared differences instead of shifting the bound.
        ("0001-01-01T00:00:30Z", datetime(1, 1, 1, 0, 0, 30, tzinfo=UTC), ALL_CALLS | {"old_reload", "old_error"}),
        (stamp(now + timedelta(days=1)), now + timedelta(days=1), set()),
    ]
    for since, bound, labelled in cases:
        expected = [r["id"] for r in world.newest_first() if at_or_after(bound)(r)]
        body = await ok(world, {"since": since, "limit": "1000"})
        assert [r["id"] for r in body["records"]] == expected, since
        assert {world.label_of(r["id"]) for r in body["records"]} - {None} == labelled, since
    # Filters combine: recent destructive intents only.
    body = await ok(world, {"since": "20m", "intent_type": "destructive"})
    assert [world.label_of(r["id"]) for r in body["records"]] == ["destroy"]


# ---- paging


def append(box: Sandbox, records: list[ActivityRecord]) -> list[str]:
    """Append as a second process does: its own ActivityLog on the same file, under the same lock."""
    log = ActivityLog(box.log)
    try:
        for record in records:
            log.append(record)
    finally:
        log.close()
    return [r.id for r in records]


async def test_limit_and_cursor_walk_every_record_once_newest_first(world: World) -> None:
    pager = append(world.box, [ActivityRecord(server="pager", tool=f"t{i}", status="success") for i in range(7)])
    snapshot = [r["id"] for r in world.newest_first()]
    assert len(snapshot) >= 7 + len(ALL_CALLS)

    first = await ok(world, {"limit": "3"})
    assert [r["id"] for r in first["records"]] == snapshot[:3] == pager[::-1][:3]
    assert first["next_cursor"] == first["records"][-1]["id"]

    # Written after the first page, by another process and by the daemon itself: later pages do not move.
    late = append(world.box, [ActivityRecord(server="late", tool="t", status="success")])
    async with http_agent(world.daemon.url, world.daemon.headers) as client:
        await client.call_tool("call_tool_read", {"name": "probe:read_notes", "intent": {"operation_type": "read"}})
    late.append(world.box.records()[-1]["id"])

    walked = [r["id"] for r in first["records"]]
    cursor = first["next_cursor"]
    pages = 1
    while cursor is not None:
        page = await ok(world, {"limit": "3", "cursor": cursor})
        pages += 1
        ids = [r["id"] for r in page["records"]]
        assert ids and len(ids) <= 3
        walked += ids
        cursor = page["next_cursor"]
        assert cursor is None or (len(ids) == 3 and cursor == ids[-1])
        assert pages <= len(snapshot), "paging does not end"
    assert walked == snapshot  # newest first, no record twice, none left out, none written later
    assert pages == -(-len(snapshot) // 3)

    fresh = await ok(world, {"limit": "3"})
    assert [r["id"] for r in fresh["records"]][:2] == late[::-1]


async def test_paging_under_a_filter_and_a_last_page_that_is_exactly_full(world: World) -> None:
    ids = append(world.box, [ActivityRecord(server="pages", tool=f"t{i}", status="denied") for i in range(7)])
    seen: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    while True:
        query = {"server": "pages", "limit": "3", **({"cursor": cursor} if cursor else {})}
        page = await ok(world, query)
        seen += [r["id"] for r in page["records"]]
        sizes.append(page["count"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids[::-1]
    assert sizes == [3, 3, 1]
    # All the matches fit the page: no cursor to an empty page.
    whole = await ok(world, {"server": "pages", "limit": "7"})
    assert [r["id"] for r in whole["records"]] == ids[::-1]
    assert whole["next_cursor"] is None
    # Default limit applies without `limit`.
    assert (await ok(world, {"server": "pages"}))["count"] == 7


# ---- bad requests

INTENTS = ("read", "write", "destructive")
STATUSES = ("success", "error", "rejected", "denied", "expired", "cancelled", "started", "allowed", "asked")
TYPES = (
    "tool_call",
    "tool_call_started",
    "config_reload",
    "config_error",
    "upstream_connected",
    "upstream_lost",
    "annotations_changed",
    "hook_decision",
)
PARAMETERS = ("intent_type", "status", "server", "tool", "type", "since", "limit", "cursor")

BAD: list[tuple[str, list[tuple[str, str]], str, Sequence[str]]] = [
    ("intent_type", [("intent_type", "delete")], "intent_type", INTENTS),
    ("intent_type-case", [("intent_type", "READ")], "intent_type", INTENTS),
    ("status", [("status", "ok")], "status", STATUSES),
    ("type", [("type", "call")], "type", TYPES),
    ("limit-0", [("limit", "0")], "limit", ("1 to 1000",)),
    ("limit-1001", [("limit", "1001")], "limit", ("1 to 1000",)),
    ("limit-x", [("limit", "x")], "limit", ("1 to 1000",)),
    ("limit-negative", [("limit", "-3")], "limit", ("1 to 1000",)),
    ("since-word", [("since", "yesterday")], "since", ("2026-11-21T10:00:00Z", "15m", "2h", "7d")),
    ("since-unit", [("since", "15y")], "since", ("15m", "7d")),
    ("since-month-13", [("since", "2026-13-01")], "since", ("2026-11-21T10:00:00Z",)),
    # Out of the calendar: a 500 (OverflowError) before query.py caught it.
    ("since-huge-age", [("since", "99999999d")], "since", ("out of range", "7d")),
    ("since-before-year-1", [("since", "0001-01-01T00:00:00+01:00")], "since", ("out of range",)),
    ("cursor-short", [("cursor", "nope")], "cursor", ("record id",)),
    ("cursor-alphabet", [("cursor", "U" * 26)], "cursor", ("record id",)),
    ("unknown", [("verbose", "1")], "verbose", PARAMETERS),
    ("repeated-status", [("status", "success"), ("status", "error")], "status", ("more than once",)),
    ("repeated-limit", [("limit", "3"), ("limit", "3")], "limit", ("more than once",)),
]


@pytest.mark.parametrize(("query", "parameter", "mentions"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
async def test_bad_parameters_are_a_400_that_names_the_parameter_and_what_is_valid(
    world: World, query: list[tuple[str, str]], parameter: str, mentions: Sequence[str]
) -> None:
    response = await get(world, query)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "invalid_parameter"
    assert body["parameter"] == parameter
    assert body["message"].startswith(f"{parameter}: ")
    for word in mentions:
        assert word in body["message"], (word, body["message"])


# ---- the published description


async def test_answers_match_the_openapi_document(world: World) -> None:
    body = await ok(world, {"limit": "1000"})
    SCHEMA_FOR_STATUS[200].validate(body)  # `get` checked it already; here on every kind of record at once
    kinds = {r.get("type") for r in body["records"]}
    assert {"tool_call", "config_reload", "config_error"} <= kinds
    records = {world.label_of(r["id"]): r for r in body["records"]}
    destroy = records["destroy"]
    assert destroy["metadata"]["intent"] == {"operation_type": "destructive"}
    assert destroy["metadata"]["tool_variant"] == "call_tool_destructive"
    assert destroy["decision"]["outcome"] == "deny"
    operation = OPENAPI["paths"]["/api/v1/activity"]["get"]
    assert tuple(p["name"] for p in operation["parameters"]) == PARAMETERS
    assert [p["schema"].get("enum") for p in operation["parameters"][:5]] == [
        list(INTENTS),
        list(STATUSES),
        None,
        None,
        list(TYPES),
    ]


async def test_records_of_the_agent_calls_carry_intent_and_status(world: World) -> None:
    body = await ok(world, {"server": "probe", "type": "tool_call", "limit": "1000"})
    by_label = {world.label_of(r["id"]): r for r in body["records"]}
    assert by_label["mismatch"]["error"]["code"] == "INTENT_MISMATCH"
    assert by_label["read_wipe"]["error"]["code"] == "SERVER_MISMATCH"
    assert by_label["no_intent"]["error"]["code"] == "MISSING_INTENT"
    assert not (by_label["no_intent"]["metadata"].get("intent") or {}).get("operation_type")
    assert by_label["no_intent"]["metadata"]["tool_variant"] == "call_tool_read"
