"""Secrets never reach the activity log: key-based and format-based redaction.

Every fake secret is assembled at runtime, so no string that looks like a real credential is committed.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from mcphost.activity.redact import REDACTED, is_secret_key, left_alone, redact, redact_text, scrub

# ---------------------------------------------------------------------------------------------- fakes


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def fake_jwt() -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": "1234567890", "name": "Fake"}).encode())
    return f"{header}.{payload}.{_b64url(b'not-a-real-signature-0123456789')}"


def fake_pem(label: str = "RSA PRIVATE KEY") -> str:
    body = "\n".join(["MIIEfake" + "A" * 56] * 3)
    return f"{'-' * 5}BEGIN {label}{'-' * 5}\n{body}\n{'-' * 5}END {label}{'-' * 5}"


# kind -> a factory for one realistic-looking fake of that kind
FAKES: dict[str, Callable[[], str]] = {
    "jwt": fake_jwt,
    "github_classic": lambda: "ghp_" + "a1B2" * 9,
    "github_oauth": lambda: "gho_" + "Z9y8" * 9,
    "github_server": lambda: "ghs_" + "k" * 36,
    "github_fine_grained": lambda: "github_pat_" + "11AB" * 5 + "CD_" + "x7" * 29 + "y",
    "gitlab": lambda: "glpat-" + "Ab3-" * 5,
    "slack": lambda: "xoxb-" + "1234567890-" + "0987654321-" + "aBcD" * 6,
    "aws": lambda: "AKIA" + "IOSFODNN7EXAMPLE",
    "aws_session": lambda: "ASIA" + "Q7" * 8,
    "google": lambda: "AIza" + "Sy" + "B1c2" * 8 + "d",
    "openai_legacy": lambda: "sk-" + "T3Blbk" * 8,
    "openai_project": lambda: "sk-proj-" + "a1_B2-c3" * 6,
    "anthropic": lambda: "sk-ant-api03-" + "Xy-9_" * 18 + "AA",
    "stripe_live": lambda: "sk_" + "live_" + "4eC39H" * 4,
    "stripe_restricted": lambda: "rk_" + "live_" + "9fQ2" * 6,
    "stripe_test": lambda: "sk_" + "test_" + "Qw3" * 8,
    "npm": lambda: "npm_" + "a1b2c3" * 6,
    "huggingface": lambda: "hf_" + "AbCdEfGhIj" * 3 + "KlMn",
    "sendgrid": lambda: "SG." + "aB3_" * 5 + "cD" + "." + "eF4-" * 10 + "gHi",
}

EXPECTED_KIND = {
    "jwt": "jwt",
    "github_classic": "github",
    "github_oauth": "github",
    "github_server": "github",
    "github_fine_grained": "github",
    "gitlab": "gitlab",
    "slack": "slack",
    "aws": "aws_access_key",
    "aws_session": "aws_access_key",
    "google": "google_api_key",
    "openai_legacy": "openai",
    "openai_project": "openai",
    "anthropic": "anthropic",
    "stripe_live": "stripe",
    "stripe_restricted": "stripe",
    "stripe_test": "stripe",
    "npm": "npm",
    "huggingface": "huggingface",
    "sendgrid": "sendgrid",
}


def flatten(value: Any) -> list[str]:
    """Every string value inside a JSON-like structure."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in flatten(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in flatten(v)]
    return []


# ---------------------------------------------------------------------------------------------- keys


@pytest.mark.parametrize(
    "key",
    [
        "token",
        "access_token",
        "accessToken",
        "refresh_token",
        "refreshToken",
        "id_token",
        "session_token",
        "AWS_SESSION_TOKEN",
        "auth_token",
        "GITHUB_PERSONAL_ACCESS_TOKEN",
        "password",
        "PASSWORD",
        "Password",
        "db.password",
        "db password",
        "new-password",
        "passWord",
        "passwd",
        "passphrase",
        "pass_phrase",
        "passcode",
        "pwd",
        "secret",
        "secrets",
        "client_secret",
        "clientSecret",
        "oauth_token_secret",
        "api_key",
        "apiKey",
        "APIKey",
        "API_KEY",
        "apikey",
        "x-api-key",
        "X-Api-Key",
        "OPENAI_API_KEY",
        "api_key2",
        "authorization",
        "Authorization",
        "Proxy-Authorization",
        "auth",
        "auth_header",
        "cookie",
        "Cookie",
        "cookies",
        "Set-Cookie",
        "credential",
        "credentials",
        "creds",
        "private_key",
        "privateKey",
        "access_key",
        "secret_key",
        "AWS_SECRET_ACCESS_KEY",
        "signing_key",
        "encryption_key",
        "jwt",
        "bearer",
        "bearer_token",
        "otp",
        "totp",
        "pin_code",
        "pinCode",
        "mfa_code",
        "csrf_token",
        "access_tokens",
        "api_tokens",
    ],
)
def test_keys_naming_a_credential_are_secret(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "token_id",
        "access_key_id",
        "secret_id",  # Vault's AppRole secret_id is a credential
        "private_key_id",
    ],
)
def test_identifiers_of_secrets_are_treated_as_secret_on_the_safe_side(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "author",
        "Author",
        "authored_by",
        "authority",
        "authenticated",
        "oauth_provider",
        "OAuthProvider",
        "keyboard",
        "monkey",
        "turkey",
        "key",
        "Key",
        "key_id",
        "keys",
        "cache_key",
        "sort_key",
        "tokenizer",
        "tokens",
        "max_tokens",
        "maxTokens",
        "tokens_used",
        "prompt_tokens",
        "total_tokens",
        "num_tokens",
        "max_token",
        "pin",
        "pinned",
        "spinning",
        "passed",
        "compass",
        "session_id",
        "signature",
        "name",
        "",
    ],
)
def test_keys_that_only_resemble_credentials_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "token_count",
        "tokenCount",
        "token-count",
        "token_limit",
        "token_type",
        "token_length",
        "token_ttl",
        "token_expires_at",
        "token_expiry",
        "token_url",
        "token_endpoint",
        "token_file",
        "token_env",
        "auth_url",
        "auth_type",
        "auth_method",
        "auth_provider",
        "password_min_length",
        "password_policy",
        "password_hint",
        "secret_name",
        "secret_arn",
        "secret_version",
        "cookie_name",
        "client_secret_expires_at",
        "access_token_ttl",
    ],
)
def test_a_qualifier_after_the_secret_word_makes_the_key_metadata_not_a_secret(key: str) -> None:
    assert not is_secret_key(key)


@pytest.mark.parametrize(
    "key", ["nextPageToken", "page_token", "next_token", "NextToken", "progressToken", "sync_token"]
)
def test_pagination_and_progress_tokens_are_handles_not_credentials(key: str) -> None:
    assert not is_secret_key(key)


def test_qualifier_words_before_the_secret_word_do_not_unmask_it() -> None:
    assert is_secret_key("token_value")
    assert is_secret_key("expired_token")
    assert is_secret_key("user_password_confirm")


def test_extra_keys_match_the_key_lowercased_without_dashes_or_underscores() -> None:
    assert not is_secret_key("X-Tenant-Key")
    for key in ("X-Tenant-Key", "x_tenant_key", "xTenantKey", "XTENANTKEY", "x-tenant_key"):
        assert is_secret_key(key, ["x_tenant_key"])
        assert is_secret_key(key, ("X-Tenant-Key",))


def test_extra_keys_are_exact_names_not_substrings() -> None:
    assert not is_secret_key("x_tenant_key_name", ["x_tenant_key"])
    assert not is_secret_key("tenant", ["x_tenant_key"])


def test_extra_keys_override_the_qualifier_rule_and_plain_key() -> None:
    assert is_secret_key("key", ["key"])
    assert is_secret_key("token_count", ["token_count"])


def test_extra_keys_given_as_a_single_string_is_one_name() -> None:
    assert is_secret_key("session", "session")
    assert not is_secret_key("s", "session")


# ---------------------------------------------------------------------------------------------- value formats


@pytest.mark.parametrize("name", sorted(FAKES))
def test_each_credential_format_inside_a_sentence_is_redacted_with_its_kind(name: str) -> None:
    secret = FAKES[name]()
    text = f"Deploy failed (used {secret}) for task-123, retrying."
    out = redact_text(text)
    assert secret not in out
    assert out == f"Deploy failed (used [REDACTED:{EXPECTED_KIND[name]}]) for task-123, retrying."


@pytest.mark.parametrize("name", sorted(FAKES))
def test_each_credential_format_is_redacted_at_the_start_and_end_of_a_string(name: str) -> None:
    secret = FAKES[name]()
    marker = f"[REDACTED:{EXPECTED_KIND[name]}]"
    assert redact_text(secret) == marker
    assert redact_text(f"{secret}\n{secret}") == f"{marker}\n{marker}"


@pytest.mark.parametrize("name", sorted(FAKES))
def test_each_credential_format_nested_in_dicts_and_lists_under_ordinary_keys_is_redacted(name: str) -> None:
    secret = FAKES[name]()
    args = {"repo": "o/r", "steps": [{"run": f"curl -H 'X: {secret}' https://example.com", "n": 1}], "note": secret}
    out = redact(args)
    assert not any(secret in s for s in flatten(out))
    assert out["repo"] == "o/r"
    assert out["steps"][0]["n"] == 1
    assert out["note"] == f"[REDACTED:{EXPECTED_KIND[name]}]"
    assert out["steps"][0]["run"].startswith("curl -H 'X: [REDACTED:")


def test_github_token_inside_a_sentence_is_redacted() -> None:
    token = "ghp_" + "a" * 36
    assert redact_text(f"my token is {token}, keep it safe") == "my token is [REDACTED:github], keep it safe"


def test_aws_access_key_id_needs_exactly_sixteen_characters() -> None:
    assert redact_text("AKIA" + "A" * 15) == "AKIA" + "A" * 15
    assert redact_text("AKIA" + "A" * 17) == "AKIA" + "A" * 17


def test_multi_line_pem_private_key_block_is_redacted_and_surrounding_text_kept() -> None:
    pem = fake_pem()
    out = redact_text(f"key file:\n{pem}\nend of file")
    assert out == "key file:\n[REDACTED:private_key]\nend of file"


@pytest.mark.parametrize("label", ["PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"])
def test_pem_private_key_blocks_of_every_label_are_redacted(label: str) -> None:
    assert redact_text(fake_pem(label)) == "[REDACTED:private_key]"


def test_pgp_private_key_block_is_redacted() -> None:
    assert redact_text(fake_pem("PGP PRIVATE KEY BLOCK")) == "[REDACTED:private_key]"


def test_truncated_private_key_block_without_end_line_is_redacted_to_the_end() -> None:
    pem = fake_pem()
    truncated = "cat id_rsa:\n" + pem[: len(pem) // 2]
    assert redact_text(truncated) == "cat id_rsa:\n[REDACTED:private_key]"


def test_public_key_and_certificate_blocks_are_not_redacted() -> None:
    text = f"{'-' * 5}BEGIN CERTIFICATE{'-' * 5}\nMIIB{'A' * 60}\n{'-' * 5}END CERTIFICATE{'-' * 5}"
    assert redact_text(text) == text


def test_bearer_authorization_keeps_the_scheme_word_and_redacts_the_credential() -> None:
    opaque = "a1b2c3d4e5f6g7h8i9j0"
    assert redact_text(f"Authorization: Bearer {opaque}") == "Authorization: Bearer [REDACTED:bearer]"
    assert redact_text(f"curl -H 'authorization: bearer {opaque}' x") == (
        "curl -H 'authorization: bearer [REDACTED:bearer]' x"
    )


def test_bearer_credential_of_a_known_format_is_named_by_that_format() -> None:
    assert redact_text(f"Authorization: Bearer {fake_jwt()}") == "Authorization: Bearer [REDACTED:jwt]"
    token = "ghp_" + "b" * 36
    assert redact_text(f"Bearer {token}") == "Bearer [REDACTED:github]"


def test_basic_authorization_keeps_the_scheme_word_and_redacts_the_credential() -> None:
    cred = base64.b64encode(b"alice:correct horse").decode()
    assert redact_text(f"Authorization: Basic {cred}") == "Authorization: Basic [REDACTED:basic_auth]"


def test_password_in_url_userinfo_is_redacted_and_user_and_host_are_kept() -> None:
    text = "connect to postgres://admin:" + "s3cr3t" + "@db.internal:5432/app now"
    assert redact_text(text) == "connect to postgres://admin:[REDACTED:url_password]@db.internal:5432/app now"


def test_url_userinfo_with_empty_user_or_at_sign_in_password_is_redacted() -> None:
    assert redact_text("redis://:" + "p4ss" + "@cache:6379/0") == "redis://:[REDACTED:url_password]@cache:6379/0"
    assert redact_text("https://bob:" + "p@ss" + "@example.com/x") == (
        "https://bob:[REDACTED:url_password]@example.com/x"
    )


def test_known_token_used_as_url_password_is_named_by_its_format() -> None:
    token = "ghs_" + "c" * 36
    assert redact_text(f"git clone https://x-access-token:{token}@github.com/o/r.git") == (
        "git clone https://x-access-token:[REDACTED:github]@github.com/o/r.git"
    )


def test_token_as_url_user_name_is_redacted_by_format() -> None:
    token = "ghp_" + "d" * 36
    assert redact_text(f"https://{token}@github.com/o/r") == "https://[REDACTED:github]@github.com/o/r"


def test_slack_webhook_url_is_redacted() -> None:
    url = "https://hooks.slack.com/services/" + "T0000/B0000/" + "x" * 24
    assert redact_text(f"post to {url} please") == "post to [REDACTED:slack_webhook] please"


def test_secret_assignments_in_text_are_redacted() -> None:
    env = "DEBUG=1\nDB_PASSWORD=hunter2\nAPI_KEY='abc def'\nmax_tokens=100\nTOKEN_COUNT=5\n"
    assert redact_text(env) == (
        "DEBUG=1\nDB_PASSWORD=[REDACTED:assignment]\nAPI_KEY='[REDACTED:assignment]'\nmax_tokens=100\nTOKEN_COUNT=5\n"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x: password: hunter2", "x: password: [REDACTED:assignment]"),
        ("ERROR: password: hunter2", "ERROR: password: [REDACTED:assignment]"),
        ("env: API_KEY: xyz123456789", "env: API_KEY: [REDACTED:assignment]"),
        ("Error: api_key: 9f8e7d6c5b4a3210", "Error: api_key: [REDACTED:assignment]"),
        ("a: b: password: x", "a: b: password: [REDACTED:assignment]"),
        ("x: pass_word: hunter2", "x: pass_word: [REDACTED:assignment]"),  # a term split by a separator
        ("config: db: password=hunter2 port=5432", "config: db: password=[REDACTED:assignment] port=5432"),
        ('"error": "password: hunter2"', '"error": "password: [REDACTED:assignment]"'),
        ("token: https://x/y", "token: [REDACTED:assignment]"),
        ("password: a:b:c", "password: [REDACTED:assignment]"),
        ("note: token: a:b:c and more", "note: token: [REDACTED:assignment] and more"),
    ],
)
def test_a_secret_assignment_after_labels_is_redacted_and_a_value_with_colons_whole(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_a_secret_assignment_after_a_label_in_a_records_strings_is_redacted() -> None:
    record = {"arguments": {"cmd": "x: password: hunter2"}, "response_preview": "ERROR: api_key: 9f8e7d6c5b4a3210"}
    assert not left_alone(json.dumps(record).encode())
    assert scrub(record) == {
        "arguments": {"cmd": "x: password: [REDACTED:assignment]"},
        "response_preview": "ERROR: api_key: [REDACTED:assignment]",
    }


def test_secret_in_a_query_string_is_redacted_and_other_parameters_kept() -> None:
    url = "https://api.example.com/v1/items?access_token=abc123&page=2&nextPageToken=zz9"
    assert redact_text(url) == (
        "https://api.example.com/v1/items?access_token=[REDACTED:assignment]&page=2&nextPageToken=zz9"
    )


def test_secret_fields_in_json_text_are_redacted() -> None:
    body = json.dumps({"user": "bob", "password": "correct horse", "token_count": 5, "client_secret": "x\\"})
    assert json.loads(redact_text(body)) == {
        "user": "bob",
        "password": "[REDACTED:assignment]",
        "token_count": 5,
        "client_secret": "[REDACTED:assignment]",
    }


def test_plain_authorization_header_value_in_text_is_redacted_keeping_the_scheme() -> None:
    assert redact_text("Authorization: Bearer plainopaque") == "Authorization: Bearer [REDACTED:assignment]"
    assert redact_text("Authorization: token abcdef") == "Authorization: token [REDACTED:assignment]"


@pytest.mark.parametrize(
    "text",
    [
        "task-123",
        "fix task-123 and task-456 before the skeleton review",
        "asking for a desk-side review",
        "risk-assessment-for-the-quarterly-review",
        "sk-learn-tutorial-for-beginners",
        "skeleton key, sketch, skill",
        str(uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)),
        hashlib.sha1(b"commit").hexdigest(),
        hashlib.sha256(b"blob").hexdigest(),
        "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8).decode(),
        base64.urlsafe_b64encode(bytes(range(255, -1, -1)) * 4).decode(),
        "the bearer of bad news",
        "Bearer bonds are basic instruments",
        "a basic understanding; Basic YWJj",
        "mail bob@example.com or see https://example.com/a?b=c#d",
        "ghp_short and AKIA is a prefix",
        "npm_config_cache=/tmp/npm",
        "hf_hub_download(repo_id)",
        "author: Jane Doe; keyboard: us; monkey=patched",
        "key=user:42 sort_key=created_at",
        "max_tokens=4096 tokens_used: 1200 token_count=7",
        "nextPageToken=CAUQAA progressToken: 3",
        "2024-01-01T10:00:00Z at 10:30",
        "SG.1 and SG.2 are sections",
        "eyJ is how base64 JSON starts",
        "xoxo, see you",
    ],
)
def test_non_secret_look_alikes_survive_unchanged(text: str) -> None:
    assert redact_text(text) == text


def test_redaction_markers_are_not_redacted_again() -> None:
    once = redact_text("password=hunter2 Bearer " + "ghp_" + "e" * 36)
    assert redact_text(once) == once


# ---------------------------------------------------------------------------------------------- structures


def test_values_under_secret_keys_become_redacted_whatever_their_type() -> None:
    out = redact({"password": "hunter2", "pin_code": 1234, "otp": 12.5, "api_key": "", "auth": ["a", "b"]})
    assert out == {"password": REDACTED, "pin_code": REDACTED, "otp": REDACTED, "api_key": REDACTED, "auth": REDACTED}


def test_a_dict_under_a_secret_key_is_replaced_whole() -> None:
    out = redact({"credentials": {"user": "bob", "nested": {"deep": [1, 2]}}, "other": {"user": "bob"}})
    assert out == {"credentials": REDACTED, "other": {"user": "bob"}}


def test_bool_and_none_under_secret_keys_are_kept() -> None:
    out = redact({"token": None, "password": True, "auth": False, "secret": "s"})
    assert out == {"token": None, "password": True, "auth": False, "secret": REDACTED}
    assert out["password"] is True


def test_secret_keys_are_found_at_any_depth_including_inside_lists() -> None:
    args = {"servers": [{"name": "a", "env": {"GITHUB_TOKEN": "t1", "HOME": "/h"}}, {"headers": {"Cookie": "c"}}]}
    assert redact(args) == {
        "servers": [{"name": "a", "env": {"GITHUB_TOKEN": REDACTED, "HOME": "/h"}}, {"headers": {"Cookie": REDACTED}}]
    }


def test_metadata_keys_about_secrets_keep_their_values() -> None:
    args = {"max_tokens": 1024, "token_type": "Bearer", "auth_url": "https://example.com/auth", "author": "Jane"}
    assert redact(args) == args


def test_dict_keys_are_never_rewritten_only_values() -> None:
    token = "ghp_" + "f" * 36
    out = redact({token: "value", "x": {"password": 1}})
    assert list(out) == [token, "x"]
    assert out == {token: "value", "x": {"password": REDACTED}}


def test_extra_keys_redact_user_configured_names() -> None:
    args = {"X-Tenant-Key": "t-1", "tenant": "acme", "inner": [{"x_tenant_key": {"a": 1}}]}
    assert redact(args, extra_keys=["x_tenant_key"]) == {
        "X-Tenant-Key": REDACTED,
        "tenant": "acme",
        "inner": [{"x_tenant_key": REDACTED}],
    }
    assert redact(args) == args


def test_the_input_is_not_mutated_and_the_result_shares_no_containers() -> None:
    secret = "sk-" + "Q1w2E3r4" * 5
    args: dict[str, Any] = {
        "password": "hunter2",
        "list": [{"note": f"use {secret}"}, ["nested", secret]],
        "meta": {"n": 1, "ok": True, "none": None},
    }
    before = copy.deepcopy(args)
    out = redact(args)
    assert args == before
    assert out is not args
    assert out["list"] is not args["list"]
    assert out["list"][0] is not args["list"][0]
    assert out["list"][1] is not args["list"][1]
    assert out["meta"] is not args["meta"]
    assert out["list"][1] == ["nested", "[REDACTED:openai]"]


def test_scalars_and_non_secret_structures_come_back_equal() -> None:
    for value in (None, True, 0, 3.5, "plain text", [], {}, [1, "a", None], {"a": [1, {"b": "c"}]}):
        assert redact(value) == value


def test_top_level_string_goes_through_redact_text() -> None:
    assert redact("x " + "npm_" + "z" * 36) == "x [REDACTED:npm]"


def test_tuples_are_redacted_like_lists() -> None:
    assert redact(("a", "AKIA" + "B" * 16)) == ("a", "[REDACTED:aws_access_key]")


# ---------------------------------------------------------------------------------------------- the memo of clean text


def test_a_string_seen_before_is_redacted_the_same_from_the_memo_and_a_lone_surrogate_still_replaced() -> None:
    from mcphost.activity import redact as module

    secret = f"see {fake_jwt()} here"
    surrogate = "bad \udfff text"
    first = module.scrub({"text": secret, "other": surrogate, secret: 1})
    assert secret in module._clean_memo  # short strings are remembered...
    again = module.scrub({"text": secret, "other": surrogate, secret: 1})
    assert again == first  # ...and give the same clean text the second time
    assert "[REDACTED" in first["text"] and "eyJ" not in json.dumps(first)
    assert first["other"] == "bad \ufffd text"


def test_the_memo_keeps_no_long_string_and_stays_bounded() -> None:
    from mcphost.activity import redact as module

    long = "x" * (module._CLEAN_MEMO_MAX_CHARS + 1)
    module.scrub(long)
    assert long not in module._clean_memo
    for n in range(module._CLEAN_MEMO_ENTRIES + 10):
        module.scrub(f"value {n}")
    assert len(module._clean_memo) <= module._CLEAN_MEMO_ENTRIES
    assert module.scrub(f"token={'a' * 30}") == "token=[REDACTED:assignment]"


# ---------------------------------------------------------------------------------------------- a whole line at once

# What an agent or an upstream can put in a record: every fake credential, keys that name one however they are
# spelled (words split by a space, a newline, a slash, case humps), look-alikes, and text no encoder takes as is.
_HOSTILE = [
    *(make() for make in FAKES.values()),
    "password=hunter2",
    "Authorization: Bearer abcDEF123456",
    "https://bob:pa55word@example.com/x",
    "api key",
    "api\nkey",
    "pass\tword",
    "private/key",
    "APIKey",
    "db password",
    "to\u212aen",  # a Kelvin sign lowercases to an ASCII k
    "\u0130d_token",
    "bad \udfff surrogate",
    'quote " and \\ backslash',
    "\x1b[31mred\x1b[0m",
    "task-123 with sk-learn",
    "mail bob@example.com",
    "plain text",
    "日本語のテキスト",
]


def _records(text: str) -> list[Any]:
    from mcphost.activity.record import ActivityRecord, Decision, ErrorInfo, RecordIntent, RecordMetadata

    return [
        ActivityRecord(server=text, tool=text, client=text, session_id=text, warnings=[text]),
        ActivityRecord(arguments={text: "value", "note": text, "deep": [{"x": text}]}),
        ActivityRecord(arguments={"x": 1}, response_preview=text, arguments_preview=text),
        ActivityRecord(error=ErrorInfo(code="UPSTREAM_ERROR", message=text), details={text: {text: [text]}}),
        ActivityRecord(
            metadata=RecordMetadata(intent=RecordIntent(operation_type="read", reason=text), annotations={text: True}),
            decision=Decision(by="policy", action="allow", outcome="allow", reason=text, approver=text),
        ),
    ]


@pytest.mark.parametrize("text", _HOSTILE)
def test_the_short_way_to_a_records_line_writes_exactly_what_the_walk_writes(text: str) -> None:
    for record in _records(text):
        line, safe_dict = record.encode_line()
        payload, walked = record.encode()
        assert line == walked.encode("utf-8")
        assert safe_dict() == payload


def test_a_record_without_secrets_takes_the_short_way_and_one_with_any_takes_the_walk() -> None:
    from mcphost.activity.redact import left_alone

    clean = json.dumps({"server": "probe", "arguments": {"text": "x", "n": [1, 2]}, "client": "bench 0"}).encode()
    assert left_alone(clean)
    for text in [*_HOSTILE[: len(FAKES)], "api key", "pass\tword", "private/key", "quote \\ here"]:
        line = json.dumps({"arguments": {text: "v", "note": text}}, ensure_ascii=False).encode()
        assert not left_alone(line), text


# A call's record is a plain object (CallRecord) on the call's way; its line must be the model's, field for field.
_CALL_FIELDS = ("server", "tool", "status", "duration_ms", "decision", "warnings", "arguments", "arguments_preview")
_CALL_FIELDS += ("request_bytes", "response_bytes", "response_preview", "session_id", "client", "started_id")


def _call_records(fields: dict[str, Any]) -> tuple[Any, Any]:
    """The same call as a CallRecord and as an ActivityRecord."""
    from mcphost.activity.record import ActivityRecord, CallRecord, ErrorInfo, RecordIntent, RecordMetadata

    call = CallRecord("call_tool_read", fields.get("session_id"), fields.get("client"))
    for name, value in fields.items():
        setattr(call, name, value)
    call.id, call.timestamp = "01JCALL0000000000000000000", "2026-11-27T10:00:00.123Z"
    model = ActivityRecord(
        id=call.id,
        timestamp=call.timestamp,
        type=call.type,
        metadata=RecordMetadata(
            intent=RecordIntent(**call.intent) if call.intent is not None else None,
            tool_variant=call.tool_variant,
            annotations=call.annotations,
            call_with=call.call_with,
        ),
        error=ErrorInfo(**call.error) if call.error is not None else None,
        forwarded=call.forwarded,
        **{name: getattr(call, name) for name in _CALL_FIELDS},
    )
    return call, model


def _calls(text: str) -> list[dict[str, Any]]:
    from mcphost.activity.record import Decision

    return [
        {"server": text, "tool": text, "client": text, "session_id": text, "warnings": [text], "status": "success"},
        {"arguments": {text: "value", "note": text, "deep": [{"x": text}]}, "request_bytes": 12, "duration_ms": 1.5},
        {"arguments_preview": text, "response_preview": text, "response_bytes": 70, "forwarded": True},
        # A preview is the field settled while the upstream works; the rest, clean, is all that is looked at then.
        {"arguments_preview": text, "arguments": {"path": "notes.txt"}, "response_preview": "ok", "status": "success"},
        {"error": {"code": "UPSTREAM_ERROR", "message": text}, "started_id": "01JSTART000000000000000000"},
        {
            "intent": {"operation_type": "read", "reason": text},
            "annotations": {text: True},
            "call_with": text,
            "decision": Decision(by="policy", action="allow", outcome="allow", reason=text, approver=text),
        },
        {"intent": {"raw": text}, "arguments": {"big": 2**70, "small": -(2**70), "float": 0.1, "none": None}},
    ]


@pytest.mark.parametrize("text", _HOSTILE)
def test_a_calls_plain_record_writes_the_line_and_dict_its_model_writes(text: str) -> None:
    for fields in _calls(text):
        call, model = _call_records(fields)
        line, safe_dict = call.encode_line()
        model_line, model_dict = model.encode_line()
        expected_dict = model_dict()
        if "\udfff" in text:
            # The model's dump turns a lone surrogate in a key into one U+FFFD per UTF-8 byte; the plain record
            # turns it into one, as both do in values.
            model_line = model_line.replace("\ufffd\ufffd\ufffd".encode(), "\ufffd".encode())
            expected_dict = json.loads(model_line)
        assert line == model_line, fields
        assert safe_dict() == expected_dict
        assert json.loads(line)["metadata"]["tool_variant"] == "call_tool_read"
        settled, _ = _call_records(fields)
        settled.settle()  # as the gateway does while the upstream works
        settled.settle_response()  # and once its answer is in
        settled_line, settled_dict = settled.encode_line()
        assert settled_line == line
        assert settled_dict() == expected_dict


def test_a_settled_record_whose_decision_changed_writes_the_new_one() -> None:
    from mcphost.activity.record import Decision

    call, _ = _call_records({"decision": Decision(by="policy", action="ask", outcome="allow", at="then")})
    call.settle()
    call.decision = Decision(by="policy", action="ask", outcome="expired", at="later")
    assert json.loads(call.encode_line()[0])["decision"]["outcome"] == "expired"


def test_a_calls_line_is_looked_at_for_secrets_in_every_field_but_mcphosts_own() -> None:
    # The short way looks only at what outsiders may have written; a field in neither set would go unlooked at.
    from mcphost.activity.record import _OUTSIDERS, _OWN_FIELDS, Decision

    everything: dict[str, Any] = {name: "x" for name in _CALL_FIELDS}
    everything |= {"decision": Decision(by="policy", action="allow", outcome="allow"), "warnings": ["w"]}
    everything |= {"duration_ms": 1.5, "arguments": {"a": 1}, "request_bytes": 7, "response_bytes": 9}
    everything |= {"intent": {"operation_type": "read"}, "error": {"code": "C", "message": "m"}, "forwarded": True}
    everything |= {"annotations": {"readOnlyHint": True}, "call_with": "call_tool_read"}
    call, _ = _call_records(everything)
    assert set(call.as_dict()) == set(_OUTSIDERS) | _OWN_FIELDS
    assert not set(_OUTSIDERS) & _OWN_FIELDS


@pytest.mark.parametrize("field", ["server", "tool", "warnings", "arguments_preview", "response_preview", "client"])
def test_a_secret_in_any_one_field_of_a_calls_record_is_redacted(field: str) -> None:
    # One hostile field at a time, the rest plain: no other field's secret can send the record the long way for it.
    secret = FAKES["github_fine_grained"]()
    fields: dict[str, Any] = {"server": "probe", "tool": "t", "arguments": {"text": "x"}, "session_id": "s"}
    fields[field] = [f"see {secret}"] if field == "warnings" else f"see {secret}"
    call, _ = _call_records(fields)
    line = call.encode_line()[0].decode()
    assert secret not in line and "[REDACTED" in line


def test_a_settled_record_whose_arguments_changed_scrubs_the_new_ones() -> None:
    # The arguments are scrubbed while the upstream works; a preview set after that is scrubbed when written.
    secret = FAKES["github_fine_grained"]()
    call, _ = _call_records({"server": "probe", "arguments": {"note": "a\nb"}, "arguments_preview": "plain\ntext"})
    call.settle()
    call.arguments_preview = f"see\n{secret}"
    call.arguments = {"note": f"see\n{secret}"}
    line = call.encode_line()[0].decode()
    assert secret not in line and line.count("[REDACTED") == 2


def test_a_settled_response_preview_that_changed_is_scrubbed_as_it_is_now() -> None:
    secret = FAKES["github_fine_grained"]()
    call, _ = _call_records({"server": "probe", "response_preview": '{"note": "a\\"b"}'})
    call.settle_response()
    call.response_preview = f'{{"note": "{secret}"}}'
    line = call.encode_line()[0].decode()
    assert secret not in line and "[REDACTED" in line


@pytest.mark.parametrize("settled", [False, True])
def test_a_json_response_preview_settled_once_the_answer_is_in_takes_the_short_way(
    settled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Escaped quotes in a preview of JSON send a line the long way (scrubbed whole, written twice) unless the preview
    # was settled: then only the fields no one has scrubbed are looked at.
    from mcphost.activity import record as record_module

    ways: list[str] = []
    long_way = record_module._scrubbed

    def counted(*args: Any) -> Any:
        ways.append("long")
        return long_way(*args)

    monkeypatch.setattr(record_module, "_scrubbed", counted)
    call, _ = _call_records({"server": "probe", "response_preview": '[{"id": 1, "title": "say \\"hi\\""}]'})
    if settled:
        call.settle_response()
    line = call.encode_line()[0]
    assert json.loads(line)["response_preview"] == call.response_preview
    assert ways == ([] if settled else ["long"])


@pytest.mark.parametrize("settled", [False, True])
def test_a_calls_record_too_deep_to_write_keeps_what_it_can_and_says_why(settled: bool) -> None:
    deep: Any = "x"
    for _ in range(1200):
        deep = [deep]
    call, _ = _call_records({"server": "probe", "tool": "t", "arguments": {"x": deep}, "status": "error"})
    call.intent = {"operation_type": "read"}
    if settled:
        call.settle()  # what cannot be scrubbed early is left to the line's own scrub, which says so
    line, safe_dict = call.encode_line()
    written = json.loads(line)
    assert "arguments" not in written
    assert written["arguments_preview"].startswith("[not recordable: ")
    assert (written["server"], written["tool"], written["status"], written["metadata"]) == ("probe", "t", "error", {})
    assert safe_dict() == written


def test_a_calls_start_record_is_a_copy_whose_warnings_are_its_own() -> None:
    call, _ = _call_records({"server": "probe", "tool": "t", "warnings": ["first"]})
    start = call.copy()
    start.type, start.status = "tool_call_started", "started"
    start.warnings.append("only the start's")
    call.warnings.append("only the outcome's")
    assert (call.type, call.status, call.server) == ("tool_call", None, "probe")
    assert start.warnings == ["first", "only the start's"]
    assert call.warnings == ["first", "only the outcome's"]


@pytest.mark.parametrize(
    "glued",
    ["MY_{}", "mcp__server__{}", "prefix_{}_suffix", "__{}"],
)
def test_a_credential_after_an_underscore_is_redacted(glued: str) -> None:
    # `\b` sees no boundary between `_` and a letter: a token in an MCP tool's name or an env-style name was kept.
    for token, kind in (("ghp_" + "a1B2" * 9, "github"), ("AKIAQWERTYUIOPASDFGH", "aws_access_key")):
        assert redact_text(glued.format(token)) == glued.format(f"[REDACTED:{kind}]")
