"""The documents under schemas/ are what the code generates, and they describe what the code really writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from mcphost import schemas
from mcphost.activity.query import DEFAULT_LIMIT, INTENT_TYPES, MAX_LIMIT, RECORD_TYPES, STATUSES
from mcphost.activity.record import ActivityRecord, Decision, ErrorInfo, RecordIntent, RecordMetadata
from mcphost.gateway.activity_api import API_PATH, QUERY_PARAMETERS

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
    unknown = sorted(p.name for p in SCHEMAS.glob("*.json") if p.name not in generated)
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
    assert set(responses) == {"200", "400", "401"}
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
    page.validate({"records": [record], "count": 1, "next_cursor": record["id"]})
    page.validate({"records": [], "count": 0, "next_cursor": None})
    assert not page.is_valid({"records": [{"id": "x"}], "count": 1, "next_cursor": None})
    assert not page.is_valid({"records": [], "count": 0})
    bad = Draft202012Validator(schemas.openapi_component_schema(doc, "InvalidParameter"))
    bad.validate({"error": "invalid_parameter", "parameter": "limit", "message": "limit: 0 is out of range"})
    assert not bad.is_valid({"error": "unauthorized", "parameter": "limit", "message": "m"})
