"""What every benchmark shares: the failure that voids a run, the machine it ran on, percentiles, the output."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


class BenchFailure(Exception):
    """The path under test does not do what the benchmark assumes; timing it would measure nothing."""


def terminate(process: subprocess.Popen[Any], grace_s: float = 20) -> None:
    """SIGTERM, then SIGKILL if it has not exited after `grace_s`; reaped either way."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        # Other work on the machine moves the absolute figures; the load says how much to trust them.
        "load_average_1m": os.getloadavg()[0],
    }


def cpu_ticks(stat: str | None = None) -> list[int] | None:
    """The machine's CPU time so far, in ticks, as the first line of /proc/stat counts it (user, nice, system, idle,
    iowait, irq, softirq, steal); None where there is no such file."""
    if stat is None:
        try:
            with Path("/proc/stat").open() as file:
                stat = file.readline()
        except OSError:
            return None
    fields = stat.split()
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    return [int(value) for value in fields[1:9]]


def steal_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the CPU time between two `cpu_ticks` that the hypervisor gave to other guests (steal): on a
    virtual machine, the one figure that says the host was busy. Several percent and a run's ratios read high: each
    wake-up of a process waits longer for its CPU, and a path of more processes and hops waits more often."""
    if before is None or after is None:
        return None
    spent = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(spent)
    return spent[7] / total if total > 0 else None


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest rank: always a value that was observed."""
    ordered = sorted(values)
    return float(ordered[max(1, math.ceil(fraction * len(ordered))) - 1])


def failed(name: str, failure: BaseException) -> int:
    print(f"{name}: FAILED: {failure}", file=sys.stderr)
    return 1


def emit(report: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], str]) -> None:
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        sys.stdout.write(render(report))


def run_bench(
    name: str,
    argv: list[str] | None,
    parse: Callable[[list[str] | None], Any],
    run: Callable[[Any], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """A benchmark's `main`: parse, run, print; exit 1 only when the path under test is broken."""
    opts = parse(argv)
    try:
        report = run(opts)
    except BenchFailure as exc:
        return failed(name, exc)
    emit(report, opts.json, render)
    return 0
