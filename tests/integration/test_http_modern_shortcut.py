"""2026-07-28 tool calls over HTTP, answered by the daemon's call shortcut as the SDK's single exchange answers them.

A call that says it brings no state back (`requestState: null`, which the SDK reads as absent) is the SDK's: the
shortcut takes no repeat of a call that asked. So the same call sent twice, once with it and once without, is answered
once by each way: the two answers and their records must be the same. A sitecustomize in the daemon counts the
shortcut's answers, so a test knows which way answered.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
import pytest_asyncio
from mcp_types import HEADER_MISMATCH

from mcphost.serve.http_app import MAX_REQUEST_BODY
from tests.helpers import Daemon, Hostile, Sandbox, daemon, http_session, message_of, poll, slow_read, tools_call
from tests.integration.test_stdio_calls import (
    COUNTING,
    MODERN_CASES,
    ODD,
    ODD_RESULTS,
    READ,
    SDK_ID,
    SDK_ONLY,
    SHORTCUT_ID,
    modern_meta,
    odd_envelopes,
    plain_request,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODERN = "2026-07-28"


class CountingBox(Sandbox):
    """A sandbox whose daemon loads a sitecustomize that notes each answer the shortcut shapes."""

    @property
    def count(self) -> Path:
        return self.root / "shortcut-count"

    def env(self) -> dict[str, str]:
        env = super().env()
        env["PYTHONPATH"] = os.pathsep.join([str(self.root / "site"), env["PYTHONPATH"]])
        env["MCPHOST_TEST_SHORTCUT_COUNT"] = str(self.count)
        return env

    def answered_by_shortcut(self) -> int:
        return len(self.count.read_text().splitlines()) if self.count.exists() else 0


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Daemon]:
    box = CountingBox(tmp_path_factory.mktemp("modern-http"))
    (box.root / "site").mkdir()
    (box.root / "site" / "sitecustomize.py").write_text(COUNTING, encoding="utf-8")
    box.write_config(
        '[intent_declaration]\nstrict_server_validation = false\n\n[permissions]\nread = "allow"\nwrite = "allow"\n\n'
        + box.probe_server()
        + Hostile(box.root).toml()
    )
    async with daemon(box) as d:
        yield d


def call_body(
    request_id: Any, tool: str, arguments: dict[str, Any], *, sdk_way: bool = False, **capabilities: Any
) -> dict[str, Any]:
    """A 2026-era tools/call; `sdk_way`: one the shortcut leaves to the SDK, which reads it as the same call (an
    explicit null `requestState` is no state to the SDK, but the shortcut takes no repeat of a call that asked)."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments, "_meta": modern_meta(**capabilities)}
    if sdk_way:
        params["requestState"] = None
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def modern_headers(d: Daemon, body: dict[str, Any], **extra: str) -> dict[str, str]:
    headers = {
        **d.headers,
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": body["method"],
        "mcp-name": body["params"]["name"],
    }
    headers.update(extra)
    return headers


async def post(d: Daemon, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(d.url, content=json.dumps(body), headers=headers or modern_headers(d, body))


async def test_a_2026_era_http_call_is_answered_by_the_shortcut_exactly_as_the_sdk_answers_it(served: Daemon) -> None:
    box = served.box
    assert isinstance(box, CountingBox)
    shortcut_before = box.answered_by_shortcut()
    for case, (tool, arguments) in MODERN_CASES.items():
        before = len(box.tool_calls())
        by_sdk = await post(served, call_body("sdk", tool, arguments, sdk_way=True))
        # A client that could be asked, under a config that asks no agent's client: nothing would ask it.
        by_shortcut = await post(served, call_body("shortcut", tool, arguments, elicitation={}))
        assert by_shortcut.status_code == by_sdk.status_code == 200, case
        assert by_shortcut.headers["content-type"] == by_sdk.headers["content-type"] == "application/json", case
        assert "mcp-session-id" not in by_shortcut.headers, case
        assert {k: v for k, v in by_shortcut.json().items() if k != "id"} == {
            k: v for k, v in by_sdk.json().items() if k != "id"
        }, case
        assert by_shortcut.json()["id"] == "shortcut"
        records = box.tool_calls()[before:]  # on disk before either answer was sent
        assert len(records) in (0, 2), (case, records)
        if records:
            sdk_record, shortcut_record = records
            assert sdk_record["client"] == shortcut_record["client"] == "modern-agent 3", case
            assert "session_id" not in sdk_record and "session_id" not in shortcut_record, case
            assert sdk_record["status"] == shortcut_record["status"], case
    assert box.answered_by_shortcut() - shortcut_before == len(MODERN_CASES)


async def test_what_the_sdk_would_refuse_it_refuses_in_its_own_words(served: Daemon) -> None:
    box = served.box
    assert isinstance(box, CountingBox)
    body = call_body(1, "call_tool_read", READ)
    mismatch = {"code": HEADER_MISMATCH}
    refused: dict[str, tuple[dict[str, str], int, dict[str, int] | str]] = {
        "a name header that disagrees with the body": (
            modern_headers(served, body, **{"mcp-name": "retrieve_tools"}),
            400,
            mismatch,
        ),
        "a method header that disagrees with the body": (
            modern_headers(served, body, **{"mcp-method": "tools/list"}),
            400,
            mismatch,
        ),
        "a body sent as text": (
            modern_headers(served, body, **{"content-type": "text/plain"}),
            400,
            "Invalid Content-Type header",
        ),
        "a client that takes JSON only": (modern_headers(served, body, accept="application/json"), 406, ""),
    }
    before, shortcut_before = len(box.tool_calls()), box.answered_by_shortcut()
    for case, (headers, status, said) in refused.items():
        answer = await post(served, body, headers)
        assert answer.status_code == status, (case, answer.text)
        if isinstance(said, dict):
            assert answer.json()["error"]["code"] == said["code"], case
        else:
            assert answer.text == said, case
    duplicated = [(k, v) for k, v in modern_headers(served, body).items()] + [("mcp-method", "tools/call")]
    async with httpx2.AsyncClient(timeout=30) as http:
        twice = await http.post(served.url, content=json.dumps(body), headers=duplicated)
    assert twice.status_code == 400 and "more than once" in twice.json()["error"]["message"]
    assert len(box.tool_calls()) == before, "a refused call ran"
    assert box.answered_by_shortcut() == shortcut_before


FILES = {
    # A bracket or two in every line of a file's content is no nesting: the call is the shortcut's.
    "source code": "".join(f"    rows[{n}] = {{'id': [{n}], 'ok': items[{n}]}}\n" for n in range(300)),
    # Past what the door used to hold (60 KB), a 2026-era call went the SDK's long way; up to the endpoint's limit it
    # is the shortcut's, on the door as on the ASGI way.
    "a large file": "".join(f"line {n}: nothing to see here\n" for n in range(8_000)),  # some 250 KB
}


@pytest.mark.parametrize("file", FILES)
async def test_a_call_carrying_a_file_is_answered_by_the_shortcut_as_the_sdk_answers_it(
    served: Daemon, file: str
) -> None:
    box = served.box
    assert isinstance(box, CountingBox)
    text = FILES[file]
    arguments = {**READ, "args": {"text": text}}
    shortcut_before = box.answered_by_shortcut()
    by_sdk = await post(served, call_body(1, "call_tool_read", arguments, sdk_way=True))
    by_shortcut = await post(served, call_body(1, "call_tool_read", arguments))
    assert box.answered_by_shortcut() == shortcut_before + 1
    assert by_shortcut.status_code == by_sdk.status_code == 200
    assert by_shortcut.json() == by_sdk.json()
    assert by_shortcut.json()["result"]["content"][0]["text"].endswith(text)


@pytest.mark.parametrize("modern", [True, False])
async def test_a_body_past_the_endpoints_limit_is_refused_as_the_sdk_refuses_it(served: Daemon, modern: bool) -> None:
    box = served.box
    assert isinstance(box, CountingBox)
    arguments = {**READ, "args": {"text": "x" * (MAX_REQUEST_BODY + 1)}}
    before, shortcut_before = len(box.tool_calls()), box.answered_by_shortcut()
    if modern:
        body = call_body(1, "call_tool_read", arguments)
        refused = await post(served, body)
    else:
        session = await http_session(served)
        async with httpx2.AsyncClient(timeout=30) as http:
            refused = await http.post(
                served.url, content=json.dumps(tools_call(1, "call_tool_read", arguments)), headers=session
            )
    assert refused.status_code == 413, refused.text
    assert len(box.tool_calls()) == before and box.answered_by_shortcut() == shortcut_before


async def test_a_call_with_a_param_header_is_the_sdks_to_answer(served: Daemon) -> None:
    # mcphost's tools declare no `x-mcp-header`: what a header of that kind means is for the SDK to say.
    box = served.box
    assert isinstance(box, CountingBox)
    body = call_body(1, "call_tool_read", READ)
    shortcut_before = box.answered_by_shortcut()
    plain = await post(served, body, modern_headers(served, body))
    with_param = await post(served, body, {**modern_headers(served, body), "mcp-param-region": "eu"})
    assert box.answered_by_shortcut() == shortcut_before + 1
    assert with_param.status_code == 200, with_param.text  # the SDK checks only the headers a tool declares
    assert with_param.json()["result"] == plain.json()["result"]


async def test_a_handshake_era_call_sent_as_text_is_refused_as_the_sdk_refuses_it(served: Daemon) -> None:
    # A browser's form post needs no preflight: only the SDK's content-type check stands between it and a call.
    box = served.box
    session = await http_session(served)
    async with httpx2.AsyncClient(timeout=30) as http:
        before = len(box.tool_calls())
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "call_tool_read", "arguments": READ},
        }
        as_text = await http.post(
            served.url, content=json.dumps(call), headers={**session, "content-type": "text/plain;charset=UTF-8"}
        )
        assert as_text.status_code == 400, as_text.text
        assert len(box.tool_calls()) == before
        as_json = await http.post(served.url, content=json.dumps(call), headers=session)
        assert as_json.status_code == 200 and as_json.json()["result"]["content"][0]["text"] == "read_notes: hi"


async def test_a_2026_era_http_call_whose_client_goes_away_is_cut_short_and_recorded_as_cancelled(
    served: Daemon, tmp_path: Path
) -> None:
    box = served.box
    started, gate = tmp_path / "started", tmp_path / "gate"
    body = call_body("slow", "call_tool_read", slow_read(started, gate))
    payload = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in modern_headers(served, body).items())
    url = urlsplit(served.url)
    before = len(box.tool_calls())
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    request = f"POST {url.path} HTTP/1.1\r\nhost: {url.netloc}\r\ncontent-length: {len(payload)}\r\n{head}\r\n"
    writer.write(request.encode() + payload)
    await writer.drain()
    try:
        await poll(started.exists, "the upstream to start the slow call")
    finally:
        writer.close()
        await writer.wait_closed()
    try:
        records = await poll(lambda: box.tool_calls()[before:], "the cut call's record")
        assert [r["status"] for r in records] == ["cancelled"]
        assert records[0]["client"] == "modern-agent 3"
    finally:
        gate.touch()
    assert "claimed call failed" not in served.stderr
    assert reader is not None


# Both ways' windows cut to a fraction of a second, so that a call outlasts them in a test.
SHORT_WINDOWS = (
    COUNTING
    + """
from mcp.server import _streamable_http_modern
from mcphost.serve import http_app

_streamable_http_modern._SSE_PING_INTERVAL = 0.3
http_app.SSE_DEFER_S = 0.3
"""
)


async def streamed(d: Daemon, body: dict[str, Any], gate: Path, started: Path) -> tuple[httpx2.Response, list[bytes]]:
    """POST `body`, open `gate` once the answer has committed to a stream and a ping came, and read the stream."""
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        http.stream("POST", d.url, content=json.dumps(body), headers=modern_headers(d, body)) as response,
    ):
        received = b""
        async for chunk in response.aiter_bytes():
            received += chunk
            if b": ping\r\n\r\n" in received and started.exists():
                gate.touch()
    return response, received.split(b"\r\n\r\n")


async def test_a_2026_era_call_that_outlasts_the_window_streams_as_the_sdks_does(tmp_path: Path) -> None:
    box = CountingBox(tmp_path)
    (box.root / "site").mkdir()
    (box.root / "site" / "sitecustomize.py").write_text(SHORT_WINDOWS, encoding="utf-8")
    box.write_config('[permissions]\nread = "allow"\n\n' + box.probe_server())
    async with daemon(box) as d:
        answers = {}
        for way in ("sdk", "shortcut"):
            started, gate = tmp_path / f"started-{way}", tmp_path / f"gate-{way}"
            body = call_body(way, "call_tool_read", slow_read(started, gate), sdk_way=way == "sdk")
            response, events = await streamed(d, body, gate, started)
            assert response.status_code == 200, way
            assert response.headers["content-type"] == "text/event-stream", way
            assert response.headers["cache-control"] == "no-cache, no-transform", way
            *pings, last, end = events
            assert pings and set(pings) == {b": ping"} and end == b"", (way, events)
            assert last.startswith(b"event: message\r\ndata: "), (way, last)
            answers[way] = json.loads(last.removeprefix(b"event: message\r\ndata: "))
        assert answers["shortcut"].pop("id") == "shortcut" and answers["sdk"].pop("id") == "sdk"
        assert answers["shortcut"] == answers["sdk"]
        assert "pid" in json.loads(answers["shortcut"]["result"]["content"][0]["text"])
        assert box.answered_by_shortcut() == 1
        assert [r["status"] for r in box.tool_calls()] == ["success", "success"]


def hostile_bodies() -> dict[str, tuple[Any, dict[str, Any]]]:
    """Tool calls an agent may send that are odd but well-formed enough for the SDK to serve: (id, arguments)."""
    read = dict(READ)
    return {
        "a lone surrogate in an argument": (1, {**read, "args": {"text": "\ud800"}}),
        "escape sequences in an argument": (2, {**read, "args": {"text": "\x1b[31m\u202e\x00"}}),
        "a megabyte argument": (3, {**read, "args": {"text": "x" * 1_000_000}}),
        "deep arguments": (4, {**read, "args": {"text": "x", "deep": json.loads("[" * 200 + "]" * 200)}}),
        "an integer past 64 bits": (5, {**read, "args": {"text": "x", "big": 2**70}}),
        "an id past 64 bits": (2**70, read),
        "a unicode id": ("ид-☃", read),
        "no arguments at all": (6, None),
        "an intent that is a string": (7, {**read, "intent": json.dumps(READ["intent"])}),
        "a mismatched intent": (8, {**read, "intent": {"operation_type": "write"}}),
        "a secret in the reason": (9, {**read, "intent": {"operation_type": "read", "reason": "ghp_" + "a" * 36}}),
    }


@pytest.mark.parametrize("case", list(hostile_bodies()))
async def test_an_odd_2026_era_call_gets_the_same_answer_either_way(served: Daemon, case: str) -> None:
    request_id, arguments = hostile_bodies()[case]
    answers = []
    for sdk_way in (True, False):
        body = call_body(request_id, "call_tool_read", arguments or {}, sdk_way=sdk_way)
        if arguments is None:
            del body["params"]["arguments"]
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        async with httpx2.AsyncClient(timeout=60) as http:
            answer = await http.post(served.url, content=payload, headers=modern_headers(served, body))
        answers.append((answer.status_code, answer.headers.get("content-type"), answer.text))
    (sdk_status, sdk_type, sdk_text), (status, kind, text) = answers
    assert (status, kind) == (sdk_status, sdk_type), (case, answers)
    if kind == "application/json":
        assert json.loads(text) == json.loads(sdk_text), case
    else:
        assert text == sdk_text, case


async def test_an_odd_handshake_era_call_gets_the_same_answer_and_record_either_way(served: Daemon) -> None:
    # The SDK's way answers a session's call on an event stream, the shortcut as plain JSON: the messages must match.
    box = served.box
    session = await http_session(served)
    async with httpx2.AsyncClient(timeout=60) as http:
        for case, arguments in ODD.items():
            answers, kinds, before = [], [], len(box.tool_calls())
            for request_id in (SDK_ID, SHORTCUT_ID):
                body = plain_request(request_id, False, arguments)
                payload = json.dumps(body).encode("utf-8", "surrogatepass")
                response = await http.post(served.url, content=payload, headers=session)
                message = {k: v for k, v in message_of(response).items() if k != "id"}
                answers.append((response.status_code, message))
                kinds.append(response.headers["content-type"].split(";")[0])
            assert answers[0] == answers[1], case
            if answers[0][0] == 200 and case not in SDK_ONLY:  # each went the way it was meant to
                assert kinds == ["text/event-stream", "application/json"], (case, kinds)
            # A body the protocol refuses (a lone surrogate in its JSON) is no call: a 400, either way.
            records = box.tool_calls()[before:]
            assert len(records) == (0 if "error" in answers[0][1] else 2), (case, answers[0], records)
            for key in ("status", "error", "arguments", "arguments_preview", "metadata", "response_preview"):
                assert all(r.get(key) == records[0].get(key) for r in records), (case, key)


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
async def test_an_odd_result_reaches_the_agent_the_same_either_way(served: Daemon, modern: bool) -> None:
    session = None if modern else await http_session(served)
    differ = {}
    async with httpx2.AsyncClient(timeout=60) as http:
        for case, result in ODD_RESULTS.items():
            arguments = {"name": "hostile:malformed", "args": {"result": result}, "intent": {"operation_type": "read"}}
            answers, before = [], len(served.box.tool_calls())
            for request_id in (SDK_ID, SHORTCUT_ID):
                if session is None:
                    body = call_body(request_id, "call_tool_read", arguments, sdk_way=request_id == SDK_ID)
                    headers = modern_headers(served, body)
                else:
                    body = plain_request(request_id, False, arguments)
                    headers = session
                response = await http.post(served.url, content=json.dumps(body), headers=headers)
                answers.append((response.status_code, {k: v for k, v in message_of(response).items() if k != "id"}))
            if answers[0] != answers[1]:
                differ[case] = answers
            # Both went through to the upstream, whose answer is what reached the agent.
            assert [r["decision"]["outcome"] for r in served.box.tool_calls()[before:]] == ["allow"] * 2, case
    assert not differ, json.dumps(differ, indent=1)


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
async def test_an_odd_request_gets_the_same_answer_either_way(served: Daemon, modern: bool) -> None:
    session = None if modern else await http_session(served)
    cases = odd_envelopes(modern)
    cases["an error member beside the method"] = lambda m: {**m, "error": {"code": 1, "message": "x"}}
    differ = {}
    async with httpx2.AsyncClient(timeout=60) as http:
        for case, change in cases.items():
            answers = []
            for request_id in (SDK_ID, SHORTCUT_ID):
                body = change(plain_request(request_id, modern))
                headers = modern_headers(served, body) if session is None else session
                response = await http.post(served.url, content=json.dumps(body), headers=headers)
                message = message_of(response) if response.content else {}
                # The SDK's refusal of an unreadable body quotes it, the id too (cut after 17 characters).
                text = json.dumps({k: v for k, v in message.items() if k != "id"}).replace(request_id[:17], "<id>")
                answers.append((response.status_code, text))
            if answers[0] != answers[1]:
                differ[case] = answers
    assert not differ, json.dumps(differ, indent=1)
