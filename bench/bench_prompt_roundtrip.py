"""The permission prompt's round trip, daemon -> editor -> daemon, and what prompting costs an agent's calls.

Two real daemons (`mcphost serve`) run side by side with the probe upstream, identical but for one key:
`permissions.write = "ask"` (every call_tool_write prompts) and `"allow"` (the baseline: the same call, no prompt).
A real editor client, in its own process, attaches to each daemon's Unix socket like an editor does (the test
editor, tests/editor_client.py: pygls, LSP framing, activity and status notifications on) and answers every prompt
at once with allow/once, so every call to the ask daemon prompts (the allow daemon's editor is never asked, but is
sent the same notifications). Agents are MCP SDK clients over streamable HTTP, each its own session.

(a) Sequential: one agent, N calls per daemon in interleaved rounds. The round trip as the broker sees it is the
    record's `decision.wait_ms` (from the prompt's creation to the answer's arrival, validated); the cost to the
    agent is the call's latency on the ask daemon minus the same call's on the allow daemon.
(b) Concurrent: 100 agents at once, each making calls that prompt, all answered by the one editor: throughput and
    per-call latency, against the same 100 agents on the allow daemon.

The bench checks what it times: every call succeeds with the expected text, every ask record has decision.by
"editor" (outcome allow) and every allow record decision.by "policy", and the editor saw exactly one prompt per
prompted call, none withdrawn. Otherwise it exits 1. Timings are information (exit 0 either way). From the repo root:

    python -m bench.bench_prompt_roundtrip [--quick] [--prompts 300] [--agents 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import BenchFailure, emit, failed, machine, percentile  # noqa: E402
from tests.helpers import Daemon, Sandbox, daemon, http_agent, text_of  # noqa: E402

TARGET_MS = 3.0
TOOL = "call_tool_write"
MODES = ("ask", "allow")


def call_args(tag: str) -> dict[str, Any]:
    # The tag goes into the arguments, which the record keeps: it tells the phases apart in the log.
    return {"name": "probe:plain_echo", "args": {"text": tag}, "intent": {"operation_type": "write"}}


def config_text(box: Sandbox, write: str) -> str:
    return (
        f'[permissions]\nread = "allow"\nwrite = "{write}"\ndestructive = "confirm"\nprompt_timeout = 60\n\n'
        + box.probe_server()
    )


# ---- the editor, in its own process (so the agents' work in this process never delays its answers)


async def run_editor(socket_path: str) -> None:
    from tests.editor_client import allow, editor

    async with editor(socket_path, allow("once"), name="bench-editor") as ed:
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)  # until the bench closes our stdin
        counts = {"prompts": len(ed.prompts), "cancelled": len(ed.cancelled)}
        counts.update(statuses=len(ed.statuses), activity=len(ed.activity))
        print(json.dumps(counts), flush=True)


@dataclass
class EditorProcess:
    process: subprocess.Popen[str]

    def finish(self, cpu_start: float | None) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        cpu = since(cpu_start, cpu_seconds(self.process.pid))
        self.process.stdin.close()
        line = self.process.stdout.readline()
        self.process.wait(30)
        try:
            counts: dict[str, Any] = json.loads(line)
        except ValueError:
            raise BenchFailure(f"the editor process ended without its counts: {line!r}") from None
        counts["cpu_s"] = cpu
        return counts


@asynccontextmanager
async def editor_process(socket_path: str, errlog: Path) -> AsyncIterator[EditorProcess]:
    with errlog.open("w", encoding="utf-8") as err:
        # Popen only forks; the blocking reads run in a thread.
        process = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-m", "bench.bench_prompt_roundtrip", "--editor", socket_path],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = await anyio.to_thread.run_sync(process.stdout.readline)
            if line.strip() != "ready":
                raise BenchFailure(f"the editor did not attach: {line!r}; see {errlog}")
            yield EditorProcess(process)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


# ---- agents and measurements


@dataclass
class Side:
    mode: str
    daemon: Daemon
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def add(self, tag: str, latency_ms: float) -> None:
        self.latencies_ms.setdefault(tag, []).append(latency_ms)


async def checked_call(agent: Any, tag: str) -> float:
    started = time.perf_counter()
    result = await agent.call_tool(TOOL, call_args(tag))
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error or text_of(result) != f"plain_echo: {tag}":
        raise BenchFailure(f"{TOOL} returned is_error={result.is_error}: {text_of(result)[:300]!r}")
    return elapsed


async def first_call(side: Side) -> None:
    """One call that must succeed; it also waits out the upstream's start and the editor's attach."""
    deadline = time.monotonic() + 30
    async with http_agent(side.daemon.url, side.daemon.headers, mode="legacy") as agent:
        while True:
            result = await agent.call_tool(TOOL, call_args("warmup"))
            if not result.is_error:  # a failed try (no editor yet) prompted nobody: not counted
                side.calls["warmup"] = side.calls.get("warmup", 0) + 1
                return
            if time.monotonic() > deadline:
                raise BenchFailure(f"{side.mode}: the first call keeps failing: {text_of(result)[:300]}")
            await anyio.sleep(0.1)


async def sequential(sides: list[Side], opts: argparse.Namespace) -> None:
    async with AsyncExitStack() as stack:
        agents = {
            s.mode: await stack.enter_async_context(http_agent(s.daemon.url, s.daemon.headers, mode="legacy"))
            for s in sides
        }
        for side in sides:
            for _ in range(opts.warmup):
                await checked_call(agents[side.mode], "warmup")
            side.calls["warmup"] = side.calls.get("warmup", 0) + opts.warmup
        per_round = max(1, opts.prompts // opts.rounds)
        for index in range(opts.rounds):
            # Alternate which daemon goes first, so slow drift is shared instead of charged to one side.
            for side in sides if index % 2 == 0 else list(reversed(sides)):
                for _ in range(per_round):
                    side.add("seq", await checked_call(agents[side.mode], "seq"))
                side.calls["seq"] = side.calls.get("seq", 0) + per_round


async def concurrent(side: Side, opts: argparse.Namespace) -> float:
    """`opts.agents` agents, each its own HTTP session, all calling at once; returns the timed wall seconds."""
    ready = 0
    all_ready = anyio.Event()
    go = anyio.Event()
    all_done = anyio.Event()
    latencies: list[float] = []
    total = opts.agents * opts.calls_per_agent

    async def agent_task() -> None:
        nonlocal ready
        async with http_agent(side.daemon.url, side.daemon.headers, mode="legacy") as agent:
            ready += 1
            if ready == opts.agents:
                all_ready.set()
            await go.wait()
            for _ in range(opts.calls_per_agent):
                latencies.append(await checked_call(agent, "conc"))
                if len(latencies) == total:
                    all_done.set()

    elapsed = 0.0
    async with anyio.create_task_group() as tg:
        for _ in range(opts.agents):
            tg.start_soon(agent_task)
        with anyio.fail_after(120):
            await all_ready.wait()
        started = time.perf_counter()
        go.set()
        await all_done.wait()  # the timer stops when the last call returns, before the sessions close
        elapsed = time.perf_counter() - started
    for value in latencies:
        side.add("conc", value)
    side.calls["conc"] = side.calls.get("conc", 0) + len(latencies)
    return elapsed


# ---- the log: what the broker saw


def tool_calls(side: Side) -> list[dict[str, Any]]:
    return side.daemon.box.tool_calls()


def check_records(side: Side) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every call has its record with the expected decision. Returns, per phase, decision.wait_ms (ask side only)
    and the record's duration_ms (the call inside the daemon, from its arrival to its result)."""
    records = tool_calls(side)
    waits: dict[str, list[float]] = {}
    durations: dict[str, list[float]] = {}
    by_tag: dict[str, int] = {}
    for record in records:
        tag = (record.get("arguments") or {}).get("text", "?")
        by_tag[tag] = by_tag.get(tag, 0) + 1
        decision = record.get("decision") or {}
        if record.get("status") != "success" and tag != "warmup":
            raise BenchFailure(f"{side.mode}: a {tag} record has status {record.get('status')}: {record}")
        if record.get("status") != "success":
            continue
        expected = "editor" if side.mode == "ask" else "policy"
        if decision.get("by") != expected or decision.get("outcome") != "allow":
            raise BenchFailure(f"{side.mode}: a record was decided by {decision}, expected by {expected} -> allow")
        if side.mode == "ask":
            waits.setdefault(tag, []).append(float(decision["wait_ms"]))
        durations.setdefault(tag, []).append(float(record["duration_ms"]))
    for tag in ("seq", "conc"):
        if by_tag.get(tag, 0) != side.calls.get(tag, 0):
            raise BenchFailure(
                f"{side.mode}: {side.calls.get(tag, 0)} {tag} calls made but {by_tag.get(tag, 0)} records written"
            )
    return waits, durations


# ---- figures


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_ms": statistics.median(values),
        "p99_ms": percentile(values, 0.99),
        "mean_ms": statistics.fmean(values),
        "min_ms": min(values),
        "max_ms": max(values),
    }


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time a process has used so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def since(start: float | None, now: float | None) -> float | None:
    return None if start is None or now is None else now - start


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    load_start = load_average()
    with tempfile.TemporaryDirectory(prefix="mcphost-bench-prompt-") as tmp:
        root = Path(tmp)
        boxes = {mode: Sandbox(root / mode) for mode in MODES}
        for mode, box in boxes.items():
            box.root.mkdir()
            box.write_config(config_text(box, mode))
        async with AsyncExitStack() as stack:
            sides = [Side(mode, await stack.enter_async_context(daemon(boxes[mode]))) for mode in MODES]
            ask, allow = sides
            # The same editor on both daemons, so both pay for the activity and status notifications it is sent;
            # the one on the allow daemon is never prompted. The difference is the prompt alone.
            editors: dict[str, EditorProcess] = {}
            for mode, box in boxes.items():
                info = json.loads(next((box.root / "run").glob("daemon-*.json")).read_text(encoding="utf-8"))
                editors[mode] = await stack.enter_async_context(
                    editor_process(info["editor_socket"], root / f"editor-{mode}.stderr")
                )
            for side in sides:
                await first_call(side)
            # CPU time from here on: the measured calls, without the processes' start.
            cpu_start = {
                side.mode: (cpu_seconds(side.daemon.process.pid), cpu_seconds(editors[side.mode].process.pid))
                for side in sides
            }

            await sequential(sides, opts)

            throughput: dict[str, list[float]] = {mode: [] for mode in MODES}
            for index in range(opts.passes):
                for side in sides if index % 2 == 0 else list(reversed(sides)):
                    seconds = await concurrent(side, opts)
                    throughput[side.mode].append(opts.agents * opts.calls_per_agent / seconds)

            daemon_cpu = {
                side.mode: since(cpu_start[side.mode][0], cpu_seconds(side.daemon.process.pid)) for side in sides
            }
            counts = await anyio.to_thread.run_sync(editors["ask"].finish, cpu_start["ask"][1])
            prompted = sum(ask.calls.values())
            if counts["prompts"] != prompted or counts["cancelled"]:
                raise BenchFailure(
                    f"the editor saw {counts['prompts']} prompts ({counts['cancelled']} withdrawn) for {prompted} "
                    "prompted calls"
                )
            unprompted = await anyio.to_thread.run_sync(editors["allow"].finish, cpu_start["allow"][1])
            if unprompted["prompts"]:
                raise BenchFailure(f'the editor of the write = "allow" daemon was prompted {unprompted["prompts"]}x')
            waits, ask_durations = check_records(ask)
            _, allow_durations = check_records(allow)
            report: dict[str, Any] = {
                "machine": {**machine(), "load_average_start": load_start},
                "settings": {
                    "prompts": ask.calls["seq"],
                    "rounds": opts.rounds,
                    "warmup": opts.warmup,
                    "agents": opts.agents,
                    "calls_per_agent": opts.calls_per_agent,
                    "passes": opts.passes,
                },
                "editor_prompts": counts["prompts"],
                # Both timed phases: what each process spent (the ask side's editor also answered the prompts).
                "cpu_s": {
                    mode: {
                        "daemon": daemon_cpu[mode],
                        "editor": c["cpu_s"],
                        "calls": side.calls["seq"] + side.calls["conc"] + opts.warmup,
                    }
                    for mode, c, side in (("ask", counts, ask), ("allow", unprompted, allow))
                },
                "editor_notifications": {
                    mode: {"status": c["statuses"], "activity": c["activity"]}
                    for mode, c in (("ask", counts), ("allow", unprompted))
                },
            }
            seq_ask, seq_allow = summary(ask.latencies_ms["seq"]), summary(allow.latencies_ms["seq"])
            report["sequential"] = {
                "round_trip": summary(waits["seq"]),
                "daemon_ask": summary(ask_durations["seq"]),
                "daemon_allow": summary(allow_durations["seq"]),
                "call_ask": seq_ask,
                "call_allow": seq_allow,
                "added_median_ms": seq_ask["median_ms"] - seq_allow["median_ms"],
                "added_p99_ms": seq_ask["p99_ms"] - seq_allow["p99_ms"],
                "ratio_median": seq_ask["median_ms"] / seq_allow["median_ms"],
            }
            conc_ask, conc_allow = summary(ask.latencies_ms["conc"]), summary(allow.latencies_ms["conc"])
            tput_ask, tput_allow = statistics.fmean(throughput["ask"]), statistics.fmean(throughput["allow"])
            report["concurrent"] = {
                "round_trip": summary(waits["conc"]),
                "daemon_ask": summary(ask_durations["conc"]),
                "daemon_allow": summary(allow_durations["conc"]),
                "call_ask": conc_ask,
                "call_allow": conc_allow,
                "calls_per_s_ask": tput_ask,
                "calls_per_s_allow": tput_allow,
                "throughput_ratio": tput_ask / tput_allow,
                "ratio_median": conc_ask["median_ms"] / conc_allow["median_ms"],
            }
    report["machine"]["load_average_end"] = load_average()
    report["wall_s"] = time.perf_counter() - started
    return report


def render(report: dict[str, Any]) -> str:
    m, s = report["machine"], report["settings"]
    seq, conc = report["sequential"], report["concurrent"]
    rt = seq["round_trip"]

    def row(label: str, x: dict[str, float]) -> str:
        return (
            f"  {label:<44} {x['n']:>6} {x['median_ms']:>9.2f} {x['p99_ms']:>9.2f} {x['mean_ms']:>9.2f} "
            f"{x['max_ms']:>9.2f}"
        )

    header = f"  {'':<44} {'n':>6} {'median':>9} {'p99':>9} {'mean':>9} {'max':>9}"
    verdict = "PASS" if rt["median_ms"] < TARGET_MS else "MISS"
    verdict99 = "PASS" if rt["p99_ms"] < TARGET_MS else "MISS"
    lines = [
        f"mcphost prompt round trip: {m['cpus']} CPUs, CPython {m['python']}, {m['platform']}, "
        f"load average {m['load_average_start']:.2f} at start",
        'two daemons: permissions.write = "ask" (the editor answers allow/once at once) and "allow" (baseline); '
        "the same editor client attached to each over its socket, in its own process",
        f"agents: MCP SDK clients over streamable HTTP, one session each; {report['editor_prompts']} prompts "
        "answered, every record checked",
        "",
        f"(a) one agent, {s['prompts']} calls per daemon in {s['rounds']} interleaved rounds after "
        f"{s['warmup']} warm-up calls (ms)",
        header,
        row("prompt round trip (record decision.wait_ms)", rt),
        row("  in the daemon (record duration_ms), ask", seq["daemon_ask"]),
        row("  in the daemon (record duration_ms), allow", seq["daemon_allow"]),
        row('call_tool_write, write = "ask" (prompted)', seq["call_ask"]),
        row('call_tool_write, write = "allow" (baseline)', seq["call_allow"]),
        f"  added by the prompt: {seq['added_median_ms']:.2f} ms median ({seq['added_p99_ms']:.2f} ms at p99); "
        f"ask/allow latency = {seq['ratio_median']:.2f}x",
        "",
        f"(b) {s['agents']} agents at once, {s['calls_per_agent']} calls each, {s['passes']} pass(es) per daemon (ms)",
        header,
        row("prompt round trip (record decision.wait_ms)", conc["round_trip"]),
        row("  in the daemon (record duration_ms), ask", conc["daemon_ask"]),
        row("  in the daemon (record duration_ms), allow", conc["daemon_allow"]),
        row('call_tool_write, write = "ask" (prompted)', conc["call_ask"]),
        row('call_tool_write, write = "allow" (baseline)', conc["call_allow"]),
        f"  throughput: ask {conc['calls_per_s_ask']:.0f} calls/s, allow {conc['calls_per_s_allow']:.0f} calls/s; "
        f"ask/allow = {conc['throughput_ratio']:.2f}; latency ask/allow = {conc['ratio_median']:.2f}x",
        "",
        "CPU seconds over (a) and (b) (Linux /proc), and the notifications each editor received in the whole run",
        *cpu_lines(report),
        "",
        "target (information only)",
        f"  {verdict}  prompt round trip under {TARGET_MS:.0f} ms, median ({rt['median_ms']:.2f} ms)",
        f"  {verdict99}  the same at p99 ({rt['p99_ms']:.2f} ms)",
        "",
        f"wall time {report['wall_s']:.0f} s; load average {m['load_average_end']:.2f} at end",
    ]
    return "\n".join(lines) + "\n"


def cpu_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for mode in MODES:
        c, n = report["cpu_s"][mode], report["editor_notifications"][mode]
        daemon_cpu = (
            "n/a" if c["daemon"] is None else f"{c['daemon']:.1f} s ({c['daemon'] / c['calls'] * 1000:.2f} ms/call)"
        )
        editor_cpu = "n/a" if c["editor"] is None else f"{c['editor']:.1f} s"
        lines.append(
            f"  {mode:<6} {c['calls']} calls: daemon {daemon_cpu}, editor {editor_cpu}; editor got "
            f"{n['status']} status and {n['activity']} activity notifications"
        )
    return lines


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--prompts", type=int, default=300, help="(a) timed calls per daemon (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="(a) interleaved rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=30, help="(a) untimed calls per daemon first (default 30)")
    parser.add_argument("--agents", type=int, default=100, help="(b) concurrent agents (default 100)")
    parser.add_argument("--calls-per-agent", type=int, default=10, help="(b) calls each agent makes (default 10)")
    parser.add_argument("--passes", type=int, default=2, help="(b) passes per daemon, alternating (default 2)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 60 prompts, 100 agents x 2 calls, 1 pass")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--editor", metavar="SOCKET", help=argparse.SUPPRESS)  # the editor process's entry point
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.prompts, opts.rounds, opts.warmup, opts.calls_per_agent, opts.passes = 60, 2, 10, 2, 1
    if min(opts.prompts, opts.rounds, opts.agents, opts.calls_per_agent, opts.passes) < 1 or opts.warmup < 0:
        parser.error("counts must be at least 1 (--warmup at least 0)")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_cli(argv)
    if opts.editor:
        anyio.run(run_editor, opts.editor)
        return 0
    failure: BaseException | None = None
    try:
        report = anyio.run(run, opts)
    except* BenchFailure as group:  # raised in an agent's task, it arrives inside a task group's exception group
        failure = group.exceptions[0]
    if failure is not None:
        return failed("bench_prompt_roundtrip", failure)
    emit(report, opts.json, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
