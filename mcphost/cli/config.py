"""`mcphost config path|show|validate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mcphost.cli.common import load_or_exit, print_json
from mcphost.paths import config_path

# Each action imports what it runs: `config path` needs no pydantic, `show` and `validate` need the models.


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    actions.add_parser("path", parents=[parent], help="print the config file's path").set_defaults(func=run_path)
    actions.add_parser(
        "show", parents=[parent], help="print the effective config (secrets masked) as JSON"
    ).set_defaults(func=run_show)
    init = actions.add_parser("init", parents=[parent], help="write a commented starter config (and its schema)")
    init.add_argument("file", nargs="?", default=None, help="where (default: the config path)")
    init.set_defaults(func=run_init)
    actions.add_parser(
        "schema", parents=[parent], help="print the config's JSON Schema (for editors that check TOML)"
    ).set_defaults(func=run_schema)
    v = actions.add_parser("validate", parents=[parent], help="check a config file; exit 1 with the errors")
    v.add_argument("file", nargs="?", default=None, help="the file to check (default: the config in use)")
    v.set_defaults(func=run_validate)


def run_path(args: argparse.Namespace) -> int:
    print(config_path(args.config))
    return 0


def run_show(args: argparse.Namespace) -> int:
    from mcphost.activity.redact import redact

    loaded = load_or_exit(args)
    print_json(
        {
            "path": str(loaded.path),
            "exists": loaded.exists,
            "config": redact(loaded.config.model_dump(mode="json")),
        }
    )
    return 0


def run_validate(args: argparse.Namespace) -> int:
    from mcphost.config import ConfigError
    from mcphost.config.loader import parse_config_bytes

    path = Path(args.file) if args.file else config_path(args.config)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        print(f"mcphost: {path}: no such file (mcphost runs on the embedded default without one)", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mcphost: {path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        # From the bytes: a file that is not UTF-8 is a positioned error like any other, not a read failure.
        parse_config_bytes(data, path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"{path}: valid")
    return 0


def run_init(args: argparse.Namespace) -> int:
    from mcphost.config.starter import SCHEMA_FILE, starter_config
    from mcphost.schemas import config_schema, render

    path = Path(args.file) if args.file else config_path(args.config)
    if path.exists():
        # The person's file is theirs: never overwritten, not even by init.
        print(f"mcphost: {path} already exists; edit it, or remove it first to start over", file=sys.stderr)
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as f:
        f.write(starter_config(sys.executable))
    (path.parent / SCHEMA_FILE).write_text(render(config_schema()), encoding="utf-8")
    print(f"wrote {path}")
    print(f"wrote {path.parent / SCHEMA_FILE} (editors use it to complete and check the file)")
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from mcphost.schemas import config_schema, render

    sys.stdout.write(render(config_schema()))
    return 0
