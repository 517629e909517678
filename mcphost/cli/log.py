"""`mcphost log tail`: the last records of the activity log, and (-f) the ones that follow, as they happen."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from mcphost import console
from mcphost.activity import display
from mcphost.activity.reader import Follower, Record, tail
from mcphost.cli.common import add_listing_flags, table_width
from mcphost.cli.filters import add_filter_flags, filter_from, log_path, reads_log, usage_error

POLL_INTERVAL = 0.1


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="log_command", metavar="ACTION", required=True)
    t = actions.add_parser("tail", parents=[parent], help="the last records, oldest first; -f follows new ones")
    t.add_argument("-n", "--lines", type=int, default=20, metavar="N", help="how many records (default 20)")
    t.add_argument("-f", "--follow", action="store_true", help="keep printing records as they are written")
    add_filter_flags(t)
    add_listing_flags(t, default="text")
    t.set_defaults(func=run_tail)


@reads_log
def run_tail(args: argparse.Namespace) -> int:
    if args.lines < 0:
        usage_error(f"-n: {args.lines} is negative; give how many records to show (0: none, only follow)")
    flt = filter_from(args)
    path = log_path(args)
    records, position = tail(path, args.lines, flt.matches, flt.needle(), flt.is_past)
    plain = console.ascii_only()
    as_json = args.output == "json"
    # The same columns as `activity list`, oldest first.
    table = display.listing(plain, table_width(args))

    def emit(record: Record) -> None:
        if as_json:
            sys.stdout.write(console.json_escaped(json.dumps(record, ensure_ascii=False)) + "\n")
        else:
            sys.stdout.write(table.line(display.row(record, plain)) + "\n")

    if as_json:
        for record in records:
            emit(record)
    elif records:
        # No header, as a tail goes: the columns line up, and follow on in the rows that come after.
        rows = [display.row(record, plain) for record in records]
        at_least = display.FOLLOW_WIDTHS if args.follow else ()
        sys.stdout.write("\n".join(table.lines(rows, header=False, at_least=at_least)) + "\n")
    elif args.follow:
        table.lines([], header=False, at_least=display.FOLLOW_WIDTHS)
    sys.stdout.flush()
    if not args.follow:
        if not records and not path.exists():
            print(f"mcphost: no activity yet ({path} does not exist)", file=sys.stderr)
        return 0
    follower = Follower(path, position, on_cut=_say_cut)
    try:
        while True:
            fresh = [r for r in follower.poll() if flt.matches(r)]
            for record in fresh:
                emit(record)
            if fresh:
                sys.stdout.flush()
            time.sleep(POLL_INTERVAL)
    except KeyboardInterrupt:
        return 0
    finally:
        follower.close()


def _say_cut(path: Path) -> None:
    # As `tail -F` says it: the records printed before stay, and the file is read again from its start.
    print(f"mcphost: {path} was cut short (emptied by hand?); following it from its start", file=sys.stderr)
