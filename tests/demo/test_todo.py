"""The bundled todo server, driven as a real subprocess through the official MCP client, as mcphost drives it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcphost.demo import todo

SECRET = "test-secret-for-the-todo-server-0123456789abcdef"
USER_A = uuid.UUID("aaaaaaaa-0000-4000-8000-000000000001")
USER_B = uuid.UUID("bbbbbbbb-0000-4000-8000-000000000002")
SERVER_ARGS = ["-m", "mcphost.demo.todo"]
STARTUP_DEADLINE = 20.0

TOKEN_A = todo.mint_token(USER_A, email="a@example.com", secret=SECRET)
TOKEN_B = todo.mint_token(USER_B, secret=SECRET)


def server_env(data_dir: Path, *, secret: str | None = SECRET, token: str | None = None) -> dict[str, str]:
    env = {"MCPHOST_DATA_DIR": str(data_dir)}
    if secret is not None:
        env["TODO_JWT_SECRET"] = secret
    if token is not None:
        env["TODO_TOKEN"] = token
    return env


@asynccontextmanager
async def todo_client(data_dir: Path, **env_options: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=SERVER_ARGS, env=server_env(data_dir, **env_options))
    async with Client(params, mode="legacy", cache=None) as client:
        yield client


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result
    payload = result.structured_content
    assert isinstance(payload, dict)
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    assert json.loads(block.text) == payload
    return payload


async def fails(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The `error` object of a call that must fail as a tool error (isError, readable text, structured error)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    payload = result.structured_content
    assert isinstance(payload, dict)
    error = payload["error"]
    assert isinstance(error, dict)
    assert set(error) == {"code", "message", "details"}
    block = result.content[0]
    assert block.type == "text"
    assert error["message"] in block.text
    return error


def assert_error(error: dict[str, Any], code: str, message: str) -> None:
    assert (error["code"], error["message"]) == (code, message)


def page_info(listing: dict[str, Any]) -> tuple[int, int, int, int]:
    return (listing["total"], listing["page"], listing["page_size"], listing["total_pages"])


def is_rfc3339_utc(value: str) -> bool:
    return value.endswith("Z") and datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None


# --- in-process helpers ---------------------------------------------------------------------------------------------


def test_local_user_id_is_the_fixed_uuid5() -> None:
    assert uuid.uuid5(uuid.NAMESPACE_DNS, "local.mcphost") == todo.LOCAL_USER_ID


def test_minted_token_carries_access_claims() -> None:
    token = todo.mint_token(str(USER_A), email="a@example.com", ttl_seconds=60, secret=SECRET)
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert claims["sub"] == str(USER_A)
    assert claims["email"] == "a@example.com"
    assert claims["type"] == "access"
    assert 0 < claims["exp"] - claims["iat"] <= 60


def test_jwt_secret_prefers_env_then_creates_a_private_stable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPHOST_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TODO_JWT_SECRET", SECRET)
    assert todo.jwt_secret() == SECRET
    assert not (tmp_path / "data" / "todo-jwt-secret").exists()

    monkeypatch.delenv("TODO_JWT_SECRET")
    first = todo.jwt_secret()
    secret_file = tmp_path / "data" / "todo-jwt-secret"
    assert secret_file.read_text(encoding="utf-8").strip() == first
    assert len(first) >= 32
    if os.name == "posix":
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert todo.jwt_secret() == first
    assert [p.name for p in secret_file.parent.iterdir()] == ["todo-jwt-secret"]

    secret_file.write_text("\n", encoding="utf-8")
    replaced = todo.jwt_secret()
    assert replaced and replaced != first
    assert secret_file.read_text(encoding="utf-8").strip() == replaced


def test_database_path_prefers_todo_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPHOST_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TODO_DB", raising=False)
    assert todo.database_path() == tmp_path / "todo.sqlite3"
    monkeypatch.setenv("TODO_DB", str(tmp_path / "elsewhere.db"))
    assert todo.database_path() == tmp_path / "elsewhere.db"


# --- the server over stdio ------------------------------------------------------------------------------------------

EXPECTED_HINTS = {
    "add_task": (False, False, False),
    "list_tasks": (True, False, True),
    "update_task": (False, False, True),
    "complete_task": (False, False, True),
    "delete_task": (False, True, False),
}


async def test_lists_five_tools_with_annotations_and_strict_schemas(tmp_path: Path) -> None:
    async with todo_client(tmp_path) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert set(tools) == set(EXPECTED_HINTS)
    for name, (read_only, destructive, idempotent) in EXPECTED_HINTS.items():
        tool = tools[name]
        hints = tool.annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
            read_only,
            destructive,
            idempotent,
        ), name
        assert hints.open_world_hint is False
        assert tool.title and hints.title
        assert tool.description and len(tool.description) > 40
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert "jwt_token" in schema["properties"]
        assert "jwt_token" not in schema.get("required", [])
        for prop_name, prop in schema["properties"].items():
            assert prop.get("description"), f"{name}.{prop_name} has no description"
        assert tool.output_schema is not None

    assert tools["add_task"].input_schema["required"] == ["title"]
    assert tools["add_task"].input_schema["properties"]["title"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "description": tools["add_task"].input_schema["properties"]["title"]["description"],
    }
    list_props = tools["list_tasks"].input_schema["properties"]
    assert (list_props["page"]["minimum"], list_props["page"]["default"]) == (1, 1)
    assert (list_props["page_size"]["minimum"], list_props["page_size"]["maximum"]) == (1, 100)
    assert list_props["page_size"]["default"] == 20
    assert list_props["completed"]["type"] == "boolean"
    for name in ("update_task", "complete_task", "delete_task"):
        assert tools[name].input_schema["required"] == ["task_id"]
        assert tools[name].input_schema["properties"]["task_id"]["format"] == "uuid"
    assert tools["update_task"].input_schema["properties"]["is_completed"]["type"] == "boolean"


async def test_added_tasks_are_listed_newest_first_and_filtered_by_completion(tmp_path: Path) -> None:
    async with todo_client(tmp_path) as client:
        first = await ok(client, "add_task", {"jwt_token": TOKEN_A, "title": "  Buy milk ", "description": "2 l"})
        second = await ok(client, "add_task", {"jwt_token": TOKEN_A, "title": "Call mum"})
        await ok(client, "complete_task", {"jwt_token": TOKEN_A, "task_id": first["id"]})
        everything = await ok(client, "list_tasks", {"jwt_token": TOKEN_A})
        done = await ok(client, "list_tasks", {"jwt_token": TOKEN_A, "completed": True})
        open_ = await ok(client, "list_tasks", {"jwt_token": TOKEN_A, "completed": False})

    assert uuid.UUID(first["id"]).version == 4
    assert first["user_id"] == str(USER_A)
    assert (first["title"], first["description"], first["is_completed"]) == ("Buy milk", "2 l", False)
    assert second["description"] is None
    assert is_rfc3339_utc(first["created_at"]) and first["created_at"] == first["updated_at"]

    assert [task["id"] for task in everything["items"]] == [second["id"], first["id"]]
    assert page_info(everything) == (2, 1, 20, 1)
    assert [task["id"] for task in done["items"]] == [first["id"]]
    assert [task["id"] for task in open_["items"]] == [second["id"]]


async def test_update_changes_only_given_fields_and_refreshes_updated_at(tmp_path: Path) -> None:
    async with todo_client(tmp_path, token=TOKEN_A) as client:
        task = await ok(client, "add_task", {"title": "Draft", "description": "notes"})
        renamed = await ok(client, "update_task", {"task_id": task["id"], "title": "Final"})
        reopened = await ok(
            client, "update_task", {"task_id": task["id"].upper(), "is_completed": True, "description": ""}
        )
        listed = await ok(client, "list_tasks", {})

    assert (renamed["title"], renamed["description"], renamed["is_completed"]) == ("Final", "notes", False)
    assert renamed["created_at"] == task["created_at"]
    assert renamed["updated_at"] > task["updated_at"]
    assert (reopened["title"], reopened["description"], reopened["is_completed"]) == ("Final", None, True)
    assert reopened["updated_at"] > renamed["updated_at"]
    assert listed["items"] == [reopened]


async def test_complete_task_is_idempotent(tmp_path: Path) -> None:
    async with todo_client(tmp_path, token=TOKEN_A) as client:
        task = await ok(client, "add_task", {"title": "Once"})
        completed = await ok(client, "complete_task", {"task_id": task["id"]})
        again = await ok(client, "complete_task", {"task_id": task["id"]})

    assert completed["is_completed"] is True
    assert completed["updated_at"] > task["updated_at"]
    assert again == completed


async def test_deleted_task_is_not_found_afterwards(tmp_path: Path) -> None:
    async with todo_client(tmp_path, token=TOKEN_A) as client:
        task = await ok(client, "add_task", {"title": "Temporary"})
        deleted = await ok(client, "delete_task", {"task_id": task["id"]})
        errors = [
            await fails(client, "delete_task", {"task_id": task["id"]}),
            await fails(client, "complete_task", {"task_id": task["id"]}),
            await fails(client, "update_task", {"task_id": task["id"], "title": "Back"}),
        ]
        listed = await ok(client, "list_tasks", {})

    assert deleted == {"deleted": True, "task_id": task["id"]}
    for error in errors:
        assert_error(error, "NOT_FOUND_ERROR", "Task not found")
    assert listed["total"] == 0 and listed["items"] == []


async def test_invalid_arguments_are_rejected_with_validation_errors(tmp_path: Path) -> None:
    task_id = str(uuid.uuid4())
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("add_task", {}, "Task title is required"),
        ("add_task", {"title": ""}, "Task title is required"),
        ("add_task", {"title": " \t\n"}, "Task title is required"),
        ("add_task", {"title": "x" * 256}, "Task title must be 255 characters or less"),
        ("add_task", {"title": 7}, "Task title must be a string"),
        ("add_task", {"title": "ok", "description": 3}, "Task description must be a string"),
        ("add_task", {"title": "ok", "priority": "high"}, "Unknown argument(s) for add_task: priority"),
        ("update_task", {"task_id": "not-a-uuid", "title": "x"}, "Invalid task ID format"),
        ("update_task", {"task_id": 42, "title": "x"}, "Invalid task ID format"),
        ("update_task", {"task_id": task_id, "title": "   "}, "Task title is required"),
        ("update_task", {"task_id": task_id, "title": "y" * 300}, "Task title must be 255 characters or less"),
        ("update_task", {"task_id": task_id, "is_completed": "yes"}, "is_completed must be a boolean"),
        ("update_task", {"task_id": task_id}, "Nothing to update"),
        ("update_task", {"title": "x"}, "task_id is required"),
        ("complete_task", {"task_id": "123"}, "Invalid task ID format"),
        ("delete_task", {"task_id": ""}, "Invalid task ID format"),
        ("list_tasks", {"page": 0}, "page must be an integer of at least 1"),
        ("list_tasks", {"page": "2"}, "page must be an integer of at least 1"),
        ("list_tasks", {"page": 1.5}, "page must be an integer of at least 1"),
        ("list_tasks", {"page_size": 0}, "page_size must be an integer from 1 to 100"),
        ("list_tasks", {"page_size": 101}, "page_size must be an integer from 1 to 100"),
        ("list_tasks", {"page_size": True}, "page_size must be an integer from 1 to 100"),
        ("list_tasks", {"completed": "true"}, "completed must be a boolean (true or false)"),
        ("list_tasks", {"sort": "title"}, "Unknown argument(s) for list_tasks: sort"),
    ]
    async with todo_client(tmp_path, token=TOKEN_A) as client:
        for tool, arguments, message in cases:
            error = await fails(client, tool, arguments)
            assert error["code"] == "VALIDATION_ERROR", (tool, arguments, error)
            assert error["message"].startswith(message), (tool, arguments, error)
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("drop_database", {})
        # Validation must not have written anything.
        assert (await ok(client, "list_tasks", {}))["total"] == 0


async def test_pagination_reports_totals_and_pages_beyond_the_end_are_empty(tmp_path: Path) -> None:
    async with todo_client(tmp_path, token=TOKEN_A) as client:
        created = [(await ok(client, "add_task", {"title": f"Task {n}"}))["id"] for n in range(5)]
        pages = [await ok(client, "list_tasks", {"page": page, "page_size": 2}) for page in (1, 2, 3)]
        beyond = await ok(client, "list_tasks", {"page": 4, "page_size": 2})
        whole = await ok(client, "list_tasks", {"page_size": 100})
        integral_float = await ok(client, "list_tasks", {"page": 2.0, "page_size": 2})
        empty = await ok(client, "list_tasks", {"completed": True})

    newest_first = list(reversed(created))
    assert [task["id"] for page in pages for task in page["items"]] == newest_first
    assert [len(page["items"]) for page in pages] == [2, 2, 1]
    for number, page in enumerate(pages, start=1):
        assert page_info(page) == (5, number, 2, 3)
    assert beyond["items"] == []
    assert page_info(beyond) == (5, 4, 2, 3)
    assert [task["id"] for task in whole["items"]] == newest_first
    assert integral_float["items"] == pages[1]["items"]
    assert empty["items"] == []
    assert page_info(empty) == (0, 1, 20, 0)


async def test_other_users_task_is_reported_not_found(tmp_path: Path) -> None:
    async with todo_client(tmp_path) as client:
        task = await ok(client, "add_task", {"jwt_token": TOKEN_A, "title": "A's secret"})
        as_b = {"jwt_token": TOKEN_B, "task_id": task["id"]}
        errors = [
            await fails(client, "update_task", {**as_b, "title": "hijacked"}),
            await fails(client, "complete_task", as_b),
            await fails(client, "delete_task", as_b),
        ]
        b_list = await ok(client, "list_tasks", {"jwt_token": TOKEN_B})
        a_list = await ok(client, "list_tasks", {"jwt_token": TOKEN_A})

    for error in errors:
        assert_error(error, "NOT_FOUND_ERROR", "Task not found")
    assert (b_list["items"], b_list["total"]) == ([], 0)
    assert a_list["items"] == [task]


def forge(claims: dict[str, Any], secret: str = SECRET, algorithm: str = "HS256") -> str:
    now = datetime.now(UTC)
    defaults = {"sub": str(USER_A), "type": "access", "iat": now, "exp": now + timedelta(hours=1)}
    return jwt.encode({**defaults, **claims}, secret, algorithm=algorithm)


async def test_expired_forged_and_missing_tokens_are_rejected(tmp_path: Path) -> None:
    expired = todo.mint_token(USER_A, ttl_seconds=-60, secret=SECRET)
    invalid_tokens = {
        "wrong secret": todo.mint_token(USER_A, secret="another-secret-that-is-long-enough-for-hs256"),
        "no sub": forge({"sub": None}),
        "sub not a uuid": forge({"sub": "alice"}),
        "refresh token": forge({"type": "refresh"}),
        "no exp": jwt.encode({"sub": str(USER_A), "type": "access"}, SECRET, algorithm="HS256"),
        "unsigned": forge({}, secret="", algorithm="none"),
        "garbage": "not.a.jwt",
        "tampered": TOKEN_A[:-4] + ("AAAA" if not TOKEN_A.endswith("AAAA") else "BBBB"),
    }
    async with todo_client(tmp_path) as client:
        missing = await fails(client, "list_tasks", {})
        blank = await fails(client, "add_task", {"title": "x", "jwt_token": ""})
        expired_error = await fails(client, "list_tasks", {"jwt_token": expired})
        invalid = {name: await fails(client, "list_tasks", {"jwt_token": tok}) for name, tok in invalid_tokens.items()}
        still_works = await ok(client, "list_tasks", {"jwt_token": TOKEN_A})

    assert_error(missing, "AUTHENTICATION_ERROR", "Authentication required")
    assert_error(blank, "AUTHENTICATION_ERROR", "Authentication required")
    assert_error(expired_error, "AUTHENTICATION_ERROR", "Authentication token expired")
    for name, error in invalid.items():
        assert (name, error["code"], error["message"]) == (name, "AUTHENTICATION_ERROR", "Invalid authentication token")
    assert still_works["total"] == 0


async def test_authentication_comes_before_any_argument_check_for_every_tool(tmp_path: Path) -> None:
    # Bad arguments, no token: a caller who is nobody learns nothing about the arguments, only that it must log in.
    bad_arguments = {
        "add_task": {"title": ""},
        "list_tasks": {"page": 0, "completed": "yes"},
        "update_task": {"task_id": "not-a-uuid", "title": "   "},
        "complete_task": {"task_id": "123"},
        "delete_task": {},
    }
    assert set(bad_arguments) == {tool.name for tool in todo.TOOLS}
    expired = todo.mint_token(USER_A, ttl_seconds=-60, secret=SECRET)
    async with todo_client(tmp_path) as client:
        for tool, arguments in bad_arguments.items():
            missing = await fails(client, tool, arguments)
            assert_error(missing, "AUTHENTICATION_ERROR", "Authentication required")
            assert missing["details"] is None
            unknown_argument = await fails(client, tool, {**arguments, "priority": "high"})
            assert_error(unknown_argument, "AUTHENTICATION_ERROR", "Authentication required")
            stale = await fails(client, tool, {**arguments, "jwt_token": expired})
            assert_error(stale, "AUTHENTICATION_ERROR", "Authentication token expired")
            not_a_string = await fails(client, tool, {**arguments, "jwt_token": 12})
            assert_error(not_a_string, "AUTHENTICATION_ERROR", "Invalid authentication token")
        # With a good token the same arguments are judged on their merits.
        judged = await fails(client, "add_task", {"title": "", "jwt_token": TOKEN_A})
    assert_error(judged, "VALIDATION_ERROR", "Task title is required")


async def test_token_argument_overrides_the_servers_env_token(tmp_path: Path) -> None:
    async with todo_client(tmp_path, token=TOKEN_A) as client:
        from_env = await ok(client, "add_task", {"title": "via TODO_TOKEN"})
        from_argument = await ok(client, "add_task", {"title": "via argument", "jwt_token": TOKEN_B})
        a_view = await ok(client, "list_tasks", {})
        b_view = await ok(client, "list_tasks", {"jwt_token": TOKEN_B})

    assert from_env["user_id"] == str(USER_A)
    assert from_argument["user_id"] == str(USER_B)
    assert [task["id"] for task in a_view["items"]] == [from_env["id"]]
    assert [task["id"] for task in b_view["items"]] == [from_argument["id"]]


async def test_unusable_database_is_reported_as_database_error(tmp_path: Path) -> None:
    # A directory where the database file should be: sqlite cannot open it.
    (tmp_path / "db-is-a-directory").mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=SERVER_ARGS,
        env={**server_env(tmp_path, token=TOKEN_A), "TODO_DB": str(tmp_path / "db-is-a-directory")},
    )
    async with Client(params, mode="legacy", cache=None) as client:
        error = await fails(client, "add_task", {"title": "lost"})
    assert error == {"code": "DATABASE_ERROR", "message": "An error occurred, please try again", "details": None}


async def test_generated_secret_is_shared_by_token_cli_and_server(tmp_path: Path) -> None:
    env = {**get_default_environment(), "MCPHOST_DATA_DIR": str(tmp_path)}
    minted = await anyio.run_process([sys.executable, *SERVER_ARGS, "token", "--user", str(USER_B)], env=env)
    token = minted.stdout.decode().strip()
    secret_file = tmp_path / "todo-jwt-secret"
    assert secret_file.is_file()
    if os.name == "posix":
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    claims = jwt.decode(token, secret_file.read_text(encoding="utf-8").strip(), algorithms=["HS256"])
    assert claims["sub"] == str(USER_B)

    async with todo_client(tmp_path, secret=None) as client:
        task = await ok(client, "add_task", {"title": "signed locally", "jwt_token": token})
        forged = await fails(client, "list_tasks", {"jwt_token": TOKEN_B})
    assert task["user_id"] == str(USER_B)
    assert_error(forged, "AUTHENTICATION_ERROR", "Invalid authentication token")


# --- the server over streamable HTTP --------------------------------------------------------------------------------


@asynccontextmanager
async def http_server(data_dir: Path) -> AsyncIterator[str]:
    """Run `serve --http --port 0` and yield its URL, read from the stderr line it prints when listening."""
    env = {**get_default_environment(), **server_env(data_dir)}
    process: Process = await anyio.open_process(
        [sys.executable, *SERVER_ARGS, "serve", "--http", "--port", "0"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    stderr_lines: list[str] = []
    try:
        assert process.stderr is not None
        stderr = BufferedByteReceiveStream(process.stderr)
        prefix = "todo: listening on "
        with anyio.fail_after(STARTUP_DEADLINE):
            while True:
                line = (await stderr.receive_until(b"\n", 65536)).decode(errors="replace")
                stderr_lines.append(line)
                if line.startswith(prefix):
                    url = line.removeprefix(prefix).strip()
                    break
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert not url.endswith(":0/mcp")

        async def drain() -> None:
            # Keep reading so a chatty server can never block on a full stderr pipe.
            async for chunk in stderr:
                stderr_lines.append(chunk.decode(errors="replace"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            yield url
            tg.cancel_scope.cancel()
    except BaseException:
        print("server stderr:\n" + "".join(stderr_lines), file=sys.stderr)
        raise
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.terminate()
                try:
                    with anyio.fail_after(5):
                        await process.wait()
                except TimeoutError:
                    process.kill()
                    await process.wait()
            await process.aclose()


@asynccontextmanager
async def http_client(url: str, authorization: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": authorization} if authorization is not None else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client,
    ):
        yield client


async def test_http_transport_authenticates_with_the_bearer_authorization_header(tmp_path: Path) -> None:
    async with http_server(tmp_path) as url:
        async with http_client(url, f"Bearer {TOKEN_A}") as client:
            tools = (await client.list_tools()).tools
            task = await ok(client, "add_task", {"title": "over HTTP"})
            mine = await ok(client, "list_tasks", {})
            argument_wins = await ok(client, "list_tasks", {"jwt_token": TOKEN_B})
        async with http_client(url, None) as anonymous:
            missing = await fails(anonymous, "list_tasks", {})
            by_argument = await ok(anonymous, "list_tasks", {"jwt_token": TOKEN_A})
        async with http_client(url, "Basic dXNlcjpwYXNz") as wrong_scheme:
            wrong = await fails(wrong_scheme, "list_tasks", {})

    assert len(tools) == 5
    assert task["user_id"] == str(USER_A)
    assert mine["items"] == [task]
    assert argument_wins["total"] == 0
    assert_error(missing, "AUTHENTICATION_ERROR", "Authentication required")
    assert by_argument["items"] == [task]
    assert_error(wrong, "AUTHENTICATION_ERROR", "Invalid authentication token")
