"""A permission prompt as a terminal shows it (`mcphost approve`, `mcphost demo`), and a typed answer as the daemon
reads it. Pure: the request, a style and the time go in, text comes out; nothing here reads or writes a stream.

Everything the agent or an upstream server chose (the tool's arguments, the agent's reason, its client name, the
server's annotations) passes through `safe()`, so control characters and bidi overrides are shown escaped rather
than acted on; the agent's free text sits behind a gutter (`│`) on lines mcphost starts, so it cannot pass itself
off as mcphost's own lines. A destructive call gets a banner that cannot be missed and needs a typed
confirmation (the tool's name, or `yes`), never a single key.
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from datetime import UTC, datetime
from typing import Any

from mcphost.approval.grants import pattern_matches
from mcphost.approval.prompt import Answer, GrantMatch, PermissionRequest, PermissionResponse, one_shot_client
from mcphost.console import (
    ASCII_ICONS,
    BOLD,
    DIM,
    GREEN,
    INTENT_ICONS,
    RED,
    REVERSE,
    YELLOW,
    Style,
    cell_width,
    fit_cells,
    paint,
    safe,
)
from mcphost.policy import Remember

MAX_ARGUMENT_LINES = 24
MAX_PREVIEW_CHARS = 600

_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_LETTERS = {Remember.ONCE: "o", Remember.SESSION: "s", Remember.ALWAYS: "a"}
_SCOPE_WORDS = {
    "o": Remember.ONCE,
    "once": Remember.ONCE,
    "s": Remember.SESSION,
    "session": Remember.SESSION,
    "a": Remember.ALWAYS,
    "always": Remember.ALWAYS,
}
_ALLOW_ONCE_WORDS = {"y", "yes", "allow"}
_DENY_WORDS = {"d", "deny", "n", "no"}
_VIEW_WORDS = {"v", "view"}  # every argument, shown again whole
_PLAIN = Style()
_SHORT_SCOPE = {Remember.ONCE: "this call", Remember.SESSION: "this agent session", Remember.ALWAYS: "good"}
ONE_SHOT_NOTE = "no [s]ession: a one-shot `mcphost call` is its own session, so a session grant would end with it"


# ---- what kind of prompt


def is_destructive(request: PermissionRequest) -> bool:
    """The variant is destructive, or the server's annotations make the tool destructive whatever the variant."""
    return request.operation == "destructive" or request.call_with == "call_tool_destructive"


def one_shot(request: PermissionRequest) -> bool:
    return one_shot_client(request.client)


def _session_withheld(request: PermissionRequest) -> bool:
    """Worth a word: a one-shot call that could have been remembered beyond once. (This daemon offers it no
    `session`; an older one did, and it is taken away here.)"""
    return one_shot(request) and any(r is not Remember.ONCE for r in request.remember_options)


def needs_typed_confirmation(request: PermissionRequest) -> bool:
    """Destructive calls, and whatever the policy says to `confirm`: the person types the tool's name or `yes`."""
    return request.action == "confirm" or is_destructive(request)


def confirmation_word(request: PermissionRequest) -> str:
    """What the person types to confirm: the tool's name, unless the upstream named its tool like a key (`y`, `o`,
    `a`), short enough to be typed without meaning it, or with a space in it: then `server:tool`."""
    tool = request.tool
    word = tool.lower()
    keylike = word in _ALLOW_ONCE_WORDS or word in _SCOPE_WORDS or word in _DENY_WORDS or word in _VIEW_WORDS
    if keylike or len(tool) < 3 or any(c.isspace() for c in tool):
        return f"{request.server}:{tool}"
    return tool


# ---- rendering


def render_prompt(request: PermissionRequest, style: Style, *, now: datetime | None = None, waiting: int = 0) -> str:
    """The whole prompt, up to (not including) the question line (see `question`)."""
    destructive = is_destructive(request)
    lines: list[str] = []
    if destructive:
        rule = ("=" if style.ascii_only else "━") * style.width
        banner = "  DESTRUCTIVE  this call may delete or overwrite data, possibly for good  "
        mark = "!!" if style.ascii_only else "⚠"
        lines.append(paint(rule, style, RED, BOLD))
        lines.append(paint(f"{mark}{banner}{mark}", style, RED, BOLD, REVERSE))
        lines.append(paint(rule, style, RED, BOLD))
    else:
        lines.append(paint(("-" if style.ascii_only else "─") * style.width, style, DIM))

    icons = ASCII_ICONS if style.ascii_only else INTENT_ICONS
    icon = icons.get(request.operation, "?")
    title = f"{icon} {request.operation.upper()}  {_text(request.server, style)}:{_text(request.tool, style)}"
    heading = f"{title}   via {_text(request.variant, style)}"
    lines.append(_block(heading, style, BOLD, RED) if destructive else _block(heading, style, BOLD))
    queue = f"   ({waiting} more waiting after this one)" if waiting else ""
    lines.append(_field("prompt", f"{_text(request.id, style)}{queue}"))
    who = [_text(request.client, style, 60) if request.client else "an agent (it did not name its client)"]
    if request.session_id:
        who.append(f"session {_text(request.session_id, style, 40)}")
    lines.extend(_fields("from", ", ".join(who), style))

    lines.append(_field("arguments", "(redacted: secrets replaced)" if _has_arguments(request) else "(none)"))
    lines.extend(_gutter(_argument_lines(request, style), style))

    intent = request.intent
    if intent.reason:
        lines.append(_field("reason", "the agent's own words, not checked by mcphost:"))
        lines.extend(_gutter(_wrap(_text(intent.reason, style), style.width - _GUTTER), style))
    else:
        lines.append(_field("reason", "(the agent gave none)"))
    if intent.data_sensitivity:
        lines.append(_field("data", f"{_text(intent.data_sensitivity, style, 20)}  (as the agent declared it)"))
    else:
        lines.append(_field("data", "(the agent did not declare its sensitivity)"))

    hints = _wrap(_annotations(request.annotations, style), style.width - _FIELD)
    lines.append(_field("annotations", hints[0]))
    lines.extend(_field("", more) for more in hints[1:])
    match = request.call_with == request.variant
    verdict = "the agent's choice matches" if match else f"but the agent used {_text(request.variant, style)}"
    recommendation = f"mcphost recommends {_text(request.call_with, style)} for this tool; {verdict}"
    lines.append(_field("check", recommendation if match else paint(recommendation, style, YELLOW, BOLD)))

    if request.rule:
        # From the person's own config, yet escaped like the rest: a reason is free text.
        because = f": {_text(request.rule_reason, style, 200)}" if request.rule_reason else ""
        lines.extend(_fields("asked by", f"{_text(request.rule, style, 40)}{because}", style))

    warn = "!" if style.ascii_only else "⚠"
    for warning in request.warnings:
        text = f"{warn} {_text(warning, style, 200)}"
        lines.extend(_fields("warning", text, style, YELLOW, BOLD))
    lines.append(_field("expires", _expiry(request.expires_at, now)))
    narrow = _narrowing_hint(request, style)
    if narrow:
        lines.append(_field("narrow", narrow))
    if _session_withheld(request):
        lines.append(_field("remember", paint(ONE_SHOT_NOTE, style, DIM)))
    if destructive:
        lines.append(paint(("=" if style.ascii_only else "━") * style.width, style, RED, BOLD))
    return "\n".join(lines)


def question(request: PermissionRequest, style: Style) -> str:
    """The line that asks (no newline: the answer is typed after it)."""
    options = _options(request)
    if needs_typed_confirmation(request):
        tool = _text(confirmation_word(request), style)
        more = [r for r in options if r is not Remember.ONCE]
        remember = f" ('yes {more[0].value}' also remembers it for {_SHORT_SCOPE[more[0]]})" if more else ""
        text = f"Type {tool} or yes to allow it once{remember}, or deny: "
        return _block(text, style, BOLD, RED) if is_destructive(request) else _block(text, style, BOLD)
    choices = ", ".join(f"[{_LETTERS[r]}]{r.value[1:]}" for r in options)
    return paint(f"Allow? {choices} or [d]eny: ", style, BOLD)


def parse_answer(request: PermissionRequest, line: str, style: Style = _PLAIN) -> PermissionResponse | str:
    """The response a typed line means, or what to tell the person when it means nothing usable. A remembered
    allow may be narrowed after its scope: `a exact` (exactly these arguments) or `a path=/work/src/*` (arguments
    matching globs, name=glob, as many as needed)."""
    try:
        # Quotes keep a glob with spaces in one piece: a text="draft: *"
        words = shlex.split(line)
    except ValueError:
        return f"Not understood (a quote is not closed): {_expected(request)}"
    options = _options(request)
    offered = ", ".join(r.value for r in options)
    if not words:
        return "No answer yet: " + _expected(request)
    first = words[0].lower()
    if first in _DENY_WORDS and len(words) == 1:
        return PermissionResponse(decision=Answer.DENY)
    if first in _VIEW_WORDS and len(words) == 1:
        return all_arguments(request, style)
    if needs_typed_confirmation(request):
        accepted = {"yes", confirmation_word(request).lower(), f"{request.server}:{request.tool}".lower()}
        if first not in accepted:
            if first in _SCOPE_WORDS or first in _ALLOW_ONCE_WORDS:
                return (
                    f"This call needs a typed confirmation, not a single key: type {safe(confirmation_word(request))}"
                    " or yes to allow it, or deny."
                )
            return f"Not understood: {_expected(request)}"
        scope = Remember.ONCE if len(words) == 1 else _SCOPE_WORDS.get(words[1].lower())
        narrowing = words[2:]
    else:
        scope = Remember.ONCE if first in _ALLOW_ONCE_WORDS else _SCOPE_WORDS.get(first)
        narrowing = words[1:]
    if scope is None:
        return f"Not understood: {_expected(request)}"
    if scope is Remember.SESSION and _session_withheld(request):
        return f"A session grant would end with this one-shot `mcphost call`: {_expected(request)}"
    if scope not in options:
        return f"This call cannot be remembered as '{scope.value}' (allowed here: {offered}). {_expected(request)}"
    offers = request.match_options
    if not narrowing and scope is not Remember.ONCE and offers and GrantMatch.TOOL not in offers:
        return (
            f"This call is remembered only for its exact arguments or a pattern, not for any arguments (a shell "
            f"command's allow names its command): add {_narrowings(request)} after the scope."
        )
    if not narrowing:
        return PermissionResponse(decision=Answer.ALLOW, remember=scope)
    if scope is Remember.ONCE:
        return f"Only a remembered allow is narrowed (session or always): {_expected(request)}"
    return _narrowed(request, scope, narrowing)


def _narrowed(request: PermissionRequest, scope: Remember, words: list[str]) -> PermissionResponse | str:
    offered = set(request.match_options)
    if len(words) == 1 and words[0].lower() in ("exact", "exactly"):
        if GrantMatch.ARGUMENTS not in offered:
            return "This call cannot be remembered for exact arguments (it has none to match)."
        return PermissionResponse(decision=Answer.ALLOW, remember=scope, match=GrantMatch.ARGUMENTS)
    if GrantMatch.PATTERN not in offered:
        return "This call cannot be remembered for a pattern (it has no text argument to put a glob on)."
    pattern: dict[str, str] = {}
    for word in words:
        name, sep, glob = word.partition("=")
        if not sep or not name or not glob:
            return f"Not understood: {safe(word, 80)}. Narrow with `exact`, or with name=glob pairs (path=/work/*)."
        pattern[name] = glob
    shown = request.arguments or {}
    for name, glob in pattern.items():
        # Against what the person was shown (redacted): the daemon checks the real values again.
        if not pattern_matches({name: glob}, shown):
            return (
                f"{safe(name, 60)}={safe(glob, 200)} does not match this call's {safe(name, 60)}: a pattern must "
                "cover the call it answers."
            )
    return PermissionResponse(decision=Answer.ALLOW, remember=scope, match=GrantMatch.PATTERN, pattern=pattern)


def render_decision(request: PermissionRequest, response: PermissionResponse, style: Style) -> str:
    target = f"{_text(request.server, style)}:{_text(request.tool, style)}"
    if response.decision is Answer.DENY:
        mark = "NO" if style.ascii_only else "✘"
        return _block(f"{mark} denied {target}: the agent is told you said no", style, RED, BOLD)
    mark = "OK" if style.ascii_only else "✔"
    scope = {
        Remember.ONCE: "once (this call only)",
        Remember.SESSION: "for this agent session",
        Remember.ALWAYS: "always (until revoked, or until the tool changes)",
    }[response.remember]
    return _block(f"{mark} allowed {target} {scope}", style, GREEN, BOLD)


def render_withdrawn(request: PermissionRequest, style: Style, *, shown: bool) -> str:
    mark = "--" if style.ascii_only else "⊘"
    target = f"{_text(request.server, style)}:{_text(request.tool, style)}"
    when = "" if shown else " before its turn"
    return _block(
        f"{mark} withdrawn{when}: the prompt {_text(request.id, style)} for {target} was answered in another "
        "editor, expired, or its call ended; nothing to answer",
        style,
        DIM,
    )


def render_waiting(request: PermissionRequest, style: Style) -> str:
    icons = ASCII_ICONS if style.ascii_only else INTENT_ICONS
    target = f"{_text(request.server, style)}:{_text(request.tool, style)}"
    return _block(
        f"(another prompt is waiting: {icons.get(request.operation, '?')} {target}; it comes next)", style, DIM
    )


# ---- pieces


def _options(request: PermissionRequest) -> list[Remember]:
    # `once` is always there: an allow is at least that. The daemon lists what it accepts; nothing more is offered,
    # and `session` not for a session that ends with its one call.
    options = [r for r in (Remember.ONCE, Remember.SESSION, Remember.ALWAYS) if r in request.remember_options]
    if one_shot(request):
        options = [r for r in options if r is not Remember.SESSION]
    return options or [Remember.ONCE]


def _narrowing_hint(request: PermissionRequest, style: Style) -> str | None:
    """How to narrow a remembered allow, when this call can be: after the scope, `exact` or name=glob pairs."""
    offered = set(request.match_options)
    if not offered - {GrantMatch.TOOL} or not any(r is not Remember.ONCE for r in _options(request)):
        return None
    longest = _options(request)[-1]
    scope = f"yes {longest.value}" if needs_typed_confirmation(request) else _LETTERS[longest]
    example = "exact" if GrantMatch.ARGUMENTS in offered else "name=glob"
    ways = _narrowings(request, style)
    if GrantMatch.TOOL not in offered:
        return f"a remembered allow names what it covers: after the scope add {ways}: `{scope} {example}`"
    return f"a remembered allow covers any arguments; after the scope add {ways}: `{scope} {example}`"


def _narrowings(request: PermissionRequest, style: Style | None = None) -> str:
    """The narrowings this call offers, in words: `exact` and name=glob pairs."""
    ways = []
    if GrantMatch.ARGUMENTS in request.match_options:
        ways.append("`exact` (these argument values only)")
    if GrantMatch.PATTERN in request.match_options:
        example = " ".join(shlex.quote(f"{k}={v}") for k, v in (request.suggested_pattern or {}).items())
        example = example or "name=glob"
        ways.append(f"name=glob pairs ({_text(example, style, 80) if style else safe(example, 80)})")
    return " or ".join(ways)


def _expected(request: PermissionRequest) -> str:
    options = _options(request)
    if needs_typed_confirmation(request):
        extra = [r.value for r in options if r is not Remember.ONCE]
        scoped = f" (optionally followed by {' or '.join(extra)})" if extra else ""
        return f"type {safe(confirmation_word(request))} or yes{scoped} to allow, or deny."
    letters = ", ".join(f"{_LETTERS[r]} ({r.value})" for r in options)
    return f"answer {letters}, or d (deny)."


def _text(value: Any, style: Style, limit: int | None = None) -> str:
    text = safe(value)
    if style.ascii_only:
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    if limit is not None and len(text) > limit:
        text = text[: max(1, limit - 3)] + "..." if style.ascii_only else text[: max(1, limit - 1)] + "…"
    return text


# Columns before a field's value, and before the text in the gutter (`_field`, `_gutter`).
_FIELD = 14
_GUTTER = 16


def _field(label: str, value: str) -> str:
    return f"  {label:<12}{value}"


def _fields(label: str, value: str, style: Style, *codes: str) -> list[str]:
    """A field whose value may be longer than the line: the rest on lines of their own, under the value."""
    pieces = fit_cells(value, style.width - _FIELD)
    return [_field(label if n == 0 else "", paint(piece, style, *codes)) for n, piece in enumerate(pieces)]


def _block(text: str, style: Style, *codes: str) -> str:
    """A line of mcphost's that names what an agent or upstream chose (a tool's name): fitted to the terminal, its
    rest indented, so that none of it starts at the first column, where it would pass for a line of its own."""
    if cell_width(text) <= style.width:
        return paint(text, style, *codes)
    pieces = _wrap(text, style.width - 2)
    if text.endswith(" "):
        pieces[-1] += " "  # a question: the answer is typed after it
    return "\n".join(paint(piece if n == 0 else f"  {piece}", style, *codes) for n, piece in enumerate(pieces))


def _wrap(text: str, width: int) -> list[str]:
    """`text` wrapped at words to `width` columns (a word longer than that cut), each line cut again where wide
    characters make it take more columns than characters."""
    wrapped = textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]
    return [piece for line in wrapped for piece in fit_cells(line, width)]


def _gutter(lines: list[str], style: Style) -> list[str]:
    bar = "|" if style.ascii_only else "│"
    return [f"  {'':<12}{bar} {line}" for line in lines]


def _has_arguments(request: PermissionRequest) -> bool:
    return bool(request.arguments) or bool(request.arguments_preview)


def _argument_lines(request: PermissionRequest, style: Style, limit: int | None = MAX_ARGUMENT_LINES) -> list[str]:
    """The arguments as the prompt shows them: every line wrapped within the gutter, never cut (the agent chooses
    where a cut would fall, and would put what matters past it), long runs of spaces shown counted; past `limit`
    lines, the rest is announced with how to see it (`v`)."""
    width = style.width - _GUTTER
    if request.arguments:
        pretty = json.dumps(request.arguments, indent=2, ensure_ascii=False, default=str).split("\n")
        shown: list[str] = []
        for line in pretty:
            text = _spaces_counted(_text(line, style), style)
            shown.extend(fit_cells(text, width))
        if limit is not None and len(shown) > limit:
            left = len(shown) - limit
            shown = [*shown[:limit], *fit_cells(f"... {left} more lines not shown: answer v to see them", width)]
        return shown
    if request.arguments_preview:
        # Too large to send whole: the daemon sent the start of their JSON.
        preview = _spaces_counted(_text(request.arguments_preview, style), style)[:MAX_PREVIEW_CHARS]
        wrapped = fit_cells(preview, width)
        return [*wrapped, "... (too large to show in full: this is the start of their JSON)"]
    return []


_SPACE_RUN = re.compile(" {4,}")


def _spaces_counted(text: str, style: Style) -> str:
    """Runs of spaces an agent can pad a value with, to push its end out of sight, shown as counted marks."""
    mark = "<{} spaces>" if style.ascii_only else "␠×{}"
    return _SPACE_RUN.sub(lambda run: mark.format(len(run.group())), text)


def all_arguments(request: PermissionRequest, style: Style) -> str:
    """Every line of the arguments, for the person who asked to see them (`v`)."""
    lines = _argument_lines(request, style, limit=None) or ["(no arguments)"]
    return "\n".join(["Every argument, as the tool gets it (redacted):", *_gutter(lines, style)])


def _annotations(annotations: dict[str, Any], style: Style) -> str:
    if not annotations:
        return "(none: the server did not annotate this tool)"
    keys = [k for k in _HINTS if k in annotations] + [k for k in annotations if k not in _HINTS]
    shown = []
    for key in keys:
        value = annotations[key]
        text = str(value).lower() if isinstance(value, bool) else json.dumps(value, ensure_ascii=False, default=str)
        shown.append(f"{_text(key, style, 40)}={_text(text, style, 60)}")
    return " ".join(shown)


def _expiry(expires_at: str, now: datetime | None) -> str:
    try:
        when = datetime.fromisoformat(expires_at)
    except ValueError:
        return safe(expires_at, 40)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    left = int((when - current).total_seconds())
    local = when.astimezone().strftime("%H:%M:%S")
    if left <= 0:
        return f"now (at {local}): the call ends as expired unless answered"
    minutes, seconds = divmod(left, 60)
    span = f"{minutes}m {seconds:02d}s" if minutes else f"{seconds}s"
    return f"in {span} (at {local}); then the call ends as expired"
