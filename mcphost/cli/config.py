"""`mcphost config path|show|validate|init|schema`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from mcphost.cli.common import INIT_HINT, add_output_flag, load_or_exit, print_json
from mcphost.paths import config_path, read_regular

# Each action imports what it runs: `config path` needs no pydantic, `show` and `validate` need the models.


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    actions.add_parser("path", parents=[parent], help="print the config file's path").set_defaults(func=run_path)
    show = actions.add_parser("show", parents=[parent], help="print the config in force (secrets masked), as TOML")
    add_output_flag(show, ("toml", "json"))
    show.set_defaults(func=run_show)
    init = actions.add_parser("init", parents=[parent], help="write a commented starter config (and its schema)")
    init.add_argument("file", nargs="?", default=None, help="where (default: the config path)")
    init.set_defaults(func=run_init)
    actions.add_parser(
        "schema", parents=[parent], help="print the config's JSON Schema (for editors that check TOML)"
    ).set_defaults(func=run_schema)
    v = actions.add_parser(
        "validate",
        parents=[parent],
        help="check a config file; exit 1 with the errors (no file at all: the built-in default, which is valid)",
    )
    v.add_argument("file", nargs="?", default=None, help="the file to check (default: the config in use)")
    v.set_defaults(func=run_validate)


def run_path(args: argparse.Namespace) -> int:
    print(config_path(args.config))
    return 0


def run_show(args: argparse.Namespace) -> int:
    shown = _from_daemon(config_path(args.config))
    if shown is None:
        from mcphost.config.show import shown_config

        shown = shown_config(load_or_exit(args))
    path, exists, config = shown["path"], shown["exists"], shown["config"]
    if args.output == "json":
        print_json({"path": path, "exists": exists, "config": config})
        return 0
    import tomli_w

    if exists:
        print(f"# the config in force: {path} (every key, defaults filled in; secrets masked)")
    else:
        print(f"# no config file at {path}: this is the built-in default ({INIT_HINT}; secrets masked)")
    sys.stdout.write(tomli_w.dumps(_toml_ready(config)))
    return 0


def _from_daemon(path: Path) -> dict[str, Any] | None:
    """The config as the daemon running on `path` holds it, when it read the file as it is now (same bytes, or no
    file on either side); else None, and the command loads the file itself. A daemon has the models loaded and the
    file checked: asking it spares the command most of its start-up. A file saved since, or broken (the daemon then
    keeps the last good config), is loaded here, so that what is shown, and every error, is the file's."""
    import hashlib

    from mcphost import discovery
    from mcphost.cli.channel import CONFIG, ask

    info = discovery.for_config(path)
    if info is None or not info.get("editor_socket"):
        return None
    try:
        data: bytes | None = read_regular(path)
    except FileNotFoundError:
        data = None
    except OSError:
        return None  # unreadable: the local load says why
    try:
        shown = ask(info, "mcphost config show", CONFIG)
    except discovery.NoDaemon:
        return None
    if not isinstance(shown, dict) or not isinstance(shown.get("config"), dict):
        return None
    digest = None if data is None else hashlib.sha256(data).hexdigest()
    if shown.get("exists") != (data is not None) or shown.get("sha256") != digest:
        return None
    return {**shown, "path": str(path)}  # the daemon's name for the same file may be spelled otherwise


def _toml_ready(value: Any) -> Any:
    """The config as TOML can hold it: TOML has no null, so an unset key is left out, as are empty tables (each
    would be a header over nothing)."""
    if isinstance(value, dict):
        kept = {key: _toml_ready(item) for key, item in value.items() if item is not None}
        return {key: item for key, item in kept.items() if item != {}}
    if isinstance(value, list):
        return [_toml_ready(item) for item in value if item is not None]
    return value


def run_validate(args: argparse.Namespace) -> int:
    from mcphost.config import ConfigError
    from mcphost.config.loader import dangling_link, parse_config_bytes

    path = Path(args.file) if args.file else config_path(args.config)
    try:
        data = read_regular(path)
    except FileNotFoundError:
        dangling = dangling_link(path)
        if dangling is not None:
            # What `serve` and every command refuse is no config in force, and no valid one.
            print(f"mcphost: {path}: {dangling}", file=sys.stderr)
            return 1
        if args.file:
            print(f"mcphost: {path}: no such file", file=sys.stderr)
            return 1
        # No file is the normal state of a new install: mcphost runs on its built-in default, built from the
        # same models as any file, so it is valid.
        print(f"{path}: no config file; the built-in default is in force, and valid ({INIT_HINT})")
        return 0
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
    from mcphost.config.loader import dangling_link
    from mcphost.config.starter import SCHEMA_FILE, starter_config
    from mcphost.schemas import config_schema, render

    path = Path(args.file) if args.file else config_path(args.config)
    dangling = dangling_link(path)
    if dangling is not None:
        # The link is the person's too: init would write wherever it points, or fail on it.
        print(f"mcphost: {path}: {dangling}", file=sys.stderr)
        return 1
    if path.exists():
        # The person's file is theirs: never overwritten, not even by init.
        print(f"mcphost: {path} already exists; edit it, or remove it first to start over", file=sys.stderr)
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    # Owner-only: the file is where an upstream's token goes (its env, its Authorization header).
    with os.fdopen(
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), "w", encoding="utf-8"
    ) as f:
        f.write(starter_config(sys.executable))
    (path.parent / SCHEMA_FILE).write_text(render(config_schema()), encoding="utf-8")
    print(f"wrote {path}")
    print(f"wrote {path.parent / SCHEMA_FILE} (editors use it to complete and check the file)")
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from mcphost.schemas import config_schema, render

    sys.stdout.write(render(config_schema()))
    return 0
