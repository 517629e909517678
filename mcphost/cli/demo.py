"""`mcphost demo`: a guided run on the bundled todo server, in a throwaway data directory."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from mcphost.demo.guided import run_demo


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    p.description = (
        "A scripted agent uses the bundled todo server through an in-process mcphost, in a temporary "
        "data directory: your config, activity log, todo list and remembered approvals are not used or changed. "
        "On a terminal you answer the permission prompts; otherwise scripted answers are shown."
    )
    p.add_argument("--scripted", action="store_true", help="answer the prompts with the scripted decisions")
    p.add_argument("--keep", action="store_true", help="keep the temporary data directory (to look at its log)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    interactive = not args.scripted and sys.stdin.isatty()
    return asyncio.run(run_demo(sys.stdout, interactive=interactive, keep=args.keep))
