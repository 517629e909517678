"""What a person waits for at the prompt: the wall time of mcphost's CLI commands with a daemon running, and a full
scan of a large activity log against `grep -c` on the same file. Run from the repo root:

    python -m bench.bench_cli [--quick] [--runs 5] [--records 1000000] [--json]

Part 1 starts `mcphost serve` (probe upstream, sandboxed like every bench here) over an activity log of 10,000
generated records, then times each command as a subprocess with stdout to a file, every command once per round in
rotated order, and `python -c pass` in the same rounds as the baseline (among them `call` and `tools` starting their
own upstream, and `mcphost hook` as Claude Code runs it before each of the agent's own tool uses, with and without a
daemon to decide); in the same rounds, what an agent waits for
when it starts its MCP server: the spawn of `mcphost mcp` (relayed to the daemon, and `--in-process`) to its answer to
`initialize`, against the same for probe.py, an MCP server on the Python SDK, spawned directly; and a daemon starting
(a config of its own), to its discovery file and to its upstream connected. Part 2 generates a
log of a million records (`--quick`: 100,000) with bench_activity_log's generator and times `activity list
--intent-type destructive --limit 0` (text and `-o json`) against `grep -c destructive`. Every run must exit 0 and
the first run of each command's output is checked, or the bench exits 1; the timings themselves are information.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.bench_activity_log import NEEDLE, Pair, filesystem_of, generate_log, time_pair
from bench.bench_paths import PROBE, Sandbox, mcphost_command, start_daemon
from bench.common import BenchFailure, machine, run_bench, terminate

REPO = Path(__file__).resolve().parent.parent

READ_BOUND_MS = 300.0  # status, grants list, config show, log tail, activity list
CALL_BOUND_MS = 500.0  # call, tools
SCAN_TARGET_RATIO = 3.0  # activity list --limit 0 against grep -c on the same file
SEED_RECORDS = 10_000
# What an agent sends first to the MCP server it has just spawned.
INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench-cli", "version": "1"},
            },
        }
    ).encode()
    + b"\n"
)
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
SPAWN_TIMEOUT_S = 60.0


@dataclass
class Command:
    label: str
    argv: list[str]
    bound_ms: float | None
    check: Callable[[str, str], str | None]  # (stdout, stderr) -> what is wrong, or None
    stdin: bytes = b""


# What Claude Code sends its PreToolUse hook before the agent runs `ls -la` (a read, by the [hooks] defaults).
HOOK_PAYLOAD = json.dumps(
    {
        "session_id": "bench-cli",
        "transcript_path": "/dev/null",
        "cwd": "/",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls -la"},
    }
).encode()


def _lines(want: int, what: str) -> Callable[[str, str], str | None]:
    def check(out: str, _: str) -> str | None:
        n = len(out.splitlines())
        return None if n == want else f"{what}: printed {n} lines, expected {want}"

    return check


def commands(mcphost: list[str], daemon_pid: int, no_daemon_config: Path) -> list[Command]:
    """The commands timed, with a daemon running for the default config; `no_daemon_config` is one no daemon serves."""

    def version(out: str, _: str) -> str | None:
        return None if out.startswith("mcphost ") else f"--version printed {out[:100]!r}"

    def status(out: str, _: str) -> str | None:
        return None if f"daemon {daemon_pid}" in out else f"status does not name daemon {daemon_pid}: {out[:300]!r}"

    def config(out: str, _: str) -> str | None:
        return None if json.loads(out).get("exists") is True else f"config show: {out[:300]!r}"

    def call(out: str, _: str) -> str | None:
        return None if out.strip() == "read_notes: x" else f"call printed {out[:300]!r}, expected 'read_notes: x'"

    def tools(out: str, _: str) -> str | None:
        return None if "probe:read_notes" in out else f"tools notes did not find probe:read_notes: {out[:300]!r}"

    def hook(out: str, _: str) -> str | None:
        decision = json.loads(out).get("hookSpecificOutput", {}).get("permissionDecision")
        return None if decision == "allow" else f"the hook did not allow `ls -la`: {out[:300]!r}"

    return [
        Command("python -c pass (baseline)", [sys.executable, "-c", "pass"], None, lambda out, err: None),
        Command("mcphost --version", [*mcphost, "--version"], None, version),
        Command("mcphost status", [*mcphost, "status"], READ_BOUND_MS, status),
        Command("mcphost grants list", [*mcphost, "grants", "list"], READ_BOUND_MS, lambda out, err: None),
        Command("mcphost config show -o json", [*mcphost, "config", "show", "-o", "json"], READ_BOUND_MS, config),
        Command("mcphost log tail -n 20", [*mcphost, "log", "tail", "-n", "20"], READ_BOUND_MS, _lines(20, "log tail")),
        # A header and the newest 50.
        Command("mcphost activity list", [*mcphost, "activity", "list"], READ_BOUND_MS, _lines(51, "activity list")),
        Command(
            'mcphost call tool-read probe:read_notes --args \'{"text":"x"}\'',
            [*mcphost, "call", "tool-read", "probe:read_notes", "--args", '{"text":"x"}'],
            CALL_BOUND_MS,
            call,
        ),
        Command("mcphost tools notes", [*mcphost, "tools", "notes"], CALL_BOUND_MS, tools),
        # No daemon asked: the command starts the upstream itself (no bound; what a person without a daemon waits).
        Command(
            "mcphost call tool-read --in-process probe:read_notes ...",
            [*mcphost, "call", "tool-read", "--in-process", "probe:read_notes", "--args", '{"text":"x"}'],
            None,
            call,
        ),
        Command("mcphost tools notes --in-process", [*mcphost, "tools", "notes", "--in-process"], None, tools),
        # An agent's hook, run before each of its own tool uses (Claude Code's PreToolUse): the daemon decides, or,
        # with none running for the config, this process does (it loads the config and writes the record itself).
        Command(
            "mcphost hook (Claude Code PreToolUse, Bash ls -la)",
            [*mcphost, "hook", "--agent", "claude-code"],
            None,
            hook,
            HOOK_PAYLOAD,
        ),
        Command(
            "mcphost hook, no daemon for its config",
            [*mcphost, "hook", "--agent", "claude-code", "--config", str(no_daemon_config)],
            None,
            hook,
            HOOK_PAYLOAD,
        ),
    ]


@dataclass
class Spawned:
    """An MCP server as an agent starts it: its command, the tool call it is sent first, and what its stderr must
    show."""

    label: str
    argv: list[str]
    call: dict[str, Any]  # tools/call params
    check: Callable[[str], str | None]


def servers(mcphost: list[str]) -> list[Spawned]:
    direct = {"name": "read_notes", "arguments": {"text": "x"}}
    through = {
        "name": "call_tool_read",
        "arguments": {"name": "probe:read_notes", "args": {"text": "x"}, "intent": {"operation_type": "read"}},
    }

    def relayed(err: str) -> str | None:
        return None if "relaying to" in err else f"mcphost mcp did not relay to the daemon: {err[-500:]!r}"

    def anything(_: str) -> str | None:
        return None

    return [
        Spawned(
            "probe.py: an MCP server on the Python SDK, spawned directly",
            [sys.executable, str(PROBE)],
            direct,
            anything,
        ),
        Spawned("mcphost mcp (a daemon running: relayed to it)", [*mcphost, "mcp"], through, relayed),
        Spawned(
            "mcphost mcp --in-process (the gateway in that process)",
            [*mcphost, "mcp", "--in-process"],
            through,
            anything,
        ),
    ]


def first_answers(server: Spawned, env: dict[str, str], root: Path) -> tuple[float, float]:
    """Wall seconds from spawning an MCP server on pipes, as an agent does, to its answer to `initialize`, and to its
    answer to a first tool call (`read_notes: x`): the handshake and the call are sent at once, as an agent that does
    not wait for the server to start sends them. The server is then sent away by closing its stdin."""
    opening = (
        INITIALIZE + INITIALIZED + _line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": server.call})
    )
    answers: dict[Any, tuple[float, dict[str, Any]]] = {}
    with (root / "stderr").open("wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            server.argv, env=env, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
        assert proc.stdin is not None and proc.stdout is not None
        timer = threading.Timer(SPAWN_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            proc.stdin.write(opening)
            proc.stdin.flush()
            while 2 not in answers:
                line = proc.stdout.readline()
                if not line:
                    break
                message = json.loads(line)
                # Responses only: a request of the server's own (a ping, say) may carry the same id.
                if isinstance(message, dict) and "id" in message and "method" not in message:
                    answers[message["id"]] = (time.perf_counter() - start, message)
            proc.stdin.close()
            proc.wait(SPAWN_TIMEOUT_S)
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    stderr = (root / "stderr").read_text(encoding="utf-8", errors="replace")
    initialized, called = answers.get(1), answers.get(2)
    if initialized is None or "result" not in initialized[1]:
        raise BenchFailure(f"{server.label}: no answer to initialize ({initialized}): {stderr[-1500:].strip()}")
    content = called[1].get("result", {}).get("content", []) if called is not None else []
    if called is None or [c.get("text") for c in content] != ["read_notes: x"]:
        raise BenchFailure(f"{server.label}: the first call got {called}: {stderr[-1500:].strip()}")
    wrong = server.check(stderr)
    if wrong is not None:
        raise BenchFailure(wrong)
    return initialized[0], called[0]


def daemon_start(box: Sandbox) -> tuple[float, float]:
    """Wall seconds from spawning `mcphost serve --port 0` on `box` (a config of its own: one daemon per config file)
    to its discovery file (agents can connect) and to its upstream's `upstream_connected` record (a call can run).
    The daemon is then stopped; its log is removed first, so the record found is this start's."""
    box.activity_log.unlink(missing_ok=True)
    with (box.root / "daemon-start.stderr").open("wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*mcphost_command(), "serve", "--port", "0", "--config", str(box.config)],
            env=box.env(),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
        )
        discovery = box.runtime / f"daemon-{proc.pid}.json"
        listening = connected = None
        try:
            while listening is None or connected is None:
                now = time.perf_counter() - start
                if listening is None and discovery.exists():
                    listening = now
                if (
                    connected is None
                    and box.activity_log.exists()
                    and b'"upstream_connected"' in (box.activity_log.read_bytes())
                ):
                    connected = now
                if proc.poll() is not None or now > SPAWN_TIMEOUT_S:
                    tail = (box.root / "daemon-start.stderr").read_text(encoding="utf-8", errors="replace")
                    raise BenchFailure(f"mcphost serve did not start and connect its upstream: {tail[-1500:].strip()}")
                time.sleep(0.002)
        finally:
            terminate(proc)
    assert listening is not None and connected is not None
    return listening, connected


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def run_timed(argv: list[str], env: dict[str, str], root: Path, stdin: bytes = b"") -> float:
    """Wall seconds of one run, stdout to a regular file (as a person's terminal would take it, without drawing),
    stdin from a file holding `stdin`."""
    (root / "stdin").write_bytes(stdin)
    with (root / "stdin").open("rb") as given, (root / "stdout").open("wb") as out, (root / "stderr").open("wb") as err:
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, cwd=REPO, stdin=given, stdout=out, stderr=err, check=False)
        elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (root / "stderr").read_text(encoding="utf-8", errors="replace")[-1500:].strip()
        raise BenchFailure(f"{' '.join(argv)} exited {proc.returncode}: {tail}")
    return elapsed


def first_run(command: Command, env: dict[str, str]) -> tuple[str, str]:
    proc = subprocess.run(
        command.argv, env=env, cwd=REPO, input=command.stdin.decode(), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise BenchFailure(f"{command.label} exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
    wrong = command.check(proc.stdout, proc.stderr)
    if wrong is not None:
        raise BenchFailure(wrong)
    return proc.stdout, proc.stderr


def measure_startup(box: Sandbox, runs: int, seed_records: int) -> dict[str, Any]:
    # A log like a user's after a while, so `log tail` and `activity list` have something to read.
    generate_log(box.activity_log, seed_records)
    with ExitStack() as stack:
        daemon = start_daemon(box, stack)
        env = box.env()
        second = Sandbox(box.root / "second-daemon")
        second.root.mkdir()
        second.prepare()
        cmds = commands(mcphost_command(), daemon.process.pid, second.config)
        notes: dict[str, str] = {}
        for command in cmds:
            # Also warms the page cache, and lets the daemon's upstream finish starting before `call` is timed.
            _, err = first_run(command, env)
            if command.argv[len(mcphost_command()) : len(mcphost_command()) + 1] == ["call"] and (
                "--in-process" not in command.argv
            ):
                notes["call"] = "through the daemon" if "through the daemon" in err else "in its own process"
        spawned = servers(mcphost_command())
        for server in spawned:
            first_answers(server, env, box.root)  # checked, and warms what it reads
        daemon_start(second)  # checked, and warms what it reads
        started: list[tuple[float, float]] = []
        samples: dict[str, list[float]] = {c.label: [] for c in cmds}
        opened: dict[str, list[tuple[float, float]]] = {server.label: [] for server in spawned}
        for index in range(runs):
            # Rotating the order spreads drift (frequency scaling, other load) over every command.
            shift = index % len(cmds)
            for command in cmds[shift:] + cmds[:shift]:
                samples[command.label].append(run_timed(command.argv, env, box.root, command.stdin))
            for server in spawned[index % len(spawned) :] + spawned[: index % len(spawned)]:
                opened[server.label].append(first_answers(server, env, box.root))
            started.append(daemon_start(second))
    base = statistics.median(samples[cmds[0].label]) * 1000
    direct = [statistics.median(s[i] for s in opened[spawned[0].label]) * 1000 for i in (0, 1)]
    first_answers_rows = []
    for server in spawned:
        ms = [statistics.median(s[i] for s in opened[server.label]) * 1000 for i in (0, 1)]
        first_answers_rows.append(
            {
                "server": server.label,
                "initialize_ms": ms[0],
                "first_call_ms": ms[1],
                "initialize_ratio": ms[0] / direct[0],
                "first_call_ratio": ms[1] / direct[1],
            }
        )
    rows = []
    for command in cmds:
        ms = statistics.median(samples[command.label]) * 1000
        rows.append(
            {
                "command": command.label,
                "ms": ms,
                "min_ms": min(samples[command.label]) * 1000,
                "max_ms": max(samples[command.label]) * 1000,
                "ratio": ms / base,
                "bound_ms": command.bound_ms,
                "met": None if command.bound_ms is None else ms < command.bound_ms,
            }
        )
    listening, connected = (statistics.median(s[i] for s in started) * 1000 for i in (0, 1))
    return {
        "runs": runs,
        "seed_records": seed_records,
        "rows": rows,
        "notes": notes,
        "first_answers": first_answers_rows,
        "daemon_start": {
            "listening_ms": listening,
            "upstream_connected_ms": connected,
            "listening_ratio": listening / direct[1],
            "upstream_connected_ratio": connected / direct[1],
        },
    }


def measure_scan(box: Sandbox, records: int, runs: int, slow_runs: int) -> dict[str, Any]:
    data = box.root / "big-data"
    log = generate_log(data / "activity.jsonl", records)
    env = {**box.env(), "MCPHOST_DATA_DIR": str(data)}
    mcphost = mcphost_command()
    destructive = log.by_intent.get("destructive", 0)

    def grep_check(grep_out: str) -> None:
        if int(grep_out.strip()) != log.needle_lines:
            raise BenchFailure(f"grep -c counted {grep_out.strip()} lines, expected {log.needle_lines}")

    def text_check(out: str, grep_out: str) -> None:
        rows = len(out.splitlines()) - 1  # a header, then one row per record
        if rows != destructive:
            raise BenchFailure(f"activity list --limit 0 printed {rows} rows, expected {destructive}")
        grep_check(grep_out)

    def json_check(out: str, grep_out: str) -> None:
        found = len(json.loads(out))
        if found != destructive:
            raise BenchFailure(f"activity list --limit 0 -o json gave {found} records, expected {destructive}")
        grep_check(grep_out)

    grep = ["grep", "-c", NEEDLE, str(log.path)]
    base = [*mcphost, "activity", "list", "--intent-type", "destructive", "--limit", "0"]
    pairs = [
        Pair("activity list --intent-type destructive --limit 0", base, "grep -c destructive", grep, text_check),
        Pair(
            "activity list --intent-type destructive --limit 0 -o json",
            [*base, "-o", "json"],
            "grep -c destructive",
            grep,
            json_check,
        ),
    ]
    # time_pair checks each command's exit code and first output, and times `mcphost --version` in the same rounds.
    timed = [time_pair(p, env, runs, slow_runs, [*mcphost, "--version"], box.root / "stdout") for p in pairs]
    for row in timed:
        row["met"] = row["ratio"] <= SCAN_TARGET_RATIO
    result = {
        "records": log.records,
        "bytes": log.bytes,
        "generate_s": log.seconds,
        "destructive": destructive,
        "needle_lines": log.needle_lines,
        "commands": timed,
    }
    log.path.unlink()  # most of a gigabyte
    return result


def run(opts: argparse.Namespace) -> dict[str, Any]:
    if shutil.which("grep") is None:
        raise BenchFailure("grep is not on PATH; it is the baseline")
    started = time.perf_counter()
    host = machine()
    with tempfile.TemporaryDirectory(prefix="mcphost-bench-cli-", dir=opts.dir) as tmp:
        box = Sandbox(Path(tmp).resolve())
        box.prepare()
        host["temp_fs"] = filesystem_of(box.root)
        startup = measure_startup(box, opts.runs, opts.seed_records)
        scan = measure_scan(box, opts.records, opts.runs, opts.slow_runs)
    return {
        "benchmark": "cli",
        "machine": host,
        "settings": {"runs": opts.runs, "slow_runs": opts.slow_runs, "records": opts.records},
        "startup": startup,
        "scan": scan,
        "wall_s": time.perf_counter() - started,
        "load_average_1m_end": os.getloadavg()[0],
    }


def render(report: dict[str, Any]) -> str:
    m, st, sc = report["machine"], report["startup"], report["scan"]
    lines = [
        f"mcphost CLI: {m['cpus']} CPUs, {m['implementation']} {m['python']}, {m['platform']}, "
        f"load average {m['load_average_1m']:.2f} at start; temp dir on {m['temp_fs']}",
        "",
        f"start-up, a daemon running (mcphost serve, probe upstream), activity log of {st['seed_records']:,} "
        "generated records plus the calls made;",
        f"wall ms per command: median of {st['runs']} runs (subprocess, stdout to a file), every command once per "
        "round, order rotated; ratio = ms / python -c pass",
        f"  {'command':<62} {'ms':>7} {'min':>7} {'max':>7} {'ratio':>7}   bound",
    ]
    for r in st["rows"]:
        bound = "" if r["bound_ms"] is None else f"< {r['bound_ms']:.0f} ms  {'PASS' if r['met'] else 'MISS'}"
        lines.append(
            f"  {r['command']:<62} {r['ms']:>7.0f} {r['min_ms']:>7.0f} {r['max_ms']:>7.0f} {r['ratio']:>6.1f}x   "
            f"{bound}".rstrip()
        )
    if "call" in st["notes"]:
        lines.append(f"  (the call went {st['notes']['call']})")
    lines += [
        "",
        "an agent starting its MCP server: wall ms from the spawn (pipes, as an agent spawns it) to the answers to",
        f"`initialize` and to a first tool call, sent at once; median of {st['runs']} runs in the same rounds;",
        "ratio = ms / the same for the SDK server spawned directly",
        f"  {'server':<62} {'initialize':>10} {'ratio':>7} {'1st call':>9} {'ratio':>7}",
    ]
    for r in st["first_answers"]:
        lines.append(
            f"  {r['server']:<62} {r['initialize_ms']:>10.0f} {r['initialize_ratio']:>6.2f}x "
            f"{r['first_call_ms']:>9.0f} {r['first_call_ratio']:>6.2f}x"
        )
    ds = st["daemon_start"]
    lines += [
        "",
        "a daemon starting (mcphost serve, a config of its own, the probe upstream): wall ms from the spawn,",
        f"median of {st['runs']} runs in the same rounds; ratio = ms / the SDK server's first call above",
        f"  {'listening for agents (its discovery file written)':<62} {ds['listening_ms']:>10.0f} "
        f"{ds['listening_ratio']:>6.2f}x",
        f"  {'its upstream connected (upstream_connected on record)':<62} {ds['upstream_connected_ms']:>10.0f} "
        f"{ds['upstream_connected_ratio']:>6.2f}x",
    ]
    lines += [
        "",
        f"full scan: {sc['records']:,} records, {sc['bytes'] / 1e6:.1f} MB (generated in {sc['generate_s']:.1f} s), "
        f"{sc['destructive']:,} destructive; lines containing {NEEDLE!r}: {sc['needle_lines']:,}",
        "wall ms, median of N runs with grep -c and mcphost --version in the same rounds; work = ms - --version; "
        "ratio = ms / grep -c",
        f"  {'command':<58} {'N':>2} {'ms':>7} {'work':>7} {'grep -c':>8} {'ratio':>7}   target",
    ]
    for c in sc["commands"]:
        lines.append(
            f"  {c['label']:<58} {c['runs']:>2} {c['ms']:>7.0f} {c['work_ms']:>7.0f} {c['baseline_ms']:>8.1f} "
            f"{c['ratio']:>6.1f}x   within {SCAN_TARGET_RATIO:g}x  {'PASS' if c['met'] else 'MISS'}"
        )
    bounded = [r for r in st["rows"] if r["bound_ms"] is not None]
    lines += [
        "",
        "targets (information only)",
        f"  {sum(1 for r in bounded if r['met'])} of {len(bounded)} commands within their bound "
        f"(reading commands < {READ_BOUND_MS:.0f} ms, call and tools < {CALL_BOUND_MS:.0f} ms); "
        f"{sum(1 for c in sc['commands'] if c['met'])} of {len(sc['commands'])} full scans within "
        f"{SCAN_TARGET_RATIO:g}x grep -c",
        "",
        f"wall time {report['wall_s']:.0f} s; load average {report['load_average_1m_end']:.2f} at end",
    ]
    return "\n".join(lines) + "\n"


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a log of 100,000 records and 3 runs: ~20 s")
    parser.add_argument("--runs", type=int, help="timed runs per command (default 5; --quick 3)")
    parser.add_argument("--slow-runs", type=int, default=3, help="runs for a scan whose first run took over 2 s")
    parser.add_argument("--records", type=int, help="records in the scanned log (default 1,000,000; --quick 100,000)")
    parser.add_argument("--seed-records", type=int, default=SEED_RECORDS, help="records in the daemon's log")
    parser.add_argument("--dir", help="make the temporary directory here")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    opts = parser.parse_args(argv)
    opts.runs = opts.runs if opts.runs is not None else (3 if opts.quick else 5)
    opts.records = opts.records if opts.records is not None else (100_000 if opts.quick else 1_000_000)
    if opts.runs < 1 or opts.slow_runs < 1 or opts.records < 1000 or opts.seed_records < 100:
        parser.error("--runs and --slow-runs at least 1, --records at least 1000, --seed-records at least 100")
    return opts


def main(argv: list[str] | None = None) -> int:
    return run_bench("bench_cli", argv, parse_cli, run, render)


if __name__ == "__main__":
    sys.exit(main())
