"""Reading an upstream's stdout: JSON-RPC lines, and lines over the limit counted without being kept."""

from __future__ import annotations

import mcp_types as types
from mcp.shared.message import SessionMessage

from mcphost.upstream.guard import MessageTooLarge
from mcphost.upstream.stdio import LineReader, parse_line


def test_lines_are_split_across_chunks_and_blank_ones_skipped() -> None:
    reader = LineReader(limit=100)
    assert reader.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert reader.feed(b":2}\n\n  \n") == [b'{"b":2}']


def test_a_line_over_the_limit_is_counted_in_pieces_and_its_envelope_kept() -> None:
    reader = LineReader(limit=1000)
    body = b'{"jsonrpc":"2.0","id":12,"result":{"text":"' + b"x" * 5000
    out = []
    for start in range(0, len(body), 700):
        out += reader.feed(body[start : start + 700])
    out += reader.feed(b'"}}\n{"jsonrpc":"2.0","id":13,"result":{}}\n')
    oversized, normal = out
    assert isinstance(oversized, MessageTooLarge)
    assert oversized.size == len(body) + 3
    assert (oversized.kind, oversized.request_id, oversized.limit) == ("response", 12, 1000)
    assert normal == b'{"jsonrpc":"2.0","id":13,"result":{}}'


def test_a_line_exactly_at_the_limit_is_kept() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert LineReader(limit=len(line)).feed(line + b"\n") == [line]


def test_a_line_that_is_not_json_rpc_becomes_an_error_item() -> None:
    assert isinstance(parse_line(b"not json"), Exception)
    parsed = parse_line(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    assert isinstance(parsed, SessionMessage) and isinstance(parsed.message, types.JSONRPCResponse)
