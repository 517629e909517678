"""`mcphost call tool-read|tool-write|tool-destructive SERVER:TOOL`: the agent's calls, from a terminal."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from mcphost import __version__, discovery
from mcphost.cli.common import add_output_flag, for_terminal, load_or_exit, print_json, require_utf8
from mcphost.cli.waiting import WaitWatch
from mcphost.console import safe, safe_lines
from mcphost.intent import DataSensitivity, ToolVariant
from mcphost.paths import config_path

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

    require_utf8(**{"SERVER:TOOL": args.name, "--args": args.args_json, "--reason": args.reason})
    variant: ToolVariant = args.variant
    intent: dict[str, Any] = {"operation_type": variant.operation.value}
    if args.sensitivity:
        intent["data_sensitivity"] = args.sensitivity
    if args.reason:
        intent["reason"] = args.reason
    arguments: dict[str, Any] = {"name": args.name, "intent": intent}
    if args.args_json is not None:
        arguments["args_json"] = args.args_json

    target = None if args.in_process else discovery.for_config(config_path(args.config))
    target = discovery.unless_stopped(target, "calling from this process instead")
    if target is not None:
        # Through the running daemon: its editors answer the prompts, its upstreams and grants serve the call.
        from mcphost.cli.daemon_client import CALL_CLIENT, DaemonError, Ended, McpSession

        print(f"mcphost: calling through the daemon {target['pid']}", file=sys.stderr, flush=True)
        session = McpSession(target["mcp"]["url"], dict(target["mcp"].get("headers") or {}), CALL_CLIENT)
        try:
            with WaitWatch(target, args.name, _say):
                result = session.call_once(variant.value, arguments)
        except (KeyboardInterrupt, Ended) as cut:
            # The session has told the daemon, if it could: the call is cancelled there, a prompt for it withdrawn.
            said, code = (f"ended by {cut}", 128 + cut.signum) if isinstance(cut, Ended) else ("interrupted", 130)
            fate = (
                "the call was withdrawn"
                if session.withdrawn
                else f"the daemon {target['pid']} did not answer, so the call may still be waiting for a person or "
                "running"
            )
            print(f"mcphost: {said}; {fate} (see `mcphost log tail`)", file=sys.stderr)
            return code
        except DaemonError as exc:
            if exc.sent:
                print(
                    f"mcphost: {safe(str(exc))}; the call may or may not have reached the upstream (nothing is "
                    "retried): see `mcphost log tail`",
                    file=sys.stderr,
                )
                return 1
            # The daemon never saw the call: make it from here, as with no daemon at all.
            print(f"mcphost: {safe(str(exc))}; calling from this process instead", file=sys.stderr, flush=True)
        else:
            return _print_daemon_result(result, args.output)
    return _in_process(args, variant, arguments)


def _say(text: str) -> None:
    print(f"mcphost: {text}", file=sys.stderr, flush=True)


def _in_process(args: argparse.Namespace, variant: ToolVariant, arguments: dict[str, Any]) -> int:
    # Only the path taken is imported: through the daemon, this process needs none of the host.
    import anyio

    from mcphost.cli.daemon_client import CALL_CLIENT
    from mcphost.upstream.spawn import early_starts

    loaded = load_or_exit(args)
    server = args.name.partition(":")[0]

    async def main() -> CallOutcome:
        # Only the named server is started: a one-shot call need not wait for the others. It is spawned before the
        # host's modules are imported, so that its start and theirs overlap.
        async with early_starts(loaded.config, only=[server]) as early:
            from mcphost.gateway.service import CallContext
            from mcphost.host import Host

            async with Host(loaded, only_servers=[server], early=early) as host:
                # Named as through a daemon, where the name comes from the handshake's clientInfo and version.
                ctx = CallContext(session_id=f"cli-{os.getpid()}", client=f"{CALL_CLIENT} {__version__}")
                return await host.gateway.call(variant, arguments, ctx)

    outcome = anyio.run(main)
    for warning in outcome.warnings:
        print(f"mcphost: warning: {safe_lines(for_terminal(warning))}", file=sys.stderr)
    if outcome.error is not None:
        if args.output == "json":
            print_json(outcome.error.to_payload())
        print(
            f"mcphost: {outcome.error.code.value}: {safe_lines(for_terminal(outcome.error.message))}", file=sys.stderr
        )
        return 1
    assert outcome.result is not None and outcome.data is not None
    try:
        result = outcome.result.model_dump(mode="json", by_alias=True, exclude_none=True)
    except ValueError:
        # Text with a lone surrogate (JSON's "\udfff", which an upstream may send): the model will not write it.
        # The answer as the upstream sent it is JSON-ready, and is what the daemon's path prints.
        result = outcome.data
    if args.output == "json":
        print_json(result)
    else:
        print_result(result, sys.stderr if outcome.result.is_error else sys.stdout)
    return 1 if outcome.result.is_error else 0


def _print_daemon_result(result: dict[str, Any], output: str) -> int:
    """The daemon's answer (a CallToolResult as JSON), printed as an in-process call's would be: warnings and errors
    on stderr."""
    from mcphost.cli.daemon_client import WARNING_PREFIX

    content = result.get("content")
    blocks = []
    for block in content if isinstance(content, list) else []:
        text = _text_of(block)
        if text is not None and text.startswith(WARNING_PREFIX):
            warning = for_terminal(text.removeprefix(WARNING_PREFIX))
            print(f"mcphost: warning: {safe_lines(warning)}", file=sys.stderr)
        else:
            blocks.append(block)
    is_error = result.get("isError") is True
    structured = result.get("structuredContent")
    error = structured.get("error") if is_error and isinstance(structured, dict) else None
    if isinstance(error, dict) and "code" in error:
        if output == "json":
            print_json({"error": error})
        message = for_terminal(str(error.get("message", "")))
        print(f"mcphost: {safe(error['code'])}: {safe_lines(message)}", file=sys.stderr)
        return 1
    result = {**result, "content": blocks}
    if output == "json":
        try:
            print_json(as_dumped(result))
        except ValueError as exc:
            print(f"mcphost: the daemon's answer is not a tool result: {safe(str(exc))}", file=sys.stderr)
            return 1
    else:
        print_result(result, sys.stderr if is_error else sys.stdout)
    return 1 if is_error else 0


# A CallToolResult as `model_dump(mode="json", by_alias=True, exclude_none=True)` writes it: fields in this order,
# defaults filled in. Results of this shape (text blocks, as mcphost's own results are) are laid out here; any
# other goes through the SDK's model, so that `-o json` is the same with and without a daemon.
_RESULT_FIELDS = ("_meta", "content", "structuredContent", "isError", "resultType")
_TEXT_FIELDS = ("type", "text", "_meta")


def as_dumped(result: dict[str, Any]) -> dict[str, Any]:
    """`result` (a CallToolResult as JSON) as the SDK's model dumps it. Raises ValueError when it is not one."""
    if _plain_result(result):
        dumped: dict[str, Any] = {}
        if result.get("_meta") is not None:
            dumped["_meta"] = result["_meta"]
        dumped["content"] = [
            {key: block[key] for key in _TEXT_FIELDS if block.get(key) is not None} for block in result["content"]
        ]
        if result.get("structuredContent") is not None:
            dumped["structuredContent"] = result["structuredContent"]
        dumped["isError"] = result.get("isError", False)
        dumped["resultType"] = result.get("resultType", "complete")
        return dumped
    import mcp_types
    from pydantic import ValidationError

    try:
        model = mcp_types.CallToolResult.model_validate(result)
    except ValidationError as exc:
        raise ValueError(str(exc)) from None
    dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _plain_result(result: dict[str, Any]) -> bool:
    if not set(result) <= set(_RESULT_FIELDS) or not isinstance(result.get("content"), list):
        return False
    if not isinstance(result.get("_meta", {}), dict | None):
        return False
    if not isinstance(result.get("isError", False), bool) or not isinstance(result.get("resultType", ""), str):
        return False
    return all(
        isinstance(block, dict)
        and set(block) <= set(_TEXT_FIELDS)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and isinstance(block.get("_meta", {}), dict | None)
        for block in result["content"]
    )


def _text_of(block: Any) -> str | None:
    if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    return None


def print_result(result: dict[str, Any], stream: Any) -> None:
    """A CallToolResult (as JSON) for a person: text blocks (JSON pretty-printed), a line for any other block, and
    the structured content when there is nothing else."""
    printed = False
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        text = _text_of(block)
        if text is not None:
            print(safe_lines(_pretty(text)), file=stream)
        else:
            kind = block.get("type") if isinstance(block, dict) else None
            print(f"[{safe(kind)} content]", file=stream)
        printed = True
    if not printed and result.get("structuredContent") is not None:
        print(json.dumps(result["structuredContent"], indent=2), file=stream)  # ASCII: no raw control character


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):  # not JSON, or nested past what Python's encoder can walk
        return text
