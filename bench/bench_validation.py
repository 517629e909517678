"""In-process cost of what mcphost does to every call before forwarding it: parse, validate, decide. No I/O.

The baseline, measured in the same run, is a dict lookup plus `json.loads` of the same `args_json` string, so the
ratio carries over to machines where the absolute microseconds do not. Run from the repo root:

    python -m bench.bench_validation [--iterations 200000] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BenchFailure, machine, run_bench
from mcphost.approval.approvals import path_resolver
from mcphost.config.loader import parse_config
from mcphost.errors import ErrorCode, GatewayError
from mcphost.gateway.arguments import parse_args, split_name
from mcphost.intent import Annotations, OperationType, ToolVariant, raw_intent, validate_call
from mcphost.policy import Action, ConditionKind, Policy, RuleSet, RuleSubject, decide

TARGET_US = 50.0

VARIANT = ToolVariant.READ
ANNOTATIONS = Annotations(read_only=True)
POLICY = Policy()
QUALIFIED = "srv:tool"
INTENT = {
    "operation_type": "read",
    "data_sensitivity": "internal",
    "reason": "summarise the open issues for the weekly report",
}
ARGS_JSON = json.dumps({"text": "hello", "limit": 10, "tags": ["a", "b"]})
# What the gateway receives from an agent for call_tool_read, with the tool's arguments as a JSON string.
ARGUMENTS: dict[str, Any] = {"name": QUALIFIED, "args_json": ARGS_JSON, "intent": INTENT}
MISMATCHED_INTENT = {"operation_type": "write", "reason": "the agent declared the wrong variant"}


def full_path() -> Any:
    """The gateway's pre-forward work for one call, in the order `Gateway.call` does it."""
    raw = raw_intent(ARGUMENTS)
    server, tool = split_name(ARGUMENTS["name"], VARIANT)
    args = parse_args(ARGUMENTS, VARIANT)
    intent, verdict = validate_call(VARIANT, raw, QUALIFIED, ANNOTATIONS, strict=True)
    return args, intent, verdict, decide(POLICY, RuleSubject(VARIANT, server, tool))


def validate_and_decide() -> Any:
    intent, verdict = validate_call(VARIANT, INTENT, QUALIFIED, ANNOTATIONS, strict=True)
    return intent, verdict, decide(POLICY, SUBJECT)


def gateway_parsing() -> Any:
    return raw_intent(ARGUMENTS), split_name(ARGUMENTS["name"], VARIANT), parse_args(ARGUMENTS, VARIANT)


SUBJECT = RuleSubject(VARIANT, "srv", "tool", "claude-code 2.1", {"text": "hello", "limit": 10, "path": "src/a.py"})


def _rules_toml(count: int, layout: str) -> str:
    """`count` rules of every condition kind, none of which matches SUBJECT, each with its own values (the same
    condition twice could be checked once). Layouts: "spread", over other servers (the usual); "dense", all on the
    called tool and variant, each failing on its last argument, so every rule is read to its end (the worst case);
    "wild", over other tools by globs that start with a wildcard ("*:name"), which no index narrows down."""
    kinds = [
        'text = {{ glob = "draft{i}:*" }}',
        "text = {{ regex = '(?i)drop{i}\\s+table' }}",
        "limit = {{ equals = {n} }}",
        'text = {{ one_of = ["a{i}", "b{i}", "c{i}"] }}',
        'path = {{ inside = "/nonexistent/elsewhere{i}" }}',
    ]
    tools = {"spread": "server{i}:*", "dense": "srv:*", "wild": "*:other{i}"}
    out = []
    for i in range(count):
        condition = kinds[i % len(kinds)].format(i=i, n=11 + i)
        out.append(
            f'[[rules]]\ntool = "{tools[layout].format(i=i)}"\nvariant = "read"\nclient = "claude-*"\n'
            f'args = {{ {condition} }}\naction = "deny"\nreason = "rule {i}"\n'
        )
    return "\n".join(out)


RESOLVE = path_resolver(Path.cwd())
SPREAD = parse_config(_rules_toml(100, "spread"), Path("bench.toml")).compiled_rules
DENSE = parse_config(_rules_toml(100, "dense"), Path("bench.toml")).compiled_rules
WILD = parse_config(_rules_toml(100, "wild"), Path("bench.toml")).compiled_rules
DENSE_NO_PATHS = RuleSet(rule for rule in DENSE if all(c.kind is not ConditionKind.INSIDE for _, c in rule.args))


def rules_spread() -> Any:
    return decide(POLICY, SUBJECT, SPREAD, RESOLVE)


def rules_wild() -> Any:
    return decide(POLICY, SUBJECT, WILD, RESOLVE)


def rules_dense() -> Any:
    return decide(POLICY, SUBJECT, DENSE, RESOLVE)


def rules_dense_no_paths() -> Any:
    return decide(POLICY, SUBJECT, DENSE_NO_PATHS, RESOLVE)


def rejection() -> Any:
    try:
        validate_call(VARIANT, MISMATCHED_INTENT, QUALIFIED, ANNOTATIONS, strict=True)
    except GatewayError as err:
        return err
    raise AssertionError("unreachable: a mismatched intent must be rejected")


def baseline() -> Any:
    return json.loads(ARGUMENTS["args_json"])


def empty() -> None:
    return None


# (key, label, function); the first is the figure the target applies to.
CASES: list[tuple[str, str, Callable[[], Any]]] = [
    ("full", "parse + validate + decide (full pre-forward path)", full_path),
    ("validate_decide", "validate_call + decide", validate_and_decide),
    ("parsing", "raw_intent + split_name + parse_args", gateway_parsing),
    ("rules_spread", "decide over 100 rules on other servers (none match)", rules_spread),
    ("rules_wild", "decide over 100 rules on other tools by '*:name' globs", rules_wild),
    ("rules_dense", "decide over 100 rules on this tool, each read to its end", rules_dense),
    ("rules_dense_no_paths", f"the same without `inside` ({len(DENSE_NO_PATHS)} rules)", rules_dense_no_paths),
    ("rejection", "rejection: INTENT_MISMATCH raised and caught", rejection),
    ("baseline", "baseline: dict lookup + json.loads(args_json)", baseline),
    ("empty", "empty function call (loop + call floor)", empty),
]


def check() -> None:
    args, intent, verdict, decision = full_path()
    if args != json.loads(ARGS_JSON) or intent.operation_type is not OperationType.READ or verdict.warnings:
        raise BenchFailure(f"unexpected validation result: args={args!r} intent={intent!r} verdict={verdict!r}")
    if decision.action is not Action.ALLOW:
        raise BenchFailure(f"default policy should allow a read, got {decision!r}")
    for rules in (SPREAD, WILD, DENSE, DENSE_NO_PATHS):
        if decide(POLICY, SUBJECT, rules, RESOLVE).rule != "permissions.read":
            raise BenchFailure("no bench rule should match the call: every rule must be read")
    err = rejection()
    if err.code is not ErrorCode.INTENT_MISMATCH:
        raise BenchFailure(f"the mismatched intent should fail with INTENT_MISMATCH, got {err.code}: {err.message}")


def time_per_call_ns(fn: Callable[[], Any], iterations: int) -> float:
    clock = time.perf_counter_ns
    loop = range(iterations)
    # As timeit does: a collection triggered by garbage from earlier cases would land on whichever case is running.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = clock()
        for _ in loop:
            fn()
        elapsed = clock() - start
    finally:
        if was_enabled:
            gc.enable()
    return elapsed / iterations


def measure(iterations: int, repeats: int) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {key: [] for key, _, _ in CASES}
    for fn in (fn for _, _, fn in CASES):
        time_per_call_ns(fn, max(1, iterations // 20))  # warm caches and the specialising interpreter
    # Cases are interleaved per repeat so slow drift (frequency scaling, a noisy neighbour) hits them all alike.
    for _ in range(repeats):
        for key, _, fn in CASES:
            samples[key].append(time_per_call_ns(fn, iterations))
    return {
        key: {"best_us": min(values) / 1000, "median_us": statistics.median(values) / 1000}
        for key, values in samples.items()
    }


def run(opts: argparse.Namespace) -> dict[str, Any]:
    host = machine()
    check()
    figures = measure(opts.iterations, opts.repeats)
    base = figures["baseline"]["median_us"]
    return {
        "benchmark": "validation",
        "machine": host,
        "settings": {"iterations": opts.iterations, "repeats": opts.repeats, "args_json_bytes": len(ARGS_JSON)},
        "target_us": TARGET_US,
        "cases": {
            key: {
                "label": label,
                **figures[key],
                "ratio_to_baseline": figures[key]["median_us"] / base,
            }
            for key, label, _ in CASES
        },
    }


def render(report: dict[str, Any]) -> str:
    m, settings = report["machine"], report["settings"]
    lines = [
        f"mcphost validation cost: {m['cpus']} CPUs, {m['implementation']} {m['python']}, {m['platform']}, "
        f"load average {m['load_average_1m']:.2f} at start",
        f"{settings['iterations']} iterations x {settings['repeats']} repeats per case; "
        f"per-call µs (best / median of repeats); x baseline = median / baseline median",
        "",
        f"{'case':<52} {'best µs':>8} {'median µs':>10} {'x baseline':>11}",
    ]
    for key, case in report["cases"].items():
        ratio = case["ratio_to_baseline"]
        line = f"{case['label']:<52} {case['best_us']:>8.2f} {case['median_us']:>10.2f} {ratio:>10.2f}x"
        if key in ("full", "rules_spread", "rules_wild", "rules_dense"):
            line += f"   target < {report['target_us']:g} µs"
        lines.append(line)
    return "\n".join(lines) + "\n"


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=200_000, help="calls per timed repeat (default 200000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per case (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    opts = parser.parse_args(argv)
    if opts.iterations < 1 or opts.repeats < 1:
        parser.error("--iterations and --repeats must be at least 1")
    return opts


def main(argv: list[str] | None = None) -> int:
    return run_bench("bench_validation", argv, parse_cli, run, render)


if __name__ == "__main__":
    sys.exit(main())
