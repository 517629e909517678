"""Fewer, better questions, end to end with a real daemon, a real editor client and the official SDK agent: the prompt
says which rule asked and why; a burst of calls from one agent session is one batch (allow all, deny all, never a
destructive call without naming it); "always allow" narrowed to exact arguments or to a pattern the person confirmed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client

from tests.editor_client import Answer, allow, allow_all, deny_all, editor, never
from tests.helpers import Daemon, Hosted, Sandbox, daemon, error_of, http_agent, mcphost, text_of

# The tests that share the module's daemon (each with editors and agents of its own) run on the module's loop.
ON_SHARED_HOST = pytest.mark.asyncio(loop_scope="module")

# Sessions are what batches gather by: a 2026-07-28 agent over HTTP has none (see the test of that below).
LEGACY = "legacy"

ASK = """
[permissions]
write = "ask"
destructive = "confirm"
batch_window = {window}
prompt_timeout = {timeout}

[[rules]]
tool = "probe:plain_echo"
variant = "write"
args = {{ text = {{ glob = "outside:*" }} }}
action = "ask"
reason = "writes outside the workspace need a look"
"""


def write(text: str, tool: str = "plain_echo") -> dict[str, Any]:
    return {"name": f"probe:{tool}", "args": {"text": text}, "intent": {"operation_type": "write"}}


def destroy(text: str) -> dict[str, Any]:
    return {"name": "probe:wipe_notes", "args": {"text": text}, "intent": {"operation_type": "destructive"}}


@asynccontextmanager
async def host(sandbox: Sandbox, window: float = 0.5, timeout: float = 30) -> AsyncIterator[Daemon]:
    sandbox.write_config(ASK.format(window=window, timeout=timeout) + sandbox.probe_server())
    async with daemon(sandbox) as d:
        yield d


async def burst(client: Client, *calls: tuple[str, dict[str, Any]]) -> list[types.CallToolResult]:
    """The calls made at once from one agent session, as a model's parallel tool calls are."""
    results: list[types.CallToolResult | None] = [None] * len(calls)

    async def one(i: int, variant: str, arguments: dict[str, Any]) -> None:
        results[i] = await client.call_tool(variant, arguments)

    async with anyio.create_task_group() as tg:
        for i, (variant, arguments) in enumerate(calls):
            tg.start_soon(one, i, variant, arguments)
    return [r for r in results if r is not None]


def decisions(sandbox: Sandbox | Hosted) -> list[dict[str, Any]]:
    return [r["decision"] for r in sandbox.tool_calls()]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared_host(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Sandbox, Daemon]]:
    box = Sandbox(tmp_path_factory.mktemp("batches"))
    async with host(box) as d:
        yield box, d


@pytest.fixture
def hosted(shared_host: tuple[Sandbox, Daemon]) -> Hosted:
    return Hosted.now(*shared_host)


# ---- the rule in the prompt


@ON_SHARED_HOST
async def test_a_prompt_names_the_rule_that_asked_and_its_reason(hosted: Hosted) -> None:
    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow()) as ed,
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        ruled = await client.call_tool("call_tool_write", write("outside: /etc/hosts"))
        default = await client.call_tool("call_tool_write", write("inside"))
    assert not ruled.is_error and not default.is_error, (text_of(ruled), text_of(default))
    first, second = ed.prompts
    assert (first["rule"], first["rule_reason"]) == ("rules[0]", "writes outside the workspace need a look")
    assert (second["rule"], second.get("rule_reason")) == ("permissions.write", None)
    # What an allow may be narrowed to, and where a pattern could start.
    assert first["match_options"] == ["tool", "arguments", "pattern"]
    assert first["suggested_pattern"] == {"text": "outside: /etc/*"}
    recorded = decisions(hosted)
    assert recorded[0]["by"] == "editor" and recorded[0]["rule"] == "rules[0]"
    assert recorded[0]["reason"] == "writes outside the workspace need a look"


def test_activity_show_names_the_rule_and_its_reason(sandbox: Sandbox) -> None:
    sandbox.write_config(sandbox.probe_server())
    record = {
        "id": "01JZ0000000000000000000000",
        "timestamp": "2026-11-23T10:00:00.000Z",
        "type": "tool_call",
        "server": "probe",
        "tool": "plain_echo",
        "status": "success",
        "decision": {
            "by": "editor",
            "action": "ask",
            "outcome": "allow",
            "rule": "rules[0]",
            "reason": "writes outside the workspace need a look",
            "batch": "b1",
        },
    }
    sandbox.data.mkdir(parents=True, exist_ok=True)
    sandbox.log.write_text(json.dumps(record) + "\n", encoding="utf-8")
    shown = mcphost(sandbox, "activity", "show", record["id"])
    assert shown.returncode == 0, shown.stderr
    assert "rules[0]" in shown.stdout and "writes outside the workspace need a look" in shown.stdout
    assert "batch" in shown.stdout


# ---- batches


@ON_SHARED_HOST
async def test_a_burst_from_one_agent_session_is_one_batch_and_allow_all_lets_every_call_through(
    hosted: Hosted,
) -> None:
    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=allow_all()) as ed,
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        results = await burst(client, *[("call_tool_write", write(f"note {i}")) for i in range(3)])
    assert [text_of(r) for r in results] == [f"plain_echo: note {i}" for i in range(3)]
    assert ed.prompts == []  # no call was asked about on its own
    (batch,) = ed.batches
    assert sorted(r["arguments"]["text"] for r in batch["requests"]) == ["note 0", "note 1", "note 2"]
    assert batch["session_id"] and all(r["session_id"] == batch["session_id"] for r in batch["requests"])
    recorded = decisions(hosted)
    assert {d["batch"] for d in recorded} == {batch["id"]}
    assert all(d["by"] == "editor" and d["outcome"] == "allow" for d in recorded)


@ON_SHARED_HOST
async def test_deny_all_denies_every_call_of_the_batch(hosted: Hosted) -> None:
    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=deny_all()) as ed,
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        results = await burst(client, ("call_tool_write", write("a")), ("call_tool_write", write("b")))
    assert [error_of(r)["code"] for r in results] == ["PERMISSION_DENIED"] * 2
    assert len(ed.batches) == 1
    assert [c["status"] for c in hosted.tool_calls()] == ["denied", "denied"]


@ON_SHARED_HOST
async def test_a_batch_answer_that_answers_one_call_twice_allows_nothing(hosted: Hosted) -> None:
    # Deny, then allow, for the same call: read as a dict, the last would have won and let it through.
    async def contradicting(batch: dict[str, Any]) -> dict[str, Any]:
        first = batch["requests"][0]["id"]
        return {"answers": [{"id": first, "decision": "deny"}, {"id": first, "decision": "allow"}]}

    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=contradicting) as ed,
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        results = await burst(client, ("call_tool_write", write("a")), ("call_tool_write", write("b")))
    assert len(ed.batches) == 1
    assert all(error_of(r) is not None for r in results)
    assert [c["status"] for c in hosted.tool_calls()] == ["denied", "denied"]


@ON_SHARED_HOST
async def test_a_destructive_call_is_never_allowed_by_a_batch_answer_that_does_not_name_it(hosted: Hosted) -> None:
    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=allow_all(naming=False)) as ed,
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        wrote, wiped = await burst(client, ("call_tool_write", write("fine")), ("call_tool_destructive", destroy("x")))
    assert not wrote.is_error, text_of(wrote)
    error = error_of(wiped)
    assert error["code"] == "PERMISSION_DENIED" and "by name" in error["message"]
    (batch,) = ed.batches
    assert {r["operation"] for r in batch["requests"]} == {"write", "destructive"}
    # Never forwarded: the probe's wipe_notes would have answered.
    assert [c["status"] for c in hosted.tool_calls() if c["tool"] == "wipe_notes"] == ["denied"]


@ON_SHARED_HOST
async def test_a_destructive_call_named_in_the_batch_answer_goes_through(hosted: Hosted) -> None:
    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=allow_all(naming=True)),
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        wrote, wiped = await burst(client, ("call_tool_write", write("fine")), ("call_tool_destructive", destroy("x")))
    assert not wrote.is_error and not wiped.is_error, (text_of(wrote), text_of(wiped))


@ON_SHARED_HOST
async def test_a_lone_prompt_is_asked_on_its_own_and_an_editor_without_batches_gets_every_call_alone(
    hosted: Hosted,
) -> None:
    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=allow_all()) as ed,
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        alone = await client.call_tool("call_tool_write", write("only one"))
    assert not alone.is_error and len(ed.prompts) == 1 and ed.batches == []
    async with editor(d.editor_socket, allow()) as plain, http_agent(d.url, d.headers, mode=LEGACY) as client:
        results = await burst(client, ("call_tool_write", write("a")), ("call_tool_write", write("b")))
    assert not any(r.is_error for r in results)
    assert len(plain.prompts) == 2 and plain.batches == []


@ON_SHARED_HOST
async def test_a_2026_agent_over_http_has_no_session_so_its_burst_gathers_by_its_client_name(hosted: Hosted) -> None:
    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=allow_all()) as ed,
        http_agent(d.url, d.headers, mode="2026-07-28") as client,
    ):
        results = await burst(client, ("call_tool_write", write("a")), ("call_tool_write", write("b")))
    assert not any(r.is_error for r in results)
    (batch,) = ed.batches
    assert batch["session_id"] is None and batch["client"]


@ON_SHARED_HOST
async def test_agent_sessions_are_never_mixed_in_one_batch(hosted: Hosted) -> None:
    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=allow_all()) as ed,
        http_agent(d.url, d.headers, mode=LEGACY) as one,
        http_agent(d.url, d.headers, mode=LEGACY) as two,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(burst, one, ("call_tool_write", write("one a")), ("call_tool_write", write("one b")))
        tg.start_soon(burst, two, ("call_tool_write", write("two a")), ("call_tool_write", write("two b")))
    assert len(ed.batches) == 2
    for batch in ed.batches:
        texts = {r["arguments"]["text"].split()[0] for r in batch["requests"]}
        assert len(texts) == 1  # one agent's calls only


async def test_a_batch_nobody_answers_is_withdrawn_when_its_calls_expire(sandbox: Sandbox) -> None:
    async with (
        host(sandbox, timeout=1.5) as d,
        editor(d.editor_socket, allow(), batch=never()) as ed,
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        results = await burst(client, ("call_tool_write", write("a")), ("call_tool_write", write("b")))
        await ed.wait_for(lambda: len(ed.cancelled) == 1)
    assert [error_of(r)["code"] for r in results] == ["APPROVAL_TIMEOUT"] * 2
    assert ed.cancelled == [ed.batches[0]["id"]]


@ON_SHARED_HOST
async def test_a_call_answered_in_another_editor_leaves_the_batch_whose_answer_for_it_is_ignored(
    hosted: Hosted,
) -> None:
    # One editor batches and never answers; another answers every call on its own once the batch is on screen: its
    # answers win, and the batch goes once none of its calls waits.
    shown = anyio.Event()

    async def once_batched(_request: dict[str, Any]) -> dict[str, Any]:
        await shown.wait()
        return {"decision": "allow"}

    async def batch_shown(_batch: dict[str, Any]) -> dict[str, Any]:
        shown.set()
        return await never()(_batch)

    d = hosted.daemon
    async with (
        editor(d.editor_socket, allow(), batch=batch_shown, name="batching") as batching,
        editor(d.editor_socket, once_batched, name="plain") as plain,
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        results = await burst(client, ("call_tool_write", write("a")), ("call_tool_write", write("b")))
        await batching.wait_for(lambda: len(batching.cancelled) == 1)
    assert not any(r.is_error for r in results)
    assert len(plain.prompts) == 2 and len(batching.batches) == 1
    assert {d["approver"].split(" (")[0] for d in decisions(hosted)} == {"plain 1"}


@ON_SHARED_HOST
async def test_an_editor_that_leaves_mid_batch_leaves_its_calls_to_nobody(hosted: Hosted) -> None:
    d = hosted.daemon
    async with (
        http_agent(d.url, d.headers, mode=LEGACY) as client,
        anyio.create_task_group() as tg,
    ):
        results: list[types.CallToolResult] = []

        async def calls() -> None:
            results.extend(await burst(client, ("call_tool_write", write("a")), ("call_tool_write", write("b"))))

        async with editor(d.editor_socket, allow(), batch=never()) as ed:
            tg.start_soon(calls)
            await ed.wait_for(lambda: len(ed.batches) == 1)
    assert [error_of(r)["code"] for r in results] == ["NO_APPROVER"] * 2


# ---- scoped grants


def answer_with(**response: Any) -> Answer:
    async def answer(_request: dict[str, Any]) -> dict[str, Any]:
        return {"decision": "allow", **response}

    return answer


async def test_always_allow_for_exactly_these_arguments_covers_those_values_only_and_keeps_none_on_disk(
    sandbox: Sandbox,
) -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    async with host(sandbox) as d:
        async with (
            editor(d.editor_socket, answer_with(remember="always", match="arguments")) as ed,
            http_agent(d.url, d.headers, mode=LEGACY) as client,
        ):
            first = await client.call_tool("call_tool_write", write(f"token {secret}"))
            again = await client.call_tool("call_tool_write", write(f"token {secret}"))
            other = await client.call_tool("call_tool_write", write("something else"))
        assert not any(r.is_error for r in (first, again, other))
        assert len(ed.prompts) == 2  # the first call and the one with other arguments (each remembered)
        listed = mcphost(sandbox, "grants", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    recorded = decisions(sandbox)
    assert recorded[0]["remember"] == "always" and recorded[0]["match"] == "arguments"
    assert recorded[1]["by"] == "remembered_grant" and recorded[1]["match"] == "arguments"
    assert recorded[2]["by"] == "editor"
    grants = json.loads(listed.stdout)["grants"]
    exact = sorted(g["arguments_preview"] for g in grants if g.get("match") == "arguments")
    assert len(exact) == 2 and exact[1].startswith('{"text": "token ')
    state = (sandbox.data / "state.toml").read_text(encoding="utf-8")
    assert secret not in state and secret not in listed.stdout


async def test_always_allow_for_a_confirmed_pattern_covers_matching_arguments_only(sandbox: Sandbox) -> None:
    async with host(sandbox) as d:
        async with (
            editor(d.editor_socket, answer_with(remember="always", match="pattern", pattern={"text": "draft:*"})) as ed,
            http_agent(d.url, d.headers, mode=LEGACY) as client,
        ):
            first = await client.call_tool("call_tool_write", write("draft: one"))
            matching = await client.call_tool("call_tool_write", write("draft: two"))
            other = await client.call_tool("call_tool_write", write("final"))
        assert not any(r.is_error for r in (first, matching, other))
        assert [p["arguments"]["text"] for p in ed.prompts] == ["draft: one", "final"]
        listed = mcphost(sandbox, "grants", "list")
        revoked = mcphost(sandbox, "grants", "revoke", "--all")
        async with editor(d.editor_socket, allow()) as after, http_agent(d.url, d.headers, mode=LEGACY) as client:
            await client.call_tool("call_tool_write", write("draft: three"))
        assert len(after.prompts) == 1  # revoked: asked again
    assert listed.returncode == 0 and "text=draft:*" in listed.stdout, listed.stdout
    assert revoked.returncode == 0, revoked.stderr
    assert decisions(sandbox)[1]["by"] == "remembered_grant" and decisions(sandbox)[1]["match"] == "pattern"


@pytest.mark.parametrize(
    "pattern",
    [{"text": "final*"}, {}, {"text": ""}, {"missing": "*"}],
    ids=["not-this-call", "empty", "empty-glob", "absent-argument"],
)
async def test_a_pattern_that_does_not_cover_the_call_it_answers_is_not_remembered(
    sandbox: Sandbox, pattern: dict[str, str]
) -> None:
    async with (
        host(sandbox) as d,
        editor(d.editor_socket, answer_with(remember="always", match="pattern", pattern=pattern)),
        http_agent(d.url, d.headers, mode=LEGACY) as client,
    ):
        result = await client.call_tool("call_tool_write", write("draft: one"))
    assert not result.is_error, text_of(result)
    (call,) = sandbox.tool_calls()
    assert call["decision"]["remember"] == "once"
    assert any("not remembered" in w for w in call["warnings"])
    assert not (sandbox.data / "state.toml").exists() or "pattern" not in (sandbox.data / "state.toml").read_text()
