"""An upstream answer larger than the server's `max_result_bytes` is refused with an error that says so, and the
call is recorded with the answer's size; the server stays usable."""

from __future__ import annotations

from tests.editor.support import call
from tests.helpers import Sandbox, daemon, error_of, http_agent


async def test_an_oversized_answer_is_refused_and_recorded_with_its_size(sandbox: Sandbox) -> None:
    sandbox.write_config('[permissions]\nwrite = "allow"\n' + sandbox.probe_server(extra="max_result_bytes = 4096"))
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as agent:
        big = error_of(await call(agent, "write", "plain_echo", {"text": "x" * 20_000}))
        small = await call(agent, "write", "plain_echo", {"text": "still here"})
    assert big["code"] == "UPSTREAM_ERROR" and "max_result_bytes" in big["message"]
    assert not small.is_error
    oversized, fine = sandbox.tool_calls()
    assert oversized["status"] == "error" and oversized["response_bytes"] > 20_000
    assert fine["status"] == "success"
