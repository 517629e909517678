"""`mcphost grants list|revoke`: the approvals a person asked mcphost to remember."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mcphost import discovery
from mcphost.cli.channel import GRANTS_LIST, GRANTS_REVOKE, ask
from mcphost.cli.common import add_listing_flags, add_output_flag, fail, print_json, table_width
from mcphost.console import Column, Table, ascii_only, safe
from mcphost.discovery import NoDaemon
from mcphost.paths import data_dir


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="grants_command", metavar="ACTION", required=True)
    ls = actions.add_parser("list", parents=[parent], help="remembered approvals: always (state file) and session")
    add_listing_flags(ls, default="text")
    ls.set_defaults(func=run_list)
    rv = actions.add_parser("revoke", parents=[parent], help="forget approvals: by id, by server:tool, or all")
    rv.add_argument("target", nargs="*", metavar="ID|SERVER:TOOL", help="grant ids (from `grants list`) or tools")
    rv.add_argument("--all", action="store_true", help="forget every remembered approval")
    add_output_flag(rv)
    rv.set_defaults(func=run_revoke)


COLUMNS = (
    Column("ID"),
    Column("SCOPE"),
    Column("TOOL", flex=True, floor=16),
    Column("VARIANT"),
    Column("COVERS", flex=True, floor=14),
    Column("GRANTED", optional=True),
    Column("SESSION", flex=True, floor=12, optional=True),
)


def _daemons() -> list[dict[str, Any]]:

    return [d for d in discovery.running() if d.get("editor_socket")]


def state_path() -> Path:
    """mcphost.config.state.state_path, without importing the config models (a test keeps the two equal): the
    state file holds the `always` grants, and most people have none, so most runs need no pydantic at all."""
    return data_dir() / "state.toml"


# mcphost.config.state.ASIDE_MARK (a test keeps the two equal): a state file that could not be used is moved to
# `state.toml.unreadable-<time>` before a new one is written, never written over.
ASIDE_MARK = ".unreadable-"


def _file_grants() -> list[dict[str, Any]]:
    path = state_path()
    _say_set_aside(path)
    if not path.exists():
        return []
    from mcphost.approval.grants import read_always

    return [grant.info().model_dump(mode="json", exclude_none=True) for grant in read_always(path)]


def _say_set_aside(path: Path) -> None:
    """Name on stderr each state file set aside beside `path`: the approvals in it are not in force, and the daemon's
    log, which said so when it moved it, may be long gone."""
    try:
        aside = sorted(path.parent.glob(f"{path.name}{ASIDE_MARK}*"))
    except OSError:
        return
    for found in aside:
        print(
            f"mcphost: {safe(str(found))} is a state file that could not be used (a typo, or not yours alone), moved"
            f" aside: the approvals in it are not listed and not in force; fix it and copy its [[grants]] into"
            f" {path.name} to keep them, else delete it",
            file=sys.stderr,
        )


def _revoke_in_file(ids: list[str], tool: str | None, everything: bool) -> list[dict[str, Any]]:
    path = state_path()
    if not path.exists():
        return []  # no state file, no `always` grants: nothing to forget there
    from mcphost.approval.grants import revoke_in_file

    revoked = revoke_in_file(path, ids, tool, everything)
    return [grant.info().model_dump(mode="json", exclude_none=True) for grant in revoked]


def _ask_daemons(method: str, params: Any) -> list[dict[str, Any]]:
    """Each running daemon's answer; session grants exist only inside the daemons."""

    answers = []
    for info in _daemons():
        try:
            answer = ask(info, "mcphost grants", method, params)
            if not isinstance(answer, dict):
                raise NoDaemon(f"daemon {info.get('pid')} answered {method} with {type(answer).__name__}")
            answers.append({"pid": info.get("pid"), **answer})
        except NoDaemon as exc:
            answers.append({"pid": info.get("pid"), "error": str(exc)})
    return answers


def covers(grant: dict[str, Any]) -> str:
    """What a grant covers besides the tool, in words (the same words as Grant.describe, from its listed form)."""
    match = grant.get("match", "tool")
    if match == "pattern" and isinstance(grant.get("pattern"), dict):
        return "args " + ", ".join(f"{name}={glob}" for name, glob in sorted(grant["pattern"].items()))
    if match == "arguments":
        return f"exactly {grant.get('arguments_preview') or '(arguments)'}"
    return "any arguments"


def run_list(args: argparse.Namespace) -> int:

    grants: dict[str, dict[str, Any]] = {}
    answers = _ask_daemons(GRANTS_LIST, {})
    for answer in answers:
        for grant in answer.get("grants", []):
            grants.setdefault(grant["id"], {**grant, "daemon": answer["pid"]} if grant["scope"] == "session" else grant)
    for grant in _file_grants():
        grants.setdefault(grant["id"], grant)
    listed = sorted(grants.values(), key=lambda g: (g["scope"], g["server"], g["tool"], g["variant"]))
    unanswered = _unanswered(answers, "its session approvals are not listed")
    if args.output == "json":
        print_json({"grants": listed, **({"unanswered": unanswered} if unanswered else {})})
        return 1 if unanswered else 0
    if not listed:
        print("No remembered approvals.")
        return 1 if unanswered else 0

    rows = [
        (
            str(g["id"]),
            str(g["scope"]),
            f"{g['server']}:{g['tool']}",
            str(g["variant"]),
            covers(g),
            str(g["granted_at"]),
            f"{g['session_id']} in daemon {g['daemon']}" if g["scope"] == "session" else "",
        )
        for g in listed
    ]
    print("\n".join(Table(COLUMNS, width=table_width(args), ascii_only=ascii_only()).lines(rows)))
    return 1 if unanswered else 0


def run_revoke(args: argparse.Namespace) -> int:

    if not args.target and not args.all:
        fail("say which approvals to forget: grant ids, server:tool names, or --all (see `mcphost grants list`)", 2)
    ids = [t for t in args.target if ":" not in t]
    tools = [t for t in args.target if ":" in t]
    revoked: dict[str, dict[str, Any]] = {}
    requests = [{"ids": ids, "all": args.all}] + [{"tool": tool} for tool in tools]
    answers: list[dict[str, Any]] = []
    unchanged: str | None = None  # why the state file could not be changed
    for params in requests:
        for answer in _ask_daemons(GRANTS_REVOKE, params):
            answers.append(answer)
            for grant in answer.get("revoked", []):
                revoked[grant["id"]] = grant
        if unchanged is not None:
            continue
        # The state file too: no daemon may be running, and `always` grants outlive daemons.
        try:
            for grant in _revoke_in_file(ids, params.get("tool"), args.all):
                revoked.setdefault(grant["id"], grant)
        except OSError as exc:
            # Its lock held by a stopped process, a full disk: said plainly, not as a traceback, and not done.
            unchanged = _not_changed(exc)
    # A daemon that could not be asked may still hold a matching session approval: not done, whatever else was.
    unanswered = _unanswered(answers, "its session approvals may still be in force")
    if unchanged is not None:
        print(f"mcphost: {safe(unchanged)}", file=sys.stderr)
    failed = bool(unanswered) or unchanged is not None
    if args.output == "json":
        print_json(
            {
                "revoked": list(revoked.values()),
                **({"unanswered": unanswered} if unanswered else {}),
                **({"state_file_error": unchanged} if unchanged is not None else {}),
            }
        )
        return 1 if failed else 0
    if not revoked:
        if unchanged is None:
            print("No remembered approval matched; see `mcphost grants list`.")
        return 1
    for grant in revoked.values():
        print(
            f"revoked {safe(grant['id'])} ({safe(grant['scope'])}) {safe(grant['server'])}:{safe(grant['tool'])} "
            f"{safe(grant['variant'])}"
        )
    return 1 if failed else 0


def _not_changed(exc: OSError) -> str:
    """What a revoke that could not change the state file says: which file, why, and what to do."""
    from mcphost.approval.grants import StateLocked

    path = state_path()
    if isinstance(exc, StateLocked):
        why = f"its lock {exc.lock} is held by {exc.who}, which has not let go of it for {exc.waited:g} s; {exc.remedy}"
    else:
        why = str(exc.strerror or exc)
    return f"{path} was not changed: {why}. The approvals remembered in it are still in force"


def _unanswered(answers: list[dict[str, Any]], so: str) -> list[dict[str, Any]]:
    """The daemons that could not be asked, each said on stderr with what that means for the answer."""
    missed = {answer["pid"]: answer["error"] for answer in answers if "error" in answer}
    for pid, error in missed.items():
        print(f"mcphost: could not ask daemon {pid} ({safe(error)}); {so}", file=sys.stderr)
    return [{"pid": pid, "error": error} for pid, error in missed.items()]
