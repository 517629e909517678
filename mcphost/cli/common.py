"""What every command shares: loading the config with a readable error, logging to stderr, output helpers."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from mcphost.config import LoadedConfig


def setup_logging(verbose: int) -> None:
    # stderr only: stdout of `mcphost mcp` carries the protocol and nothing else.
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="mcphost: %(levelname)s %(name)s: %(message)s")
    # pygls logs every message it sends at INFO, tokens in `mcphost/status` included: keep it quiet.
    logging.getLogger("pygls").setLevel(max(level, logging.WARNING))


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"mcphost: {message}", file=sys.stderr)
    raise SystemExit(code)


def load_or_exit(args: argparse.Namespace) -> LoadedConfig:
    from mcphost.config import ConfigError, load_config
    from mcphost.demo.default import default_config

    try:
        return load_config(getattr(args, "config", None), default=default_config)
    except ConfigError as exc:
        fail(f"{exc}\nFix the file, or check it with `mcphost config validate`.")


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def add_output_flag(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument("-o", "--output", choices=choices, default=choices[0], help="output format")
