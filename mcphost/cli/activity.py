"""`mcphost activity list|show|summary`: the activity log as a table, one record in full, or counts."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mcphost import console
from mcphost.activity import display
from mcphost.activity.query import DEFAULT_LIMIT, RecordFilter, matching_newest_first, select, summarize
from mcphost.activity.reader import records_newest_first
from mcphost.cli.filters import add_filter_flags, filter_from, log_path, usage_error

FORMATS = ("table", "json", "yaml")


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="activity_command", metavar="ACTION", required=True)

    ls = actions.add_parser("list", parents=[parent], help="matching records, newest first")
    add_filter_flags(ls)
    ls.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, metavar="N", help=f"most records (default {DEFAULT_LIMIT}, 0: all)"
    )
    ls.add_argument("-o", "--output", choices=FORMATS, default="table", help="output format")
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
    summary.add_argument("-o", "--output", choices=FORMATS, default="table", help="output format")
    summary.set_defaults(func=run_summary)


def _print(value: Any, output: str) -> None:
    if output == "json":
        print(json.dumps(value, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(display.to_yaml(value))


def run_list(args: argparse.Namespace) -> int:
    if args.limit < 0:
        usage_error(f"--limit: {args.limit} is negative; give how many records to show (0: all)")
    flt = filter_from(args)
    if args.output == "json":
        # Streamed, one record per line of the array: `--limit 0` over a big log never holds it all in memory,
        # and the C encoder does the work.
        records = matching_newest_first(log_path(args), flt)
        write = sys.stdout.write
        write("[")
        for n, record in enumerate(records):
            if args.limit and n >= args.limit:
                break
            write(("\n" if n == 0 else ",\n") + json.dumps(record, ensure_ascii=False))
        write("\n]\n")
        return 0
    page = select(log_path(args), flt, args.limit or None)
    if args.output != "table":
        _print(page.records, args.output)
        return 0
    if not page.records:
        print("no matching activity", file=sys.stderr)
        return 0
    print(display.table(page.records, console.ascii_only()))
    if page.next_cursor is not None:
        print(f"(newest {len(page.records)} shown; --limit N for more, 0 for all)", file=sys.stderr)
    return 0


def run_show(args: argparse.Namespace) -> int:
    path = log_path(args)
    wanted = args.id.strip()
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


def run_summary(args: argparse.Namespace) -> int:
    flt: RecordFilter = filter_from(args)
    summary = summarize(matching_newest_first(log_path(args), flt)).to_dict()
    summary["since"] = flt.since.isoformat() if flt.since else None
    if args.output != "table":
        _print(summary, args.output)
        return 0
    print(f"{summary['total']} records since {console.safe(args.since)}", end="")
    print(f" ({summary['first']} .. {summary['last']})" if summary["total"] else "")
    plain = console.ascii_only()
    icons = console.ASCII_ICONS if plain else console.INTENT_ICONS
    for title, key in (("intent", "by_intent"), ("status", "by_status"), ("server", "by_server"), ("type", "by_type")):
        counts: dict[str, int] = summary[key]
        if not counts:
            continue
        print(f"\nby {title}")
        for name, count in counts.items():
            label = f"{icons[name]} {name}" if key == "by_intent" and name in icons else console.safe(name)
            print(f"  {label:<24}{count:>8}")
    return 0
