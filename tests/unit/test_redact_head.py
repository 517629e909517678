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


def _lead(shrink: bool, keep: int, reach: int = 0) -> str:
    """What comes before a case: `SHRINKING` first when `shrink`, then filler, so that `reach` characters past it lie
    beyond `keep` and the slack."""
    first = (SHRINKING + " ") if shrink else ""
    return first + "w" * max(0, keep + 300 - len(first) - reach)


CROSSING = {
    "a scheme at a line's end, its token on the next": "Authorization: Bearer\n" + "MIIEowIBAAKCAQEAu1SU1LfV\n",
    "a basic scheme likewise": "Authorization: Basic\ndXNlcjpwYXNzd29yZA==\n",
    "a key block across the line end": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKC\n-----END RSA PRIVATE KEY-----\n",
    "a key block with no end": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n",
    "a URL password through a marker": "://u:-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----pw@h\n",
    # Text that opens like a marker and runs past the line end to a bracket is no marker: what it holds is redacted.
    "brackets like a marker's across the line end": "password=[REDACTED api_key=secretvalue\n] rest\n",
}


@pytest.mark.parametrize("case", CROSSING)
@pytest.mark.parametrize("shrink", [False, True])
def test_a_match_across_the_line_end_it_stops_at_changes_nothing_before_it(case: str, shrink: bool) -> None:
    keep = 512
    first = _lead(shrink, keep)  # the first line runs past keep + slack: its end is where it stops
    crossing = CROSSING[case]
    at = crossing.index("\n")
    text = first + " " + crossing[:at] + crossing[at:] + "tail line\n" * 50
    whole = redact_text(text)
    head = redact_head(text, keep)
    if "-----BEGIN" in text:
        assert head == whole, "a text with a key block is read whole"
    else:
        assert head == redact_text(text[: text.index("\n")]), (
            "the shortcut is taken: it stops at the crossing's line end"
        )
        assert whole.startswith(head) and len(head) > keep
    assert capture_response(text, keep) == old_response(text, keep)
    args = {"content": text}
    assert capture_arguments(args, keep) == old_arguments(args, keep)


def test_a_url_password_that_runs_into_a_key_block_is_redacted_in_the_preview() -> None:
    # The key block's marker carries the URL's password past the line end to its `@`: the preview must hide it too.
    keep = 512
    block = "-----BEGIN RSA PRIVATE KEY-----" + "Q" * 400 + "\nx\n-----END RSA PRIVATE KEY-----"
    # Placed so that the start up to the line end, redacted, runs just past the preview, the password inside it.
    text = "w" * (keep - 22) + " ://u:abc" + block + "pw@h\n" + "tail\n" * 50
    preview = capture_response(text, keep)
    assert preview == old_response(text, keep)
    assert preview is not None and "abc" not in preview and "://u:[REDACTED" in preview


# JSON on one line: a preview stops at the first `,"` past what it keeps, unless a value is open there.
def issues_page(count: int) -> str:
    issue = {
        "id": 1,
        "title": "It fails: see the log. It's been like this since v1.2; steps: a, b, c",
        "user": {"login": "someone", "avatar_url": "https://avatars.example.com/u/1?v=4"},
        "labels": [{"name": "bug"}],
        "author_association": "CONTRIBUTOR",
        "token_count": 12,
    }
    return json.dumps([{**issue, "id": n} for n in range(count)], separators=(",", ":"))


def test_json_on_one_line_is_redacted_only_as_far_as_its_preview_needs() -> None:
    text = issues_page(150)
    assert "\n" not in text and len(text) > 30_000
    head = redact_head(text, 512, 512 + PREVIEW_MARGIN)
    assert 512 < len(head) < 1_200, "the preview stops at the first key past its slack"
    assert redact_text(text[: 512 + PREVIEW_MARGIN]).startswith(head)
    assert capture_response(text, 512) == old_response(text, 512)
    secret = issues_page(40).replace('"token_count":12', f'"access_token":"{TOKENS[0]}"', 1)
    preview = capture_response(secret, 512)
    assert preview == old_response(secret, 512) and TOKENS[0][:12] not in (preview or "")


# Values that are open where a preview of JSON would stop (each placed so that its `,"` is the first past the slack).
OPEN_AT_THE_CUT = {
    "a double-quoted secret holding the cut": 'password: "abc,"def" and on',
    "a single-quoted secret holding it": "password: 'abc,\"def' and on",
    "a scheme and its quoted token": 'Authorization: token "abc,"def"',
    "a scheme word read as the value": 'auth: token "abc,"',
    "an escaped quote before it": 'password: "a\\\\,"b" x',
    "brackets like a marker's around it": 'password=[REDACTED:x,"y] api_key=abcdef',
    "a JSON value closed by the cut's quote": '{"password":"hunter2-secret-value,"',
}


@pytest.mark.parametrize("case", OPEN_AT_THE_CUT)
@pytest.mark.parametrize("shrink", [False, True])
def test_a_value_open_where_the_preview_would_stop_is_read_to_its_end(case: str, shrink: bool) -> None:
    keep = 512
    open_value = OPEN_AT_THE_CUT[case]
    first = _lead(shrink, keep, open_value.index(',"'))
    text = first + " " + open_value + ' x {"k":"v","n":1}' * 20
    whole = redact_text(text)
    head = redact_head(text, keep)
    assert whole.startswith(head) and (head == whole or len(head) > keep)
    assert capture_response(text, keep) == old_response(text, keep)
    assert capture_arguments({"content": text}, keep) == old_arguments({"content": text}, keep)


ATOMS = [
    ',"',
    '"',
    "'",
    ":",
    "=",
    " ",
    "\t",
    "\\",
    '\\"',
    "{",
    "}",
    "[",
    "]",
    ",",
    "password",
    "token",
    "api_key",
    "Authorization",
    "Bearer ",
    "token ",
    "[REDACTED",
    "[REDACTED:x]",
    "abc",
    "x" * 20,
    "://u:",
    "@h",
    "hunter2",
    "-----BEGIN RSA PRIVATE KEY-----",
    *TOKENS,
]


@pytest.mark.parametrize("seed", range(8))
def test_text_made_to_catch_the_cut_out_redacts_as_the_whole(seed: int) -> None:
    rng = random.Random(7000 + seed)
    for _ in range(150):
        atoms = rng.choices(ATOMS, k=rng.choice([100, 400, 1_500]))
        text = "".join(atoms if rng.random() < 0.5 else [a for a in atoms if not a.startswith("-----")])
        keep = rng.choice([16, 64, 512])
        window = rng.choice([None, keep + PREVIEW_MARGIN, keep + 300, keep + 700])
        whole = redact_text(text if window is None else text[:window])
        head = redact_head(text, keep, window)
        assert whole.startswith(head), (keep, window)
        assert head == whole or len(head) > keep


def json_document(rng: random.Random, size: int) -> str:
    """One line of compact JSON: records whose keys name credentials or not, whose values hold tokens, quotes,
    escapes, assignments and `,"` inside strings."""
    keys = ["id", "title", "password", "api_key", "token", "author", "note", "body", "access_token", "url", "count"]
    texts = [
        *TOKENS,
        'say "hi", then',
        'a,"b',
        "it's: 'x",
        "password: hunter2value",
        'token "abc,"def"',
        "a\\b\nc",
        "Bearer " + TOKENS[0],
        "plain words",
        "",
    ]
    records: list[Any] = []
    while len(json.dumps(records, separators=(",", ":"))) < size:
        record: dict[str, Any] = {}
        for _ in range(rng.randint(1, 6)):
            record[rng.choice(keys)] = rng.choice(
                [rng.choice(texts), rng.randint(0, 10**6), None, [rng.choice(texts)], {"k": rng.choice(texts)}]
            )
        records.append(record)
    return json.dumps(records, separators=(",", ":"), ensure_ascii=rng.random() < 0.5)


@pytest.mark.parametrize("seed", range(6))
def test_json_on_one_line_is_previewed_as_redacting_the_whole_would(seed: int) -> None:
    rng = random.Random(9000 + seed)
    taken = 0
    for _ in range(60):
        text = json_document(rng, rng.choice([1_000, 6_000, 20_000]))
        max_bytes = rng.choice([64, 512, 4096])
        assert capture_response(text, max_bytes) == old_response(text, max_bytes)
        args = {"query": text, "page": 2}
        assert capture_arguments(args, max_bytes) == old_arguments(args, max_bytes)
        taken += len(redact_head(text, max_bytes, max_bytes + PREVIEW_MARGIN)) < len(text[: max_bytes + PREVIEW_MARGIN])
    assert taken > 10, "the preview stops early on JSON often enough for the comparison to test that"
