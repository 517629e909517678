"""Scrub credentials out of tool-call arguments and response previews before they reach the activity log.

Two independent nets, both applied by `redact`:

1. By key (`is_secret_key`). The value under a key that names a credential becomes `REDACTED`, whatever its
   type (a dict or list under such a key is replaced whole); `None` and booleans are kept, since they say
   only whether something is set. The rule:

   * The key is split into lowercase words at `_`, `-`, `.`, spaces and camelCase humps ("OAuth" stays one
     word, so `OAuthProvider` is `oauth provider`).
   * A *secret term* is any word, or any two adjacent words joined, in `_SECRET_TERMS`: token, password,
     passwd, pwd, passphrase, passcode, secret(s), auth, authorization, cookie(s), credential(s), creds, jwt,
     bearer, otp, totp, and compounds such as api+key, private+key, access+key, secret+key, client+secret,
     access/refresh/id/session+token, signing/encryption+key, pin+code, set+cookie, pass+word.
   * A key with a secret term is a secret key unless it is *metadata about* the secret:
     - a qualifier word (`_QUALIFIERS`: count, limit, length, size, ttl, expires, expiry, type, kind, format,
       url, uri, endpoint, path, file, env, name, hint, provider, policy, version, ...) follows the last
       secret term: `token_count`, `token_type`, `auth_url`, `password_min_length`, `secret_name`; or
     - the key starts with max / min / num: `max_token`, `num_tokens`; or
     - "token" follows page / next / continuation / cursor / sync / progress / cancellation, which makes it
       a pagination or protocol handle rather than a credential: `nextPageToken`, `progressToken`.
   * Words are matched whole, so `author`, `authority`, `oauth_provider`, `keyboard`, `monkey` never match.
   * Not secret terms, on purpose:
     - `tokens` (plural): nearly always a count of model tokens (`max_tokens`, `tokens_used`,
       `prompt_tokens`); credential lists are spelled `access_tokens`, `api_tokens`, ... and those compounds
       are secret terms.
     - `key` alone: in tool arguments it is far more often a lookup key (a kv store, cache, S3 object, sort
       or i18n key) than a key; redacting it would gut the log. Real keys in a recognisable format are still
       caught by `redact_text`, and a user can add `key` through `extra_keys`. `key_id` is not secret either.
     - `pin` alone: usually "pin a message / version" (`pin: "v1.2"`); `pin_code` / `pincode` are secret.
     - `session`, `signature`, `hash`: too often ordinary data in tool schemas.
   * Identifiers are not exempted: `token_id`, `access_key_id`, `secret_id` (Vault's secret_id *is* a
     credential) are redacted; a false positive costs a little context, a false negative leaks a secret.
   * `extra_keys` are user-configured exact names, compared after lowercasing and removing `-` and `_` from
     both sides (`X-Tenant-Key` matches `x_tenant_key` and `xTenantKey`); they override every rule above.

2. By value (`redact_text`). Every string value, wherever it sits, is scanned for well-known credential
   formats, each replaced in place by `[REDACTED:<kind>]`. Kinds: private_key (PEM / OpenSSH / PGP blocks;
   without the END line, as in a truncated preview, to the end of the text), jwt, github, gitlab, slack,
   slack_webhook, aws_access_key, google_api_key, anthropic, openrouter, openai (sk-, sk-proj-, ...), stripe,
   npm, huggingface, sendgrid, bearer and basic_auth (the scheme word is kept), url_password (the user name
   is kept), and assignment: `key=value`, `key: value` or `"key": "value"` inside text when the key passes
   the built-in key rule (not `extra_keys`), which covers .env files, query strings and JSON text in
   response previews. A credential after `Bearer` or in a URL that is itself a known format is named by that
   format (`Bearer [REDACTED:jwt]`). Patterns start at a word boundary and need a distinctive prefix or
   shape and a minimum length, so ids, shas, UUIDs, slugs and ordinary base64 pass through; "bearer" and
   "basic" in prose are left alone unless followed by something shaped like a token / base64 `user:pass`.

`redact` leaves dict keys as they are; `scrub`, applied to every record and every prompt as a whole, also runs keys
through `redact_text` (an agent can send a token as an argument's name) and replaces text that is not valid Unicode
(a lone surrogate, which JSON can carry as "\udfff") with U+FFFD, so what it returns can always be written as UTF-8.
Everything is a pure function; regexes are compiled at import.
"""

from __future__ import annotations

import base64
import binascii
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

__all__ = [
    "PREVIEW_MARGIN",
    "REDACTED",
    "is_secret_key",
    "left_alone",
    "redact",
    "redact_head",
    "redact_text",
    "scrub",
    "valid_text",
]

REDACTED = "[REDACTED]"

# ---------------------------------------------------------------------------------------------- keys

_SECRET_TERMS = frozenset(
    {
        "token",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "sessiontoken",
        "authtoken",
        "accesstokens",
        "refreshtokens",
        "apitokens",
        "sessiontokens",
        "password",
        "passwords",
        "passwd",
        "pwd",
        "passphrase",
        "passcode",
        "secret",
        "secrets",
        "clientsecret",
        "apikey",
        "apikeys",
        "privatekey",
        "accesskey",
        "secretkey",
        "signingkey",
        "encryptionkey",
        "authorization",
        "auth",
        "cookie",
        "cookies",
        "setcookie",
        "credential",
        "credentials",
        "creds",
        "jwt",
        "bearer",
        "otp",
        "totp",
        "pincode",
        "mfacode",
    }
)

# Words that, after the last secret term, make the key describe the secret instead of holding it.
_QUALIFIERS = frozenset(
    {
        "count",
        "counts",
        "limit",
        "limits",
        "max",
        "min",
        "length",
        "len",
        "size",
        "index",
        "offset",
        "ttl",
        "expires",
        "expiry",
        "expiration",
        "lifetime",
        "age",
        "at",
        "type",
        "kind",
        "format",
        "scheme",
        "method",
        "mode",
        "url",
        "uri",
        "endpoint",
        "domain",
        "path",
        "file",
        "dir",
        "env",
        "var",
        "name",
        "label",
        "description",
        "hint",
        "provider",
        "policy",
        "strength",
        "required",
        "enabled",
        "used",
        "usage",
        "budget",
        "remaining",
        "ref",
        "arn",
        "version",
        "status",
        "error",
        "command",
        "cmd",
    }
)
_LEADING_QUALIFIERS = frozenset({"max", "min", "num"})
# "token" right after one of these is a cursor or protocol handle, not a credential.
_HANDLE_TOKEN_PREFIXES = frozenset({"page", "next", "continuation", "cursor", "sync", "progress", "cancellation"})

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_CAMEL_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _words(key: str) -> list[str]:
    words: list[str] = []
    for chunk in _NON_ALNUM.split(key):
        if chunk:
            words.extend(w.lower() for w in _CAMEL_WORD.findall(chunk.replace("OAuth", "Oauth")))
    return words


def _normalize(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


# Keys repeat from call to call; the verdicts on short ones are kept (a long key, which no tool's schema has, is
# judged afresh: the memo must not keep thousands of an agent's megabyte keys alive).
_KEY_MEMO_MAX_CHARS = 256


def _is_secret_by_words(key: str) -> bool:
    return _judged_key(key) if len(key) <= _KEY_MEMO_MAX_CHARS else _judge_key(key)


def _judge_key(key: str) -> bool:
    words = _words(key)
    last_end = -1
    for i, word in enumerate(words):
        if word in _SECRET_TERMS and not (word == "token" and i > 0 and words[i - 1] in _HANDLE_TOKEN_PREFIXES):
            last_end = i
        if i + 1 < len(words) and word + words[i + 1] in _SECRET_TERMS:
            last_end = i + 1
    if last_end < 0 or words[0] in _LEADING_QUALIFIERS:
        return False
    return not any(word in _QUALIFIERS for word in words[last_end + 1 :])


_judged_key = lru_cache(maxsize=4096)(_judge_key)


def _is_secret(key: str, extra: frozenset[str]) -> bool:
    return (bool(extra) and _normalize(key) in extra) or _is_secret_by_words(key)


def _extra_set(extra_keys: Iterable[str]) -> frozenset[str]:
    if isinstance(extra_keys, tuple | list) and not extra_keys:
        return _NO_EXTRA  # a record's every scrub: without a generator's frame
    if isinstance(extra_keys, str):  # a lone string would otherwise be taken as its characters
        extra_keys = (extra_keys,)
    return frozenset(_normalize(k) for k in extra_keys)


_NO_EXTRA: frozenset[str] = frozenset()


def is_secret_key(key: str, extra_keys: Iterable[str] = ()) -> bool:
    """True when a mapping key names a credential (the rule is in the module docstring)."""
    return _is_secret(key, _extra_set(extra_keys))


# ---------------------------------------------------------------------------------------------- values

_B64URL = r"A-Za-z0-9_\-"


def _fmt(kind: str, needles: tuple[str, ...], pattern: str) -> tuple[str, tuple[str, ...], re.Pattern[str]]:
    return kind, needles, re.compile(pattern)


# (kind, needles, pattern). A pattern only runs on text containing one of its needles (a plain `in` test
# is far cheaper than any regex scan), and they run in this order, so a more specific format claims its
# text first and later ones skip what is already a marker.
_FORMATS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    _fmt(
        "private_key",
        ("PRIVATE KEY",),
        # To the END line, or (a truncated preview) to the end of the text.
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*)",
    ),
    # Each pattern starts where no letter or digit comes before it, written as its first characters then a look
    # behind them (`sk-(?<![^\W_]sk-)`): a pattern that opens with `\b` gets no prefix search from the regex engine,
    # which then tries a match at every position of the text, some fifty times slower on a page of it. A test holds
    # each to that form. Not `\b`: an underscore is no boundary to it, and `MY_ghp_...` or `mcp__s__eyJ...` kept
    # their credential.
    _fmt("jwt", ("eyJ",), rf"eyJ(?<![^\W_]eyJ)[{_B64URL}]{{8,}}\.[{_B64URL}]{{8,}}\.[{_B64URL}]*"),
    _fmt(
        "github",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"g(?<![^\W_]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{22,})",
    ),
    _fmt(
        "gitlab",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-"),
        rf"gl(?<![^\W_]gl)(?:pat|dt|rt|ptt|soat)-[{_B64URL}]{{20,}}",
    ),
    _fmt("slack", ("xox", "xapp-"), r"x(?<![^\W_]x)(?:ox[abposr]|app)-[A-Za-z0-9-]{10,}"),
    _fmt(
        "slack_webhook",
        ("hooks.slack.com",),
        # With its scheme or without (`//hooks...`: a name split at its first `:` leaves that); `//` is its boundary.
        r"(?:https:)?//hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
    ),
    _fmt("aws_access_key", ("AKIA", "ASIA"), r"A(?<![^\W_]A)(?:KIA|SIA)[A-Z0-9]{16}(?![^\W_])"),
    _fmt("google_api_key", ("AIza",), rf"AIza(?<![^\W_]AIza)[{_B64URL}]{{35}}(?![{_B64URL}])"),
    _fmt("anthropic", ("sk-ant-",), rf"sk-ant-(?<![^\W_]sk-ant-)[{_B64URL}]{{20,}}"),
    _fmt("openrouter", ("sk-or-",), r"sk-or-v1-(?<![^\W_]sk-or-v1-)[A-Za-z0-9]{20,}"),
    # sk-proj-/sk-svcacct-/sk-admin- bodies carry - and _; a bare sk- key must open with 20 alphanumerics,
    # so a slug like "sk-learn-tutorial-for-beginners" is left alone.
    _fmt(
        "openai",
        ("sk-",),
        rf"sk-(?<![^\W_]sk-)(?:(?:proj|svcacct|admin)-[{_B64URL}]{{20,}}|[A-Za-z0-9]{{20,}}[{_B64URL}]*)",
    ),
    _fmt(
        "stripe",
        ("k_live_", "k_test_", "whsec_"),
        r"(?:[sr](?<![^\W_][sr])k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_(?<![^\W_]whsec_)[A-Za-z0-9+/=]{24,})",
    ),
    _fmt("npm", ("npm_",), r"npm_(?<![^\W_]npm_)[A-Za-z0-9]{36}(?![^\W_])"),
    _fmt("huggingface", ("hf_",), r"hf_(?<![^\W_]hf_)[A-Za-z]{30,}(?![^\W_])"),
    _fmt("sendgrid", ("SG.",), rf"SG\.(?<![^\W_]SG\.)[{_B64URL}]{{16,}}\.[{_B64URL}]{{16,}}"),
    # The scheme word is kept; the callback checks the credential looks like one (see _replace).
    _fmt("bearer", ("earer",), r"(?P<scheme>[Bb](?<![^\W_][Bb])earer\s+)(?P<credential>[A-Za-z0-9._~+/\-]{8,}=*)"),
    _fmt(
        "basic_auth",
        ("asic",),
        r"(?P<scheme>[Bb](?<![^\W_][Bb])asic\s+)(?P<credential>[A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])",
    ),
    # scheme://user:password@ -- the user name is kept; the password runs to the last @ of the authority.
    # A URL without its scheme too (`//user:pw@host`, what is left of one split at its first `:`).
    _fmt("url_password", ("@",), r"(?P<scheme>//[^\s:/?#@\"'<>\[\]]*:)(?P<credential>[^\s/?#\"'<>]+)@"),
)

# key=value, key: value, "key": "value" -- found from the separator; the key is read backwards (_KEY_BEFORE
# runs on the reversed text before the separator: optional blanks, an optional closing quote, the key).
_ASSIGNMENT_RE = re.compile(
    r"[:=][ \t]*"
    r"(?P<scheme>(?i:bearer|basic|token)[ \t]+)?"  # Authorization: Bearer <credential>
    # A quoted value is read as runs of plain characters between escapes, each run taken whole (`*+`): the same strings
    # as `"(?:[^"\\\n]|\\.)*"` (a backslash always takes the character after it, so a text has one reading), without a
    # turn of the group per character, nor a walk back over the runs when the quote does not close (a cut preview of
    # JSON text is one long open string), which made this pass two to three times as slow on JSON text. A marker is
    # taken as a value only as redaction writes one: `[REDACTED` and anything up to a `]` made every separator of a
    # line of `=[REDACTED ` read on to its end, a time that grows with the square of the line (1 MB: minutes).
    r"(?P<value>\[REDACTED(?::[a-z_]+)?\]|\"[^\"\\\n]*+(?:\\.[^\"\\\n]*+)*+\"|'[^'\n]*+'"
    # JSON inside a JSON string (`{\"password\": \"...\"}`): the value runs to the next escaped quote.
    r"|\\++\"(?:[^\"\\\n]++|\\++(?!\"))*+"
    r"|[^\s\"'&,;<>\[\]{}()=?]+)"
)
# An assignment whose value opens with a quote and does not close it in the text: with more text after it, the value
# could close there, and the assignment take it in (see `redact_head`).
_QUOTED_VALUE_OPEN = re.compile(
    r"[:=][ \t]*(?:(?i:bearer|basic|token)[ \t]+)?(?:\"(?![^\"\\\n]*+(?:\\.[^\"\\\n]*+)*+\")|'(?![^'\n]*+'))"
)
# (Reversed: a key's closing quote comes first, then the backslashes that escape it in JSON inside a JSON string.)
_KEY_BEFORE = re.compile(r"[ \t]*(?:[\"']\\*)?(?P<key>[A-Za-z0-9_.\-]{1,128})")
_MAX_KEY = 128


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _format_of(credential: str) -> str | None:
    """The kind of a credential found after `Bearer` or in a URL, when it is a known format by itself."""
    for kind, _, rx in _FORMATS:
        if kind not in _REPLACERS and rx.fullmatch(credential):  # the others need text around the credential
            return kind
    return None


def _looks_like_token(text: str) -> bool:
    """Prose after "bearer" ("the bearer instrument") is a plain word; a token has digits or mixed case."""
    return any(c.isdigit() for c in text) or (any(c.isupper() for c in text) and any(c.islower() for c in text))


def _is_basic_credential(text: str) -> bool:
    try:
        return b":" in base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False


def _replace_bearer(match: re.Match[str]) -> str:
    credential = match["credential"]
    if not _looks_like_token(credential):
        return match[0]
    return match["scheme"] + _marker(_format_of(credential) or "bearer")


def _replace_basic(match: re.Match[str]) -> str:
    if not _is_basic_credential(match["credential"]):
        return match[0]
    return match["scheme"] + _marker("basic_auth")


def _replace_url_password(match: re.Match[str]) -> str:
    credential = match["credential"]
    if credential.startswith("[REDACTED"):
        return match[0]
    return match["scheme"] + _marker(_format_of(credential) or "url_password") + "@"


_REPLACERS: dict[str, Callable[[re.Match[str]], str]] = {
    "bearer": _replace_bearer,
    "basic_auth": _replace_basic,
    "url_password": _replace_url_password,
}
_MARKERS = {kind: _marker(kind) for kind in [*(kind for kind, _, _ in _FORMATS), "assignment"]}


def _secret_key_before(text: str, separator: int) -> bool:
    """Whether the key an assignment's separator at `separator` has before it names a credential."""
    key_match = _KEY_BEFORE.match(text[max(0, separator - _MAX_KEY - 8) : separator][::-1])
    return key_match is not None and _is_secret_by_words(key_match["key"][::-1])


def _redacted_assignment(match: re.Match[str]) -> str:
    """An assignment whose key names a credential, its value redacted (a marker already written is kept)."""
    value = match["value"]
    if value.startswith("[REDACTED"):
        return match[0]
    opens = len(value) - len(value.lstrip("\\"))
    if opens and value[opens : opens + 1] == '"':  # escaped: its opening kept, its closing is not in the match
        return match.string[match.start() : match.start("value")] + value[: opens + 1] + _MARKERS["assignment"]
    quote = value[0] if value[0] in "\"'" else ""
    return match.string[match.start() : match.start("value")] + quote + _MARKERS["assignment"] + quote


def _gates() -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """Needles grouped under a cheap first test: their first `_`, `-` or `.`, else the needle itself."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for index, (_, needles, _) in enumerate(_FORMATS):
        for needle in needles:
            gate = next((c for c in needle if c in "_-."), needle)
            groups.setdefault(gate, []).append((needle, index))
    return tuple((gate, tuple(entries)) for gate, entries in groups.items())


_GATES = _gates()


# Every record's every string goes through redact_text, so it first asks, in one C-level scan each, whether the
# slow passes could change anything: a format's needle anywhere in the text, and a secret word anywhere in it. An
# assignment is redacted only under a key made of [A-Za-z0-9_.-] whose words hold a secret term, so that term is in
# the text once case and those separators are dropped.
def _literals(words: Iterable[str]) -> str:
    """A pattern that matches exactly `words` (literals), their common starts written once (`g(?:h(?:o_|p_)|l…)`):
    where a plain alternation has the engine try every word at every position of the text, this tries one character
    of each branch, half the time over a page of text (a 4 KiB preview: 47 -> 24 µs)."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if "" in node else body

    return pattern(tree)


_ANY_NEEDLE = re.compile(_literals({n for _, ns, _ in _FORMATS for n in ns}))


def redact_text(text: str) -> str:
    """Replace substrings that look like well-known credential formats with "[REDACTED:<kind>]"."""
    if _ANY_NEEDLE.search(text) is not None:  # here, not in a call: most texts have none, and every record is many
        text = _redact_found_formats(text)
    if ":" in text or "=" in text:
        spots = _secret_spots(text)
        if spots != []:  # the usual text holds no secret term: a call less on every string of every record
            text = _redact_keys(text, _secret_keys(text, spots))
    return text


def _redact_formats(text: str) -> str:
    """The first passes of `redact_text`: the credential formats, each where its needle is in the text."""
    return _redact_found_formats(text) if _ANY_NEEDLE.search(text) is not None else text


def _redact_found_formats(text: str) -> str:
    hits = 0  # bit i: format i has a needle in the text
    for gate, entries in _GATES:
        if gate in text:
            for needle, index in entries:
                if needle in text:
                    hits |= 1 << index
    for index, (kind, _, rx) in enumerate(_FORMATS):
        if hits >> index & 1:
            replacer = _REPLACERS.get(kind)
            if replacer is not None:
                text = rx.sub(replacer, text)
            elif kind == "jwt":
                text = _sub_jwts(rx, text)
            else:
                text = rx.sub(_MARKERS[kind], text)
    return text


_PAST_B64URL_RUN = re.compile(f"[^{_B64URL}]")
_WORD_CHAR = re.compile(r"\w")


def _sub_jwts(rx: re.Pattern[str], text: str) -> str:
    """`rx.sub` with the jwt marker, in time that grows with the text, not its square. A jwt's first part runs to the
    end of a run of base64url characters and needs a `.` there: where one `eyJ` that may start a jwt fails, every
    later one in the same run fails for the same reason, and `sub` would try each, reading on to the run's end every
    time (a line of `-eyJ` repeated: a 1 MB one took minutes). Those are skipped here; a test holds this to `sub`."""
    parts: list[str] = []
    done = skip = 0
    at = text.find("eyJ")
    while at != -1:
        match = rx.match(text, at)
        if match is not None:
            parts += (text[done:at], _MARKERS["jwt"])
            done = skip = match.end()
        elif at == 0 or _WORD_CHAR.match(text, at - 1) is None:  # it could start one: its run cannot
            run_end = _PAST_B64URL_RUN.search(text, at + 3)
            skip = len(text) if run_end is None else run_end.start()
        at = text.find("eyJ", max(at + 1, skip))
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def _secret_spots(text: str) -> list[int] | None:
    """Where a secret term starts in `text`, in order, once the text is lowered and the separators a key's words may
    have between them are dropped (`tok_en`, `pass-word`): the place of its first letter. None when lowering changes the
    text's length (`İ`), so places in the lowered text are not places in `text`. Every assignment's key that holds a
    secret term holds one of these. Plain `in` and `count` over the fewest terms that every term holds, and `replace`
    for the separators: on a page of text an alternation regex and `str.translate` took several times as long."""
    low = text.lower()
    words = low.replace("_", "").replace(".", "").replace("-", "")
    spots: list[int] = []
    for gate, terms in _TERM_GATES:
        if gate not in words:
            continue
        for term in terms:
            if term in words:
                if len(low) != len(text):
                    return None
                # No term overlaps itself, so `count` is every occurrence; dropping separators only joins letters.
                if low.count(term) != words.count(term):
                    return _joined_spots(low, words)
                at = low.find(term)
                while at != -1:
                    spots.append(at)
                    at = low.find(term, at + 1)
    spots.sort()
    return spots


_KEY_JOINER = re.compile(r"[_.\-]")


def _joined_spots(low: str, words: str) -> list[int]:
    """`_secret_spots` where a term is in `words` (`low` without `_`, `.`, `-`) but not whole in `low`: each place in
    `words` mapped back to `low`, past the separators dropped before it (the i-th dropped one, at d, comes after d - i
    letters of `words`). Reading every separator's key instead took several times as long on JSON text whose values
    hold colons (times, URLs)."""
    shifts = [at.start() - i for i, at in enumerate(_KEY_JOINER.finditer(low))]
    spots: list[int] = []
    for gate, terms in _TERM_GATES:
        if gate not in words:
            continue
        for term in terms:
            at = words.find(term)
            while at != -1:
                spots.append(at + bisect_right(shifts, at))
                at = words.find(term, at + 1)
    spots.sort()
    return spots


def _term_gates(terms: tuple[str, ...], shared: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`terms` grouped under the first of `shared` each holds (itself when none): a text without a group's gate holds
    none of its terms, so one scan of a page stands for several (21 terms, 12 scans)."""
    groups: dict[str, list[str]] = {}
    for term in terms:
        groups.setdefault(next((part for part in shared if part in term), term), []).append(term)
    return tuple((gate, tuple(members)) for gate, members in groups.items())


# From a spot to the end of its run of key characters, then what `_KEY_BEFORE` reads backwards, to the separator.
_KEY_TO_SEPARATOR = re.compile(r"[A-Za-z0-9_.\-]*(?:\\*[\"'])?[ \t]*[:=]")


def _secret_separators(text: str, spots: list[int]) -> set[int]:
    """The separators in `text` whose key names a credential, given `_secret_spots(text)` (not None): a secret key
    holds a term whole, so it ends where the run of key characters around one of those spots ends, and its separator
    follows; each is read there as `_redact_keys` reads it."""
    found: set[int] = set()
    for spot in spots:
        after = _KEY_TO_SEPARATOR.match(text, spot)
        if after is not None:
            separator = after.end() - 1
            if separator not in found and _secret_key_before(text, separator):
                found.add(separator)
    return found


def _secret_keys(text: str, spots: list[int] | None) -> set[int] | None:
    """The separators in `text` whose key names a credential, given `_secret_spots(text)`, or None when every key must
    be read (a term split by separators): the assignment pass looks only at those, where JSON text has an assignment
    in every key."""
    return None if spots is None else _secret_separators(text, spots)


_SEPARATOR = re.compile(r"[:=]")


def _redact_keys(text: str, secret: set[int] | None) -> str:
    """The assignment pass over the separators in `secret` (every one whose key names a credential, when it is None).

    Each is read where it is, in order, unless an earlier one's value took it in (`password: a:b` is one value). Not
    one scan of `_ASSIGNMENT_RE` over the text: an unquoted value may hold a `:`, so that scan read
    `x: password: hunter2` as `x` with the value `password:`, and never tried the separator after `password`."""
    if secret is None:
        secret = {at.start() for at in _SEPARATOR.finditer(text) if _secret_key_before(text, at.start())}
    if not secret:
        return text
    parts: list[str] = []
    done = 0
    for separator in sorted(secret):
        if separator < done:
            continue
        match = _ASSIGNMENT_RE.match(text, separator)
        if match is None:
            continue
        parts += (text[done:separator], _redacted_assignment(match))
        done = match.end()
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


# Past the characters a caller keeps, how much more `redact_head` reads before the line's end: room for what
# redaction takes out of them (a token becomes a shorter marker).
_HEAD_SLACK = 256


def redact_head(text: str, keep: int, window: int | None = None) -> str:
    """`redact_text(text[:window])` (all of `text` when `window` is None) as far as its first `keep` characters go:
    the redaction of a start of the text that ends where no credential crosses, when that is longer than `keep`, else
    the whole one. A preview of a 30 KB file, or of 30 KB of JSON on one line, reads a few hundred characters past its
    512 bytes instead of 16 KB; tests hold the two ways together.

    The start ends at the first line end, or the first `,"` (where JSON text opens its next key), past `keep` and some
    slack, whichever comes first; its redaction is the start of the whole one when nothing that is redacted crosses
    that end, with or without what follows:
    * No format crosses a line end but a private key block (its marker runs to its END line), and a `Bearer` or
      `Basic` scheme, which keeps the text before the line end as it is. No format takes in a `"`. A text that holds
      a key block is read whole: a URL's password can run into one, and out past the end through its marker.
    * An assignment's value crosses neither when it is plain or a marker; a quoted one runs to its closing quote, and
      at a `,"` every quoted value that opens in the start must close there, or the whole is read (which also keeps
      `token "…` from being read as a plain `token` where the whole reads a scheme and its value). With no key in the
      start that names a credential, nothing in it is an assignment's to redact, open or not."""
    limit = len(text) if window is None else min(len(text), window)
    start = keep + _HEAD_SLACK
    if start < limit:
        done: str | None = None
        line_end = text.find("\n", start, limit)
        key_opens = text.find(',"', start, limit if line_end == -1 else line_end)
        if key_opens != -1:
            done = _redact_before(text[: key_opens + 1], quotes_close=True)
        elif line_end != -1:
            done = _redact_before(text[:line_end], quotes_close=False)
        if done is not None and len(done) > keep:
            return done
    return redact_text(text[:limit])


def _redact_before(head: str, quotes_close: bool) -> str | None:
    """`redact_text(head)`, or None where what follows `head` in its text could change it (see `redact_head`).
    `quotes_close`: `head` ends before a `"`, not a line end, so a quoted value may run on past it."""
    if "-----BEGIN" in head:
        return None
    head = _redact_formats(head)
    if ":" in head or "=" in head:
        secret = _secret_keys(head, _secret_spots(head))
        # With no key there that names a credential, no assignment that starts in `head` is redacted, however far it
        # runs past it.
        if quotes_close and (secret is None or secret) and _QUOTED_VALUE_OPEN.search(head) is not None:
            return None
        head = _redact_keys(head, secret)
    return head


# ---------------------------------------------------------------------------------------------- structures


# How far past a preview's end its text is read for credentials: longer than any credential format (a PEM block
# without its end counts as one), and a bound on the cost of a huge text (a 10 MB argument took 0.6 s, read whole).
PREVIEW_MARGIN = 16384


def _redact(value: Any, extra: frozenset[str], head: int | None) -> Any:
    if isinstance(value, str):
        if head is not None and len(value) > head + _HEAD_SLACK:
            return redact_head(value, head, head + PREVIEW_MARGIN)
        return redact_text(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if isinstance(k, str) and v is not None and not isinstance(v, bool) and _is_secret(k, extra):
                out[k] = REDACTED
            else:
                out[k] = _redact(v, extra, head)
        return out
    if isinstance(value, list):
        return [_redact(v, extra, head) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact(v, extra, head) for v in value)
    return value  # numbers, bools, None: immutable, shared as-is


def redact(value: Any, extra_keys: Iterable[str] = (), head: int | None = None) -> Any:
    """A deep copy of a JSON-like value (dict/list/str/number/bool/None) with secrets replaced.

    The value under a secret key becomes REDACTED, whatever its type, except None and bool which are kept;
    every string value anywhere goes through redact_text. Dict keys are copied unchanged.

    `head`: only the first `head` characters of each string will be kept (a preview): a longer string may come back
    as only the start of its redaction (`redact_head`), still longer than `head`.
    """
    return _redact(value, _extra_set(extra_keys), head)


# ---------------------------------------------------------------------------------------------- whole records


def valid_text(text: str) -> bool:
    """True when `text` is valid Unicode: no lone surrogate (JSON's "\\udfff" escape decodes to one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def mended(text: str) -> str:
    """`text` with each lone surrogate made U+FFFD, as every string of a record is written."""
    if text.isascii() or valid_text(text):
        return text
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


# Most strings of a record repeat from call to call (a tool's name, a session, an intent, a short argument): their
# clean text is kept, so each record pays for the regex passes only on what is new. Short strings only, and a
# bounded count, so the memo stays small however many distinct strings pass.
_CLEAN_MEMO_MAX_CHARS = 256
_CLEAN_MEMO_ENTRIES = 4096
_clean_memo: dict[str, str] = {}


def _clean(text: str) -> str:
    """`text` as valid Unicode with credentials redacted (what every string of a record becomes)."""
    found = _clean_memo.get(text)
    if found is not None:
        return found
    clean = redact_text(mended(text))
    if len(text) <= _CLEAN_MEMO_MAX_CHARS:
        if len(_clean_memo) >= _CLEAN_MEMO_ENTRIES:
            _clean_memo.clear()
        _clean_memo[text] = clean
    return clean


def _scrub(value: Any, extra: frozenset[str]) -> Any:
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _clean(k) if isinstance(k, str) else str(k)
            if key in out:  # two secrets as keys redact alike: keep both values
                key = f"{key}#{sum(1 for existing in out if existing.startswith(key))}"
            if isinstance(k, str) and v is not None and not isinstance(v, bool) and _is_secret(k, extra):
                out[key] = REDACTED
            else:
                out[key] = _scrub(v, extra)
        return out
    if isinstance(value, list | tuple):
        return [_scrub(v, extra) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _clean(str(value))


def scrub(value: Any, extra_keys: Iterable[str] = ()) -> Any:
    """Like `redact`, for a whole record or prompt: keys are redacted too, invalid Unicode is replaced, and anything
    that is not JSON (a path, an enum) becomes its text. The result always serializes as UTF-8 JSON."""
    return _scrub(value, _extra_set(extra_keys))


# ---------------------------------------------------------------------------------------------- a whole line at once


def _covering(needles: Iterable[str]) -> tuple[str, ...]:
    """The fewest of `needles` such that every one of them holds one of these."""
    kept: list[str] = []
    for needle in sorted(set(needles), key=len):
        if not any(core in needle for core in kept):
            kept.append(needle)
    return tuple(kept)


# A plain `in` per needle: on a whole line, Python's regex alternation costs several times as much.
_LINE_NEEDLES = _covering(n for _, ns, _ in _FORMATS for n in ns)
_LINE_SECRET_WORDS = _covering(["key", "pass", "cred", *_SECRET_TERMS])
_TERM_CORES = _covering(_SECRET_TERMS)  # every secret term holds one of these, and each is a term
_TERM_GATES = _term_gates(_TERM_CORES, ("pass", "key", "cred", "code"))
_NOT_ALNUM_BYTES = bytes(c for c in range(256) if not (48 <= c <= 57 or 97 <= c <= 122 or 65 <= c <= 90))


def left_alone(line: bytes) -> bool:
    """Whether `scrub` (no extra keys) would leave every string and key of the JSON text `line` as it is, decided
    by substring tests over the whole text (C loops) instead of a walk over its values; False means only "walk it".

    Sound because every net of `scrub` needs ASCII that is in the text verbatim when nothing in it is escaped: a
    format's needle in some string; an assignment's key, or a dict key, whose lowercase words hold a secret term,
    which is then in the text once case and everything but letters and digits are dropped (words split only at
    non-alphanumerics and case humps); invalid Unicode never gets this far (the encoder refuses it). An escape
    (a backslash) could hide a separator between two words, so a text with one takes the walk."""
    text = line.decode("utf-8", "replace")  # str's substring search is several times quicker than bytes'
    if "\\" in text:
        return False
    for needle in _LINE_NEEDLES:  # a loop, not any(): a generator's frame per test would cost more than the test
        if needle in text:
            return False
    words = line.lower().translate(None, _NOT_ALNUM_BYTES).decode("ascii")
    for word in _LINE_SECRET_WORDS:  # noqa: SIM110 (the loop is the point: see above)
        if word in words:
            return False
    return True
