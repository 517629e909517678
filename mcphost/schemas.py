"""The JSON documents mcphost publishes under `schemas/`, generated from the code so they cannot drift from it.

`python -m mcphost.schemas` writes them to `schemas/` at the repository root; `python -m mcphost.schemas --check`
exits 1 and names the stale files (tests/unit/test_schemas.py makes the same comparison). To publish another
document, write a function that builds it and add it to `DOCUMENTS`; a name may hold a folder
(`editor/status.schema.json`). Every payload in `mcphost.editor.protocol.PAYLOADS` gets its own
`editor/<name>.schema.json`.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.json_schema import DEFAULT_REF_TEMPLATE, JsonSchemaMode

from mcphost.activity.query import DEFAULT_LIMIT, INTENT_TYPES, MAX_LIMIT, RECORD_TYPES, STATUSES
from mcphost.activity.record import ActivityRecord
from mcphost.editor import protocol as editor_protocol
from mcphost.serve.activity_api import API_PATH, QUERY_PARAMETERS

Document = dict[str, Any]

ID_BASE = "https://mcphost.dev/schemas/"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
COMPONENT_REF = "#/components/schemas/{model}"

RECORD_FILE = "activity-record.schema.json"
CONFIG_FILE = "config.schema.json"
# Editors that check TOML against JSON Schema (taplo / Even Better TOML) know draft-07 best.
CONFIG_DIALECT = "http://json-schema.org/draft-07/schema#"
ACTIVITY_API_FILE = "activity-api.openapi.json"
EDITOR_DIR = "editor"
EDITOR_ACTIVITY = "activity"  # `mcphost/activity` params: the record schema itself, referenced

OPEN_RECORDS = (
    "Records are open: every object in a record may carry fields this schema does not name "
    "(additionalProperties is true throughout), because records written by older or newer versions of mcphost "
    "keep the fields they had. A reader keeps and shows what it does not know, and accepts `type` values "
    "beyond those listed."
)


# ---- the activity record


def _annotation_parts(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in get_args(annotation):
        yield from _annotation_parts(arg)


def _models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The model and every model nested in its fields, by the name pydantic gives their definitions."""
    found = {model.__name__: model}
    for field in model.model_fields.values():
        for part in _annotation_parts(field.annotation):
            if isinstance(part, type) and issubclass(part, BaseModel) and part.__name__ not in found:
                found.update(_models(part))
    return found


def _always_written(model: type[BaseModel]) -> list[str]:
    """Fields that are in every written record: `to_json_line` leaves out only None, so those that cannot be."""
    return [
        field.alias or name
        for name, field in model.model_fields.items()
        if type(None) not in set(_annotation_parts(field.annotation))
    ]


def _record_schema(ref_template: str) -> tuple[Document, dict[str, Document]]:
    """The record's schema as pydantic gives it, plus `required` for the fields every record carries.

    Returns the record's own schema and its nested definitions (Decision, RecordMetadata, ...).
    """
    schema = ActivityRecord.model_json_schema(mode="serialization", ref_template=ref_template)
    definitions: dict[str, Document] = schema.pop("$defs", {})
    models = _models(ActivityRecord)
    for name, definition in [(ActivityRecord.__name__, schema), *definitions.items()]:
        required = _always_written(models[name])
        if required:
            definition["required"] = required
    schema["description"] = f"{schema['description']} {OPEN_RECORDS}"
    return schema, definitions


def activity_record_schema() -> Document:
    schema, definitions = _record_schema(DEFAULT_REF_TEMPLATE)
    document: Document = {
        "$schema": DIALECT,
        "$id": ID_BASE + RECORD_FILE,
        "title": "mcphost activity record",
        "description": (
            "One line of activity.jsonl (<data dir>/activity.jsonl and its rotations activity.jsonl.1, .2, ...): "
            "a tool call an agent made through mcphost, or an event of the host itself. The same objects are "
            f"the `records` of GET {API_PATH}. {OPEN_RECORDS}"
        ),
    }
    schema.pop("title", None)
    schema.pop("description", None)
    document.update(schema)
    if definitions:
        document["$defs"] = definitions
    return document


# ---- GET /api/v1/activity


def _query_parameters() -> list[Document]:
    """Every parameter the handler accepts, in its order; enums and limits come from the code that checks them."""
    specs: dict[str, tuple[str, Document]] = {
        "intent_type": (
            "Only calls of this intent: the `metadata.intent.operation_type` the agent declared, or, for a call "
            "rejected before its intent was understood, the one its tool variant implies "
            "(call_tool_read: read, and so on).",
            {"type": "string", "enum": list(INTENT_TYPES)},
        ),
        "status": ("Only records with this `status`.", {"type": "string", "enum": list(STATUSES)}),
        "server": ("Only records of this upstream server (exact name).", {"type": "string"}),
        "tool": ("Only records of this tool (exact name, without the `server:` prefix).", {"type": "string"}),
        "type": (
            "Only records of this `type` (a record without one is a tool_call).",
            {"type": "string", "enum": list(RECORD_TYPES)},
        ),
        "since": (
            "Only records written at or after this time: an RFC 3339 time (2026-11-21T10:00:00Z; a date alone, "
            "or a time without an offset, is the daemon's local time), or an age before now: a number and "
            "s, m, h, d or w (90s, 15m, 2h, 7d).",
            {"type": "string", "examples": ["15m", "2h", "7d", "2026-11-21T10:00:00Z", "2026-11-21"]},
        ),
        "limit": (
            f"Records per page, newest first (default {DEFAULT_LIMIT}, at most {MAX_LIMIT}).",
            {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
        ),
        "cursor": (
            "The `next_cursor` of the previous page: the page after it (older records), under the same "
            "filters. Records written since the first page do not shift the pages that follow.",
            {"type": "string"},
        ),
    }
    if set(specs) != set(QUERY_PARAMETERS):
        raise RuntimeError(
            f"{API_PATH} accepts {sorted(QUERY_PARAMETERS)} but the OpenAPI document describes {sorted(specs)}"
        )
    return [
        {"name": name, "in": "query", "required": False, "description": specs[name][0], "schema": specs[name][1]}
        for name in QUERY_PARAMETERS
    ]


def _json(schema_name: str, description: str, **extra: Any) -> Document:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": COMPONENT_REF.format(model=schema_name)}}},
        **extra,
    }


def activity_api_openapi() -> Document:
    record, definitions = _record_schema(COMPONENT_REF)
    own: dict[str, Document] = {
        "ActivityPage": {
            "type": "object",
            "description": "One page of matching records, newest first.",
            "required": ["records", "count", "next_cursor", "skipped"],
            "properties": {
                "records": {
                    "type": "array",
                    "items": {"$ref": COMPONENT_REF.format(model=ActivityRecord.__name__)},
                    "maxItems": MAX_LIMIT,
                    "description": "Newest first.",
                },
                "count": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_LIMIT,
                    "description": "How many records this page holds.",
                },
                "next_cursor": {
                    "type": ["string", "null"],
                    "description": "Pass back as `cursor` for the next, older page; null on the last page.",
                },
                "skipped": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Lines read for this page that hold no record (a record cut short, a JSON value "
                    "that is no object, another program's text): left out of every listing, and counted here so "
                    "that none is left out unseen.",
                },
            },
        },
        "InvalidParameter": {
            "type": "object",
            "description": "A query parameter mcphost cannot use. Nothing was read.",
            "required": ["error", "parameter", "message"],
            "properties": {
                "error": {"const": "invalid_parameter"},
                "parameter": {
                    "type": "string",
                    "description": f"The parameter at fault: one of {', '.join(QUERY_PARAMETERS)}, "
                    "or the unknown one that was sent.",
                },
                "message": {
                    "type": "string",
                    "description": "Starts with the parameter's name; says what is wrong and what is valid "
                    "(the values of an enum, the range of limit, the forms of since).",
                },
            },
        },
        "LogUnreadable": {
            "type": "object",
            "description": "The activity log is there but cannot be read: a directory or a FIFO in its place, a "
            "file this user may not read, a failing disk.",
            "required": ["error", "message"],
            "properties": {
                "error": {"const": "log_unreadable"},
                "message": {"type": "string", "description": "Names the file and what is wrong with it."},
            },
        },
        "Unauthorized": {
            "type": "object",
            "required": ["error", "message"],
            "properties": {"error": {"const": "unauthorized"}, "message": {"type": "string"}},
        },
    }
    schemas: dict[str, Document] = {ActivityRecord.__name__: record, **definitions}
    clash = schemas.keys() & own.keys()
    if clash:
        raise RuntimeError(f"component names used twice: {sorted(clash)}")
    schemas.update(own)
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": DIALECT,
        "info": {
            "title": "mcphost activity API",
            "version": "1.0.0",
            "description": (
                "The activity log of a running mcphost daemon, for scripts and dashboards. The daemon listens on "
                "127.0.0.1 only; the API's URL and its own token are in the daemon's discovery file "
                "(<runtime dir>/daemon-<pid>.json: `api.url`, `api.token`; `mcphost status -o json` shows them). "
                "The agents' /mcp token is refused here."
            ),
        },
        "servers": [
            {
                "url": "http://127.0.0.1:{port}",
                "description": "The daemon on loopback.",
                "variables": {
                    "port": {
                        "default": "0",
                        "description": "The daemon's port: [daemon] port in config.toml, or, when that is 0, "
                        "the port in the URL of its discovery file.",
                    }
                },
            }
        ],
        "security": [{"bearerAuth": []}],
        "paths": {
            API_PATH: {
                "get": {
                    "operationId": "listActivity",
                    "summary": "Activity records, newest first, filtered and paged",
                    "description": (
                        "The same records and filters as `mcphost activity list`. Filters combine with AND; an "
                        "empty value is the same as leaving the parameter out. Each parameter may be given once; "
                        "an unknown or repeated parameter, or a value out of range, is a 400 that names the "
                        "parameter and lists what is valid."
                    ),
                    "parameters": _query_parameters(),
                    "responses": {
                        "200": _json("ActivityPage", "Matching records, newest first."),
                        "400": _json("InvalidParameter", "A parameter is unknown, repeated, or has a bad value."),
                        "401": _json(
                            "Unauthorized",
                            "No `Authorization: Bearer <token>` header, or the wrong token (the agents' token "
                            "included).",
                            headers={"WWW-Authenticate": {"schema": {"type": "string"}}},
                        ),
                        "503": _json("LogUnreadable", "The activity log cannot be read; nothing was returned."),
                    },
                }
            }
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The REST API's own token, not the agents' /mcp token (which it refuses): "
                    "fresh for every daemon unless MCPHOST_API_TOKEN sets it; `api.token` in the discovery file.",
                }
            },
        },
    }


def openapi_component_schema(document: Document, name: str) -> Document:
    """A standalone JSON Schema for one component of an OpenAPI document, for a JSON Schema validator.

    The `#/components/schemas/...` references inside it resolve against the copy of `components` it carries.
    """
    return {"$schema": DIALECT, "$ref": COMPONENT_REF.format(model=name), "components": document["components"]}


# ---- config.toml


def config_schema() -> Document:
    """The schema of config.toml: every key with its default and description; unknown keys are errors."""
    from mcphost.config.models import Config

    schema = Config.model_json_schema(mode="validation", ref_template="#/definitions/{model}")
    definitions = schema.pop("$defs", {})
    document: Document = {
        "$schema": CONFIG_DIALECT,
        "$id": ID_BASE + CONFIG_FILE,
        "title": "mcphost config.toml",
        "description": (
            "mcphost's configuration (`mcphost config path` shows where it is). Every key has a default, so an "
            "empty file is valid; unknown keys are errors. The running host reloads the file when it is saved."
        ),
    }
    schema.pop("title", None)
    document.update(schema)
    if definitions:
        document["definitions"] = definitions
    return document


# ---- the editor channel (mcphost.editor.protocol)

# The daemon writes what it sends with model_dump(mode="json"): its payloads are described as serialized. What a
# client sends is described as the daemon validates it.
SENT: JsonSchemaMode = "serialization"
RECEIVED: JsonSchemaMode = "validation"

EDITOR_OPEN = (
    "Payloads are open (additionalProperties is true): a newer daemon may add fields, and an integration must "
    "ignore the ones it does not know."
)
# PAYLOADS name -> (title, what the payload is on the wire, whether the daemon sends or receives it)
EDITOR_PAYLOADS: dict[str, tuple[str, str, JsonSchemaMode]] = {
    "permission-request": (
        f"{editor_protocol.PERMISSION_REQUEST} params",
        f"Server -> client request `{editor_protocol.PERMISSION_REQUEST}`: one agent call waits for a person's "
        "decision. The same prompt (same `id`) goes to every attached approver; the first answer wins and the "
        "others receive `$/cancelRequest`. Fields that may be null are sent as null; a client should also accept "
        "them absent. Everything the agent wrote (intent.reason, arguments) is untrusted: show it as plain "
        "text, never as markup.",
        SENT,
    ),
    "permission-response": (
        f"{editor_protocol.PERMISSION_REQUEST} result",
        f"Client -> server: the result of `{editor_protocol.PERMISSION_REQUEST}`. A result that does not match "
        "this schema counts as that editor not answering (the prompt stays with the other approvers, or the "
        "call ends as NO_APPROVER when none is left). `remember` beyond the request's `remember_options` is "
        "clamped to the longest scope allowed.",
        RECEIVED,
    ),
    "permission-batch": (
        f"{editor_protocol.PERMISSION_BATCH} params",
        f"Server -> client request `{editor_protocol.PERMISSION_BATCH}`, sent only to clients whose "
        "initializationOptions set `batch: true`: two or more calls of one agent session that asked within "
        "`[permissions] batch_window`, each a full permission request. Each call still expires and may be answered "
        "in another editor on its own; the batch receives `$/cancelRequest` once none of its calls waits.",
        SENT,
    ),
    "permission-batch-result": (
        f"{editor_protocol.PERMISSION_BATCH} result",
        f"Client -> server: the result of `{editor_protocol.PERMISSION_BATCH}`, one answer per request id. A request "
        "left out is denied, and so is a destructive call allowed without `confirmed` naming it as server:tool. "
        "Answers for calls that ended meanwhile are ignored.",
        RECEIVED,
    ),
    "status": (
        f"{editor_protocol.STATUS} params and result",
        f"Server -> client notification `{editor_protocol.STATUS}` (sent on attach, then on every change, "
        "coalesced), and the result of the client -> server request of the same name (no params). Fields that "
        "are null are left out.",
        SENT,
    ),
    "grants-result": (
        f"{editor_protocol.GRANTS_LIST} result",
        f"Client -> server request `{editor_protocol.GRANTS_LIST}` (no params): every remembered approval, "
        "session and always.",
        SENT,
    ),
    "revoke-grants-params": (
        f"{editor_protocol.GRANTS_REVOKE} params",
        f"Client -> server request `{editor_protocol.GRANTS_REVOKE}`: which remembered approvals to drop: the "
        "grants with these ids, every grant of `tool` (server:tool), or all of them with `all`.",
        RECEIVED,
    ),
    "revoke-grants-result": (
        f"{editor_protocol.GRANTS_REVOKE} result",
        f"The result of `{editor_protocol.GRANTS_REVOKE}`: the grants that were removed (none when nothing matched).",
        SENT,
    ),
    "config-result": (
        f"{editor_protocol.CONFIG} result",
        f"Client -> server request `{editor_protocol.CONFIG}` (no params): the config in force, as `mcphost config "
        "show -o json` prints it (every key with its default filled in, secrets masked), with the SHA-256 of the "
        "file's bytes it was read from, so that a client can tell whether the file has changed since.",
        SENT,
    ),
    "authorize-params": (
        f"{editor_protocol.AUTHORIZE} params",
        f"Client -> server request `{editor_protocol.AUTHORIZE}` (sent by `mcphost hook` and `mcphost "
        "permission-server`): one tool call of the agent's own, as its hook described it. The daemon judges it "
        "read, write or destructive by the [hooks] table, applies the policy and the remembered grants, asks the "
        "attached approvers when the policy says so, and writes a hook_decision record before it answers. Closing "
        "the connection withdraws the prompt.",
        RECEIVED,
    ),
    "authorize-result": (
        f"{editor_protocol.AUTHORIZE} result",
        f"The result of `{editor_protocol.AUTHORIZE}`: allow, deny, ask (nobody attached: the agent's own prompt "
        "should ask) or pass (no opinion), with the reason to show.",
        SENT,
    ),
}


def editor_file(name: str) -> str:
    return f"{EDITOR_DIR}/{name}.schema.json"


def _payload_schema(model: type[BaseModel], mode: JsonSchemaMode) -> Document:
    """One payload's schema. Sent payloads get `required` = the fields that are in every message (those that
    cannot be null: the daemon leaves null fields out of most of them); received ones keep pydantic's (what
    the daemon requires)."""
    schema = model.model_json_schema(mode=mode)
    if mode == SENT:
        models = _models(model)
        definitions: dict[str, Document] = schema.get("$defs", {})
        for name, definition in [(model.__name__, schema), *definitions.items()]:
            if name not in models:
                continue  # an enum
            required = _always_written(models[name])
            if required:
                definition["required"] = required
            else:
                definition.pop("required", None)
    return schema


def editor_payload_schema(name: str) -> Document:
    if set(EDITOR_PAYLOADS) != set(editor_protocol.PAYLOADS):
        raise RuntimeError(
            f"mcphost.editor.protocol.PAYLOADS has {sorted(editor_protocol.PAYLOADS)} but schemas.EDITOR_PAYLOADS "
            f"describes {sorted(EDITOR_PAYLOADS)}"
        )
    title, description, mode = EDITOR_PAYLOADS[name]
    schema = _payload_schema(editor_protocol.PAYLOADS[name], mode)
    own = schema.pop("description", None)
    schema.pop("title", None)
    document: Document = {
        "$schema": DIALECT,
        "$id": ID_BASE + editor_file(name),
        "title": f"mcphost editor channel: {title}",
        "description": " ".join(filter(None, [own, description, EDITOR_OPEN])),
    }
    definitions = schema.pop("$defs", None)
    document.update(schema)
    if definitions:
        document["$defs"] = definitions
    return document


def editor_activity_schema() -> Document:
    return {
        "$schema": DIALECT,
        "$id": ID_BASE + editor_file(EDITOR_ACTIVITY),
        "title": f"mcphost editor channel: {editor_protocol.ACTIVITY} params",
        "description": (
            f"Server -> client notification `{editor_protocol.ACTIVITY}`: one activity record, the same object "
            "as the line written to activity.jsonl (null fields left out), sent as it is written to clients "
            "that did not initialize with `activity: false`. The record schema is the one of activity.jsonl; "
            "see its description for what is open."
        ),
        "$ref": ID_BASE + RECORD_FILE,
    }


def _editor_documents() -> dict[str, Callable[[], Document]]:
    documents: dict[str, Callable[[], Document]] = {
        editor_file(name): functools.partial(editor_payload_schema, name) for name in editor_protocol.PAYLOADS
    }
    documents[editor_file(EDITOR_ACTIVITY)] = editor_activity_schema
    return documents


# ---- the registry: file name under schemas/ -> the function that builds the document

DOCUMENTS: dict[str, Callable[[], Document]] = {
    CONFIG_FILE: config_schema,
    RECORD_FILE: activity_record_schema,
    ACTIVITY_API_FILE: activity_api_openapi,
    **_editor_documents(),
}


def generate() -> dict[str, Document]:
    return {name: build() for name, build in DOCUMENTS.items()}


def render(document: Document) -> str:
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def schemas_dir() -> Path:
    """`schemas/` at the root of the repository this package was imported from."""
    return Path(__file__).resolve().parent.parent / "schemas"


def published_files(directory: Path) -> list[str]:
    """Every .json file under `directory`, as a name relative to it (`editor/status.schema.json`)."""
    if not directory.is_dir():
        return []
    return sorted(path.relative_to(directory).as_posix() for path in directory.rglob("*.json"))


def stale_files(directory: Path) -> list[str]:
    """What differs from `generate()`: each as `name: why`."""
    stale: list[str] = []
    expected = {name: render(document) for name, document in generate().items()}
    for name, text in expected.items():
        path = directory / name
        if not path.exists():
            stale.append(f"{name}: missing")
        elif path.read_text(encoding="utf-8") != text:
            stale.append(f"{name}: differs from the code")
    for name in published_files(directory):
        if name not in expected:
            stale.append(f"{name}: not generated by mcphost.schemas (delete it, or add it to DOCUMENTS)")
    return stale


def write(directory: Path) -> list[str]:
    """Write every document whose file is missing or different; returns the names written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in generate().items():
        path = directory / name
        text = render(document)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            written.append(name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcphost.schemas", description="Write the JSON documents of schemas/ from the code."
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is stale")
    parser.add_argument("--dir", type=Path, default=None, help="where the files live (default: schemas/ in the repo)")
    args = parser.parse_args(argv)
    directory: Path = args.dir if args.dir is not None else schemas_dir()
    if args.dir is None and not (directory.parent / "pyproject.toml").exists():
        print(f"mcphost.schemas: {directory.parent} is not the mcphost repository; pass --dir", file=sys.stderr)
        return 2
    if args.check:
        stale = stale_files(directory)
        for line in stale:
            print(f"stale: {directory / line}", file=sys.stderr)
        if stale:
            print("run `python -m mcphost.schemas` to regenerate them", file=sys.stderr)
            return 1
        print(f"{len(DOCUMENTS)} documents in {directory} are current")
        return 0
    for name in write(directory):
        print(f"wrote {directory / name}")
    left = stale_files(directory)  # only files no builder makes: this command never deletes
    for line in left:
        print(f"stale: {directory / line}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
