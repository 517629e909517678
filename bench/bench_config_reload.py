"""Time from saving config.toml to the first call that follows the new config, in a live `mcphost mcp` session.

An agent (the MCP SDK client) keeps one session open to `python -m mcphost mcp` with the probe upstream. Each
save flips `permissions.write` between "allow" and "deny"; right after the save the agent calls
`call_tool_write` back to back until the answer flips. The figure is the time from the write(2) of the save to
the return of the first call that obeys it. Baseline, same run: the round trip of one call with no save, which
is the resolution of this measurement (a reload can only be seen at the next call). Run from the repo root:

    python -m bench.bench_config_reload [--saves 20] [--rename]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "tests" / "servers" / "probe.py"
TARGET_MS = 150.0
CALL = {"name": "probe:plain_echo", "args": {"text": "x"}, "intent": {"operation_type": "write"}}


def config_text(write: str) -> str:
    return (
        f'[permissions]\nread = "allow"\nwrite = "{write}"\ndestructive = "allow"\n\n'
        f"[servers.probe]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PROBE))}]\n"
    )


def save(path: Path, text: str, rename: bool) -> None:
    if rename:  # how most editors save: a temporary file renamed over the original
        temp = path.with_name(".config.toml.tmp")
        temp.write_text(text, encoding="utf-8")
        temp.replace(path)
    else:
        path.write_text(text, encoding="utf-8")


async def allowed(client: Client) -> bool:
    result = await client.call_tool("call_tool_write", CALL)
    return not result.is_error


async def measure(opts: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mcphost-bench-reload-") as tmp:
        root = Path(tmp)
        config = root / "config.toml"
        config.write_text(config_text("allow"), encoding="utf-8")
        env = {
            "MCPHOST_CONFIG": str(config),
            "MCPHOST_DATA_DIR": str(root / "data"),
            "MCPHOST_RUNTIME_DIR": str(root / "run"),
            "PYTHONPATH": str(REPO),
        }
        params = StdioServerParameters(command=sys.executable, args=["-m", "mcphost", "mcp"], env=env)
        errlog = (root / "mcphost.stderr").open("w", encoding="utf-8")  # the reload messages, kept off the table
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            if not await allowed(client):
                raise SystemExit("bench_config_reload: the first call failed; is the probe upstream working?")
            round_trips = []
            for _ in range(50):
                started = time.perf_counter()
                await allowed(client)
                round_trips.append((time.perf_counter() - started) * 1000)
            latencies: list[float] = []
            calls_per_save: list[int] = []
            state = True
            for _ in range(opts.saves):
                want = not state
                started = time.perf_counter()
                save(config, config_text("allow" if want else "deny"), opts.rename)
                calls = 0
                while True:
                    calls += 1
                    if await allowed(client) == want:
                        break
                    if time.perf_counter() - started > 10:
                        raise SystemExit("bench_config_reload: a save was not applied within 10 s")
                latencies.append((time.perf_counter() - started) * 1000)
                calls_per_save.append(calls)
                state = want
                await anyio.sleep(0.05)  # let the next save be a separate event, as a person's saves are
        errlog.close()
        reloads = (root / "mcphost.stderr").read_text(encoding="utf-8").count("config reloaded")
        if reloads != opts.saves:
            raise SystemExit(f"bench_config_reload: {opts.saves} saves but {reloads} reloads reported")
        return {
            "saves": opts.saves,
            "rename": opts.rename,
            "save_to_effect_ms": {
                "median": statistics.median(latencies),
                "p95": sorted(latencies)[max(0, round(0.95 * len(latencies)) - 1)],
                "max": max(latencies),
            },
            "call_round_trip_ms": {"median": statistics.median(round_trips)},
            "calls_per_save_median": statistics.median(calls_per_save),
            "cpus": os.cpu_count(),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--saves", type=int, default=20, help="saves to time (default 20)")
    parser.add_argument("--rename", action="store_true", help="save by rename instead of writing in place")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    opts = parser.parse_args(argv)
    report = anyio.run(measure, opts)
    if opts.json:
        print(json.dumps(report, indent=2))
        return 0
    s, rt = report["save_to_effect_ms"], report["call_round_trip_ms"]["median"]
    how = "by rename" if opts.rename else "in place"
    print(f"config reload: {report['saves']} saves {how}, {report['cpus']} CPUs")
    print(f"save -> first call under the new config: median {s['median']:.1f} ms, p95 {s['p95']:.1f} ms, ", end="")
    print(f"max {s['max']:.1f} ms")
    print(f"baseline, one call's round trip: median {rt:.2f} ms; reload median = {s['median'] / rt:.1f} round trips")
    print(f"calls made per save until the new config showed: median {report['calls_per_save_median']:.0f}")
    verdict = "PASS" if s["median"] < TARGET_MS else "MISS"
    print(f"target: median under {TARGET_MS:.0f} ms: {verdict} (information only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
