"""What crosses the editor channel, before pygls sees it and after it answers: the LSP framing (headers, then a body of
Content-Length bytes) cut into bodies within fixed bounds, each body screened as JSON-RPC 2.0 (what is not gets the
error answer JSON-RPC prescribes), and error answers stripped of what only the daemon's log should hold. No I/O here:
the connection feeds bytes in and sends what comes out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp

from mcphost.pipes import valid_id

# The largest message an editor may send. What editors send is small (an answer to a prompt, a status request); the
# largest is an initialize with a long client name, far below this. A bigger one ends the connection unread: pygls
# buffered whatever length was declared, and one connection could make the daemon hold a gigabyte.
MAX_MESSAGE = 16 * 1024 * 1024
# The most a header section (from the end of one body to the start of the next) may take. vscode-jsonrpc writes two
# short lines; pygls read any number of lines of any length, one at a time, for as long as they came.
MAX_HEADER = 8 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_FAILED = -32803  # LSP's: a well-formed request the daemon cannot carry out
INTERNAL_MESSAGE = "internal error in the mcphost daemon (its log has the details)"


def notification(method: str, params: bytes) -> bytes:
    """A JSON-RPC notification whose params are JSON already, framed: its Content-Length in bytes, then the body."""
    body = b'{"jsonrpc":"2.0","method":' + json.dumps(method).encode() + b',"params":' + params + b"}"
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class FrameError(Exception):
    """The byte stream cannot be read as framed messages within the bounds: the connection must end."""


class Framer:
    """Bodies out of the LSP byte stream, fed as it arrives. Holds at most one header section (MAX_HEADER) or one
    body (MAX_MESSAGE) plus the last chunk fed. As pygls did, header lines other than Content-Length are skipped, as
    are blank lines before any header."""

    def __init__(self, max_message: int = MAX_MESSAGE, max_header: int = MAX_HEADER) -> None:
        self._max_message = max_message
        self._max_header = max_header
        self._buffer = bytearray()
        self._header_seen = 0  # bytes of the current header section taken so far
        self._headers = False  # a header line was read in the current section
        self._declared: int | None = None  # its Content-Length
        self._body: int | None = None  # the length of the body now being read

    def feed(self, data: bytes) -> list[bytes]:
        """The bodies that `data` completes, in order. Raises FrameError."""
        self._buffer += data
        bodies: list[bytes] = []
        while True:
            if self._body is not None:
                if len(self._buffer) < self._body:
                    return bodies
                bodies.append(bytes(self._buffer[: self._body]))
                del self._buffer[: self._body]
                self._body = None
                continue
            newline = self._buffer.find(b"\n", 0, self._max_header - self._header_seen + 1)
            if newline < 0:
                if self._header_seen + len(self._buffer) > self._max_header:
                    raise FrameError(f"a header section longer than {self._max_header} bytes")
                return bodies
            line = bytes(self._buffer[:newline]).removesuffix(b"\r")
            del self._buffer[: newline + 1]
            self._header_seen += newline + 1
            self._take_header(line)

    def _take_header(self, line: bytes) -> None:
        if line:
            self._headers = True
            name, colon, value = line.partition(b":")
            if colon and name.strip().lower() == b"content-length":
                self._declared = _length(value.strip(), self._max_message)
            return
        if not self._headers:
            self._header_seen = 0  # a blank line between messages, which pygls let pass
            return
        if self._declared is None:
            raise FrameError("a header section without Content-Length")
        self._body = self._declared
        self._header_seen, self._headers, self._declared = 0, False, None


def _length(value: bytes, limit: int) -> int:
    if not value.isdigit() or len(value) > 12:
        raise FrameError(f"Content-Length {value[:40]!r} is not a length")
    length = int(value)
    if length > limit:
        raise FrameError(f"a message of {length} bytes, past the limit of {limit}")
    return length


@dataclass(frozen=True)
class Refused:
    """A body that is not a message pygls can be given: `reply`, the error answer to send (None: nothing may be
    answered, as for a notification or a response), and `why`, for the log."""

    reply: dict[str, Any] | None
    why: str


def error_reply(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error answer; `msg_id` None is written as null (an answer to a message whose id cannot be read)."""
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def screen(body: bytes) -> dict[str, Any] | Refused:
    """The message in `body` when it is one JSON-RPC 2.0 request, notification or response pygls may be given;
    otherwise what to answer (JSON-RPC 2.0, section 5: -32700 for what is not JSON, -32600 for JSON that is not a
    message, with its id when one can be read)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        reason = "nested too deeply" if isinstance(exc, RecursionError) else "not JSON"
        return Refused(error_reply(None, PARSE_ERROR, f"Parse error: the message is {reason}"), f"a message {reason}")
    if not isinstance(value, dict):
        what = "a batch (not supported here)" if isinstance(value, list) else _json_type(value)
        return _invalid(None, f"a message must be a JSON object, not {what}")
    msg_id = value.get("id")
    known_id = msg_id if valid_id(msg_id) else None
    if value.get("jsonrpc") != "2.0":
        return _invalid(known_id, 'a message must say "jsonrpc": "2.0"')
    if "method" in value:
        method = value["method"]
        if not isinstance(method, str):
            return _invalid(known_id, f"method must be a string, not {_json_type(method)}")
        if "id" in value and known_id is None:
            return _invalid(None, f"a request's id must be a string or an integer, not {_json_type(msg_id)}")
        params = value.get("params")
        if params is not None and not isinstance(params, dict | list):
            why = f"{method}: params must be an object or an array, not {_json_type(params)}"
            reply = error_reply(known_id, INVALID_PARAMS, f"Invalid params: {why}") if "id" in value else None
            return Refused(reply, why)
        return value
    if "id" in value and ("result" in value or "error" in value):
        if msg_id is not None and known_id is None:
            return Refused(None, f"an answer whose id is {_json_type(msg_id)}")
        return value
    return _invalid(known_id, "neither a request, a notification nor an answer (no method, no result, no error)")


def _invalid(msg_id: Any, why: str) -> Refused:
    return Refused(error_reply(msg_id, INVALID_REQUEST, f"Invalid Request: {why}"), why)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", float: "a number"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, int) else type(value).__name__)


def unreadable(message: dict[str, Any], invalid_params: bool) -> Refused:
    """What to answer a screened message that pygls could not turn into its types: `invalid_params`, it said why was
    its params (an initialize whose capabilities are a number)."""
    method = message.get("method")
    if method is None:
        return Refused(None, "an answer that cannot be read")
    if "id" not in message:
        return Refused(None, f"a {method} notification whose params cannot be read")
    if invalid_params:
        return Refused(error_reply(message["id"], INVALID_PARAMS, f"Invalid params for {method}"), "invalid params")
    return _invalid(message["id"], f"a {method} request that cannot be read")


def client_safe(error: lsp.ResponseError) -> lsp.ResponseError:
    """`error` as an editor may see it: no `data` (pygls puts a traceback there), and for an internal error (a
    handler that raised) no message either, which names the exception and what it said about the daemon's state."""
    if error.code == INTERNAL_ERROR:
        return lsp.ResponseError(code=INTERNAL_ERROR, message=INTERNAL_MESSAGE)
    return lsp.ResponseError(code=error.code, message=error.message)
