"""`[export.otlp]` end to end: a real daemon, an agent on the official SDK client, and a real OTLP/HTTP receiver.
Every record the daemon writes reaches the collector (calls as spans, host events as logs), redacted as on disk;
a collector that is down or hangs never slows a call, and what it cost shows in `mcphost status`."""

from __future__ import annotations

import getpass
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcphost import __version__
from tests.helpers import Sandbox, daemon, http_agent, mcphost, poll, records_of, stop_process, text_of
from tests.otlp_receiver import HANG, Exported, OtlpReceiver, closed_port_url

PERMISSIONS = '[permissions]\nread = "allow"\nwrite = "allow"\ndestructive = "deny"\n'
SPAN_TYPES = {"tool_call", "hook_decision"}
HOOK_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as r:
        yield r


def export_table(endpoint: str, extra: str = "") -> str:
    return f'[export.otlp]\nendpoint = "{endpoint}"\n{extra}\n'


def status_export(box: Sandbox) -> dict[str, Any] | None:
    done = mcphost(box, "status", "-o", "json")
    assert done.returncode == 0, done.stderr
    (report,) = json.loads(done.stdout)["daemons"]
    export: dict[str, Any] | None = report.get("export")
    return export


def by_record_id(items: list[Exported]) -> dict[str, Exported]:
    return {str(item.attributes.get("mcphost.record.id")): item for item in items}


def run_hook(box: Sandbox, fixture: str) -> subprocess.CompletedProcess[bytes]:
    """`mcphost hook` as an agent runs it, with one of tests/fixtures/hooks' payloads on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "mcphost", "hook"],
        input=(HOOK_FIXTURES / fixture).read_bytes(),
        env={**os.environ, **box.env()},
        capture_output=True,
        timeout=60,
        check=False,
    )


def intent(op: str, **more: Any) -> dict[str, Any]:
    return {"operation_type": op, **more}


async def test_every_record_of_a_daemon_reaches_the_collector_as_a_span_or_a_log(
    sandbox: Sandbox, receiver: OtlpReceiver
) -> None:
    config = PERMISSIONS + sandbox.probe_server() + export_table(receiver.url)
    sandbox.write_config(config)
    async with daemon(sandbox) as d:
        async with http_agent(d.url, d.headers) as client:
            calls = [
                ("call_tool_read", {"name": "probe:read_notes", "args": {"text": "hi"}, "intent": intent("read")}),
                ("call_tool_write", {"name": "probe:plain_echo", "args": {"text": "yo"}, "intent": intent("write")}),
                ("call_tool_write", {"name": "probe:fail", "intent": intent("write")}),
                ("call_tool_destructive", {"name": "probe:wipe_notes", "intent": intent("destructive")}),
                ("call_tool_read", {"name": "probe:read_notes", "intent": intent("write")}),
                ("call_tool_write", {"name": "probe:set_shifty", "args": {"annotations": {"destructiveHint": True}}}),
            ]
            for variant, arguments in calls:
                arguments.setdefault("intent", intent("write"))
                await client.call_tool(variant, arguments)
            await poll(lambda: records_of(sandbox, "annotations_changed"), "the annotations change")
            await client.call_tool("call_tool_write", {"name": "probe:crash", "intent": intent("write")})
            await poll(lambda: records_of(sandbox, "upstream_lost"), "the upstream to be lost")
        # An agent's own tool, decided by the daemon through `mcphost hook`.
        hooked = await anyio.to_thread.run_sync(run_hook, sandbox, "claude-code/pretooluse-bash-rm.json")
        assert hooked.returncode == 0, hooked.stderr
        sandbox.write_config(config + "[log]\nkeep = 7\n")
        await poll(lambda: records_of(sandbox, "config_reload"), "the reload")
        sandbox.write_config(config + "[log]\nkeep = 'seven'\n")
        await poll(lambda: records_of(sandbox, "config_error"), "the rejected save")

        written = sandbox.records()
        spans_expected = {r["id"] for r in written if r["type"] in SPAN_TYPES}
        logs_expected = {r["id"] for r in written if r["type"] not in SPAN_TYPES}
        await poll(
            lambda: (
                spans_expected <= set(by_record_id(receiver.spans()))
                and logs_expected <= set(by_record_id(receiver.logs()))
            ),
            "every record at the collector",
        )
        # Records may still come after the snapshot (the crashed probe's reconnection): wait for the queue to empty.
        export = await poll(
            lambda: (s := status_export(sandbox)) and s["exported"] >= len(written) and s["queued"] == 0 and s,
            "counts",
        )
        assert (export["endpoint"], export["dropped"], export["queued"]) == (receiver.url, 0, 0)
        pid = d.process.pid

    assert {r["type"] for r in written} >= {
        "tool_call",
        "tool_call_started",
        "upstream_connected",
        "upstream_lost",
        "annotations_changed",
        "config_reload",
        "config_error",
    }
    spans, logs = by_record_id(receiver.spans()), by_record_id(receiver.logs())
    calls_by_tool = {(r["tool"], r["status"]): r for r in written if r["type"] == "tool_call"}

    record_of_read = calls_by_tool[("read_notes", "success")]
    read = spans[record_of_read["id"]]
    assert read.item.name == "execute_tool probe:read_notes"
    attributes = read.attributes
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "probe:read_notes"
    assert attributes["mcp.method.name"] == "tools/call"
    # A 2026-era HTTP agent has no session (one exchange per request): then neither says one.
    assert attributes.get("mcp.session.id") == attributes.get("mcphost.session") == record_of_read.get("session_id")
    assert attributes["mcphost.variant"] == "call_tool_read"
    assert attributes["mcphost.intent.operation_type"] == "read"
    assert (attributes["mcphost.decision.by"], attributes["mcphost.decision.rule"]) == ("policy", "permissions.read")
    assert attributes["mcphost.status"] == "success" and attributes["mcphost.server"] == "probe"
    assert "mcphost.client" in attributes
    assert "gen_ai.tool.call.arguments" not in attributes  # content is opt-in
    duration = read.item.end_time_unix_nano - read.item.start_time_unix_nano
    assert abs(duration - record_of_read["duration_ms"] * 1e6) < 1e3

    # A write and its start share a trace and a span: the start is a log record pointing at the call's span.
    write = calls_by_tool[("plain_echo", "success")]
    start = logs[write["started_id"]]
    assert start.item.event_name == "mcphost.tool_call_started"
    assert (start.item.trace_id, start.item.span_id) == (
        spans[write["id"]].item.trace_id,
        spans[write["id"]].item.span_id,
    )

    failed = spans[calls_by_tool[("fail", "error")]["id"]]
    assert failed.attributes["error.type"] == "tool_error" and failed.item.status.code == 2
    crashed = spans[calls_by_tool[("crash", "error")]["id"]]
    assert crashed.attributes["error.type"] == "UPSTREAM_ERROR"
    denied = spans[calls_by_tool[("wipe_notes", "denied")]["id"]]
    assert denied.item.status.code == 0 and "error.type" not in denied.attributes
    assert denied.attributes["mcphost.decision.outcome"] == "deny"
    assert denied.attributes["mcphost.error.code"] == "PERMISSION_DENIED"
    rejected = spans[calls_by_tool[("read_notes", "rejected")]["id"]]
    assert rejected.attributes["mcphost.error.code"] == "INTENT_MISMATCH"

    (hook,) = [spans[r["id"]] for r in written if r["type"] == "hook_decision"]
    assert hook.item.name == "execute_tool Bash"
    assert hook.attributes["gen_ai.tool.call.id"] == "toolu_01ABC123DEF456GHI789JKL0"
    assert hook.attributes["mcphost.hook.agent"] == "claude-code"
    assert hook.attributes["mcphost.status"] == "denied" and "mcp.method.name" not in hook.attributes

    events = {r["type"]: logs[r["id"]] for r in written if r["type"] not in SPAN_TYPES}
    assert events["upstream_connected"].item.body.string_value.startswith("upstream probe connected")
    assert events["upstream_lost"].item.severity_text == "WARN"
    assert events["annotations_changed"].item.body.string_value == "annotations of probe:shifty changed"
    assert events["config_reload"].attributes["mcphost.details"]["changed"] == ["log.keep"]
    assert events["config_error"].item.severity_text == "ERROR"

    resource = read.resource
    assert resource["service.name"] == "mcphost" and resource["service.version"] == __version__
    assert resource["host.name"] == socket.gethostname()
    assert resource["process.owner"] == getpass.getuser()
    assert resource["process.pid"] == pid
    assert read.scope == ("mcphost.activity", __version__)


SECRETS = {
    "bearer": ("Authorization: Bearer zXq9PlantedBearer77Tok", "zXq9PlantedBearer77Tok"),
    "aws": ("AKIAQWERTYUIOPASDFGH", "QWERTYUIOPASDFGH"),
    "github": ("ghp_" + "Ab3" * 12, "Ab3Ab3Ab3Ab3Ab3"),
    "password": ("password=correcthorsebatterystaple9", "correcthorsebatterystaple9"),
}


async def test_no_secret_in_a_calls_arguments_or_answer_reaches_the_collector(
    sandbox: Sandbox, receiver: OtlpReceiver
) -> None:
    collector_token = "collector-only-S3cretToken-0042"
    extra = f'capture_content = true\nheaders = {{ Authorization = "Bearer {collector_token}" }}\n'
    sandbox.write_config(PERMISSIONS + sandbox.probe_server() + export_table(receiver.url, extra))
    planted = " | ".join(value for value, _ in SECRETS.values())
    async with daemon(sandbox) as d:
        async with http_agent(d.url, d.headers) as client:
            # The probe echoes `text` back, so each secret is in the arguments and in the answer.
            echo = {
                "name": "probe:plain_echo",
                "args": {"text": planted, "password": SECRETS["password"][1], "token": SECRETS["github"][0]},
                "intent": intent("write", reason=f"with {SECRETS['aws'][0]}"),
            }
            answered = await client.call_tool("call_tool_write", echo)
            assert SECRETS["bearer"][1] in text_of(answered)  # the agent gets its answer whole; the record does not
            read = {"name": "probe:read_notes", "args": {"text": SECRETS["bearer"][0]}, "intent": intent("read")}
            await client.call_tool("call_tool_read", read)
        ids = {r["id"] for r in sandbox.records() if r["type"] == "tool_call"}
        await poll(lambda: ids <= set(by_record_id(receiver.spans())), "both calls at the collector")
        shown = mcphost(sandbox, "status", "-o", "json").stdout

    sent = receiver.bodies()
    for kind, (_, fragment) in SECRETS.items():
        assert fragment.encode() not in sent, f"the {kind} reached the collector"
    # The content did go (redacted), so the check above looked at something.
    spans = by_record_id(receiver.spans())
    echo_id = next(r["id"] for r in sandbox.records() if r["type"] == "tool_call" and r["tool"] == "plain_echo")
    attributes = spans[echo_id].attributes
    assert attributes["gen_ai.tool.call.arguments"]["password"] == "[REDACTED]"
    assert "[REDACTED:aws_access_key]" in attributes["mcphost.intent.reason"]
    assert "[REDACTED" in attributes["mcphost.response_preview"]
    # The collector's own credential goes to the collector only: never to the log, the status or another request.
    assert all(r.headers["authorization"] == f"Bearer {collector_token}" for r in receiver.requests)
    assert collector_token not in sandbox.log.read_text(encoding="utf-8")
    assert collector_token not in shown and collector_token.encode() not in sent


async def one_more_read(url: str, headers: dict[str, str], arguments: dict[str, Any]) -> None:
    async with http_agent(url, headers) as client:
        assert not (await client.call_tool("call_tool_read", arguments)).is_error


@pytest.mark.parametrize("collector", ["down", "hanging"])
async def test_calls_stay_fast_while_the_collector_is_down_or_hangs_and_status_counts_the_loss(
    sandbox: Sandbox, receiver: OtlpReceiver, collector: str
) -> None:
    if collector == "hanging":
        receiver.mode = HANG
        endpoint = receiver.url
    else:
        endpoint = closed_port_url()
    sandbox.write_config(PERMISSIONS + sandbox.probe_server() + export_table(endpoint, "timeout = 2\n"))
    read = {"name": "probe:read_notes", "args": {"text": "hi"}, "intent": intent("read")}
    async with daemon(sandbox) as d:
        async with http_agent(d.url, d.headers) as client:
            await client.call_tool("call_tool_read", read)  # the upstream is up
            took = []
            for _ in range(10):
                began = time.perf_counter()
                result = await client.call_tool("call_tool_read", read)
                took.append(time.perf_counter() - began)
                assert not result.is_error and text_of(result) == "read_notes: hi"
        # Each batch waits for the collector up to `timeout` (2 s): no call did.
        assert max(took) < 1.0, took
        written = len(sandbox.records())
        export = await poll(
            lambda: (s := status_export(sandbox)) and s["dropped"] >= written and s, "every record dropped", 30
        )
        assert export["exported"] == 0
        expected = "cannot reach the collector" if collector == "down" else "gave up"
        assert expected in export["last_error"]
        human = mcphost(sandbox, "status")
        assert f"{export['dropped']} dropped" in human.stdout and "export error" in human.stdout
        # Records still queued at shutdown get a short deadline, not the collector's time.
        await one_more_read(d.url, d.headers, read)
        d.process.terminate()
        began = time.monotonic()
        await anyio.to_thread.run_sync(d.process.wait, 15)
        assert time.monotonic() - began < 6


async def test_saving_the_config_starts_reconfigures_and_stops_the_export(
    sandbox: Sandbox, receiver: OtlpReceiver
) -> None:
    base = PERMISSIONS + sandbox.probe_server()
    sandbox.write_config(base)
    read = {"name": "probe:read_notes", "intent": intent("read")}
    async with daemon(sandbox) as d, http_agent(d.url, d.headers) as client:
        await client.call_tool("call_tool_read", read)
        assert status_export(sandbox) is None

        sandbox.write_config(base + export_table(receiver.url))
        reload = (await poll(lambda: records_of(sandbox, "config_reload"), "the reload"))[0]
        await poll(lambda: reload["id"] in by_record_id(receiver.logs()), "the reload that started the export")
        await client.call_tool("call_tool_read", read)
        first = sandbox.tool_calls()[-1]["id"]
        await poll(lambda: first in by_record_id(receiver.spans()), "a call after the export started")
        assert sandbox.tool_calls()[0]["id"] not in by_record_id(receiver.spans())  # before it: not exported

        with OtlpReceiver() as other:
            sandbox.write_config(base + export_table(other.url))
            await poll(lambda: len(records_of(sandbox, "config_reload")) == 2, "the second reload")
            await client.call_tool("call_tool_read", read)
            moved = sandbox.tool_calls()[-1]["id"]
            await poll(lambda: moved in by_record_id(other.spans()), "the call at the new collector")
            assert (status_export(sandbox) or {})["endpoint"] == other.url

        sandbox.write_config(base + export_table(receiver.url, "enabled = false\n"))
        await poll(lambda: len(records_of(sandbox, "config_reload")) == 3, "the third reload")
        await poll(lambda: status_export(sandbox) is None, "the export to stop")
        await client.call_tool("call_tool_read", read)
        unsent = sandbox.tool_calls()[-1]["id"]

        sandbox.write_config(base + export_table(receiver.url))
        await poll(lambda: len(records_of(sandbox, "config_reload")) == 4, "the fourth reload")
        again = records_of(sandbox, "config_reload")[-1]
        await poll(lambda: again["id"] in by_record_id(receiver.logs()), "the export to start again")
        assert unsent not in by_record_id(receiver.spans())


def rotel_agent() -> Path | None:
    try:
        import rotel
    except ImportError:
        return None
    binary = Path(rotel.__file__).parent / "rotel-agent"
    return binary if binary.exists() and os.access(binary, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@pytest.mark.skipif(rotel_agent() is None, reason="rotel (an OpenTelemetry collector on PyPI) is not installed")
async def test_a_real_collector_takes_the_export_and_forwards_it_unchanged(
    sandbox: Sandbox, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """rotel, an independent collector (Rust), parses what mcphost sends and re-encodes it for the next hop."""
    binary = rotel_agent()
    assert binary is not None
    port = free_port()
    command = [
        str(binary),
        "start",
        "--otlp-http-endpoint",
        f"127.0.0.1:{port}",
        "--otlp-grpc-endpoint",
        f"127.0.0.1:{free_port()}",
        "--exporter",
        "otlp",
        "--otlp-exporter-endpoint",
        receiver.url,
        "--otlp-exporter-protocol",
        "http",
        "--batch-timeout",
        "100ms",
        "--pid-file",
        str(tmp_path / "rotel.pid"),
        "--log-file",
        str(tmp_path / "rotel.log"),
    ]
    # Popen only forks; it does not block the loop.
    collector = subprocess.Popen(  # noqa: ASYNC220
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sys.stderr
    )
    try:
        await poll(lambda: listening(port), "rotel to listen")
        sandbox.write_config(PERMISSIONS + sandbox.probe_server() + export_table(f"http://127.0.0.1:{port}"))
        async with daemon(sandbox) as d, http_agent(d.url, d.headers) as client:
            read = {"name": "probe:read_notes", "args": {"text": "hi"}, "intent": intent("read")}
            await client.call_tool("call_tool_read", read)
            call = sandbox.tool_calls()[-1]
            connected = records_of(sandbox, "upstream_connected")[0]
            await poll(lambda: call["id"] in by_record_id(receiver.spans()), "the span through rotel")
            await poll(lambda: connected["id"] in by_record_id(receiver.logs()), "the log through rotel")
    finally:
        await stop_process(collector)
    span = by_record_id(receiver.spans())[call["id"]]
    assert span.item.name == "execute_tool probe:read_notes"
    assert span.attributes["gen_ai.tool.name"] == "probe:read_notes"
    assert span.attributes["mcphost.decision.by"] == "policy"
    assert span.resource["service.name"] == "mcphost"
    log = by_record_id(receiver.logs())[connected["id"]]
    assert log.item.body.string_value.startswith("upstream probe connected")
    assert log.attributes["mcphost.details"]["tools"] == connected["details"]["tools"]


def test_config_show_masks_every_export_header(sandbox: Sandbox) -> None:
    headers = '{ x-honeycomb-team = "hcaik_01plantedteamkey", Authorization = "Bearer plantedCollectorTok" }'
    sandbox.write_config(export_table("https://api.honeycomb.io", f"headers = {headers}\n"))
    for output in ([], ["-o", "json"]):
        shown = mcphost(sandbox, "config", "show", *output)
        assert shown.returncode == 0, shown.stderr
        assert "x-honeycomb-team" in shown.stdout
        assert "hcaik_01plantedteamkey" not in shown.stdout and "plantedCollectorTok" not in shown.stdout
