"""The documents under schemas/ are what the code generates, and they describe what the code really writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError
from referencing import Registry, Resource

from mcphost import schemas
from mcphost.activity.query import DEFAULT_LIMIT, INTENT_TYPES, MAX_LIMIT, RECORD_TYPES, STATUSES
from mcphost.activity.record import ActivityRecord, Decision, ErrorInfo, RecordIntent, RecordMetadata
from mcphost.approval.grants import Grant
from mcphost.approval.prompt import PendingPrompt, PermissionRequest, PermissionResponse, PromptIntent
from mcphost.editor import protocol as ep
from mcphost.policy import Remember
from mcphost.serve.activity_api import API_PATH, QUERY_PARAMETERS

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
REGENERATE = "run `python -m mcphost.schemas` and commit the result"


def record_validator() -> Draft202012Validator:
    document = schemas.generate()[schemas.RECORD_FILE]
    Draft202012Validator.check_schema(document)
    return Draft202012Validator(document)


def openapi() -> dict[str, Any]:
    return schemas.generate()[schemas.ACTIVITY_API_FILE]


def parameters() -> dict[str, dict[str, Any]]:
    operation = openapi()["paths"][API_PATH]["get"]
    return {p["name"]: p for p in operation["parameters"]}


def full_record() -> ActivityRecord:
    return ActivityRecord(
        server="github",
        tool="delete_repo",
        status="denied",
        duration_ms=12.5,
        metadata=RecordMetadata(
            intent=RecordIntent(operation_type="destructive", data_sensitivity="private", reason="cleanup"),
            tool_variant="call_tool_destructive",
            annotations={"destructiveHint": True},
            call_with="call_tool_destructive",
        ),
        decision=Decision(by="editor", action="confirm", outcome="deny", wait_ms=1500.0, remember="once"),
        warnings=["annotations changed since the last list"],
        error=ErrorInfo(code="PERMISSION_DENIED", message="denied by the person in the editor"),
        arguments={"repo": "octo/demo"},
        request_bytes=19,
        session_id="s-1",
        client="vscode",
    )


def test_published_schemas_match_the_code() -> None:
    generated = schemas.generate()
    for name, document in generated.items():
        path = SCHEMAS / name
        assert path.exists(), f"schemas/{name} is missing: {REGENERATE}"
        assert path.read_text(encoding="utf-8") == schemas.render(document), f"schemas/{name} is stale: {REGENERATE}"
    unknown = sorted(name for name in schemas.published_files(SCHEMAS) if name not in generated)
    assert not unknown, f"schemas/ holds files no generator makes: {unknown}; delete them or add them to DOCUMENTS"


def test_check_command_names_stale_files_and_the_writer_fixes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 1
    assert schemas.main(["--dir", str(tmp_path)]) == 0
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 0
    (tmp_path / schemas.RECORD_FILE).write_text("{}\n", encoding="utf-8")
    (tmp_path / "leftover.schema.json").write_text("{}\n", encoding="utf-8")
    capsys.readouterr()
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{schemas.RECORD_FILE}: differs" in err
    assert "leftover.schema.json: not generated" in err
    assert "python -m mcphost.schemas" in err
    assert schemas.ACTIVITY_API_FILE not in err
    # A stale or leftover file in a folder (schemas/editor/) is found too, and the writer recreates the folder.
    (tmp_path / schemas.editor_file("status")).write_text("{}\n", encoding="utf-8")
    (tmp_path / "editor" / "old.schema.json").write_text("{}\n", encoding="utf-8")
    capsys.readouterr()
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "editor/status.schema.json: differs" in err
    assert "editor/old.schema.json: not generated" in err
    other = tmp_path / "fresh"
    assert schemas.main(["--dir", str(other)]) == 0
    assert (other / schemas.editor_file("permission-request")).exists()


def test_check_command_runs_as_a_module_against_the_repository() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcphost.schemas", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_documents_are_deterministic_and_identified() -> None:
    assert schemas.generate() == schemas.generate()
    record = schemas.generate()[schemas.RECORD_FILE]
    assert record["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert record["$id"] == "https://mcphost.dev/schemas/activity-record.schema.json"
    assert record["title"] and record["description"]
    assert openapi()["openapi"].startswith("3.1")


def test_records_as_written_validate_against_the_record_schema() -> None:
    validator = record_validator()
    for record in (full_record(), ActivityRecord(type="upstream_connected", server="probe", details={"tools": 9})):
        written = json.loads(record.to_json_line())
        validator.validate(written)
    # Open: a field from a newer mcphost, at the top and nested, is still a valid record.
    newer = json.loads(full_record().to_json_line())
    newer["trace_id"] = "abc"
    newer["metadata"]["intent"]["confidence"] = 0.9
    newer["decision"]["channel"] = "lsp"
    validator.validate(newer)


def test_the_record_schema_rejects_what_mcphost_never_writes() -> None:
    validator = record_validator()
    written = json.loads(full_record().to_json_line())
    for field in ("id", "timestamp", "type", "metadata", "warnings"):
        broken = {k: v for k, v in written.items() if k != field}
        assert not validator.is_valid(broken), f"a record without {field} passed"
    assert not validator.is_valid({**written, "duration_ms": "fast"})
    assert not validator.is_valid({**written, "decision": {"by": "policy"}})  # no action, no outcome
    assert not validator.is_valid({**written, "error": {"code": "X"}})


def test_openapi_parameters_come_from_the_query_code() -> None:
    params = parameters()
    assert tuple(params) == QUERY_PARAMETERS
    assert params["intent_type"]["schema"]["enum"] == list(INTENT_TYPES)
    assert params["status"]["schema"]["enum"] == list(STATUSES)
    assert params["type"]["schema"]["enum"] == list(RECORD_TYPES)
    limit = params["limit"]["schema"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, MAX_LIMIT, DEFAULT_LIMIT)
    assert all(p["in"] == "query" and p["required"] is False for p in params.values())


def test_openapi_document_is_well_formed() -> None:
    doc = openapi()
    bearer = doc["components"]["securitySchemes"]["bearerAuth"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    assert doc["security"] == [{"bearerAuth": []}]
    responses = doc["paths"][API_PATH]["get"]["responses"]
    assert set(responses) == {"200", "400", "401", "503"}
    for schema in doc["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    # Every reference points at a component that exists.
    text = json.dumps(doc)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"], ref


def test_openapi_response_schemas_accept_real_answers() -> None:
    doc = openapi()
    page = Draft202012Validator(schemas.openapi_component_schema(doc, "ActivityPage"))
    record = json.loads(full_record().to_json_line())
    page.validate({"records": [record], "count": 1, "next_cursor": record["id"], "skipped": 0})
    page.validate({"records": [], "count": 0, "next_cursor": None, "skipped": 2})
    assert not page.is_valid({"records": [{"id": "x"}], "count": 1, "next_cursor": None, "skipped": 0})
    assert not page.is_valid({"records": [], "count": 0})
    bad = Draft202012Validator(schemas.openapi_component_schema(doc, "InvalidParameter"))
    bad.validate({"error": "invalid_parameter", "parameter": "limit", "message": "limit: 0 is out of range"})
    assert not bad.is_valid({"error": "unauthorized", "parameter": "limit", "message": "m"})


# ---- the editor channel


def editor_validator(name: str) -> Draft202012Validator:
    """A validator for schemas/editor/<name>.schema.json, with the record schema it may refer to registered."""
    generated = schemas.generate()
    document = generated[schemas.editor_file(name)]
    Draft202012Validator.check_schema(document)
    record = generated[schemas.RECORD_FILE]
    registry: Registry = Registry().with_resource(record["$id"], Resource.from_contents(record))
    return Draft202012Validator(document, registry=registry)


def permission_request(**changes: Any) -> PermissionRequest:
    fields: dict[str, Any] = {
        "id": "0f3a9c2b7d1e4a55",
        "variant": "call_tool_destructive",
        "operation": "destructive",
        "action": "confirm",
        "server": "github",
        "tool": "delete_repo",
        "arguments": {"repo": "octo/demo", "token": "[redacted]"},
        "intent": PromptIntent(operation_type="destructive", data_sensitivity="private", reason="<b>cleanup</b>"),
        "annotations": {"destructiveHint": True},
        "call_with": "call_tool_destructive",
        "warnings": ["annotations changed"],
        "expires_at": "2026-11-21T10:05:00.000Z",
        "remember_options": [Remember.ONCE, Remember.SESSION],
        "session_id": "s-1",
        "client": "claude-code 1.0",
    }
    fields.update(changes)
    return PermissionRequest(**fields)


def status_payload() -> ep.StatusPayload:
    return ep.StatusPayload(
        version="0.1.0",
        pid=4242,
        mcp=ep.McpEndpoint(url="http://127.0.0.1:8765/mcp", headers={"Authorization": "Bearer t"}),
        config_path="/home/u/.config/mcphost/config.toml",
        log_path="/home/u/.local/share/mcphost/activity.jsonl",
        editor_socket="/run/user/1000/mcphost/daemon-4242.sock",
        servers=[
            ep.UpstreamStatus(name="todo", transport="stdio", state="connected", tools=5),
            ep.UpstreamStatus(name="remote", transport="http", state="failed", tools=0, error="connection refused"),
        ],
        pending=1,
        prompts=[
            PendingPrompt(
                id="0f3a9c2b7d1e4a55",
                variant="call_tool_write",
                server="todo",
                tool="add",
                expires_at="2026-11-21T10:05:00.000Z",
            )
        ],
        editors=[ep.EditorInfo(id="editor-1", name="vscode 1.2", transport="stdio", attached_at="2026-11-21T10:00Z")],
        config_error="permissions.write: Input should be 'allow', 'ask', 'confirm' or 'deny'",
        export=ep.ExportStatus(
            endpoint="http://127.0.0.1:4318",
            queued=2,
            exported=1204,
            dropped=37,
            last_error="cannot reach the collector at http://127.0.0.1:4318/v1/traces: connection refused",
            last_error_at="2026-11-21T10:05:00.250Z",
        ),
    )


def test_every_editor_payload_has_its_own_schema() -> None:
    generated = schemas.generate()
    for name, model in ep.PAYLOADS.items():
        document = generated[schemas.editor_file(name)]
        assert document["$id"] == f"https://mcphost.dev/schemas/editor/{name}.schema.json"
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert document["title"].startswith("mcphost editor channel: ")
        assert document["description"]
        assert set(model.model_fields) <= set(document["properties"]), name
        assert document["additionalProperties"] is True, name
    activity = generated[schemas.editor_file("activity")]
    assert ep.ACTIVITY in activity["title"]
    assert activity["$ref"] == generated[schemas.RECORD_FILE]["$id"]


def test_permission_requests_as_sent_validate() -> None:
    validator = editor_validator("permission-request")
    # As the daemon sends them: model_dump(mode="json"), nulls included.
    validator.validate(permission_request().model_dump(mode="json"))
    large = permission_request(arguments=None, arguments_preview='{"text": "aaaa', session_id=None, client=None)
    validator.validate(large.model_dump(mode="json"))
    validator.validate(large.model_dump(mode="json", exclude_none=True))
    # A newer daemon's extra field is still valid.
    validator.validate({**permission_request().model_dump(mode="json"), "risk": "high"})
    sent = permission_request().model_dump(mode="json")
    for field in ("id", "variant", "operation", "action", "server", "tool", "intent", "expires_at", "remember_options"):
        assert not validator.is_valid({k: v for k, v in sent.items() if k != field}), f"a request without {field}"
    assert not validator.is_valid({**sent, "operation": "admin"})
    assert not validator.is_valid({**sent, "remember_options": ["forever"]})


def test_permission_responses_are_valid_exactly_when_the_daemon_accepts_them() -> None:
    validator = editor_validator("permission-response")
    answers: list[Any] = [
        {"decision": "allow", "remember": "once"},
        {"decision": "allow", "remember": "session"},
        {"decision": "allow", "remember": "always"},
        {"decision": "allow"},
        {"decision": "deny"},
        {"decision": "deny", "remember": "always", "note": "extra fields are ignored"},
        {"decision": "yes"},
        {"decision": "allow", "remember": "forever"},
        {"remember": "once"},
        {},
        None,
        "allow",
    ]
    for answer in answers:
        try:
            PermissionResponse.model_validate(answer)
            accepted = True
        except ValidationError:
            accepted = False
        assert validator.is_valid(answer) == accepted, answer


def test_status_as_sent_validates() -> None:
    validator = editor_validator("status")
    payload = status_payload()
    validator.validate(payload.model_dump(mode="json", exclude_none=True))
    # A daemon with no agent endpoint, no socket, no upstreams and nothing pending: null fields are left out.
    bare = ep.StatusPayload(
        version="0.1.0", pid=1, mcp=ep.McpEndpoint(url=None), config_path="c", log_path="l", servers=[], pending=0
    )
    sent = bare.model_dump(mode="json", exclude_none=True)
    assert "url" not in sent["mcp"]
    validator.validate(sent)
    full = payload.model_dump(mode="json", exclude_none=True)
    assert not validator.is_valid({**full, "pending": "one"})
    assert not validator.is_valid({k: v for k, v in full.items() if k != "servers"})
    assert not validator.is_valid({**full, "editors": [{"id": "editor-1", "name": "x", "transport": "tcp"}]})
    assert not validator.is_valid({**full, "export": {**full["export"], "dropped": "many"}})


def test_grants_payloads_validate() -> None:
    grants = [
        Grant(scope="session", server="todo", tool="add", variant="call_tool_write", fingerprint="f", session_id="s"),
        Grant(scope="always", server="todo", tool="delete", variant="call_tool_destructive", fingerprint="f"),
    ]
    infos = [g.info() for g in grants]
    editor_validator("grants-result").validate(ep.GrantsResult(grants=infos).model_dump(mode="json", exclude_none=True))
    editor_validator("revoke-grants-result").validate(
        ep.RevokeGrantsResult(revoked=infos[:1]).model_dump(mode="json", exclude_none=True)
    )
    assert not editor_validator("grants-result").is_valid({"grants": [{"id": "x", "scope": "forever"}]})
    params = editor_validator("revoke-grants-params")
    for sent in ({"ids": [infos[0].id]}, {"tool": "todo:add"}, {"all": True}, {}):
        params.validate(sent)
        ep.RevokeGrantsParams.model_validate(sent)
    assert not params.is_valid({"ids": "abc"})
    assert not params.is_valid({"all": "yes please"})


def test_activity_notifications_validate_against_the_record_schema() -> None:
    validator = editor_validator("activity")
    # What the hub sends: the record, null fields left out (the same object as the line in activity.jsonl).
    record = full_record()
    sent = record.model_dump(mode="json", exclude_none=True)
    assert sent == json.loads(record.to_json_line())
    validator.validate(sent)
    validator.validate(ActivityRecord(type="config_error", details={"issues": 1}).model_dump(mode="json"))
    assert not validator.is_valid({k: v for k, v in sent.items() if k != "timestamp"})
