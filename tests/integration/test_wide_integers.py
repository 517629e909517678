"""An integer past 64 bits in an agent's arguments or an upstream's answer is passed on with every digit.

orjson, which the shortcuts and the upstream lane read and write with, reads such an integer as a float, silently
rounded, and refuses to write one: a call carried 1.1805916207174113e+21 where the agent sent 1180591620717411303424,
or failed as an upstream error though the upstream never saw it. Python's `json` reads here, the way every answer is
read back, so a rounded digit cannot hide.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx2
import pytest

from tests.helpers import JSON_BOTH, Daemon, Sandbox, daemon, http_session, message_of
from tests.integration.test_stdio_calls import modern_meta, opened

WIDE = 2**70  # 1180591620717411303424
ARGUMENTS = {
    "name": "probe:read_notes",
    "args": {"text": WIDE, "also": [-(2**64) - 1]},
    "intent": {"operation_type": "read"},
}


def call(request_id: Any, modern: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "call_tool_read", "arguments": ARGUMENTS}
    if modern:
        params["_meta"] = modern_meta()
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def check(answer: dict[str, Any], box: Sandbox) -> None:
    result = answer["result"]
    assert not result.get("isError"), result
    assert result["content"][0]["text"] == f"read_notes: {WIDE}"
    assert result["structuredContent"] == {"tool": "read_notes", "text": WIDE}
    record = box.tool_calls()[-1]
    assert record["status"] == "success" and record["arguments"] == ARGUMENTS["args"]


@pytest.mark.parametrize("door", ["--in-process", "relay"])
@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
async def test_a_wide_integer_crosses_stdio_exactly(sandbox: Sandbox, door: str, modern: bool) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with contextlib.AsyncExitStack() as stack:
        raw = await opened(stack, sandbox, door, modern)
        # The second after the first went through (nothing in between turned lossy), under an id as wide.
        for request_id in (1, WIDE + 1):
            await raw.send(call(request_id, modern))
            check(await raw.answer_to(request_id, timeout=30), sandbox)


async def post(d: Daemon, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.post(d.url, content=json.dumps(body), headers=headers)
    assert answer.status_code == 200, answer.text
    return message_of(answer)  # the SDK's way answers a session's call on an event stream


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
async def test_a_wide_integer_crosses_http_exactly(sandbox: Sandbox, modern: bool) -> None:
    sandbox.write_config('[permissions]\nread = "allow"\n\n' + sandbox.probe_server())
    async with daemon(sandbox) as d:
        if modern:
            headers = {**d.headers, **JSON_BOTH, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}
            headers["mcp-name"] = "call_tool_read"
        else:
            headers = await http_session(d)
        for request_id in (1, WIDE + 1):
            answer = await post(d, call(request_id, modern), headers)
            assert answer["id"] == request_id
            check(answer, sandbox)
