"""Flags shared by the commands that read the activity log, parsed by the same core as the REST endpoint."""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from mcphost.activity.query import INTENT_TYPES, RECORD_TYPES, STATUSES, FilterError, RecordFilter, parse_filter
from mcphost.activity.reader import UnreadableLog, forgery_risk, not_records, read_failure
from mcphost.console import safe
from mcphost.paths import activity_log_path

FLAG_FOR = {
    "intent_type": "--intent-type",
    "status": "--status",
    "server": "--server",
    "tool": "--tool",
    "type": "--type",
    "since": "--since",
}


def add_filter_flags(parser: argparse.ArgumentParser, *, since: bool = True) -> None:
    parser.add_argument("--intent-type", metavar="T", help=f"only {' | '.join(INTENT_TYPES)} calls")
    parser.add_argument("--status", metavar="S", help=f"only records with status {' | '.join(STATUSES)}")
    parser.add_argument("--server", metavar="NAME", help="only this upstream server")
    parser.add_argument("--tool", metavar="NAME", help="only this tool (its name without the server)")
    parser.add_argument("--type", metavar="TYPE", help=f"only this record type: {' | '.join(RECORD_TYPES)}")
    if since:
        parser.add_argument("--since", metavar="TIME", help="only records since a time (RFC 3339) or age (15m, 2h, 7d)")
    parser.add_argument("--file", metavar="PATH", help="read this log instead of <data dir>/activity.jsonl")


def usage_error(message: str) -> NoReturn:
    print(f"mcphost: {message}", file=sys.stderr)
    raise SystemExit(2)


def filter_from(args: argparse.Namespace) -> RecordFilter:
    try:
        return parse_filter(
            {
                "intent_type": args.intent_type,
                "status": args.status,
                "server": args.server,
                "tool": args.tool,
                "type": args.type,
                "since": getattr(args, "since", None),
            }
        )
    except FilterError as exc:
        usage_error(f"{FLAG_FOR.get(exc.parameter, exc.parameter)}: {exc.message}")


def log_path(args: argparse.Namespace) -> Path:
    return Path(args.file).expanduser() if args.file else activity_log_path()


def reads_log(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command that reads the log says why it cannot, in a line, instead of a traceback: the path given is a
    directory or a FIFO, a file is not this user's, the disk fails mid-read."""

    @functools.wraps(run)
    def reading(args: argparse.Namespace) -> int:
        if not args.file:  # a file named by hand is the person's own choice
            risk = forgery_risk(activity_log_path())
            if risk is not None:
                print(f"mcphost: warning: {risk}", file=sys.stderr)
        try:
            return run(args)
        except BrokenPipeError:
            raise
        except (UnreadableLog, OSError) as exc:
            print(f"mcphost: {read_failure(exc)}", file=sys.stderr)
        finally:
            _say_not_records(args)
        return 1

    return reading


def _say_not_records(args: argparse.Namespace) -> None:
    """Lines that hold no record are left out of every listing: never without a word (a damaged record of a
    destructive call would otherwise vanish from every view)."""
    n = not_records()
    if n:
        lines, were = ("1 line", "was") if n == 1 else (f"{n} lines", "were")
        where = safe(shlex.quote(str(log_path(args))))
        print(
            f"mcphost: warning: {lines} of the activity log held no record and {were} left out (damage, a hand edit, "
            f"another program's output): `grep -n -v '^{{' {where}*` shows them",
            file=sys.stderr,
        )
