"""Each credential format's pattern finds exactly what its plain form finds (no letter or digit before it; an
underscore may be: `MY_ghp_...`). The patterns are written as their first characters then a look behind them, because
a pattern that opens with a look behind or `\\b` gets no prefix search from the regex engine (fifty times slower on
a page of text); these are the forms they were first written in, and the reference."""

from __future__ import annotations

import random
import re

import pytest

from mcphost.activity import redact
from tests.helpers import runs_in_linear_time

B64URL = r"A-Za-z0-9_\-"
WORD_BOUNDARY_FORMS = {
    "jwt": rf"(?<![^\W_])eyJ[{B64URL}]{{8,}}\.[{B64URL}]{{8,}}\.[{B64URL}]*",
    "github": r"(?<![^\W_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    "gitlab": rf"(?<![^\W_])gl(?:pat|dt|rt|ptt|soat)-[{B64URL}]{{20,}}",
    "slack": r"(?<![^\W_])(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}",
    "aws_access_key": r"(?<![^\W_])(?:AKIA|ASIA)[A-Z0-9]{16}(?![^\W_])",
    "google_api_key": rf"(?<![^\W_])AIza[{B64URL}]{{35}}(?![{B64URL}])",
    "anthropic": rf"(?<![^\W_])sk-ant-[{B64URL}]{{20,}}",
    "openrouter": r"(?<![^\W_])sk-or-v1-[A-Za-z0-9]{20,}",
    "openai": rf"(?<![^\W_])sk-(?:(?:proj|svcacct|admin)-[{B64URL}]{{20,}}|[A-Za-z0-9]{{20,}}[{B64URL}]*)",
    "stripe": r"(?<![^\W_])(?:[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9+/=]{24,})",
    "npm": r"(?<![^\W_])npm_[A-Za-z0-9]{36}(?![^\W_])",
    "huggingface": r"(?<![^\W_])hf_[A-Za-z]{30,}(?![^\W_])",
    "sendgrid": rf"(?<![^\W_])SG\.[{B64URL}]{{16,}}\.[{B64URL}]{{16,}}",
    "bearer": r"(?<![^\W_])(?P<scheme>[Bb]earer\s+)(?P<credential>[A-Za-z0-9._~+/\-]{8,}=*)",
    "basic_auth": r"(?<![^\W_])(?P<scheme>[Bb]asic\s+)(?P<credential>[A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])",
}
PATTERNS = {kind: rx for kind, _, rx in redact._FORMATS}

# What comes right before a credential decides the boundary: word characters of several scripts (letters, digits,
# the underscore, an accented letter, an Arabic-Indic digit, a combining mark) and the separators around them.
BEFORE = ["", " ", "x", "Z", "7", "_", "-", ".", "/", ":", "=", '"', "'", "\n", "é", "٣", "ß", "\u0301", "@", "(", "+"]
HEADS = [
    "eyJ",
    "ghp_",
    "gho_",
    "github_pat_",
    "glpat-",
    "glsoat-",
    "xoxb-",
    "xapp-",
    "https://hooks.slack.com/services/",
    "AKIA",
    "ASIA",
    "AIza",
    "sk-ant-",
    "sk-or-v1-",
    "sk-",
    "sk-proj-",
    "sk_live_",
    "rk_test_",
    "whsec_",
    "npm_",
    "hf_",
    "SG.",
    "Bearer ",
    "bearer\t",
    "Basic ",
    "basic ",
]
BODY = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.+/=: é"


def sample(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        body = "".join(rng.choice(BODY) for _ in range(rng.choice([3, 12, 20, 36, 40, 60])))
        parts.append(rng.choice(BEFORE) + rng.choice(HEADS) + body)
    return rng.choice(BEFORE).join(parts) + rng.choice(BEFORE)


@pytest.mark.parametrize("kind", sorted(WORD_BOUNDARY_FORMS))
def test_a_format_finds_what_its_word_boundary_form_finds(kind: str) -> None:
    reference, pattern = re.compile(WORD_BOUNDARY_FORMS[kind]), PATTERNS[kind]
    rng = random.Random(kind)
    for _ in range(4000):
        text = sample(rng)
        assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in reference.finditer(text)], text
        assert [m.groupdict() for m in pattern.finditer(text)] == [m.groupdict() for m in reference.finditer(text)]
        assert bool(pattern.fullmatch(text)) == bool(reference.fullmatch(text)), text


def test_every_format_that_starts_at_a_word_boundary_has_its_reference() -> None:
    # A key block has its marker line, a URL and a webhook their `//`.
    kept = {kind for kind, pattern in PATTERNS.items() if kind not in ("private_key", "url_password", "slack_webhook")}
    assert kept == set(WORD_BOUNDARY_FORMS)
    assert not any(pattern.pattern.startswith(r"\b") for pattern in PATTERNS.values())


def test_the_gate_before_the_assignment_pass_is_the_alternation_it_replaces() -> None:
    # Which texts get the assignment pass at all: every secret term, in any case, with a key's separators inside it.
    reference = re.compile("|".join(sorted(redact._SECRET_TERMS, key=len, reverse=True)))
    separators = str.maketrans("", "", "_.-")
    rng = random.Random(7)
    pieces = [*redact._SECRET_TERMS, "Access_Token", "PASS-WORD", "api.key", "to_ken", "monkey", "author", "x", " "]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) + rng.choice(["", "_", "-", ".", " ", "=", ":"]) for _ in range(4))
        text = "".join(c.upper() if rng.random() < 0.2 else c for c in text)
        expected = reference.search(text.lower().translate(separators)) is not None
        spots = redact._secret_spots(text)
        assert (spots is None or spots != []) is expected, text


def test_the_needle_gate_finds_a_format_exactly_where_one_of_its_needles_is_in_the_text() -> None:
    # The gate before the format passes is one pattern of every needle, their common starts written once: it must
    # find a needle wherever a plain `in` finds one, and nowhere else.
    needles = sorted({n for _, ns, _ in redact._FORMATS for n in ns})
    rng = random.Random(11)
    # Needles cut at every point, so texts hold near misses (`gh_`, `sk`, `xo`) beside whole ones.
    pieces = [needle[:cut] for needle in needles for cut in range(len(needle) + 1)] + [" ", "x", "_", "-", "."]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        assert (redact._ANY_NEEDLE.search(text) is not None) is any(n in text for n in needles), text
    assert redact._ANY_NEEDLE.pattern.count("|") < len(needles) - 1  # the common starts are shared


def test_the_assignment_pattern_finds_what_its_per_character_form_finds() -> None:
    # Quoted values are read as runs between escapes, each taken whole; the old form took a group per character.
    value = redact._ASSIGNMENT_RE.pattern.index("(?P<value>")
    reference = re.compile(
        redact._ASSIGNMENT_RE.pattern[:value]
        + r"(?P<value>\[REDACTED(?::[a-z_]+)?\]|\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"
        + r"|\\+\"(?:[^\"\\\n]|\\+(?![\\\"]))*"
        + r"|[^\s\"'&,;<>\[\]{}()=?]+)"
    )
    assert reference.pattern != redact._ASSIGNMENT_RE.pattern
    rng = random.Random(11)
    pieces = ['"', "\\", '\\"', "\\\\", "\n", ":", "=", " ", "\t", "'", "token ", "Bearer ", "[REDACTED", "]", "a", "é"]
    for _ in range(5000):
        text = "".join(rng.choices(pieces, k=rng.randint(1, 40)))
        found = [(m.span(), m.groupdict()) for m in redact._ASSIGNMENT_RE.finditer(text)]
        assert found == [(m.span(), m.groupdict()) for m in reference.finditer(text)], text


def _every_key_read(text: str) -> str:
    """The assignment pass as its rule says, one character at a time: every separator whose key names a credential,
    in order, unless an earlier one's value took it in; a separator under any other key takes nothing in."""
    out: list[str] = []
    done = 0
    for at, char in enumerate(text):
        if at < done or char not in ":=" or not redact._secret_key_before(text, at):
            continue
        match = redact._ASSIGNMENT_RE.match(text, at)
        if match is not None:
            out += (text[done:at], redact._redacted_assignment(match))
            done = match.end()
    return "".join([*out, text[done:]])


def test_an_assignment_pass_that_reads_only_keys_near_a_secret_term_redacts_as_reading_every_key() -> None:
    # Keys at every distance from their separator, split terms, camel humps, letters whose lowercase is longer, and
    # labels before a key (`ERROR: password: x`) whose unquoted value would run over the key and its separator.
    rng = random.Random(13)
    keys = ["password", "pwd", "api_key", "apiKey", "tok_en", "PASS-word", "author", "token_count", "id"]
    keys += ["x" * 123 + "token", "token_" + "x" * 122]  # the longest key read, its term at either end
    gaps = ["", " ", '"', "\t" * 6, " " * 7 + '"', " " * 12]
    values = ['"hunter2value"', "'hunter2value'", "hunter2value", "[REDACTED:x]", '"a\\"b"', "token abc", ""]
    values += ["a:b:c", "https://x/y"]
    filler = ["", " ", ",", "İ" * 12, "\u212a", "é", "{", '","', "\n", "x" * 150, "ERROR: ", "x:", "a: b: ", "env="]
    for _ in range(4000):
        text = "".join(
            rng.choice(filler) + rng.choice(keys) + rng.choice(gaps) + rng.choice(":=") + rng.choice(values)
            for _ in range(rng.randint(1, 6))
        )
        expected = _every_key_read(text)
        assert redact._redact_keys(text, redact._secret_keys(text, redact._secret_spots(text))) == expected, text
        assert redact._redact_keys(text, None) == expected, text


def test_a_marker_is_a_value_only_as_redaction_writes_one() -> None:
    # A marker already written is left as it is; text that only opens like one hides no assignment behind it.
    for text in ["password=[REDACTED]", "token: [REDACTED:github]", "Authorization: Bearer [REDACTED:bearer]"]:
        assert redact.redact_text(text) == text
    assert redact.redact_text("note=[REDACTED api_key=hunter2value]") == "note=[REDACTED api_key=[REDACTED:assignment]]"


def test_a_line_of_separators_before_what_looks_like_markers_is_redacted_in_linear_time() -> None:
    # Each `=[REDACTED ` once read on to the line's only `]`: 2 MB of them took minutes. A hang detector, not a
    # timing: the same work, linear, takes a fraction of a second; run apart so that a hang can be stopped.
    script = (
        "from mcphost.activity.redact import redact_head, redact_text, scrub\n"
        "line = 'password=x ' + '=[REDACTED ' * 300_000\n"
        "assert redact_text(line).startswith('password=[REDACTED:assignment] ')\n"
        "assert redact_text(line + ']').startswith('password=[REDACTED:assignment] ')\n"
        "redact_head(line + '],\"k\":1', 64)\n"
        "scrub({'note': line})\n"
    )
    runs_in_linear_time(script)


def test_jwts_are_replaced_as_the_patterns_own_sub_replaces_them() -> None:
    # The jwt pass skips the `eyJ`s that would fail for the reason the one before them in their run failed.
    rx = next(pattern for kind, _, pattern in redact._FORMATS if kind == "jwt")
    rng = random.Random(14)
    pieces = ["eyJ", "-", ".", "_", "a", "Z9", "x" * 8, " ", "é", "\n", "eyJhbGciOi", ".c2ln", "٣"]
    for _ in range(20_000):
        text = "".join(rng.choices(pieces, k=rng.randint(1, 30)))
        assert redact._sub_jwts(rx, text) == rx.sub("[REDACTED:jwt]", text), text


def test_a_line_of_jwt_starts_is_redacted_in_linear_time() -> None:
    # `-eyJ` repeated: each one may start a jwt and `sub` read each on to the run's end (a 1 MB line: minutes).
    script = (
        "from mcphost.activity.redact import redact_text\n"
        "token = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl'\n"
        "assert redact_text('-eyJ' * 300_000 + ' ' + token).endswith(' [REDACTED:jwt]')\n"
        "assert redact_text('sk-proj-eyJ' * 100_000).startswith('[REDACTED:openai]')\n"
    )
    runs_in_linear_time(script)


def test_long_keys_are_judged_without_being_kept() -> None:
    # An agent's megabyte-long keys would otherwise stay alive in the memo, four thousand of them.
    redact._judged_key.cache_clear()
    for n in range(50):
        key = "x" * 300 + f"{n}_access_token"
        assert redact.redact({key: "hunter2value"}) == {key: redact.REDACTED}
        assert redact.redact({"x" * 300 + f"{n}_note": "v"}) == {"x" * 300 + f"{n}_note": "v"}
    assert redact._judged_key.cache_info().currsize == 0
    assert redact.redact({"api_key": "v"}) == {"api_key": redact.REDACTED}
    assert redact._judged_key.cache_info().currsize == 1
