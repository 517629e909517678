"""The todo server's access tokens: the local user, the signing secret, and minting. Apart from the server, so that
the default config can mint the local user's token without importing an MCP server."""

from __future__ import annotations

import os
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import jwt

from mcphost.paths import data_dir, ensure_private_dir

LOCAL_USER_ID: Final[uuid.UUID] = uuid.uuid5(uuid.NAMESPACE_DNS, "local.mcphost")
"""The single local user of the default config; stable across machines so configs can name it."""

SECRET_FILE_NAME: Final = "todo-jwt-secret"
JWT_ALGORITHM: Final = "HS256"
DEFAULT_TOKEN_TTL_SECONDS: Final = 365 * 24 * 3600


def _read_secret_file(path: Path) -> str | None:
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return value or None


def jwt_secret() -> str:
    """The HS256 signing secret: `$TODO_JWT_SECRET`, else `<data dir>/todo-jwt-secret` (created 0600 on first use)."""
    env = os.environ.get("TODO_JWT_SECRET")
    if env:
        return env
    path = ensure_private_dir(data_dir()) / SECRET_FILE_NAME
    existing = _read_secret_file(path)
    if existing:
        return existing
    # mcphost and the server process may both get here first. Writing a temp file and hard-linking it into place
    # publishes the secret atomically and never overwrites a winner's, so every process ends up with one secret.
    tmp = path.with_name(f".{SECRET_FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(secrets.token_urlsafe(32) + "\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        # Another process published first (keep theirs), unless what is there is blank: nothing to preserve.
        if _read_secret_file(path) is None:
            tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    secret = _read_secret_file(path)
    if secret is None:
        raise RuntimeError(f"could not create the todo JWT secret file {path}")
    return secret


def mint_token(
    user_id: uuid.UUID | str,
    *,
    email: str | None = None,
    ttl_seconds: int = DEFAULT_TOKEN_TTL_SECONDS,
    secret: str | None = None,
) -> str:
    """An HS256 access token for `user_id` that this server accepts (signed with `jwt_secret()` by default)."""
    subject = user_id if isinstance(user_id, uuid.UUID) else uuid.UUID(user_id)
    now = datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": str(subject),
        "type": "access",
        "iat": now,
        "exp": now + timedelta(seconds=ttl_seconds),
    }
    if email is not None:
        claims["email"] = email
    return jwt.encode(claims, secret if secret is not None else jwt_secret(), algorithm=JWT_ALGORITHM)
