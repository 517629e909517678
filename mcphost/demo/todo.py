"""The bundled todo MCP server: mcphost's embedded default upstream.

A small but honest MCP server: five tools over a per-user SQLite task list, JWT (HS256) authentication,
hand-written argument validation so every failure comes back as a tool error an agent can read.

    python -m mcphost.demo.todo                           # stdio
    python -m mcphost.demo.todo serve --http --port 8765  # streamable HTTP on 127.0.0.1:8765/mcp
    python -m mcphost.demo.todo token [--user UUID]       # mint an access token

Environment: TODO_JWT_SECRET (signing secret; else a generated secret file in mcphost's data dir),
TODO_TOKEN (the token used when a call carries none), TODO_DB (database file), MCPHOST_DATA_DIR.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import jwt
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from mcphost.demo.tokens import DEFAULT_TOKEN_TTL_SECONDS, JWT_ALGORITHM, LOCAL_USER_ID, jwt_secret, mint_token
from mcphost.paths import data_dir, ensure_private_dir
from mcphost.pipes import bind_loopback

__all__ = [
    "LOCAL_USER_ID",
    "create_server",
    "database_path",
    "jwt_secret",
    "main",
    "mint_token",
]

logger = logging.getLogger("mcphost.demo.todo")

DATABASE_FILE_NAME: Final = "todo.sqlite3"

TITLE_MAX_LENGTH: Final = 255
PAGE_SIZE_MAX: Final = 100
PAGE_SIZE_DEFAULT: Final = 20

AUTHENTICATION_ERROR: Final = "AUTHENTICATION_ERROR"
VALIDATION_ERROR: Final = "VALIDATION_ERROR"
NOT_FOUND_ERROR: Final = "NOT_FOUND_ERROR"
DATABASE_ERROR: Final = "DATABASE_ERROR"

MSG_AUTH_REQUIRED: Final = "Authentication required"
MSG_AUTH_INVALID: Final = "Invalid authentication token"
MSG_AUTH_EXPIRED: Final = "Authentication token expired"
MSG_BAD_TASK_ID: Final = "Invalid task ID format"
MSG_TITLE_REQUIRED: Final = "Task title is required"
MSG_TITLE_TOO_LONG: Final = f"Task title must be {TITLE_MAX_LENGTH} characters or less"
MSG_NOT_FOUND: Final = "Task not found"
MSG_INTERNAL: Final = "An error occurred, please try again"

JSONObject = dict[str, Any]


# --- secrets, tokens, paths -------------------------------------------------------------------------------------


def _server_version() -> str:
    # From the distribution rather than `mcphost.__version__`: a stale editable install can expose `mcphost` as a
    # namespace package without `__init__` attributes, and the server must still start.
    try:
        return metadata.version("mcphost")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def database_path() -> Path:
    """`$TODO_DB`, else `<data dir>/todo.sqlite3`."""
    env = os.environ.get("TODO_DB")
    if env:
        return Path(env).expanduser()
    return data_dir() / DATABASE_FILE_NAME


# --- errors -------------------------------------------------------------------------------------------------------


class ToolError(Exception):
    """A failure the caller should see as an `isError` tool result with this code and message."""

    def __init__(self, code: str, message: str, details: JSONObject | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


def _invalid(message: str, field: str | None = None, **extra: Any) -> ToolError:
    details: JSONObject = {"field": field} if field is not None else {}
    details.update(extra)
    return ToolError(VALIDATION_ERROR, message, details or None)


def _not_found(task_id: str) -> ToolError:
    return ToolError(NOT_FOUND_ERROR, MSG_NOT_FOUND, {"task_id": task_id})


# --- authentication -----------------------------------------------------------------------------------------------


def _bearer_token(request: object) -> str | None:
    """The token of an HTTP request's `Authorization: Bearer` header; None on stdio or without the header."""
    if not isinstance(request, Request):
        return None
    header = request.headers.get("authorization")
    if header is None or not header.strip():
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        # A credential was offered but in a form we cannot use; saying "required" would mislead.
        raise ToolError(AUTHENTICATION_ERROR, MSG_AUTH_INVALID)
    return value.strip()


# `serve --as-local-user` (stdio only): a call with no token acts for the local user. Over stdio the server is a
# child of a process of that user, who can read the signing secret anyway, so this grants nothing new; it lets a
# config file run the server without a token that would expire in it.
_AS_LOCAL_USER = False


def _select_token(argument: str | None, request: object) -> str:
    if argument:
        return argument
    env = os.environ.get("TODO_TOKEN")
    if env:
        return env
    header = _bearer_token(request)
    if header:
        return header
    if _AS_LOCAL_USER:
        return mint_token(LOCAL_USER_ID, ttl_seconds=60)
    raise ToolError(AUTHENTICATION_ERROR, MSG_AUTH_REQUIRED)


def _authenticate(token: str) -> str:
    """The user id (canonical UUID string) the token was issued to."""
    try:
        claims = jwt.decode(
            token,
            jwt_secret(),
            algorithms=[JWT_ALGORITHM],
            options={"require": ["exp", "sub"]},
        )
    except jwt.ExpiredSignatureError:
        raise ToolError(AUTHENTICATION_ERROR, MSG_AUTH_EXPIRED) from None
    except jwt.InvalidTokenError:
        raise ToolError(AUTHENTICATION_ERROR, MSG_AUTH_INVALID) from None
    if claims.get("type") != "access":
        raise ToolError(AUTHENTICATION_ERROR, MSG_AUTH_INVALID)
    try:
        return str(uuid.UUID(str(claims["sub"])))
    except ValueError:
        raise ToolError(AUTHENTICATION_ERROR, MSG_AUTH_INVALID) from None


# --- storage ------------------------------------------------------------------------------------------------------

_SCHEMA_SQL: Final = """
CREATE TABLE IF NOT EXISTS task (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    title TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 255),
    description TEXT,
    is_completed INTEGER NOT NULL DEFAULT 0 CHECK (is_completed IN (0, 1)),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_task_user_id ON task (user_id);
"""

_TASK_COLUMNS: Final = "id, user_id, title, description, is_completed, created_at, updated_at"


def _now() -> str:
    # Fixed width (always microseconds) so the text column sorts chronologically.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _task_from_row(row: sqlite3.Row) -> JSONObject:
    return {
        "id": row["id"],
        "user_id": row["user_id"],
        "title": row["title"],
        "description": row["description"],
        "is_completed": bool(row["is_completed"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


class TaskStore:
    """The task table. Every statement is scoped to one user: `WHERE id = ? AND user_id = ?`.

    A connection per operation, run in a worker thread: HTTP calls arrive concurrently and a sqlite3
    connection must not be shared across threads, while WAL lets readers proceed during a write.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._initialized = False
        self._init_lock = threading.Lock()

    def _ensure_schema(self) -> None:
        with self._init_lock:
            if self._initialized:
                return
            if self.path.parent == data_dir():
                ensure_private_dir(self.path.parent)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(sqlite3.connect(self.path, timeout=10.0)) as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA_SQL)
            self._initialized = True

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._ensure_schema()
        with closing(sqlite3.connect(self.path, timeout=10.0)) as conn:
            conn.row_factory = sqlite3.Row
            with conn:
                yield conn

    def _fetch(self, conn: sqlite3.Connection, user_id: str, task_id: str) -> JSONObject:
        row = conn.execute(
            f"SELECT {_TASK_COLUMNS} FROM task WHERE id = ? AND user_id = ?", (task_id, user_id)
        ).fetchone()
        if row is None:
            raise _not_found(task_id)
        return _task_from_row(row)

    def add_task(self, user_id: str, title: str, description: str | None) -> JSONObject:
        task_id = str(uuid.uuid4())
        now = _now()
        with self._transaction() as conn:
            conn.execute(
                f"INSERT INTO task ({_TASK_COLUMNS}) VALUES (?, ?, ?, ?, 0, ?, ?)",
                (task_id, user_id, title, description, now, now),
            )
            return self._fetch(conn, user_id, task_id)

    def list_tasks(self, user_id: str, completed: bool | None, page: int, page_size: int) -> JSONObject:
        where = "user_id = ?"
        params: list[Any] = [user_id]
        if completed is not None:
            where += " AND is_completed = ?"
            params.append(int(completed))
        with self._transaction() as conn:
            total = int(conn.execute(f"SELECT COUNT(*) FROM task WHERE {where}", params).fetchone()[0])
            rows = conn.execute(
                # rowid breaks ties between tasks created within the same microsecond, keeping pages stable.
                f"SELECT {_TASK_COLUMNS} FROM task WHERE {where} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
                [*params, page_size, (page - 1) * page_size],
            ).fetchall()
        return {
            "items": [_task_from_row(row) for row in rows],
            "total": total,
            "page": page,
            "page_size": page_size,
            "total_pages": (total + page_size - 1) // page_size,
        }

    def update_task(self, user_id: str, task_id: str, changes: Mapping[str, Any]) -> JSONObject:
        # Column names come from the validated, fixed set of update_task fields, never from the caller.
        assignments = [f"{column} = ?" for column in changes]
        values = [int(v) if isinstance(v, bool) else v for v in changes.values()]
        with self._transaction() as conn:
            cursor = conn.execute(
                f"UPDATE task SET {', '.join(assignments)}, updated_at = ? WHERE id = ? AND user_id = ?",
                [*values, _now(), task_id, user_id],
            )
            if cursor.rowcount == 0:
                raise _not_found(task_id)
            return self._fetch(conn, user_id, task_id)

    def complete_task(self, user_id: str, task_id: str) -> JSONObject:
        with self._transaction() as conn:
            # Already-completed tasks are left untouched (updated_at included): completing twice is a no-op.
            conn.execute(
                "UPDATE task SET is_completed = 1, updated_at = ? WHERE id = ? AND user_id = ? AND is_completed = 0",
                (_now(), task_id, user_id),
            )
            return self._fetch(conn, user_id, task_id)

    def delete_task(self, user_id: str, task_id: str) -> JSONObject:
        with self._transaction() as conn:
            cursor = conn.execute("DELETE FROM task WHERE id = ? AND user_id = ?", (task_id, user_id))
            if cursor.rowcount == 0:
                raise _not_found(task_id)
        return {"deleted": True, "task_id": task_id}


# --- tool definitions ---------------------------------------------------------------------------------------------

_JWT_TOKEN_PROPERTY: Final[JSONObject] = {
    "type": "string",
    "description": (
        "Optional JWT access token (HS256) identifying the user whose tasks to use. Leave it out when the server "
        "is already configured with a token (TODO_TOKEN) or the HTTP request carries an Authorization: Bearer header."
    ),
}
_TASK_ID_PROPERTY: Final[JSONObject] = {
    "type": "string",
    "format": "uuid",
    "description": "The task's id (a UUID, as returned by add_task or list_tasks).",
}


def _input_schema(properties: JSONObject, required: Sequence[str] = ()) -> JSONObject:
    schema: JSONObject = {
        "type": "object",
        "properties": {"jwt_token": _JWT_TOKEN_PROPERTY, **properties},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


_TASK_OUTPUT_SCHEMA: Final[JSONObject] = {
    "type": "object",
    "description": "A todo task.",
    "properties": {
        "id": {"type": "string", "format": "uuid", "description": "The task's id."},
        "user_id": {"type": "string", "format": "uuid", "description": "The id of the user who owns the task."},
        "title": {"type": "string", "description": "Short title, 1-255 characters."},
        "description": {"type": ["string", "null"], "description": "Optional longer text; null when absent."},
        "is_completed": {"type": "boolean", "description": "Whether the task is done."},
        "created_at": {"type": "string", "format": "date-time", "description": "Creation time, RFC 3339 UTC."},
        "updated_at": {"type": "string", "format": "date-time", "description": "Last change, RFC 3339 UTC."},
    },
    "required": ["id", "user_id", "title", "description", "is_completed", "created_at", "updated_at"],
    "additionalProperties": False,
}

_LIST_OUTPUT_SCHEMA: Final[JSONObject] = {
    "type": "object",
    "description": "One page of tasks, newest first.",
    "properties": {
        "items": {"type": "array", "items": _TASK_OUTPUT_SCHEMA, "description": "The tasks on this page."},
        "total": {"type": "integer", "minimum": 0, "description": "Number of matching tasks across all pages."},
        "page": {"type": "integer", "minimum": 1, "description": "This page's number (1-based)."},
        "page_size": {"type": "integer", "minimum": 1, "description": "Maximum tasks per page."},
        "total_pages": {"type": "integer", "minimum": 0, "description": "Number of pages (0 when nothing matches)."},
    },
    "required": ["items", "total", "page", "page_size", "total_pages"],
    "additionalProperties": False,
}

_DELETE_OUTPUT_SCHEMA: Final[JSONObject] = {
    "type": "object",
    "description": "Confirmation that the task was deleted.",
    "properties": {
        "deleted": {"type": "boolean", "description": "Always true."},
        "task_id": {"type": "string", "format": "uuid", "description": "The id of the deleted task."},
    },
    "required": ["deleted", "task_id"],
    "additionalProperties": False,
}


def _annotations(title: str, *, read_only: bool, destructive: bool, idempotent: bool) -> types.ToolAnnotations:
    return types.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


_TITLE_DESCRIPTION: Final = f"Short title of the task, 1-{TITLE_MAX_LENGTH} characters, not only whitespace."

TOOLS: Final[tuple[types.Tool, ...]] = (
    types.Tool(
        name="add_task",
        title="Add task",
        description=(
            "Create a new todo task for the authenticated user. Returns the created task with its id, "
            "is_completed=false and timestamps."
        ),
        input_schema=_input_schema(
            {
                "title": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": TITLE_MAX_LENGTH,
                    "description": _TITLE_DESCRIPTION,
                },
                "description": {"type": "string", "description": "Optional longer details or notes for the task."},
            },
            required=["title"],
        ),
        output_schema=_TASK_OUTPUT_SCHEMA,
        annotations=_annotations("Add task", read_only=False, destructive=False, idempotent=False),
    ),
    types.Tool(
        name="list_tasks",
        title="List tasks",
        description=(
            "List the authenticated user's todo tasks, newest first, with optional completion filter and "
            "pagination. Returns {items, total, page, page_size, total_pages}."
        ),
        input_schema=_input_schema(
            {
                "completed": {
                    "type": "boolean",
                    "description": "true: only completed tasks; false: only open tasks; omit for all tasks.",
                },
                "page": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 1,
                    "description": "Page number, starting at 1. A page past the end returns no items.",
                },
                "page_size": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": PAGE_SIZE_MAX,
                    "default": PAGE_SIZE_DEFAULT,
                    "description": f"Tasks per page, 1-{PAGE_SIZE_MAX} (default {PAGE_SIZE_DEFAULT}).",
                },
            }
        ),
        output_schema=_LIST_OUTPUT_SCHEMA,
        annotations=_annotations("List tasks", read_only=True, destructive=False, idempotent=True),
    ),
    types.Tool(
        name="update_task",
        title="Update task",
        description=(
            "Change the title, description and/or completion state of one of the authenticated user's tasks. "
            "Only the fields given are changed; returns the updated task."
        ),
        input_schema=_input_schema(
            {
                "task_id": _TASK_ID_PROPERTY,
                "title": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": TITLE_MAX_LENGTH,
                    "description": f"New title. {_TITLE_DESCRIPTION}",
                },
                "description": {
                    "type": "string",
                    "description": "New description; an empty string removes the description.",
                },
                "is_completed": {
                    "type": "boolean",
                    "description": "true marks the task done, false reopens it.",
                },
            },
            required=["task_id"],
        ),
        output_schema=_TASK_OUTPUT_SCHEMA,
        annotations=_annotations("Update task", read_only=False, destructive=False, idempotent=True),
    ),
    types.Tool(
        name="complete_task",
        title="Complete task",
        description=(
            "Mark one of the authenticated user's tasks as completed. Safe to repeat: completing an already "
            "completed task changes nothing. Returns the task."
        ),
        input_schema=_input_schema({"task_id": _TASK_ID_PROPERTY}, required=["task_id"]),
        output_schema=_TASK_OUTPUT_SCHEMA,
        annotations=_annotations("Complete task", read_only=False, destructive=False, idempotent=True),
    ),
    types.Tool(
        name="delete_task",
        title="Delete task",
        description=(
            "Permanently delete one of the authenticated user's tasks. This cannot be undone. "
            "Returns {deleted: true, task_id}."
        ),
        input_schema=_input_schema({"task_id": _TASK_ID_PROPERTY}, required=["task_id"]),
        output_schema=_DELETE_OUTPUT_SCHEMA,
        annotations=_annotations("Delete task", read_only=False, destructive=True, idempotent=False),
    ),
)

_TOOLS_BY_NAME: Final[dict[str, types.Tool]] = {tool.name: tool for tool in TOOLS}


# --- argument validation ------------------------------------------------------------------------------------------

_Operation = Callable[[TaskStore, str], JSONObject]
"""A validated call, waiting for the store and the authenticated user id."""


def _check_known_arguments(tool: types.Tool, args: Mapping[str, Any]) -> None:
    allowed = list(tool.input_schema["properties"])
    unknown = sorted(name for name in args if name not in allowed)
    if unknown:
        raise _invalid(
            f"Unknown argument(s) for {tool.name}: {', '.join(unknown)}. Allowed: {', '.join(allowed)}",
            unknown[0],
            allowed=allowed,
        )


def _token_argument(args: Mapping[str, Any]) -> str | None:
    value = args.get("jwt_token")
    if value is None:
        return None
    if not isinstance(value, str):
        # A credential was offered in a form no token takes: as unusable as a forged one.
        raise ToolError(AUTHENTICATION_ERROR, MSG_AUTH_INVALID)
    # An empty string is what agents send for "no token"; treat it as absent rather than as a bad token.
    return value.strip() or None


def _title(value: Any) -> str:
    if value is None:
        raise _invalid(MSG_TITLE_REQUIRED, "title")
    if not isinstance(value, str):
        raise _invalid("Task title must be a string", "title")
    title = value.strip()
    if not title:
        raise _invalid(MSG_TITLE_REQUIRED, "title")
    if len(title) > TITLE_MAX_LENGTH:
        raise _invalid(MSG_TITLE_TOO_LONG, "title")
    return title


def _description(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid("Task description must be a string", "description")
    # An empty description carries no information; storing null keeps "no description" single-valued.
    return value or None


def _task_id(args: Mapping[str, Any]) -> str:
    value = args.get("task_id")
    if value is None:
        raise _invalid("task_id is required (the task's UUID)", "task_id")
    if not isinstance(value, str):
        raise _invalid(MSG_BAD_TASK_ID, "task_id")
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise _invalid(MSG_BAD_TASK_ID, "task_id") from None


def _optional_bool(args: Mapping[str, Any], name: str) -> bool | None:
    value = args.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise _invalid(f"{name} must be a boolean (true or false)", name)


def _bounded_int(args: Mapping[str, Any], name: str, default: int, maximum: int | None) -> int:
    value = args.get(name)
    if value is None:
        return default
    # JSON Schema's "integer" admits 2.0; bool is an int subclass in Python but never a JSON integer.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    allowed = f"an integer from 1 to {maximum}" if maximum is not None else "an integer of at least 1"
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{name} must be {allowed}", name)
    if value < 1 or (maximum is not None and value > maximum):
        raise _invalid(f"{name} must be {allowed}, got {value}", name)
    return value


def _prepare_add(args: Mapping[str, Any]) -> _Operation:
    title = _title(args.get("title"))
    description = _description(args.get("description"))
    return lambda store, user_id: store.add_task(user_id, title, description)


def _prepare_list(args: Mapping[str, Any]) -> _Operation:
    completed = _optional_bool(args, "completed")
    page = _bounded_int(args, "page", 1, None)
    page_size = _bounded_int(args, "page_size", PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX)
    return lambda store, user_id: store.list_tasks(user_id, completed, page, page_size)


def _prepare_update(args: Mapping[str, Any]) -> _Operation:
    task_id = _task_id(args)
    changes: JSONObject = {}
    if "title" in args:
        changes["title"] = _title(args["title"])
    if "description" in args:
        changes["description"] = _description(args["description"])
    if args.get("is_completed") is not None:
        changes["is_completed"] = _optional_bool(args, "is_completed")
    if not changes:
        raise _invalid("Nothing to update: give at least one of title, description, is_completed")
    return lambda store, user_id: store.update_task(user_id, task_id, changes)


def _prepare_complete(args: Mapping[str, Any]) -> _Operation:
    task_id = _task_id(args)
    return lambda store, user_id: store.complete_task(user_id, task_id)


def _prepare_delete(args: Mapping[str, Any]) -> _Operation:
    task_id = _task_id(args)
    return lambda store, user_id: store.delete_task(user_id, task_id)


_PREPARERS: Final[dict[str, Callable[[Mapping[str, Any]], _Operation]]] = {
    "add_task": _prepare_add,
    "list_tasks": _prepare_list,
    "update_task": _prepare_update,
    "complete_task": _prepare_complete,
    "delete_task": _prepare_delete,
}


# --- the MCP server -----------------------------------------------------------------------------------------------


def _success(payload: JSONObject) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
    )


def _failure(error: ToolError) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=f"{error.code}: {error.message}")],
        structured_content={"error": {"code": error.code, "message": error.message, "details": error.details}},
        is_error=True,
    )


def create_server(store_path: Path | None = None) -> Server[Any]:
    """The todo MCP server (low-level SDK server), storing tasks in `store_path` (default `database_path()`)."""
    store = TaskStore(store_path if store_path is not None else database_path())

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = _TOOLS_BY_NAME.get(params.name)
        if tool is None:
            # Not a tool failure but a request for something that does not exist: a protocol error, per the spec.
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        args: Mapping[str, Any] = params.arguments or {}
        try:
            # Authentication first, for every tool: a caller without a valid token learns nothing about its
            # arguments (which are known, which are wrong), only that it must authenticate.
            token = _select_token(_token_argument(args), ctx.request)

            def run() -> JSONObject:
                # Token verification may create the secret file, so it runs off the event loop with the query.
                user_id = _authenticate(token)
                _check_known_arguments(tool, args)
                return _PREPARERS[tool.name](args)(store, user_id)

            return _success(await anyio.to_thread.run_sync(run))
        except ToolError as error:
            return _failure(error)
        except Exception:
            logger.exception("todo: %s failed", tool.name)
            return _failure(ToolError(DATABASE_ERROR, MSG_INTERNAL))

    return Server(
        "todo",
        version=_server_version(),
        title="Todo",
        instructions=(
            "A personal todo list. Use list_tasks to see tasks, add_task to create one, update_task or "
            "complete_task to change one, delete_task to remove one. Task ids are UUIDs from add_task/list_tasks."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


# --- transports and CLI -------------------------------------------------------------------------------------------


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server[Any], port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    # Binding here (not in uvicorn) lets port 0 work: the kernel's choice is known before anyone must connect,
    # and connections made before uvicorn starts accepting wait in the listen backlog.
    sock = bind_loopback(port)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2)
    print(f"todo: listening on http://127.0.0.1:{bound_port}/mcp", file=sys.stderr, flush=True)
    with closing(sock):
        await uvicorn.Server(config).serve(sockets=[sock])


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mcphost.demo.todo",
        description="The bundled todo MCP server (stdio by default).",
    )
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="Run the server (stdio unless --http).")
    serve.add_argument("--http", action="store_true", help="Serve streamable HTTP on 127.0.0.1 at /mcp.")
    serve.add_argument("--port", type=int, default=None, help="HTTP port (0 picks a free one; the default).")
    serve.add_argument(
        "--as-local-user", action="store_true", help="stdio only: calls without a token act for the local user."
    )
    token = commands.add_parser("token", help="Print an access token for a user.")
    token.add_argument("--user", type=uuid.UUID, default=LOCAL_USER_ID, help="User UUID (default: the local user).")
    token.add_argument("--email", default=None, help="Optional email claim.")
    token.add_argument(
        "--ttl-seconds", type=int, default=DEFAULT_TOKEN_TTL_SECONDS, help="Lifetime in seconds (default: 1 year)."
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    # stdout belongs to the protocol in stdio mode, so all diagnostics go to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")

    if args.command == "token":
        print(mint_token(args.user, email=args.email, ttl_seconds=args.ttl_seconds))
        return 0

    http = args.command == "serve" and args.http
    port = getattr(args, "port", None)
    if port is not None and not http:
        parser.error("--port needs --http")
    if port is not None and not 0 <= port <= 65535:
        parser.error("--port must be between 0 and 65535")

    if getattr(args, "as_local_user", False):
        if http:
            parser.error("--as-local-user is for stdio only: over HTTP, other local users could reach the server")
        global _AS_LOCAL_USER
        _AS_LOCAL_USER = True
    server = create_server()
    try:
        if http:
            anyio.run(serve_http, server, port or 0)
        else:
            anyio.run(serve_stdio, server)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
