"""The person sees what they approve: a prompt shows the (redacted) arguments even when the log keeps none."""

from __future__ import annotations

from tests.editor.support import assert_ok, call
from tests.editor_client import allow, editor
from tests.helpers import Sandbox, daemon, http_agent


async def test_a_prompt_shows_the_arguments_even_when_the_log_keeps_none(sandbox: Sandbox) -> None:
    sandbox.write_config("[log]\narguments_max_bytes = 0\n" + sandbox.probe_server())
    async with daemon(sandbox) as d, editor(d.editor_socket, allow()) as ed, http_agent(d.url, d.headers) as agent:
        assert_ok(await call(agent, "write", "plain_echo", {"text": "hello", "password": "hunter2"}))
    [prompt] = ed.prompts
    assert prompt["arguments"] == {"text": "hello", "password": "[REDACTED]"}
    [record] = sandbox.tool_calls()
    assert "arguments" not in record and "arguments_preview" not in record


async def test_large_arguments_are_shown_as_a_preview(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    async with daemon(sandbox) as d, editor(d.editor_socket, allow()) as ed, http_agent(d.url, d.headers) as agent:
        assert_ok(await call(agent, "write", "plain_echo", {"text": "x" * 40_000}))
    [prompt] = ed.prompts
    assert prompt["arguments"] is None
    assert prompt["arguments_preview"].startswith('{"text":"xxx')
    assert len(prompt["arguments_preview"].encode("utf-8")) <= 16 * 1024
