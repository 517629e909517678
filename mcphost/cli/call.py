"""`mcphost call tool-read|tool-write|tool-destructive SERVER:TOOL`: the agent's calls, from a terminal."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from mcphost import discovery
from mcphost.cli.common import add_output_flag, load_or_exit, print_json
from mcphost.console import safe, safe_lines
from mcphost.intent import DataSensitivity, ToolVariant
from mcphost.paths import config_path
from mcphost.serve.mcp_server import WARNING_PREFIX

if TYPE_CHECKING:
    from mcphost.gateway.service import CallOutcome

COMMANDS = {
    "tool-read": ToolVariant.READ,
    "tool-write": ToolVariant.WRITE,
    "tool-destructive": ToolVariant.DESTRUCTIVE,
}


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    variants = p.add_subparsers(dest="variant_command", metavar="VARIANT", required=True)
    for command, variant in COMMANDS.items():
        v = variants.add_parser(
            command,
            parents=[parent],
            help=f"call through {variant.value} (intent.operation_type = {variant.operation.value})",
        )
        v.add_argument("name", metavar="SERVER:TOOL", help="the tool, as retrieve_tools / `mcphost tools` names it")
        v.add_argument(
            "--args", dest="args_json", default=None, metavar="JSON", help="the tool's arguments, a JSON object"
        )
        v.add_argument("--reason", default=None, help="why (recorded, and shown to whoever approves)")
        v.add_argument(
            "--sensitivity", default=None, choices=[s.value for s in DataSensitivity], help="intent.data_sensitivity"
        )
        v.add_argument(
            "--in-process",
            action="store_true",
            help="call from this process even when a daemon is running (its prompts then reach no editor)",
        )
        add_output_flag(v)
        v.set_defaults(func=run, variant=variant)


def run(args: argparse.Namespace) -> int:

    variant: ToolVariant = args.variant
    intent: dict[str, Any] = {"operation_type": variant.operation.value}
    if args.sensitivity:
        intent["data_sensitivity"] = args.sensitivity
    if args.reason:
        intent["reason"] = args.reason
    arguments: dict[str, Any] = {"name": args.name, "intent": intent}
    if args.args_json is not None:
        arguments["args_json"] = args.args_json
    server = args.name.partition(":")[0]

    target = None if args.in_process else discovery.for_config(config_path(args.config))
    if target is not None:
        # Through the running daemon: its editors answer the prompts, its upstreams and grants serve the call.
        print(f"mcphost: calling through the daemon {target['pid']}", file=sys.stderr, flush=True)
        result = anyio.run(
            _via_daemon, target["mcp"]["url"], dict(target["mcp"].get("headers") or {}), variant, arguments
        )
        return _print_daemon_result(result, args.output)

    # Only the path taken is imported: through the daemon, this process needs none of the host.
    from mcphost.gateway.service import CallContext
    from mcphost.host import Host

    loaded = load_or_exit(args)

    async def main() -> CallOutcome:
        # Only the named server is started: a one-shot call need not wait for the others.
        async with Host(loaded, only_servers=[server]) as host:
            ctx = CallContext(session_id=f"cli-{os.getpid()}", client="mcphost-cli")
            return await host.gateway.call(variant, arguments, ctx)

    outcome = anyio.run(main)
    for warning in outcome.warnings:
        print(f"mcphost: warning: {safe_lines(warning)}", file=sys.stderr)
    if outcome.error is not None:
        if args.output == "json":
            print_json(outcome.error.to_payload())
        print(f"mcphost: {outcome.error.code.value}: {safe_lines(outcome.error.message)}", file=sys.stderr)
        return 1
    assert outcome.result is not None
    if args.output == "json":
        print_json(outcome.result.model_dump(mode="json", by_alias=True, exclude_none=True))
    else:
        print_result(outcome.result, sys.stderr if outcome.result.is_error else sys.stdout)
    return 1 if outcome.result.is_error else 0


async def _via_daemon(
    url: str, headers: dict[str, str], variant: ToolVariant, arguments: dict[str, Any]
) -> types.CallToolResult:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    # No proxy from the environment: the daemon is on loopback, and its token must not travel anywhere else.
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=None), trust_env=False)
    async with http, Client(streamable_http_client(url, http_client=http), cache=None) as client:
        return await client.call_tool(variant.value, arguments)


def _print_daemon_result(result: types.CallToolResult, output: str) -> int:
    """The daemon's answer, printed as an in-process call's would be: warnings and errors on stderr."""

    blocks = []
    for block in result.content:
        if isinstance(block, types.TextContent) and block.text.startswith(WARNING_PREFIX):
            print(f"mcphost: warning: {safe_lines(block.text.removeprefix(WARNING_PREFIX))}", file=sys.stderr)
        else:
            blocks.append(block)
    error = (result.structured_content or {}).get("error") if result.is_error else None
    if isinstance(error, dict) and "code" in error:
        if output == "json":
            print_json({"error": error})
        print(f"mcphost: {safe(error['code'])}: {safe_lines(str(error.get('message', '')))}", file=sys.stderr)
        return 1
    result = result.model_copy(update={"content": blocks})
    if output == "json":
        print_json(result.model_dump(mode="json", by_alias=True, exclude_none=True))
    else:
        print_result(result, sys.stderr if result.is_error else sys.stdout)
    return 1 if result.is_error else 0


def print_result(result: types.CallToolResult, stream: Any) -> None:
    printed = False
    for block in result.content:
        if isinstance(block, types.TextContent):
            print(safe_lines(_pretty(block.text)), file=stream)
        else:
            print(f"[{safe(block.type)} content]", file=stream)
        printed = True
    if not printed and result.structured_content is not None:
        print(json.dumps(result.structured_content, indent=2), file=stream)  # ASCII: no raw control character


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return text
