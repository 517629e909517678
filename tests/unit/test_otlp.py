"""Records as OpenTelemetry spans and logs: the mapping is plain functions over the record dicts, and the bytes it
encodes are what opentelemetry-proto's own generated classes read back."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, get_args

import pytest

from mcphost.activity import otlp
from mcphost.activity.record import (
    ActivityRecord,
    Decision,
    ErrorInfo,
    RecordIntent,
    RecordMetadata,
    RecordType,
)
from mcphost.config import ConfigError
from mcphost.config.loader import parse_config
from mcphost.config.models import EXPORTED_RECORD_TYPES, ExportedRecordType

trace_pb = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
logs_pb = pytest.importorskip("opentelemetry.proto.collector.logs.v1.logs_service_pb2")
span_pb = pytest.importorskip("opentelemetry.proto.trace.v1.trace_pb2")

from tests.otlp_receiver import attributes_of  # noqa: E402

STAMP = "2026-11-21T10:05:00.250Z"
STAMP_NS = 1_795_255_500_250_000_000


def written(record: ActivityRecord) -> dict[str, Any]:
    """The record as the activity log writes it and hands it to listeners."""
    payload, _ = record.encode()
    return payload


def write_call(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": "01JCALL0000000000000000000",
        "timestamp": STAMP,
        "server": "github",
        "tool": "create_issue",
        "status": "success",
        "duration_ms": 1500.0,
        "metadata": RecordMetadata(
            intent=RecordIntent(operation_type="write", data_sensitivity="internal", reason="file the bug"),
            tool_variant="call_tool_write",
            annotations={"readOnlyHint": False, "destructiveHint": False},
            call_with="call_tool_write",
        ),
        "decision": Decision(
            by="editor", action="ask", outcome="allow", rule="permissions.write", wait_ms=900.0, remember="once"
        ),
        "arguments": {"title": "crash on start"},
        "request_bytes": 26,
        "response_bytes": 120,
        "response_preview": "issue #12 created",
        "session_id": "relay-7f3a",
        "client": "claude-code 1.0",
        "started_id": "01JSTART000000000000000000",
    }
    fields.update(changes)
    return written(ActivityRecord(**fields))


def hook_decision() -> dict[str, Any]:
    return written(
        ActivityRecord(
            id="01JHOOK0000000000000000000",
            timestamp=STAMP,
            type="hook_decision",
            server="claude-code",
            tool="Bash",
            status="denied",
            duration_ms=3.0,
            metadata=RecordMetadata(
                intent=RecordIntent(operation_type="destructive"),
                tool_variant="call_tool_destructive",
                hook={
                    "agent": "claude-code",
                    "event": "PreToolUse",
                    "tool_name": "Bash",
                    "tool_use_id": "toolu_01",
                    "because": "rm -rf is destructive",
                },
            ),
            decision=Decision(by="policy", action="deny", outcome="deny", rule="permissions.destructive"),
            session_id="claude-code-1a2b",
            client="Claude Code (hook)",
        )
    )


# ---- spans


def test_a_tool_call_is_an_execute_tool_span_with_the_genai_and_mcp_attributes() -> None:
    span = otlp.to_span(write_call(), now_ns=0)
    assert span.name == "execute_tool github:create_issue"
    assert span.kind == otlp.SPAN_KIND_INTERNAL
    assert (span.start_ns, span.end_ns) == (STAMP_NS - 1_500_000_000, STAMP_NS)
    assert span.status_code == otlp.STATUS_UNSET
    attributes = span.attributes
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "github:create_issue"
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["mcp.session.id"] == "relay-7f3a"
    assert "error.type" not in attributes


def test_mcphosts_own_view_of_a_call_is_under_the_mcphost_prefix() -> None:
    attributes = otlp.to_span(write_call(), now_ns=0).attributes
    assert {k: v for k, v in attributes.items() if k.startswith("mcphost.")} == {
        "mcphost.record.id": "01JCALL0000000000000000000",
        "mcphost.record.type": "tool_call",
        "mcphost.started_id": "01JSTART000000000000000000",
        "mcphost.status": "success",
        "mcphost.server": "github",
        "mcphost.tool": "create_issue",
        "mcphost.client": "claude-code 1.0",
        "mcphost.session": "relay-7f3a",
        "mcphost.variant": "call_tool_write",
        "mcphost.call_with": "call_tool_write",
        "mcphost.intent.operation_type": "write",
        "mcphost.intent.data_sensitivity": "internal",
        "mcphost.intent.reason": "file the bug",
        "mcphost.annotations.readOnlyHint": False,
        "mcphost.annotations.destructiveHint": False,
        "mcphost.decision.by": "editor",
        "mcphost.decision.action": "ask",
        "mcphost.decision.outcome": "allow",
        "mcphost.decision.rule": "permissions.write",
        "mcphost.decision.at": attributes["mcphost.decision.at"],
        "mcphost.decision.wait_ms": 900.0,
        "mcphost.decision.remember": "once",
        "mcphost.request_bytes": 26,
        "mcphost.response_bytes": 120,
    }


def test_content_is_exported_only_when_asked_for_and_as_recorded() -> None:
    record = write_call()
    assert "gen_ai.tool.call.arguments" not in otlp.to_span(record, now_ns=0).attributes
    assert "mcphost.response_preview" not in otlp.to_span(record, now_ns=0).attributes
    captured = otlp.to_span(record, now_ns=0, capture_content=True).attributes
    assert captured["gen_ai.tool.call.arguments"] == {"title": "crash on start"}
    assert captured["mcphost.response_preview"] == "issue #12 created"
    # Arguments over [log] arguments_max_bytes are on record as a preview only: that is what goes.
    cut = write_call(arguments=None, arguments_preview='{"title": "crash')
    assert otlp.to_span(cut, now_ns=0, capture_content=True).attributes["gen_ai.tool.call.arguments"] == (
        '{"title": "crash'
    )


def test_a_failed_call_is_an_error_with_mcphosts_code_as_error_type() -> None:
    record = write_call(status="error", error=ErrorInfo(code="UPSTREAM_ERROR", message="github: server went away"))
    span = otlp.to_span(record, now_ns=0)
    assert span.attributes["error.type"] == "UPSTREAM_ERROR"
    assert (span.status_code, span.status_message) == (otlp.STATUS_ERROR, "github: server went away")


def test_a_tools_own_error_is_error_type_tool_error_as_the_mcp_conventions_say() -> None:
    span = otlp.to_span(write_call(status="error"), now_ns=0)
    assert span.attributes["error.type"] == "tool_error"
    assert span.status_code == otlp.STATUS_ERROR


@pytest.mark.parametrize(
    ("status", "code"),
    [("denied", "PERMISSION_DENIED"), ("rejected", "INTENT_MISMATCH"), ("expired", "APPROVAL_TIMEOUT")],
)
def test_a_refused_denied_or_expired_call_is_a_decision_not_an_error(status: str, code: str) -> None:
    span = otlp.to_span(write_call(status=status, error=ErrorInfo(code=code, message="no")), now_ns=0)
    assert span.status_code == otlp.STATUS_UNSET
    assert "error.type" not in span.attributes
    assert (span.attributes["mcphost.status"], span.attributes["mcphost.error.code"]) == (status, code)


def test_a_hook_decision_is_a_span_named_by_the_agents_tool_without_mcp_attributes() -> None:
    span = otlp.to_span(hook_decision(), now_ns=0)
    assert span.name == "execute_tool Bash"
    attributes = span.attributes
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "Bash"
    assert attributes["gen_ai.tool.call.id"] == "toolu_01"
    assert "mcp.method.name" not in attributes and "mcp.session.id" not in attributes
    assert attributes["mcphost.hook.agent"] == "claude-code"
    assert attributes["mcphost.hook.event"] == "PreToolUse"
    assert attributes["mcphost.hook.because"] == "rm -rf is destructive"
    assert attributes["mcphost.decision.by"] == "policy"
    assert span.status_code == otlp.STATUS_UNSET


def test_a_call_rejected_before_its_name_parsed_is_still_a_span() -> None:
    bare = written(ActivityRecord(status="rejected", error=ErrorInfo(code="MISSING_INTENT", message="m")))
    span = otlp.to_span(bare, now_ns=42)
    assert span.name == "execute_tool"
    assert "gen_ai.tool.name" not in span.attributes


def test_times_fall_back_to_now_and_a_missing_duration_is_an_instant() -> None:
    span = otlp.to_span({"type": "tool_call", "id": "x", "timestamp": "not a time"}, now_ns=7)
    assert (span.start_ns, span.end_ns) == (7, 7)
    assert otlp.time_ns("2026-11-21T10:05:00.250+00:00") == STAMP_NS
    assert otlp.time_ns("2026-11-21T10:05:00.250123Z") == STAMP_NS + 123_000
    assert otlp.time_ns("2026-11-21T10:05:00") is None  # no zone: not a time the writer makes
    assert otlp.time_ns(None) is None


# ---- ids


def test_ids_come_from_the_record_so_a_second_export_is_the_same_span() -> None:
    first, again = otlp.to_span(write_call(), now_ns=1), otlp.to_span(write_call(), now_ns=2)
    assert (first.trace_id, first.span_id) == (again.trace_id, again.span_id)
    assert len(first.trace_id) == 16 and len(first.span_id) == 8
    other = otlp.to_span(write_call(id="01JOTHER000000000000000000", started_id=None), now_ns=1)
    assert other.trace_id != first.trace_id and other.span_id != first.span_id


def test_a_call_and_its_start_share_trace_and_span_id() -> None:
    outcome = write_call()
    start = dict(outcome, id=outcome["started_id"], type="tool_call_started", status="started")
    del start["started_id"]
    span, log = otlp.to_span(outcome, now_ns=0), otlp.to_log(start, now_ns=0)
    assert (log.trace_id, log.span_id) == (span.trace_id, span.span_id)
    # A read has no start on record: its ids come from its own id.
    read = write_call(started_id=None)
    assert otlp.call_ids(read) == (otlp.trace_id_for(read["id"]), otlp.span_id_for(read["id"]))


# ---- logs


@pytest.mark.parametrize(
    ("record", "severity", "body"),
    [
        (
            {"type": "config_reload", "details": {"summary": "changed: permissions.write", "changed": ["a"]}},
            otlp.SEVERITY_INFO,
            "config reloaded: changed: permissions.write",
        ),
        (
            {"type": "config_error", "details": {"errors": [{"message": "unknown key `wirte`"}]}},
            otlp.SEVERITY_ERROR,
            "config rejected, the last good config stays in force: unknown key `wirte`",
        ),
        (
            {"type": "upstream_connected", "server": "probe", "details": {"tools": 9}},
            otlp.SEVERITY_INFO,
            "upstream probe connected (9 tools)",
        ),
        (
            {"type": "upstream_lost", "server": "probe", "details": {"reason": "exit code 3"}},
            otlp.SEVERITY_WARN,
            "upstream probe lost: exit code 3",
        ),
        (
            {"type": "annotations_changed", "server": "probe", "tool": "shifty", "details": {"tool": "shifty"}},
            otlp.SEVERITY_WARN,
            "annotations of probe:shifty changed",
        ),
        ({"type": "something_newer"}, otlp.SEVERITY_INFO, "something_newer"),
    ],
)
def test_host_events_are_log_records_with_a_severity_and_a_sentence(
    record: dict[str, Any], severity: int, body: str
) -> None:
    log = otlp.to_log({"id": "01JEVENT000000000000000000", "timestamp": STAMP, **record}, now_ns=0)
    assert (log.severity_number, log.body, log.time_ns) == (severity, body, STAMP_NS)
    assert log.event_name == f"mcphost.{record['type']}"
    assert log.attributes["mcphost.record.type"] == record["type"]
    assert log.attributes["mcphost.record.id"] == "01JEVENT000000000000000000"
    if "details" in record:
        assert log.attributes["mcphost.details"] == record["details"]
    assert (log.trace_id, log.span_id) == (b"", b"")


def test_a_calls_start_is_a_log_record_with_the_calls_attributes() -> None:
    start = write_call(id="01JSTART000000000000000000", type="tool_call_started", status="started", started_id=None)
    log = otlp.to_log(start, now_ns=0)
    assert log.body == "call_tool_write github:create_issue forwarded to its server"
    assert log.attributes["gen_ai.tool.name"] == "github:create_issue"
    assert log.attributes["mcphost.intent.reason"] == "file the bug"
    assert log.attributes["mcphost.decision.by"] == "editor"
    assert log.severity_text == "INFO"


# ---- the resource


def test_the_resource_says_which_mcphost_on_which_machine_for_which_login() -> None:
    attributes = otlp.resource_attributes(
        version="0.1.0", instance_id="i-1", host_name="ana-laptop", owner="ana", pid=4242, extra={}
    )
    assert attributes == {
        "service.name": "mcphost",
        "service.version": "0.1.0",
        "service.instance.id": "i-1",
        "host.name": "ana-laptop",
        "process.pid": 4242,
        "process.owner": "ana",
    }
    team = otlp.resource_attributes(
        version="0", instance_id="i", host_name="h", owner=None, pid=1, extra={"user.email": "ana@example.com"}
    )
    assert team["user.email"] == "ana@example.com" and "process.owner" not in team


# ---- the wire format, read back by opentelemetry-proto


def test_spans_decode_with_the_official_classes() -> None:
    resource = otlp.resource_attributes(version="0.1.0", instance_id="i", host_name="h", owner="o", pid=1, extra={})
    spans = [
        otlp.to_span(write_call(), now_ns=0, capture_content=True),
        otlp.to_span(write_call(id="01JERR", status="error", started_id=None), now_ns=0),
    ]
    request = trace_pb.ExportTraceServiceRequest.FromString(otlp.encode_traces(resource, spans, "0.1.0"))
    (resource_spans,) = request.resource_spans
    assert attributes_of(resource_spans.resource.attributes) == resource
    (scope_spans,) = resource_spans.scope_spans
    assert (scope_spans.scope.name, scope_spans.scope.version) == ("mcphost.activity", "0.1.0")
    ok, failed = scope_spans.spans
    assert ok.name == "execute_tool github:create_issue"
    assert ok.kind == span_pb.Span.SPAN_KIND_INTERNAL
    assert (ok.trace_id, ok.span_id) == (spans[0].trace_id, spans[0].span_id)
    assert (ok.start_time_unix_nano, ok.end_time_unix_nano) == (spans[0].start_ns, spans[0].end_ns)
    assert attributes_of(ok.attributes) == spans[0].attributes
    assert ok.status.code == span_pb.Status.STATUS_CODE_UNSET
    assert failed.status.code == span_pb.Status.STATUS_CODE_ERROR
    assert attributes_of(failed.attributes)["error.type"] == "tool_error"


def test_logs_decode_with_the_official_classes() -> None:
    start = write_call(id="01JSTART000000000000000000", type="tool_call_started", status="started", started_id=None)
    event = {"id": "e", "timestamp": STAMP, "type": "config_error", "details": {"errors": [{"message": "bad"}]}}
    logs = [otlp.to_log(start, now_ns=0), otlp.to_log(event, now_ns=0)]
    request = logs_pb.ExportLogsServiceRequest.FromString(otlp.encode_logs({"service.name": "mcphost"}, logs, "0"))
    first, second = request.resource_logs[0].scope_logs[0].log_records
    assert (first.trace_id, first.span_id) == (logs[0].trace_id, logs[0].span_id)
    assert first.severity_text == "INFO" and first.severity_number == 9
    assert first.body.string_value == logs[0].body
    assert first.event_name == "mcphost.tool_call_started"
    assert first.time_unix_nano == first.observed_time_unix_nano == STAMP_NS
    assert second.severity_number == 17 and second.severity_text == "ERROR"
    assert attributes_of(second.attributes)["mcphost.details"] == {"errors": [{"message": "bad"}]}
    assert second.trace_id == b"" and second.span_id == b""


@pytest.mark.parametrize(
    "value",
    [
        "",
        "ünïcödé ✓ 𝄞",
        True,
        False,
        0,
        -1,
        2**63 - 1,
        -(2**63),
        0.0,
        -2.5,
        [],
        [1, "two", None, [3.5], {"k": False}],
        {},
        {"nested": {"deeper": [{"a": 1}]}, "": "empty key"},
    ],
)
def test_every_json_value_survives_as_an_any_value(value: Any) -> None:
    log = otlp.LogRecord(time_ns=1, severity_number=9, body="b", event_name="e", attributes={"v": value})
    request = logs_pb.ExportLogsServiceRequest.FromString(otlp.encode_logs({}, [log], "0"))
    got = attributes_of(request.resource_logs[0].scope_logs[0].log_records[0].attributes)["v"]
    assert got == value


def test_numbers_protobuf_cannot_hold_become_text_and_odd_floats_stay_floats() -> None:
    log = otlp.LogRecord(
        time_ns=1, severity_number=9, body="b", event_name="e", attributes={"big": 2**64, "inf": math.inf}
    )
    request = logs_pb.ExportLogsServiceRequest.FromString(otlp.encode_logs({}, [log], "0"))
    got = attributes_of(request.resource_logs[0].scope_logs[0].log_records[0].attributes)
    assert got == {"big": str(2**64), "inf": math.inf}


def test_a_record_as_the_writer_makes_it_round_trips_through_the_wire() -> None:
    """Whatever a record holds (the writer made it JSON), its attributes read back equal."""
    record = json.loads(ActivityRecord(arguments={"deep": [[[{"x": None}]]], "n": 10**30}).to_json_line())
    span = otlp.to_span(record, now_ns=0, capture_content=True)
    request = trace_pb.ExportTraceServiceRequest.FromString(otlp.encode_traces({}, [span], "0"))
    got = attributes_of(request.resource_spans[0].scope_spans[0].spans[0].attributes)
    assert got["gen_ai.tool.call.arguments"] == {"deep": [[[{"x": None}]]], "n": str(10**30)}


# ---- the collector's answers


def test_partial_success_is_read_from_the_official_response() -> None:
    response = trace_pb.ExportTraceServiceResponse()
    assert otlp.partial_success(response.SerializeToString()) == (0, "")
    response.partial_success.rejected_spans = 3
    response.partial_success.error_message = "over quota"
    assert otlp.partial_success(response.SerializeToString()) == (3, "over quota")
    logs = logs_pb.ExportLogsServiceResponse()
    logs.partial_success.rejected_log_records = 2
    assert otlp.partial_success(logs.SerializeToString()) == (2, "")


@pytest.mark.parametrize("body", [b"", b"\xff\xff\xff", b"not protobuf at all", b"\x0a\x05\x08"])
def test_an_answer_that_is_not_protobuf_is_no_partial_success(body: bytes) -> None:
    assert otlp.partial_success(body) == (0, "")


def test_the_status_message_of_an_error_answer_is_read() -> None:
    assert otlp.status_message(b"\x08\x03\x12\x08bad span") == "bad span"
    assert otlp.status_message(b"<html>bad gateway</html>") == ""


# ---- the config


def test_the_exported_record_types_are_the_record_types() -> None:
    assert set(get_args(ExportedRecordType)) == {t.value for t in RecordType}
    assert set(EXPORTED_RECORD_TYPES) == {t.value for t in RecordType}


def test_an_export_table_with_no_keys_exports_everything_to_the_local_collector() -> None:
    config = parse_config("[export.otlp]\n", Path("config.toml"))
    assert config.export.otlp is not None
    assert config.export.otlp.endpoint == "http://127.0.0.1:4318"
    assert set(config.export.otlp.records) == {t.value for t in RecordType}
    assert parse_config("", Path("config.toml")).export.otlp is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[export.otlp]\nendpont = "http://x"\n', "endpont"),
        ('[export.otlp]\nendpoint = "127.0.0.1:4318"\n', "http:// or https://"),
        ('[export.otlp]\nendpoint = "http://x/?a=b"\n', "no query"),
        ('[export.otlp]\nrecords = ["tool_calls"]\n', "tool_calls"),
        ("[export.otlp]\ntimeout = 0\n", "timeout"),
        ('[export.otlp]\ncapture_content = "yes"\n', "capture_content"),
        ('[export.jaeger]\nendpoint = "http://x"\n', "jaeger"),
    ],
)
def test_a_wrong_export_key_is_an_error_that_names_it(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(text, Path("config.toml"))
    assert says in str(raised.value)


def test_the_collector_config_in_the_docs_takes_otlp_http_on_loopback_and_wires_every_component() -> None:
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "docs" / "otel-collector.yaml").read_text())
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "127.0.0.1:4318"
    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces", "logs"}
    for pipeline in pipelines.values():
        assert pipeline["processors"][0] == "memory_limiter" and "batch" in pipeline["processors"]
        for kind in ("receivers", "processors", "exporters"):
            for name in pipeline[kind]:
                assert name in config[kind], f"{name} is used but not defined"
    assert all(name.startswith("otlphttp") for name in config["exporters"])
