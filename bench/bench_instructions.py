"""What each path's processes execute per call, counted in instructions by valgrind's callgrind: a figure that other
work on the machine does not move, where a latency moves by a tenth from one run to the next.

bench_paths times the paths; on two shared cores its ratios wander more than most changes to the code move them.
This counts the user-space instructions each process of a path runs per call (the kernel's work, the disk's and
the scheduler's are not in it), beside two baselines counted the same way in the same run: the upstream itself
(tests/servers/probe.py, a small Python MCP server, its work for one call) and the floor (bench/floor_relay.py, a
line relay that only appends and fdatasyncs a record per answer). The same read call, upstream, config and plain
client as bench_paths; PYTHONHASHSEED=0, and each figure the median of blocks of 20 calls, so that what runs by the
clock (a tool list read again every 5 s) does not weigh on it: a run repeats to within a percent or so.

    python -m bench.bench_instructions [--paths in-process,relay,relay-sockets,http] [--calls 300] [--json]

Needs valgrind (`callgrind_control` beside it). Under callgrind a process runs some 50 times slower: mcphost's
start takes tens of seconds, a run a few minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import bench_paths as paths
from bench.common import BenchFailure, machine, run_bench

MCPHOST_PATHS = ("in-process", "relay", "relay-sockets", "http")
WARMUP = 30
# Calls are counted in blocks of this many, and each path's figure is the median block: what runs by the clock (a
# tool list read again every 5 s, a second's timestamp text) lands in a few blocks under callgrind's slow clock, far
# more often per call than at full speed, and would otherwise weigh on every count.
BLOCK = 20
START_TIMEOUT_S = 600.0  # mcphost's start under callgrind
DUMP_TIMEOUT_S = 120.0


class Counted:
    """Processes run under callgrind, their dumps in one directory: counters zeroed after the warm-up, dumped after
    the timed calls, the instructions between read off the dump."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def wrap(self, argv: list[str]) -> list[str]:
        return ["valgrind", "--tool=callgrind", "--quiet", f"--callgrind-out-file={self.directory}/cg.%p", *argv]

    def zero(self, pid: int) -> None:
        _control("-z", pid)

    def instructions(self, pid: int) -> int:
        """The instructions `pid` ran since it was zeroed: it is told to dump, and the dump is read once written."""
        before = set(self.directory.glob(f"cg.{pid}.*"))
        _control("-d", pid)
        deadline = time.monotonic() + DUMP_TIMEOUT_S
        while time.monotonic() < deadline:
            for dump in set(self.directory.glob(f"cg.{pid}.*")) - before:
                total = _totals(dump)
                if total is not None:
                    return total
            time.sleep(0.05)
        raise BenchFailure(f"callgrind wrote no dump for process {pid}")


def _control(flag: str, pid: int) -> None:
    done = subprocess.run(
        ["callgrind_control", flag, str(pid)], capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise BenchFailure(f"callgrind_control {flag} {pid} failed: {done.stdout.strip()} {done.stderr.strip()}")


def _totals(dump: Path) -> int | None:
    """The dump's total instruction count, once its last line is written."""
    try:
        text = dump.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    return None


def _call(rpc: paths.Rpc, tool: str, args: dict[str, Any]) -> None:
    text, is_error = rpc.call_tool(tool, args)
    if is_error or text != paths.EXPECTED_TEXT:
        raise BenchFailure(f"a call failed: is_error={is_error}, text={text!r}")


def measure(
    key: str, opts: argparse.Namespace, box: paths.Sandbox, stack: ExitStack, counted: Counted
) -> dict[str, Any]:
    """Instructions per call of the processes of path `key`: {process: count}."""
    valgrind = counted.wrap([sys.executable, "-m", "mcphost"])
    urls: dict[str, tuple[str, dict[str, str]]] = {}
    watched: dict[str, int] = {}
    if key in ("relay", "relay-sockets", "http"):
        daemon = paths.start_daemon(box, stack, mcphost=valgrind)
        urls["http"] = (daemon.url, daemon.headers)
        watched["daemon"] = daemon.process.pid
    rpc: paths.Rpc
    if key in ("direct", "floor"):
        argv = [sys.executable, str(paths.PROBE)] if key == "direct" else paths.floor_argv(box, fsync=True)
        stdio = paths.StdioRpc(counted.wrap(argv), dict(os.environ), stack.enter_context(box.stderr_file(key)))
        stack.callback(stdio.close)
        stdio.initialize()
        watched["upstream" if key == "direct" else "floor"] = stdio.process.pid
        rpc = stdio
    else:
        rpc, _ = paths.open_plain(key, box, stack, urls, mcphost=valgrind)
        if isinstance(rpc, paths.StdioRpc):
            watched["mcphost" if key == "in-process" else "relay"] = rpc.process.pid
    direct = key in ("direct", "floor")
    tool, args = (paths.DIRECT_TOOL, paths.DIRECT_ARGS) if direct else (paths.THROUGH_TOOL, paths.THROUGH_ARGS)
    for _ in range(WARMUP):
        _call(rpc, tool, args)
    for pid in watched.values():
        counted.zero(pid)
    blocks: dict[str, list[float]] = {name: [] for name in watched}
    for _ in range(max(1, opts.calls // BLOCK)):
        for _ in range(BLOCK):
            _call(rpc, tool, args)
        for name, pid in watched.items():  # a dump holds what ran since the one before
            blocks[name].append(counted.instructions(pid) / BLOCK)
    return {name: statistics.median(counts) for name, counts in blocks.items()}


def run(opts: argparse.Namespace) -> dict[str, Any]:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise BenchFailure("valgrind is not installed (callgrind counts the instructions)")
    paths.START_TIMEOUT_S = START_TIMEOUT_S
    report: dict[str, Any] = {"machine": machine(), "calls": opts.calls, "paths": {}}
    keys = ["direct", "floor", *opts.paths]
    os.environ["PYTHONHASHSEED"] = "0"  # what mcphost and the servers it starts hash, the same every run
    for key in keys:
        print(f"bench_instructions: {key} under callgrind", file=sys.stderr, flush=True)
        with ExitStack() as stack:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            box = paths.Sandbox(root)
            box.prepare(True)
            counted = Counted(root)
            report["paths"][key] = measure(key, opts, box, stack, counted)
    return report


def render(report: dict[str, Any]) -> str:
    found = report["paths"]
    upstream = found["direct"]["upstream"]
    floor = found["floor"]["floor"]
    m = report["machine"]
    lines = [
        f"bench_instructions: {m['cpus']} CPUs, Python {m['python']}; user-space instructions per call (thousands), "
        f"the median of blocks of {BLOCK} calls ({report['calls']} calls after {WARMUP} warm-up calls), counted by "
        "callgrind",
        "",
        "| path | process | k instructions/call | vs the floor | vs the upstream's own |",
        "|---|---|---:|---:|---:|",
        f"| direct stdio | the upstream (probe.py) | {upstream / 1e3:.0f} | - | 1.00x |",
        f"| floor: line relay + fdatasync | the relay | {floor / 1e3:.0f} | 1.00x | {floor / upstream:.2f}x |",
    ]
    for key in MCPHOST_PATHS:
        for process, count in found.get(key, {}).items():
            lines.append(
                f"| {paths.LABELS[key].format(version='')} | {process} | {count / 1e3:.0f} | {count / floor:.2f}x | "
                f"{count / upstream:.2f}x |"
            )
    return "\n".join(lines)


def parse_cli(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", default=",".join(MCPHOST_PATHS), help="mcphost paths, comma-separated")
    parser.add_argument("--calls", type=int, default=300, help="counted calls per path (after the warm-up)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    opts = parser.parse_args(argv)
    opts.paths = [p for p in opts.paths.split(",") if p]
    unknown = set(opts.paths) - set(MCPHOST_PATHS)
    if unknown:
        parser.error(f"unknown paths: {', '.join(sorted(unknown))} (choose from {', '.join(MCPHOST_PATHS)})")
    return opts


def main(argv: list[str] | None = None) -> int:
    return run_bench("bench_instructions", argv, parse_cli, run, render)


if __name__ == "__main__":
    sys.exit(main())
