"""Where a call's time goes on each mcphost path: the median of each stretch between two points of its way, measured
inside the processes, beside the direct stdio call.

bench_paths says how long each path takes; this says what the time is made of, so that work on speed goes where the
time is. mcphost runs under bench/segment_probes.py, which stamps CLOCK_MONOTONIC at each point (one clock for every
process, so the client's, the relay's and the daemon's stamps line up); the client stamps a call's start and end.
The same read call, upstream, config and plain client as bench_paths. The probes cost about a microsecond each: the
p50 with probes is shown beside the stretches, and bench_paths remains the measure of the paths themselves.

    python -m bench.bench_segments [--paths in-process,relay,relay-sockets,http] [--calls 1000] [--rounds 5]
        [--payload BYTES [--payload-shape code|json]] [--json]
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import bench_paths as paths
from bench.common import BenchFailure, machine, run_bench

PROBES = Path(__file__).resolve().parent / "segment_probes.py"
MCPHOST_PATHS = ("in-process", "relay", "relay-sockets", "http")
LABELS = {
    "in-process": "mcp --in-process",
    "relay": "mcp -> serve (relay)",
    "relay-sockets": "the relay on socket pairs",
    "http": "serve (HTTP)",
}

# Each path's points in the order a call passes them: (process, stamp, what the stretch ending there is spent on).
# "agent" is the client here.
Point = tuple[str, str, str]
_START: Point = ("agent", "start", "")
_LINE: Point = ("mcphost", "line", "the agent's line read by mcphost")
_RELAYED: list[Point] = [
    ("relay", "line", "the agent's line read by the relay"),
    ("relay", "passed", "the relay passes it on"),
    ("mcphost", "line", "the daemon reads it off the relay's socket"),
]
_CORE: list[Point] = [
    ("mcphost", "call", "from the line to the gateway's call"),
    ("mcphost", "checked", "the record begun, the arguments checked"),
    ("mcphost", "resolving", "intent, name and arguments read and captured"),
    ("mcphost", "resolved", "the upstream's tool found, its definition fresh"),
    ("mcphost", "authorizing", "annotations checked, the call's facts gathered"),
    ("mcphost", "authorized", "the policy's decision"),
    ("mcphost", "forward", "on to the upstream's lane"),
    ("mcphost", "answer", "the upstream's round trip"),
    ("mcphost", "resumed", "the call resumed with the answer"),
    ("mcphost", "record", "the answer checked, the outcome and its record made"),
    ("mcphost", "fsync", "the record encoded and appended"),
    ("mcphost", "synced", "fdatasync"),
    ("mcphost", "reply", "the result made and written"),
    ("agent", "end", "until the agent holds the result"),
]
# A relay that handed the agent's stdin to its daemon stamps nothing: the daemon reads the agent's line itself.
_HANDED: Point = ("mcphost", "line", "the agent's line read by the daemon (the relay handed it stdin)")
_HTTP_IN: list[Point] = [
    ("mcphost", "recv", "HTTP: the request's bytes reach uvicorn"),
    ("mcphost", "claimed", "HTTP: uvicorn parses them, the agents' door claims the call"),
    ("mcphost", "line", "HTTP: the call's task starts"),
]
# Over HTTP, a claimed call's answer is written in one piece, head and body.
_HTTP_OUT: list[Point] = [
    ("mcphost", "reply", "HTTP: the result made"),
    ("mcphost", "body", "HTTP: its head made"),
    ("agent", "end", "HTTP: the response written, until the agent holds the result"),
]
ROUTES: dict[str, list[Point]] = {
    "in-process": [_START, _LINE, *_CORE],
    "relay": [_START, *_RELAYED, *_CORE],
    "relay-sockets": [_START, *_RELAYED, *_CORE],
    "http": [_START, *_HTTP_IN, *_CORE[:-2], *_HTTP_OUT],
}
HANDED_ROUTE: list[Point] = [_START, _HANDED, *_CORE]
# The table's rows, in the order a call meets them.
ORDER = [label for _, _, label in [*_RELAYED, _HANDED, _LINE, *_HTTP_IN, *_CORE, *_HTTP_OUT]]


def read_stamps(directory: Path) -> dict[int, list[tuple[int, str]]]:
    stamps: dict[int, list[tuple[int, str]]] = {}
    for file in directory.glob("stamps-*.txt"):
        pid = int(file.stem.removeprefix("stamps-"))
        pairs = (line.split(" ", 1) for line in file.read_text(encoding="ascii").splitlines() if line)
        stamps[pid] = sorted((int(ns), name) for ns, name in pairs)
    return stamps


def stretches(
    route: list[Point], calls: list[tuple[int, int]], stamps: dict[str, list[tuple[int, str]]]
) -> tuple[list[list[int]], int]:
    """For each stretch of `route`, its length (ns) in every call whose every point was found; and how many were."""
    found: list[list[int]] = [[] for _ in route[1:]]
    whole = 0
    for start, end in calls:
        window = {who: _between(list_, start, end) for who, list_ in stamps.items()}
        times: list[int] = []
        for who, name, _ in route:
            if who == "agent":
                times.append(start if name == "start" else end)
                continue
            # The first stamp of that name in that process after the previous point, within the call.
            after = times[-1]
            at = next((ns for ns, n in window.get(who, []) if n == name and ns >= after), None)
            if at is None:
                break
            times.append(at)
        if len(times) != len(route):
            continue
        whole += 1
        for i in range(len(route) - 1):
            found[i].append(times[i + 1] - times[i])
    return found, whole


def _between(stamps: list[tuple[int, str]], start: int, end: int) -> list[tuple[int, str]]:
    low = bisect.bisect_left(stamps, (start, ""))
    high = bisect.bisect_right(stamps, (end, "\U0010ffff"))
    return stamps[low:high]


def _call(key: str) -> tuple[str, dict[str, Any]]:
    return (paths.DIRECT_TOOL, paths.DIRECT_ARGS) if key == "direct" else (paths.THROUGH_TOOL, paths.THROUGH_ARGS)


def run(opts: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": machine(), "calls": opts.calls, "rounds": opts.rounds, "paths": {}}
    if opts.payload:
        paths.use_payload(opts.payload, opts.payload_shape)
        report["payload"] = {"bytes": opts.payload, "shape": opts.payload_shape}
    with tempfile.TemporaryDirectory(prefix="mcphost-segments-") as tmp:
        root = Path(tmp)
        out = root / "stamps"
        out.mkdir()
        box = paths.Sandbox(root / "box")
        box.root.mkdir()
        box.prepare(True)
        probed = [sys.executable, str(PROBES), str(out)]
        timed: dict[str, list[tuple[int, int]]] = {key: [] for key in ["direct", *opts.paths]}
        roles: dict[str, dict[str, int]] = {}
        with ExitStack() as stack:
            urls, _versions, _unavailable, pids = paths.start_servers(opts.paths, box, stack, probed)
            clients: dict[str, paths.Rpc] = {}
            for key in timed:
                rpc, _ = paths.open_plain(key, box, stack, urls, mcphost=probed)
                clients[key] = rpc
                spawned = rpc.process.pid if isinstance(rpc, paths.StdioRpc) else None
                if key == "in-process" and spawned is not None:
                    roles[key] = {"mcphost": spawned}
                elif key in ("relay", "relay-sockets") and spawned is not None:
                    roles[key] = {"relay": spawned, "mcphost": pids[key]}
                elif key == "http":
                    roles[key] = {"mcphost": pids["http"]}
                for _ in range(opts.warmup):
                    rpc.call_tool(*_call(key))
            per_round = max(1, opts.calls // opts.rounds)
            keys = list(timed)
            for index in range(opts.rounds):
                shift = index % len(keys)
                for key in keys[shift:] + keys[:shift]:
                    rpc = clients[key]
                    for _ in range(per_round):
                        start = time.monotonic_ns()
                        text, is_error = rpc.call_tool(*_call(key))
                        timed[key].append((start, time.monotonic_ns()))
                        if is_error or text != paths.EXPECTED_TEXT:
                            raise BenchFailure(f"{key}: unexpected answer {text!r}")
        # Every process has ended and written its stamps.
        stamps = read_stamps(out)
    report["direct_p50_us"] = statistics.median(e - s for s, e in timed["direct"]) / 1000
    for key in opts.paths:
        by_role = {role: stamps.get(pid, []) for role, pid in roles[key].items()}
        route = HANDED_ROUTE if key in ("relay", "relay-sockets") and not by_role.get("relay") else ROUTES[key]
        found, whole = stretches(route, timed[key], by_role)
        report["paths"][key] = {
            "p50_us": statistics.median(e - s for s, e in timed[key]) / 1000,
            "calls_traced": whole,
            "stretches": [
                {"name": route[i + 1][2], "median_us": statistics.median(v) / 1000 if v else None}
                for i, v in enumerate(found)
            ],
        }
    return report


def render(report: dict[str, Any]) -> str:
    keys = list(report["paths"])
    lines = [
        f"bench_segments: {report['machine']['cpus']} CPUs, Python {report['machine']['python']}; "
        f"{report['calls']} calls per path in {report['rounds']} interleaved rounds, median of each stretch (µs)",
        f"direct stdio p50, no mcphost: {report['direct_p50_us']:.0f} µs",
        "",
    ]
    if "payload" in report:
        carried = report["payload"]
        lines[-1:-1] = [f"each call carries {carried['bytes']} bytes of {carried['shape']} text, echoed back twice"]
    present = {s["name"] for key in keys for s in report["paths"][key]["stretches"]}
    names = [name for name in ORDER if name in present]
    header = "| stretch | " + " | ".join(LABELS[k] for k in keys) + " |"
    lines += [header, "|---|" + "---:|" * len(keys)]
    for name in names:
        cells = []
        for key in keys:
            value = next((s["median_us"] for s in report["paths"][key]["stretches"] if s["name"] == name), None)
            cells.append("" if value is None else f"{value:.0f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    sums = [sum(s["median_us"] or 0 for s in report["paths"][k]["stretches"]) for k in keys]
    lines.append("| sum of the medians | " + " | ".join(f"{v:.0f}" for v in sums) + " |")
    lines.append("| p50 with probes | " + " | ".join(f"{report['paths'][k]['p50_us']:.0f}" for k in keys) + " |")
    lines.append("| calls traced | " + " | ".join(str(report["paths"][k]["calls_traced"]) for k in keys) + " |")
    return "\n".join(lines) + "\n"


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--paths", default=",".join(MCPHOST_PATHS), help=f"comma-separated subset of {','.join(MCPHOST_PATHS)}"
    )
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per path (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed calls per path first (default 100)")
    parser.add_argument(
        "--payload",
        type=int,
        default=0,
        metavar="BYTES",
        help="each call carries this many bytes of text, echoed in its answer, as bench_paths' --payload",
    )
    parser.add_argument(
        "--payload-shape", choices=paths.PAYLOAD_SHAPES, default="code", help="as bench_paths' --payload-shape"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    opts = parser.parse_args(argv)
    chosen = [p.strip() for p in opts.paths.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in MCPHOST_PATHS]
    if unknown or not chosen:
        parser.error(f"--paths: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(MCPHOST_PATHS)}")
    if opts.calls < 1 or opts.rounds < 1 or opts.warmup < 0:
        parser.error("--calls and --rounds must be at least 1, --warmup at least 0")
    if not 0 <= opts.payload <= 1 << 20:
        parser.error("--payload: from 0 to 1048576 bytes")
    opts.paths = [p for p in MCPHOST_PATHS if p in chosen]
    return opts


def main(argv: list[str] | None = None) -> int:
    return run_bench("bench_segments", argv, parse_cli, run, render)


if __name__ == "__main__":
    sys.exit(main())
