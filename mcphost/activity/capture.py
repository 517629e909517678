"""What of a call's arguments and answer goes on record: redacted, and bounded by the `[log]` limits."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from mcphost.activity.redact import PREVIEW_MARGIN, mended, redact, redact_head


def cut_utf8(text: str, limit: int) -> str:
    """At most `limit` bytes of `text` as UTF-8, never splitting a character, marked when cut. A lone surrogate
    (an upstream's JSON may write one as an escape) is U+FFFD here, as it would be in the record anyway: it has no
    UTF-8, and its encoding error once failed the call whose answer held it, after the tool had run."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        text = mended(text)
        data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: max(0, limit - 3)].decode("utf-8", "ignore") + "…"


def capture_arguments(
    args: Mapping[str, Any], max_bytes: int, extra_keys: Iterable[str] = ()
) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, preview): the redacted arguments when they fit in `max_bytes`, else the start of their JSON."""
    if max_bytes <= 0 or not args:
        return None, None
    # A string longer than the limit may come back as the start of its redaction only: arguments holding one do not
    # fit whole, and the preview shows no more of it than that start.
    cleaned = redact(dict(args), extra_keys, head=max_bytes)
    try:
        if len(orjson.dumps(cleaned, default=str)) <= max_bytes:
            return cleaned, None
    except (orjson.JSONEncodeError, TypeError):
        pass  # what orjson refuses (a lone surrogate, an integer past 64 bits) is measured by Python's encoder
    text = json.dumps(cleaned, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text.encode("utf-8", "surrogatepass")) <= max_bytes:
        return cleaned, None
    # `redact` leaves keys alone (the record's scrub redacts them whole); a preview is cut, and a credential used as
    # a key that the cut went through would keep its start, too short then for its format. So the text is redacted
    # again before its cut, as an answer's preview is.
    return None, cut_utf8(redact_head(text, max_bytes, max_bytes + PREVIEW_MARGIN), max_bytes)


def response_text(content: Iterable[Mapping[str, Any]], structured: Any) -> str:
    """The readable part of a tool's answer: its text blocks, else its structured content as JSON."""
    texts = [str(block.get("text", "")) for block in content if block.get("type") == "text"]
    if texts:
        return "\n".join(texts)
    if structured is not None:
        return json.dumps(structured, ensure_ascii=False, separators=(",", ":"), default=str)
    kinds = sorted({str(block.get("type")) for block in content})
    return f"[{', '.join(kinds)} content]" if kinds else ""


def capture_response(text: str, max_bytes: int) -> str | None:
    if max_bytes <= 0 or not text:
        return None
    # Redact before cutting, so a secret that straddles the cut is still recognised (PREVIEW_MARGIN bounds the cost).
    return cut_utf8(redact_head(text, max_bytes, max_bytes + PREVIEW_MARGIN), max_bytes)
