"""`mcphost rules test`: what the config decides for a call, and which rule decided it, without calling anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mcphost.cli.common import add_output_flag, fail, for_terminal, load_or_exit, print_json
from mcphost.console import safe


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="rules_command", metavar="ACTION", required=True)
    test = actions.add_parser(
        "test", parents=[parent], help="the decision for a call and the rule that makes it (nothing is called)"
    )
    test.add_argument("tool", metavar="SERVER:TOOL")
    test.add_argument("--variant", required=True, choices=("read", "write", "destructive"))
    test.add_argument("--args", default="{}", metavar="JSON", help="the call's arguments, a JSON object")
    test.add_argument("--client", default=None, help="the agent's client name, for rules with `client`")
    add_output_flag(test)
    test.set_defaults(func=run_test)


def run_test(args: argparse.Namespace) -> int:
    from mcphost.approval.approvals import path_resolver
    from mcphost.errors import GatewayError
    from mcphost.gateway.arguments import parse_args
    from mcphost.intent import OperationType, ToolVariant
    from mcphost.policy import RuleSubject, decide

    server, sep, tool = args.tool.partition(":")
    if not sep or not server or not tool:
        fail(f"name the tool as SERVER:TOOL (got {args.tool!r})", 2)
    variant = ToolVariant.for_operation(OperationType(args.variant))
    try:
        # As the gateway reads a call's args_json: what it would refuse before any rule (too deep to record, text
        # that is not Unicode, not an object) is no question for the rules, and JSON past the stack's depth is no
        # traceback.
        arguments = parse_args({"args_json": args.args}, variant)
    except GatewayError as exc:
        fail(for_terminal(exc.message), 2)
    loaded = load_or_exit(args)
    subject = RuleSubject(variant, server, tool, args.client, arguments)
    verdict = decide(
        loaded.config.permissions.to_policy(), subject, loaded.config.compiled_rules, path_resolver(Path.cwd())
    )
    answer: dict[str, Any] = {
        "tool": args.tool,
        "variant": args.variant,
        "action": verdict.action.value,
        "rule": verdict.rule,
        "reason": verdict.reason,
        "config": str(loaded.path),
    }
    if args.output == "json":
        print_json(answer)
        return 0
    print(f"{safe(args.tool)} ({args.variant}): {verdict.action.value}")
    if verdict.rule.startswith("rules["):
        index = int(verdict.rule[len("rules[") : -1])
        shown = loaded.config.rules[index].model_dump(mode="json", exclude_defaults=True)
        print(f"  by {verdict.rule}: {safe(json.dumps(shown, ensure_ascii=False))}")
        if verdict.reason:
            print(f"  reason: {safe(verdict.reason)}")
    else:
        matched = "no rule matched" if loaded.config.rules else "no [[rules]] in the config"
        print(f'  {matched}: {verdict.rule} = "{verdict.action.value}"')
    print(f"  config: {safe(str(loaded.path))}")
    return 0
