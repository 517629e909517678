"""The editor channel's framing and screening (mcphost.editor.wire), byte by byte."""

from __future__ import annotations

import pytest
from lsprotocol import types as lsp

from mcphost.editor import wire


def framed(body: bytes, headers: bytes = b"") -> bytes:
    return b"Content-Length: %d\r\n%s\r\n%s" % (len(body), headers, body)


def test_bodies_come_out_whole_however_the_bytes_are_cut() -> None:
    stream = framed(b'{"a":1}') + b"\r\n" + framed(b'{"b":2}', b"Content-Type: application/vscode-jsonrpc\r\n")
    for size in (1, 2, 7, len(stream)):
        framer, bodies = wire.Framer(), []
        for start in range(0, len(stream), size):
            bodies += framer.feed(stream[start : start + size])
        assert bodies == [b'{"a":1}', b'{"b":2}'], size


def test_a_declared_length_past_the_limit_is_refused_before_its_body_arrives() -> None:
    with pytest.raises(wire.FrameError, match="past the limit"):
        wire.Framer(max_message=100).feed(b"Content-Length: 101\r\n\r\n")
    assert wire.Framer(max_message=100).feed(framed(b"x" * 100)) == [b"x" * 100]


@pytest.mark.parametrize(
    "stream",
    [b"X-Pad: " + b"a" * 200, b"X: y\r\n" * 40, b"Content-Length: 5\r\n" * 40],
    ids=["one-long-line", "many-lines", "never-a-blank-line"],
)
def test_a_header_section_past_its_bound_is_refused(stream: bytes) -> None:
    with pytest.raises(wire.FrameError, match="header section longer"):
        wire.Framer(max_header=128).feed(stream)


@pytest.mark.parametrize("value", [b"-1", b"1e3", b"", b"9" * 40])
def test_a_content_length_that_is_not_a_length_is_refused(value: bytes) -> None:
    with pytest.raises(wire.FrameError, match="not a length"):
        wire.Framer().feed(b"Content-Length: " + value + b"\r\n\r\n")


def test_a_header_section_without_content_length_is_refused() -> None:
    with pytest.raises(wire.FrameError, match="without Content-Length"):
        wire.Framer().feed(b"Content-Type: x\r\n\r\n")


def test_requests_notifications_and_answers_pass_screening() -> None:
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "m"},
        {"jsonrpc": "2.0", "id": "a", "method": "m", "params": None},
        {"jsonrpc": "2.0", "method": "m", "params": []},
        {"jsonrpc": "2.0", "id": "x.1", "result": None},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "m"}},
    ):
        assert wire.screen(wire.json.dumps(message).encode()) == message


def test_what_is_not_a_message_is_answered_as_json_rpc_says() -> None:
    parse = wire.screen(b"\xff")
    assert isinstance(parse, wire.Refused) and parse.reply is not None
    assert (parse.reply["id"], parse.reply["error"]["code"]) == (None, -32700)
    deep = wire.screen(b"[" * 100_000)
    assert isinstance(deep, wire.Refused) and deep.reply is not None and deep.reply["error"]["code"] == -32700
    bad_params = wire.screen(b'{"jsonrpc": "2.0", "method": "m", "params": 5}')
    assert isinstance(bad_params, wire.Refused) and bad_params.reply is None, "a notification is never answered"


def test_an_error_reaches_the_client_without_data_and_an_internal_one_without_its_message() -> None:
    internal = lsp.ResponseError(code=-32603, message="KeyError: 'secret'", data={"traceback": ["File ..."]})
    assert wire.client_safe(internal) == lsp.ResponseError(code=-32603, message=wire.INTERNAL_MESSAGE)
    named = lsp.ResponseError(code=-32602, message="invalid ids", data={"traceback": []})
    assert wire.client_safe(named) == lsp.ResponseError(code=-32602, message="invalid ids")
