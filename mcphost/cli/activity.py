"""`mcphost activity list|show|summary`: the activity log as a table, one record in full, or counts."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mcphost import console
from mcphost.activity import display
from mcphost.activity.ids import record_id
from mcphost.activity.query import (
    DEFAULT_LIMIT,
    RecordFilter,
    facts,
    matching_entries_newest_first,
    matching_newest_first,
    select,
    summary_of,
    tally,
)
from mcphost.activity.reader import records_newest_first
from mcphost.cli.common import TABLE_FORMATS, add_listing_flags, print_json, table_width
from mcphost.cli.filters import add_filter_flags, filter_from, log_path, reads_log, usage_error

if TYPE_CHECKING:
    from mcphost.cli.scan import Render

T = TypeVar("T")
CHUNK_BYTES = 1 << 18
COMPACT = (",", ":")  # `-o json` writes each record on one line, as the log does


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="activity_command", metavar="ACTION", required=True)

    ls = actions.add_parser("list", parents=[parent], help="matching records, newest first")
    add_filter_flags(ls)
    ls.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, metavar="N", help=f"most records (default {DEFAULT_LIMIT}, 0: all)"
    )
    add_listing_flags(ls, ("json", "yaml"))
    ls.set_defaults(func=run_list)

    show = actions.add_parser("show", parents=[parent], help="one record in full")
    show.add_argument("id", help="the record's id (from activity list or log tail -o json)")
    show.add_argument("--file", metavar="PATH", help="read this log instead of <data dir>/activity.jsonl")
    show.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")
    show.set_defaults(func=run_show)

    summary = actions.add_parser("summary", parents=[parent], help="counts by intent, status and server")
    add_filter_flags(summary, since=False)
    summary.add_argument(
        "--since", default="24h", metavar="TIME", help="window start: a time (RFC 3339) or age (default 24h)"
    )
    add_listing_flags(summary, ("json", "yaml"))
    summary.set_defaults(func=run_summary)


def _print(value: Any, output: str) -> None:
    if output == "json":
        print_json(value)
    else:
        sys.stdout.write(display.to_yaml(value))


@reads_log
def run_list(args: argparse.Namespace) -> int:
    if args.limit < 0:
        usage_error(f"--limit: {args.limit} is negative; give how many records to show (0: all)")
    flt = filter_from(args)
    path = log_path(args)
    # The records read are plain dicts without cycles: the collector would only walk them, over and over.
    gc.disable()
    if args.output == "json":
        if _utf8(sys.stdout):
            _write_json_array(_rendered(path, flt, args.limit, _json_line), args.limit)
        else:
            _write_json_text(matching_newest_first(path, flt), args.limit)
        return 0
    if args.output not in TABLE_FORMATS:
        _print(select(path, flt, args.limit or None).records, args.output)
        return 0
    plain = console.ascii_only()
    table = display.listing(plain, table_width(args))
    if not args.limit:
        # All of them: read, and laid out, on all cores (mcphost.cli.scan).
        from mcphost.cli.scan import laid_out_newest_first

        written = False
        for lines in laid_out_newest_first(path, flt, lambda record, _line: display.row(record, plain), table):
            if lines:
                sys.stdout.write(lines + "\n")
            written = True
        if not written:
            print("no matching activity", file=sys.stderr)
        return 0
    # Rows, not records, are kept until the columns' widths are known.
    rows: list[tuple[str, ...]] = []
    more = False
    for cells in _rendered(path, flt, args.limit, lambda record, _line: display.row(record, plain)):
        if len(rows) >= args.limit:
            more = True
            break
        rows.append(cells)
    if not rows:
        print("no matching activity", file=sys.stderr)
        return 0
    _write_lines(table.lines(rows))
    if more:
        print(f"(newest {len(rows)} shown; --limit N for more, 0 for all)", file=sys.stderr)
    return 0


def _rendered(path: Path, flt: RecordFilter, limit: int, render: Render[T]) -> Iterator[T]:
    """Every matching record rendered, newest first. All of them (`--limit 0`): the big log's parts are read on all
    cores (mcphost.cli.scan); the newest few are near the end of the log, and read in this process alone."""
    if not limit:
        from mcphost.cli.scan import rendered_newest_first

        return rendered_newest_first(path, flt, render)
    return (render(record, line) for record, line in matching_entries_newest_first(path, flt))


def _utf8(stream: Any) -> bool:
    return (getattr(stream, "encoding", None) or "").lower().replace("-", "") == "utf8"


def _json_line(record: dict[str, Any], line: bytes | None) -> bytes:
    """A record for the JSON array: its line of the log as it is, when that is the record exactly as JSON; else
    encoded as the writer encodes a line."""
    if line is not None:
        return line
    text = json.dumps(record, ensure_ascii=False, separators=COMPACT)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a hand-made line's "\udfff"): written as that escape, which stays JSON and UTF-8.
        return json.dumps(record, separators=COMPACT).encode("ascii")


def _write_json_array(lines: Iterator[bytes], limit: int) -> None:
    """A JSON array, one record per line, streamed: `--limit 0` over a big log never holds it all in memory."""
    sys.stdout.flush()
    write = sys.stdout.buffer.write
    chunk: list[bytes] = [b"["]
    size = 0
    separator = b"\n"
    for n, line in enumerate(lines):
        if limit and n >= limit:
            break
        chunk.append(separator)
        chunk.append(line)
        separator = b",\n"
        size += len(line)
        if size >= CHUNK_BYTES:
            write(console.json_escaped_bytes(b"".join(chunk)))
            chunk.clear()
            size = 0
    chunk.append(b"\n]\n")
    # A line of the log holds what an agent wrote as it is (orjson escapes no C1 control, bidi mark or separator):
    # escaped here, as every other JSON output escapes it, and still the same JSON.
    write(console.json_escaped_bytes(b"".join(chunk)))
    sys.stdout.buffer.flush()


def _write_json_text(records: Iterator[dict[str, Any]], limit: int) -> None:
    """The JSON array as text, for an output that is not UTF-8 (encoded as it says; the log's lines are UTF-8)."""
    sys.stdout.write("[")
    for n, record in enumerate(records):
        if limit and n >= limit:
            break
        sys.stdout.write(("\n" if n == 0 else ",\n") + json.dumps(record, ensure_ascii=False, separators=COMPACT))
    sys.stdout.write("\n]\n")


def _write_lines(lines: Iterable[str]) -> None:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= 4096:
            sys.stdout.write("\n".join(chunk) + "\n")
            chunk.clear()
    if chunk:
        sys.stdout.write("\n".join(chunk) + "\n")


@reads_log
def run_show(args: argparse.Namespace) -> int:
    path = log_path(args)
    wanted = record_id(args.id)
    outcome: str | None = None  # the outcome of a started call, read before it (newest first)
    for record in records_newest_first(path, wanted.encode("utf-8", "replace")):
        if record.get("started_id") == wanted:
            outcome = str(record.get("id"))
        if record.get("id") == wanted:
            if record.get("type") == "tool_call_started":
                record = {**record, "outcome": outcome or "unknown"}
            if args.output == "text":
                print(display.detail(record, console.ascii_only()))
            else:
                _print(record, args.output)
            return 0
    print(f"mcphost: no record with id {console.safe(wanted)!r} in {path} or its rotated files", file=sys.stderr)
    return 1


@reads_log
def run_summary(args: argparse.Namespace) -> int:
    flt: RecordFilter = filter_from(args)
    gc.disable()  # as in run_list: plain dicts, no cycles
    # Every record of the window counted on all cores (mcphost.cli.scan): each hands over its counts.
    from mcphost.cli.scan import folded_newest_first

    counted = folded_newest_first(log_path(args), flt, lambda record, _line: facts(record), tally)
    summary = summary_of(counted).to_dict()
    summary["since"] = flt.since.isoformat() if flt.since else None
    if args.output not in TABLE_FORMATS:
        _print(summary, args.output)
        return 0
    print(f"{summary['total']} records since {console.safe(args.since)}", end="")
    print(f" ({summary['first']} .. {summary['last']})" if summary["total"] else "")
    plain = console.ascii_only()
    icons = console.ASCII_ICONS if plain else console.INTENT_ICONS
    width = table_width(args)
    for title, key in (("intent", "by_intent"), ("status", "by_status"), ("server", "by_server"), ("type", "by_type")):
        counts: dict[str, int] = summary[key]
        if not counts:
            continue
        rows = [
            (f"{icons[name]} {name}" if key == "by_intent" and name in icons else name, str(count))
            for name, count in counts.items()
        ]
        columns = (console.Column(f"BY {title.upper()}", flex=True, floor=12), console.Column("COUNT", right=True))
        table = console.Table(columns, width=None if width is None else width - 2, ascii_only=plain)
        print()
        print("\n".join("  " + line for line in table.lines(rows)))
    return 0
