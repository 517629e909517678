"""A preview's redaction reads only as far as the preview needs (`redact_head`), and gives exactly what redacting the
whole would: for a response preview, for an argument too long to be stored whole, and on texts built to catch it out
(a credential split across the cut, a scheme at a line's end with its token on the next, private key blocks, tokens
that shrink to markers)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from mcphost.activity.capture import PREVIEW_MARGIN, capture_arguments, capture_response, cut_utf8
from mcphost.activity.redact import redact, redact_head, redact_text

TOKENS = [
    "ghp_" + "a1B2c3D4e5" * 4,
    "github_pat_" + "Z9y8X7w6v5" * 3,
    "glpat-" + "abcDEF123_" * 3,
    "xoxb-" + "1234567890-abcdef",
    "AKIA" + "ABCDEFGHIJ234567",
    "AIza" + "S" * 35,
    "sk-ant-" + "api03-" + "q" * 30,
    "sk-or-v1-" + "0" * 24,
    "sk-" + "Ab3" * 10,
    "sk_live_" + "9" * 20,
    "whsec_" + "w" * 30,
    "npm_" + "n" * 36,
    "hf_" + "h" * 34,
    "SG." + "s" * 20 + "." + "t" * 20,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlc2lnbmF0dXJl",
    "https://user:hunter2secret@example.com/path",
]
LINES = [
    "def handler(request):",
    "    return {'ok': True}",
    "Authorization: Bearer {token}",
    "api_key = {token}",
    '  "password": "{token}",',
    "token: {token}",
    "see {token} here",
    "curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA==' https://x",
    "the bearer of this note",
    "Bearer",
    "basic",
    "-----BEGIN RSA PRIVATE KEY-----",
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "-----END RSA PRIVATE KEY-----",
    "plain prose with words like monkey, author and keyboard",
    "x" * 300,
    "é" * 120 + " unicode",
    "",
]


def text_of(rng: random.Random, size: int) -> str:
    lines = []
    while sum(len(line) + 1 for line in lines) < size:
        line = rng.choice(LINES).replace("{token}", rng.choice(TOKENS))
        if rng.random() < 0.05:
            line += " " + rng.choice(TOKENS) * rng.randint(5, 40)  # a long token, or one that shrinks a lot
        lines.append(line)
    separator = rng.choice(["\n", "\n", "\r\n", " \n\t"])
    return separator.join(lines)


@pytest.mark.parametrize("seed", range(6))
def test_the_start_of_a_redaction_is_the_start_of_the_whole_one(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        text = text_of(rng, rng.choice([300, 2_000, 9_000, 30_000]))
        keep = rng.choice([16, 64, 512, 4096])
        window = rng.choice([None, keep + PREVIEW_MARGIN, keep + 300])
        whole = redact_text(text if window is None else text[:window])
        head = redact_head(text, keep, window)
        assert whole.startswith(head), (keep, window)
        assert head == whole or len(head) > keep


def old_response(text: str, max_bytes: int) -> str | None:
    if max_bytes <= 0 or not text:
        return None
    return cut_utf8(redact_text(text[: max_bytes + PREVIEW_MARGIN]), max_bytes)


def old_arguments(args: Mapping[str, Any], max_bytes: int) -> tuple[dict[str, Any] | None, str | None]:
    if max_bytes <= 0 or not args:
        return None, None
    cleaned = redact(dict(args))
    if len(orjson.dumps(cleaned, default=str)) <= max_bytes:
        return cleaned, None
    return None, cut_utf8(json.dumps(cleaned, ensure_ascii=False, separators=(",", ":"), default=str), max_bytes)


@pytest.mark.parametrize("seed", range(6))
def test_a_response_preview_and_a_long_argument_are_what_they_were_before_the_shortcut(seed: int) -> None:
    rng = random.Random(1000 + seed)
    for _ in range(100):
        text = text_of(rng, rng.choice([200, 3_000, 20_000, 40_000]))
        max_bytes = rng.choice([32, 512, 4096])
        assert capture_response(text, max_bytes) == old_response(text, max_bytes)
        args = {"path": "/src/app.py", "content": text, "nested": [text[:500], {"token": "x"}]}
        assert capture_arguments(args, max_bytes) == old_arguments(args, max_bytes)


def test_a_long_file_is_redacted_only_as_far_as_its_preview_needs() -> None:
    # Found by a secret: one past the first 16 KB is not in the preview, so it is never looked at; the start is.
    page = "\n".join(f"line {n}: nothing to see" for n in range(2_000))
    text = f"password={TOKENS[0]}\n{page}\napi_key = {TOKENS[1]}\n"
    preview = capture_response(text, 512)
    assert preview is not None and TOKENS[0] not in preview and "[REDACTED" in preview
    head = redact_head(text, 512)
    assert len(head) < 2_000 and TOKENS[1] not in redact_text(text)


SHRINKING = " ".join([TOKENS[0]] * 30)  # 1 230 characters that redact to some 540: what follows moves up
CROSSING = {
    "a scheme at a line's end, its token on the next": "Authorization: Bearer\n" + "MIIEowIBAAKCAQEAu1SU1LfV\n",
    "a basic scheme likewise": "Authorization: Basic\ndXNlcjpwYXNzd29yZA==\n",
    "a key block across the line end": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKC\n-----END RSA PRIVATE KEY-----\n",
    "a key block with no end": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n",
    "a URL password through a marker": "://u:-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----pw@h\n",
}


@pytest.mark.parametrize("case", CROSSING)
@pytest.mark.parametrize("shrink", [False, True])
def test_a_match_across_the_line_end_it_stops_at_changes_nothing_before_it(case: str, shrink: bool) -> None:
    keep = 512
    first = (SHRINKING + " ") if shrink else ""
    first += "w" * max(0, keep + 300 - len(first))  # the first line runs past keep + slack: its end is where it stops
    crossing = CROSSING[case]
    at = crossing.index("\n")
    text = first + " " + crossing[:at] + crossing[at:] + "tail line\n" * 50
    whole = redact_text(text)
    head = redact_head(text, keep)
    assert head == redact_text(text[: text.index("\n")]), "the shortcut is taken: it stops at the crossing's line end"
    assert whole.startswith(head) and len(head) > keep
    assert capture_response(text, keep) == old_response(text, keep)
    args = {"content": text}
    assert capture_arguments(args, keep) == old_arguments(args, keep)
