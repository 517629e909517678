"""Per-call overhead of a read call through `mcphost mcp`, against the same call made straight to the upstream.

Both paths run in the same process and the same run, against the same upstream program (tests/servers/probe.py),
so the ratio between them holds on any machine even where the absolute figures do not. Run from the repo root:

    python -m bench.bench_call_overhead [--calls 500] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.common import BenchFailure, emit, failed, machine, percentile

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "tests" / "servers" / "probe.py"

DIRECT_TOOL = "read_notes"
DIRECT_ARGS: dict[str, Any] = {"text": "x"}
THROUGH_TOOL = "call_tool_read"
THROUGH_ARGS: dict[str, Any] = {"name": "probe:read_notes", "args": {"text": "x"}, "intent": {"operation_type": "read"}}
EXPECTED_TEXT = "read_notes: x"

CONFIG = """\
[permissions]
read = "allow"
write = "allow"
destructive = "allow"

[servers.probe]
command = {python}
args = [{probe}]
"""


@dataclass
class Target:
    """One way of making the read call: a connected client plus the tool name and arguments to send."""

    label: str
    client: Client
    tool: str
    args: dict[str, Any]
    samples_ns: list[int] = field(default_factory=list)
    calls_made: int = 0
    errors: int = 0

    async def call(self) -> Any:
        self.calls_made += 1
        result = await self.client.call_tool(self.tool, self.args)
        if result.is_error:
            self.errors += 1
        return result


@dataclass(frozen=True)
class Sandbox:
    """Every path mcphost touches lives under `root`, so the run leaves nothing behind and reads no user config."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def activity_log(self) -> Path:
        return self.root / "data" / "activity.jsonl"

    @property
    def stderr_log(self) -> Path:
        return self.root / "stderr.log"

    def env(self) -> dict[str, str]:
        return {
            "MCPHOST_CONFIG": str(self.config),
            "MCPHOST_DATA_DIR": str(self.root / "data"),
            "MCPHOST_RUNTIME_DIR": str(self.root / "run"),
            # The stdio client passes only a safe few variables on; this keeps `-m mcphost` importable even
            # when the package is not installed into the interpreter.
            "PYTHONPATH": str(REPO),
        }

    def write_config(self) -> None:
        text = CONFIG.format(python=json.dumps(sys.executable), probe=json.dumps(str(PROBE)))
        self.config.write_text(text, encoding="utf-8")


@asynccontextmanager
async def open_client(params: StdioServerParameters, mode: str, errlog: TextIO) -> AsyncIterator[Client]:
    # Children's stderr goes to a file: their logging must not interleave with the table, yet stays readable
    # when a run fails.
    async with Client(stdio_client(params, errlog=errlog), mode=mode, cache=None) as client:
        yield client


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")


async def verify(target: Target) -> None:
    result = await target.call()
    text = text_of(result)
    if result.is_error or text != EXPECTED_TEXT:
        raise BenchFailure(
            f"{target.label}: {target.tool} {json.dumps(target.args)} returned is_error={result.is_error}, "
            f"text={text!r}; expected is_error=False, text={EXPECTED_TEXT!r}"
        )


async def timed_calls(target: Target, count: int) -> None:
    clock = time.perf_counter_ns
    samples = target.samples_ns
    for _ in range(count):
        start = clock()
        await target.call()
        samples.append(clock() - start)


async def concurrent_throughput(target: Target, total: int, callers: int) -> float:
    """Calls per second with `callers` tasks sharing one session, as agents issuing parallel tool calls do."""
    per_caller = max(1, total // callers)

    async def caller() -> None:
        for _ in range(per_caller):
            await target.call()

    start = time.perf_counter_ns()
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller)
    elapsed = time.perf_counter_ns() - start
    return per_caller * callers / (elapsed / 1e9)


def latency_summary(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    return {
        "calls": len(ordered),
        "median_us": statistics.median(ordered) / 1000,
        "p95_us": percentile(ordered, 0.95) / 1000,
        "min_us": ordered[0] / 1000,
        "mean_us": statistics.fmean(ordered) / 1000,
    }


async def interleave(first: Target, second: Target, rounds: int, work: Callable[[Target], Awaitable[None]]) -> None:
    # Alternating which path goes first each round spreads slow drift (CPU frequency, page cache, other load)
    # over both paths instead of charging it to whichever ran last.
    for index in range(rounds):
        pair = (first, second) if index % 2 == 0 else (second, first)
        for target in pair:
            await work(target)


async def measure_mode(box: Sandbox, mode: str, opts: argparse.Namespace, errlog: TextIO) -> dict[str, Any]:
    direct_params = StdioServerParameters(command=sys.executable, args=[str(PROBE)], cwd=str(REPO))
    through_params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcphost", "mcp", "--config", str(box.config)],
        env=box.env(),
        cwd=str(REPO),
    )
    async with AsyncExitStack() as stack:
        direct_client = await stack.enter_async_context(open_client(direct_params, mode, errlog))
        through_client = await stack.enter_async_context(open_client(through_params, mode, errlog))
        direct = Target("direct", direct_client, DIRECT_TOOL, DIRECT_ARGS)
        through = Target("through mcphost", through_client, THROUGH_TOOL, THROUGH_ARGS)

        # The first through-call also waits for mcphost's upstream to finish starting, so checking it here
        # keeps that one-off wait out of the timings as well.
        await verify(through)
        await verify(direct)
        for target in (direct, through):
            for _ in range(opts.warmup):
                await target.call()

        per_round = max(1, opts.calls // opts.rounds)
        await interleave(direct, through, opts.rounds, lambda t: timed_calls(t, per_round))

        throughput: dict[str, list[float]] = {direct.label: [], through.label: []}

        async def run_concurrent(target: Target) -> None:
            throughput[target.label].append(await concurrent_throughput(target, opts.calls, opts.concurrency))

        # Two alternating passes: enough to smooth the order effect without doubling the run time again.
        await interleave(direct, through, 2, run_concurrent)

    for target in (direct, through):
        # Error results are cheap to produce; timings that include them would flatter the path.
        if target.errors:
            raise BenchFailure(f"{target.label}: {target.errors} of {target.calls_made} calls returned is_error")
    d, t = latency_summary(direct.samples_ns), latency_summary(through.samples_ns)
    d_tput = statistics.median(throughput[direct.label])
    t_tput = statistics.median(throughput[through.label])
    return {
        "mode": mode,
        "through_calls_made": through.calls_made,
        "direct": d,
        "through": t,
        "added_median_us": t["median_us"] - d["median_us"],
        "added_p95_us": t["p95_us"] - d["p95_us"],
        "ratio_median": t["median_us"] / d["median_us"],
        "concurrent": {
            "callers": opts.concurrency,
            "calls": max(1, opts.calls // opts.concurrency) * opts.concurrency,
            "direct_calls_per_s": d_tput,
            "through_calls_per_s": t_tput,
            "ratio_through_over_direct": t_tput / d_tput,
        },
    }


def innermost(exc: BaseException) -> BaseException:
    """The exception that started it: the SDK's task groups wrap a failure inside a client block in groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def count_tool_calls(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open(encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip() and json.loads(line).get("type") == "tool_call")


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    host = machine()
    with tempfile.TemporaryDirectory(prefix="mcphost-bench-") as tmp:
        box = Sandbox(Path(tmp))
        box.write_config()
        with box.stderr_log.open("w", encoding="utf-8") as errlog:
            try:
                results = []
                with anyio.fail_after(opts.timeout):
                    for mode in opts.modes:
                        results.append(await measure_mode(box, mode, opts, errlog))
            except Exception as exc:
                errlog.flush()
                cause = innermost(exc)
                reason = f"no result within --timeout {opts.timeout:g}s" if isinstance(cause, TimeoutError) else cause
                tail = box.stderr_log.read_text(encoding="utf-8")[-4000:].strip()
                raise BenchFailure(f"{reason}" + (f"\n--- child stderr (tail) ---\n{tail}" if tail else "")) from exc
        logged = count_tool_calls(box.activity_log)
    made = sum(r["through_calls_made"] for r in results)
    # The figures claim "activity log on": a call that left no record would make that claim false.
    if logged != made:
        raise BenchFailure(f"{made} calls went through mcphost but activity.jsonl holds {logged} tool_call records")
    return {
        "benchmark": "call_overhead",
        "machine": host,
        "settings": {
            "calls": opts.calls,
            "rounds": opts.rounds,
            "warmup": opts.warmup,
            "concurrency": opts.concurrency,
            "modes": opts.modes,
            "policy": "read = allow",
            "activity_log": "on",
        },
        "activity_log_tool_calls": logged,
        "results": results,
    }


def render(report: dict[str, Any]) -> str:
    m, settings = report["machine"], report["settings"]
    lines = [
        f"mcphost call overhead: {m['cpus']} CPUs, {m['implementation']} {m['python']}, {m['platform']}, "
        f"load average {m['load_average_1m']:.2f} at start",
        f"read call, policy allow, activity log on ({report['activity_log_tool_calls']} tool_call records written)",
        f"{settings['calls']} timed calls per path in {settings['rounds']} interleaved rounds, "
        f"after {settings['warmup']} warm-up calls; throughput with {settings['concurrency']} concurrent callers",
        "",
        f"{'mode':<7} {'path':<16} {'median µs':>10} {'p95 µs':>10} {'mean µs':>10} {'calls/s':>10}",
    ]
    for r in report["results"]:
        c = r["concurrent"]
        for label, key, tput in (
            ("direct", "direct", c["direct_calls_per_s"]),
            ("through mcphost", "through", c["through_calls_per_s"]),
        ):
            s = r[key]
            lines.append(
                f"{r['mode']:<7} {label:<16} {s['median_us']:>10.0f} {s['p95_us']:>10.0f} {s['mean_us']:>10.0f} "
                f"{tput:>10.0f}"
            )
        lines.append(
            f"{'':<7} added by mcphost: {r['added_median_us']:.0f} µs median ({r['added_p95_us']:.0f} µs at p95); "
            f"latency through/direct = {r['ratio_median']:.2f}x; "
            f"throughput through/direct = {c['ratio_through_over_direct']:.2f}"
        )
    return "\n".join(lines) + "\n"


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500, help="timed calls per path (default 500)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds the timed calls are split into")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per path before timing")
    parser.add_argument("--concurrency", type=int, default=10, help="concurrent callers for the throughput figure")
    parser.add_argument(
        "--modes",
        default="legacy,auto",
        help="comma-separated client modes to measure, each for both paths (default legacy,auto)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    opts = parser.parse_args(argv)
    opts.modes = [m.strip() for m in opts.modes.split(",") if m.strip()]
    if opts.calls < 1 or opts.rounds < 1 or opts.warmup < 0 or opts.concurrency < 1 or not opts.modes:
        parser.error("--calls, --rounds and --concurrency must be at least 1, --warmup at least 0, --modes not empty")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_cli(argv)
    try:
        report = anyio.run(run, opts)
    except BenchFailure as exc:
        return failed("bench_call_overhead", exc)
    emit(report, opts.json, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
