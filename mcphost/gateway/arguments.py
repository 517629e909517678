"""The call tools' own parameters as an agent sends them: `name` ('server:tool') and the tool's arguments (`args`, an
object, or `args_json`, a JSON string). Pure: a mapping in, the parsed value or a GatewayError out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import orjson

from mcphost.activity.reader import opening_brackets
from mcphost.activity.redact import valid_text
from mcphost.errors import ErrorCode, GatewayError
from mcphost.intent import FLAT_INTENT_KEYS, ToolVariant
from mcphost.pipes import encoded, json_spelling, non_finite_at

CALL_KEYS = frozenset({"name", "args", "args_json", "intent", *FLAT_INTENT_KEYS})
# Deeper than any tool's arguments need; past it the JSON libraries on the way (ours, the upstream's) recurse into
# trouble, and a record that cannot be written must stop the call before it is forwarded, not after.
MAX_DEPTH = 64


def encoded_call(arguments: Mapping[str, Any]) -> tuple[bytes | None, bytes | None]:
    """(the call's parameters, its `args` object) as compact JSON, `args` written once: what `check_input` reads,
    what the record measures and what goes to the upstream are the one encoding (a file's worth of JSON in a string
    takes orjson tens of microseconds to escape). None where orjson refuses it, or `args` is not an object."""
    args = arguments.get("args")
    args_json = encoded(args) if type(args) is dict else None
    if args_json is None or len(args_json) < _WRITTEN_AGAIN:
        return encoded(arguments), args_json
    return encoded({**arguments, "args": orjson.Fragment(args_json)}), args_json


# Arguments shorter than this are written again inside the whole: less work than putting their writing in.
_WRITTEN_AGAIN = 1024


def check_input(value: Any, variant: ToolVariant, where: str = "arguments", *, as_json: bytes | None = None) -> None:
    """Refuse what could not be recorded faithfully: text that is not valid Unicode (a lone surrogate, which JSON
    can carry as "\\udfff") and nesting deeper than MAX_DEPTH. Iterative, so no input can exhaust the stack.

    Every call's arguments pass here. The usual case takes one C pass: orjson refuses every lone surrogate, and a
    text with at most MAX_DEPTH brackets cannot nest deeper. Otherwise the walk finds what is wrong, if anything.
    `as_json`: `value` as orjson wrote it, when the caller has it (`encoded_call`)."""
    if as_json is None:
        as_json = encoded(value)
    if as_json is not None and opening_brackets(as_json) <= MAX_DEPTH:
        if b"null" in as_json:  # orjson writes NaN and the infinities as null: a null may be one of them
            found = non_finite_at(value, where)  # `value` is known to be shallow here
            if found is not None:
                raise _non_finite(*found, variant)
        return
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if type(item) is float and not math.isfinite(item):
            raise _non_finite(path, item, variant)
        if depth > MAX_DEPTH:
            raise GatewayError(
                ErrorCode.INVALID_ARGS,
                f"{_root(path)} {'nests' if _root(path) in _SINGULAR else 'nest'} deeper than {MAX_DEPTH} "
                f"levels (at {_short(path)}): flatten the arguments",
                {"variant": variant.value, "max_depth": MAX_DEPTH},
            )
        if isinstance(item, str):
            if not valid_text(item):
                raise _not_unicode(f"{_short(path)} holds text", path, variant)
        elif isinstance(item, Mapping):
            for key, child in item.items():
                name = str(key)
                if not valid_text(name):
                    raise _not_unicode(f"a key in {_short(path)}", path, variant)
                stack.append((child, f"{path}.{name}", depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))


_SINGULAR = frozenset({"tool_input", "args_json"})


def _non_finite(path: str, number: float, variant: ToolVariant) -> GatewayError:
    """NaN and the infinities, which Python's JSON readers (the SDK's among them) take from text that is no JSON, and
    which no JSON can carry on: written, each became null, so the upstream was handed, and the record kept, a value
    the agent never sent."""
    spelled = json_spelling(number)
    if number != number:
        said = f"{spelled}, which is no JSON value"
    else:
        said = f"{spelled} (or a number past 1.8e308, read as it), which is no JSON value"
    return GatewayError(
        ErrorCode.INVALID_ARGS,
        f"{_short(path)} is {said}: send a finite number, or the value as a string",
        {"variant": variant.value, "field": _short(path)},
    )


def _not_unicode(what: str, path: str, variant: ToolVariant) -> GatewayError:
    return GatewayError(
        ErrorCode.INVALID_ARGS,
        f'{what} that is not valid Unicode (a lone UTF-16 surrogate such as "\\udfff"): send well-formed text',
        {"variant": variant.value, "field": _short(path)},
    )


def _root(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def _short(path: str) -> str:
    # A path through 60 levels is no help to a reader; its start says where, its end says what.
    return path if len(path) <= 120 else f"{path[:60]}…{path[-40:]}"


def split_name(name: Any, variant: ToolVariant) -> tuple[str, str]:
    if not isinstance(name, str) or not name.strip():
        raise GatewayError(
            ErrorCode.INVALID_ARGS,
            "name is required: the tool to call as 'server:tool' (find it with retrieve_tools)",
            {"variant": variant.value},
        )
    server, sep, tool = name.strip().partition(":")
    if not sep or not server or not tool:
        raise GatewayError(
            ErrorCode.TOOL_NOT_FOUND,
            f"Tool '{name}' not found: names have the form 'server:tool' (find them with retrieve_tools)",
            {"variant": variant.value, "tool": name},
        )
    return server, tool


def parse_args(arguments: Mapping[str, Any], variant: ToolVariant) -> dict[str, Any]:
    details = {"variant": str(variant)}
    unknown = sorted(set(arguments) - CALL_KEYS)
    if unknown:
        raise GatewayError(
            ErrorCode.INVALID_ARGS,
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown)} for "
            f"{variant.value}: pass the tool's own arguments inside args (an object) or args_json (a JSON string)",
            details,
        )
    args, args_json = arguments.get("args"), arguments.get("args_json")
    if args is not None and args_json not in (None, ""):
        raise GatewayError(
            ErrorCode.INVALID_ARGS, "pass the tool's arguments as args or as args_json, not both", details
        )
    if arguments.get("intent") is not None and any(key in arguments for key in FLAT_INTENT_KEYS):
        # One of the two would go unheeded: an intent of read beside an intent_operation_type of write ran as a read.
        raise GatewayError(
            ErrorCode.INVALID_ARGS, "declare the intent as intent or as the flat intent_* keys, not both", details
        )
    if args_json not in (None, ""):
        if not isinstance(args_json, str):
            if isinstance(args_json, dict):
                return args_json  # a client that decoded the string for us: accept the object it meant
            raise GatewayError(ErrorCode.INVALID_ARGS, "args_json must be a string holding a JSON object", details)
        try:
            parsed = json.loads(args_json)
        except RecursionError:
            raise GatewayError(
                ErrorCode.INVALID_ARGS,
                f"args_json nests deeper than {MAX_DEPTH} levels: flatten the arguments",
                details,
            ) from None
        except json.JSONDecodeError as exc:
            raise GatewayError(
                ErrorCode.INVALID_ARGS,
                f"args_json is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): "
                'send a JSON object such as {"title": "Buy milk"}',
                details,
            ) from None
        check_input(parsed, variant, "args_json")
        if not isinstance(parsed, dict):
            raise GatewayError(
                ErrorCode.INVALID_ARGS,
                f"args_json must hold a JSON object, not {_json_type(parsed)}: wrap the arguments in {{...}}",
                details,
            )
        return parsed
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise GatewayError(ErrorCode.INVALID_ARGS, f"args must be an object, not {_json_type(args)}", details)
    return args


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )
