"""Reading and writing the activity log: `log tail`, `activity list|summary` on logs of up to a million records,
each beside the tail, grep or wc command doing the same job in the same run, and appends per second with and without
fsync, against a bare write(2) and a bare fsync per record. Run from the repo root:

    python -m bench.bench_activity_log [--quick] [--sizes 10000,100000,1000000] [--runs 5] [--json]

The logs are generated, not recorded: records built the way the gateway builds them (`ActivityRecord`, serialised
with `to_json_line()`) from a fixed set of templates, with ids and timestamps filled in by string formatting so
that a million records take seconds. Everything lives in a temporary directory, removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bench.common import BenchFailure, emit, failed, machine
from mcphost.activity.query import intent_type
from mcphost.activity.record import (
    ActivityRecord,
    Decision,
    ErrorInfo,
    RecordIntent,
    RecordMetadata,
    new_record_id,
)
from mcphost.activity.writer import ActivityLog, LogSettings

REPO = Path(__file__).resolve().parent.parent

TAIL_TARGET_MS = 150.0
LIST_TARGET_RATIO = 3.0
NEEDLE = "destructive"  # what `--intent-type destructive` prefilters lines on, and what `grep -c` counts
SPAN_DAYS = 30  # generated records cover the last 30 days, so `summary --since 100d` reads every one
_ID_MARK, _TS_MARK = "@@ID@@", "@@TS@@"
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


# ---------------------------------------------------------------------------------------------------- records

# (weight in %, server, tool, variant, declared intent, annotations as the server reports them, status, error code)
# The annotation styles follow real servers: the filesystem reference server sends readOnly/idempotent/destructive
# hints, GitHub's a title and readOnlyHint, "linear" all four hints on every tool, postgres and todo none.
FS_READ = {"readOnlyHint": True}
FS_WRITE_DESTRUCTIVE = {"readOnlyHint": False, "idempotentHint": True, "destructiveHint": True}
FS_WRITE = {"readOnlyHint": False, "idempotentHint": False, "destructiveHint": False}
GH_READ = {"title": "Get issue details", "readOnlyHint": True}
GH_WRITE = {"title": "Create issue", "readOnlyHint": False}
GH_DELETE = {"title": "Delete file", "readOnlyHint": False, "destructiveHint": True}
LIN_READ = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": True}
LIN_WRITE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": True}
LIN_DELETE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": True}

CALLS: list[tuple[float, str, str, str, str, dict[str, Any] | None, str, str | None]] = [
    # reads: 70%
    (16.0, "filesystem", "read_file", "read", "read", FS_READ, "success", None),
    (8.0, "filesystem", "list_directory", "read", "read", FS_READ, "success", None),
    (6.0, "filesystem", "search_files", "read", "read", FS_READ, "success", None),
    (9.0, "github", "get_issue", "read", "read", GH_READ, "success", None),
    (6.0, "github", "list_pull_requests", "read", "read", GH_READ, "success", None),
    (10.0, "linear", "list_issues", "read", "read", LIN_READ, "success", None),
    (10.0, "postgres", "query", "read", "read", None, "success", None),
    (5.0, "todo", "list_tasks", "read", "read", None, "success", None),
    # writes: 20%
    (3.0, "filesystem", "create_directory", "write", "write", FS_WRITE, "success", None),
    (2.0, "filesystem", "move_file", "write", "write", FS_WRITE, "success", None),
    (4.0, "github", "create_issue", "write", "write", GH_WRITE, "success", None),
    (3.0, "github", "add_issue_comment", "write", "write", GH_WRITE, "success", None),
    (3.0, "linear", "create_issue", "write", "write", LIN_WRITE, "success", None),
    (2.0, "linear", "update_issue", "write", "write", LIN_WRITE, "success", None),
    (3.0, "todo", "add_task", "write", "write", None, "success", None),
    # destructive, let through by a person in the editor: 5%
    (2.5, "filesystem", "write_file", "destructive", "destructive", FS_WRITE_DESTRUCTIVE, "success", None),
    (1.0, "github", "delete_file", "destructive", "destructive", GH_DELETE, "success", None),
    (0.5, "linear", "delete_issue", "destructive", "destructive", LIN_DELETE, "success", None),
    (1.0, "postgres", "execute", "destructive", "destructive", None, "success", None),
    # refused, denied, failed: 4%
    (0.7, "filesystem", "write_file", "read", "write", FS_WRITE_DESTRUCTIVE, "rejected", "INTENT_MISMATCH"),
    (0.5, "filesystem", "write_file", "write", "write", FS_WRITE_DESTRUCTIVE, "rejected", "SERVER_MISMATCH"),
    (0.8, "postgres", "execute", "destructive", "destructive", None, "denied", "PERMISSION_DENIED"),
    (0.5, "todo", "add_task", "write", "write", None, "denied", "NO_APPROVER"),
    (0.2, "github", "delete_file", "destructive", "destructive", GH_DELETE, "expired", "APPROVAL_TIMEOUT"),
    (1.3, "github", "get_issue", "read", "read", GH_READ, "error", "UPSTREAM_ERROR"),
]
HOST_EVENTS: list[tuple[float, str, str | None, dict[str, Any]]] = [
    (0.3, "upstream_connected", None, {"tools": 14, "server": {"name": "github-mcp-server", "version": "0.9.1"}}),
    (0.2, "upstream_lost", None, {"reason": "process exited with code 1", "retry_in_s": 2.0}),
    (0.3, "config_reload", None, {"summary": "permissions.write: ask -> allow", "path": "~/.config/mcphost"}),
    (0.2, "annotations_changed", "write_file", {"tool": "write_file", "old": FS_WRITE, "new": FS_WRITE_DESTRUCTIVE}),
]

ARGUMENTS: dict[str, list[dict[str, Any]]] = {
    "read_file": [{"path": "/home/dev/project/src/app/server.py"}, {"path": "/home/dev/project/README.md"}],
    "list_directory": [{"path": "/home/dev/project/src"}, {"path": "/home/dev/project/tests/fixtures"}],
    "search_files": [{"path": "/home/dev/project", "pattern": "*.toml", "excludePatterns": ["node_modules"]}],
    "get_issue": [{"owner": "acme", "repo": "webshop", "issue_number": 1423}],
    "list_pull_requests": [{"owner": "acme", "repo": "webshop", "state": "open", "perPage": 20}],
    "list_issues": [{"team": "PLAT", "state": "In Progress", "first": 25}],
    "query": [{"sql": "SELECT id, email, created_at FROM users WHERE created_at > now() - interval '7 days'"}],
    "list_tasks": [{"project": "release-2.4", "done": False}],
    "create_directory": [{"path": "/home/dev/project/src/app/handlers"}],
    "move_file": [{"source": "/home/dev/project/notes.md", "destination": "/home/dev/project/docs/notes.md"}],
    "create_issue": [{"owner": "acme", "repo": "webshop", "title": "Checkout fails on empty cart", "labels": ["bug"]}],
    "add_issue_comment": [{"owner": "acme", "repo": "webshop", "issue_number": 1423, "body": "Fixed in #1431."}],
    "update_issue": [{"id": "PLAT-311", "stateId": "done", "assigneeId": "u_12"}],
    "add_task": [{"project": "release-2.4", "title": "bump the changelog", "due": "2026-11-28"}],
    "write_file": [{"path": "/home/dev/project/src/app/config.py", "content": "DEBUG = False\nTIMEOUT = 30\n"}],
    "delete_file": [{"owner": "acme", "repo": "webshop", "path": "scripts/old_deploy.sh", "branch": "main"}],
    "delete_issue": [{"id": "PLAT-298"}],
    "execute": [{"sql": "DELETE FROM sessions WHERE expires_at < now()", "token": "[REDACTED]"}],
}
PREVIEWS = [
    "import asyncio\nimport logging\n\nfrom app.handlers import checkout, health\nfrom app.settings import load\n\n"
    "logger = logging.getLogger(__name__)\n\nasync def main() -> None:",
    "[FILE] README.md\n[FILE] pyproject.toml\n[DIR] src\n[DIR] tests\n[FILE] .gitignore\n[DIR] docs",
    '{"number":1423,"title":"Checkout fails on empty cart","state":"open","user":{"login":"mara"},'
    '"labels":[{"name":"bug"}],"comments":4,"body":"Steps: open the cart with no items and press pay."}',
    '[{"id":"PLAT-311","title":"Rotate the staging certificates","state":"In Progress","assignee":"Jonas"},'
    '{"id":"PLAT-314","title":"Flaky upload test","state":"In Progress"}]',
    '[{"id":8812,"email":"a.khan@example.com","created_at":"2026-11-19T08:12:44Z"},'
    '{"id":8813,"email":"li.wei@example.com","created_at":"2026-11-19T09:40:02Z"}]',
]
REASONS = {
    "read": "read the handler to find where the empty-cart case is handled",
    "write": "file the bug the user described so the team can pick it up",
    "destructive": "overwrite the config with the timeout the user asked for",
}
SESSIONS = [("claude-code", "9f1c2a7e-5d1b-4c55-a0a4-3e2f1b9d8c01"), ("cursor", "c2d77b10-8e44-4b0e-9c61-7a5fd2e0b3aa")]
SESSIONS += [
    ("vscode-copilot", "4b8e0f3c-1a2d-4e5f-8a9b-0c1d2e3f4a5b"),
    ("claude-code", "71aa09d2-6c3e-4f10-b2d4-98e7c6a5b4f3"),
]
ERROR_MESSAGES = {
    "INTENT_MISMATCH": "Intent mismatch: call_tool_read was declared with operation_type 'write'; "
    "use call_tool_write for write operations",
    "SERVER_MISMATCH": "Tool 'filesystem:write_file' is marked destructive by server, use call_tool_destructive",
    "PERMISSION_DENIED": "Permission denied by policy: "
    'permissions.destructive = "deny" in ~/.config/mcphost/config.toml',
    "NO_APPROVER": 'call_tool_write needs approval (permissions.write = "ask") and nobody is attached to answer',
    "APPROVAL_TIMEOUT": "Nobody answered the approval prompt within 120 s",
    "UPSTREAM_ERROR": "Upstream server 'github' failed during the call to 'github:get_issue': 502 Bad Gateway",
}


def _tool_call(
    server: str,
    tool: str,
    variant: str,
    declared: str,
    annotations: dict[str, Any] | None,
    status: str,
    code: str | None,
    k: int,
) -> ActivityRecord:
    """One call record as `Gateway.call` fills it in; `k` picks among variations of arguments, answer, session."""
    client, session = SESSIONS[k % len(SESSIONS)]
    args = ARGUMENTS[tool][k % len(ARGUMENTS[tool])]
    meta = RecordMetadata(
        intent=RecordIntent(
            operation_type=declared,
            data_sensitivity=("internal", "private", "public")[k % 3],
            reason=REASONS[declared],
        ),
        tool_variant=f"call_tool_{variant}",
    )
    record = ActivityRecord(server=server, tool=tool, metadata=meta, session_id=session, client=client, status=status)
    record.request_bytes = len(json.dumps(args, separators=(",", ":")))
    record.arguments = args
    if annotations:
        meta.annotations = dict(annotations)
    destructive_hint = bool(annotations and annotations.get("destructiveHint"))
    read_only = bool(annotations and annotations.get("readOnlyHint"))
    meta.call_with = f"call_tool_{'destructive' if destructive_hint else 'read' if read_only else 'write'}"
    if code in ("INTENT_MISMATCH", "SERVER_MISMATCH"):
        record.error = ErrorInfo(code=code, message=ERROR_MESSAGES[code])
        record.duration_ms = 0.2 + k * 0.05
        return record
    if variant == "destructive":
        record.decision = Decision(by="editor", action="confirm", outcome="allow", rule="permissions.destructive")
        record.decision.wait_ms, record.decision.remember, record.decision.approver = 2300.0 + k * 410, "once", "vscode"
    else:
        record.decision = Decision(by="policy", action="allow", outcome="allow", rule=f"permissions.{variant}")
    if code is not None:
        if status in ("denied", "expired"):
            by = {"PERMISSION_DENIED": "policy", "NO_APPROVER": "no_approver", "APPROVAL_TIMEOUT": "timeout"}[code]
            record.decision = Decision(by=by, action="ask", outcome="expired" if status == "expired" else "deny")
        record.error = ErrorInfo(code=code, message=ERROR_MESSAGES[code])
        record.duration_ms = 1.5 + k * 0.3 if status != "expired" else 120000.0
        return record
    record.duration_ms = round(3.2 + (k * 37.7) % 480, 3)
    preview = PREVIEWS[k % len(PREVIEWS)]
    record.response_preview = preview[: 100 + (k * 29) % 100]
    record.response_bytes = 180 + (k * 977) % 24000
    if k % 7 == 3 and variant == "read" and annotations is None:
        record.warnings = ["the tool has no annotations; mcphost treats it as a write tool"]
    return record


def _host_event(kind: str, tool: str | None, details: dict[str, Any]) -> ActivityRecord:
    return ActivityRecord(
        type=kind, server="github" if kind.startswith("upstream") else None, tool=tool, details=details
    )


@dataclass(frozen=True)
class Template:
    weight: float
    fmt: str  # the JSON line, with {0} for the id and {1} for the timestamp
    intent: str | None  # what `--intent-type` sees in it (query.intent_type of the parsed line)
    has_needle: bool  # whether the line contains NEEDLE, as grep and the reader's prefilter see it


def templates(variations: int = 4) -> list[Template]:
    out: list[Template] = []
    specs: list[tuple[float, Callable[..., ActivityRecord], tuple[Any, ...]]] = [
        (call[0], _tool_call, call[1:]) for call in CALLS
    ] + [(event[0], _host_event, event[1:]) for event in HOST_EVENTS]
    for weight, build, args in specs:
        for k in range(variations):
            record = build(*args, k) if build is _tool_call else build(*args)
            record.id, record.timestamp = _ID_MARK, _TS_MARK
            if record.decision is not None:
                record.decision.at = _TS_MARK
            line = record.to_json_line()
            parsed = json.loads(line)
            fmt = line.replace("{", "{{").replace("}", "}}").replace(_ID_MARK, "{0}").replace(_TS_MARK, "{1}")
            out.append(Template(weight / variations, fmt, intent_type(parsed), NEEDLE in line))
    return out


def _ulid_time(ms: int) -> str:
    chars = []
    for _ in range(10):
        chars.append(_CROCKFORD[ms & 31])
        ms >>= 5
    return "".join(reversed(chars))


@dataclass(frozen=True)
class GeneratedLog:
    path: Path
    records: int
    bytes: int
    seconds: float
    by_intent: dict[str, int]
    needle_lines: int


def generate_log(path: Path, count: int, seed: int = 1) -> GeneratedLog:
    """`count` records in time order over the last SPAN_DAYS days, ending a minute ago."""
    started = time.perf_counter()
    rng = random.Random(seed)
    tmpl = templates()
    picks = rng.choices(range(len(tmpl)), weights=[t.weight for t in tmpl], k=count)
    fmts = [t.fmt for t in tmpl]
    # ULID random parts from a pool: the time parts already differ, since timestamps strictly increase.
    pool = ["".join(rng.choice(_CROCKFORD) for _ in range(16)) for _ in range(4096)]
    end_ms = int(time.time() * 1000) - 60_000
    step = max(2, SPAN_DAYS * 86_400_000 // max(1, count))
    first_ms = end_ms - step * count
    jitter = step // 2
    second, stamp = -1, ""
    high_key, high = -1, ""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("w", encoding="utf-8", newline="\n") as out:
        chunk: list[str] = []
        for i, t in enumerate(picks):
            ms = first_ms + i * step + (i * 7919) % jitter
            if ms // 1000 != second:
                second = ms // 1000
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            if ms >> 25 != high_key:
                high_key = ms >> 25
                high = _ulid_time(ms)[:5]
            low = ms & 0x1FFFFFF
            ulid = (
                high
                + _CROCKFORD[low >> 20]
                + _CROCKFORD[(low >> 15) & 31]
                + _CROCKFORD[(low >> 10) & 31]
                + _CROCKFORD[(low >> 5) & 31]
                + _CROCKFORD[low & 31]
                + pool[i & 4095]
            )
            chunk.append(fmts[t].format(ulid, f"{stamp}.{ms % 1000:03d}Z"))
            if len(chunk) >= 16384:
                out.write("".join(chunk))
                chunk.clear()
        out.write("".join(chunk))
    counts = Counter(picks)
    by_intent: Counter[str] = Counter()
    needle = 0
    for index, n in counts.items():
        by_intent[tmpl[index].intent or "none"] += n
        needle += n if tmpl[index].has_needle else 0
    return GeneratedLog(path, count, path.stat().st_size, time.perf_counter() - started, dict(by_intent), needle)


# ---------------------------------------------------------------------------------------------------- reading


def mcphost_command() -> list[str]:
    script = Path(sys.executable).parent / "mcphost"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcphost"]


def run_once(argv: list[str], env: dict[str, str], sink: Path) -> float:
    """Wall time of one run. Its output goes to a regular file: GNU grep stops at the first match when its output
    is /dev/null (nobody can see the count), which would time a different job."""
    with sink.open("wb") as out:
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.DEVNULL, check=False)
        elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise BenchFailure(f"{' '.join(argv)} exited {proc.returncode}")
    return elapsed


def checked_output(argv: list[str], env: dict[str, str]) -> tuple[str, float]:
    """The command's stdout (it also warms the page cache and the interpreter's files), and its wall time."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, encoding="utf-8", check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise BenchFailure(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout, elapsed


@dataclass
class Pair:
    """A mcphost command and the tail, grep or wc command doing the same job, timed in the same rounds."""

    label: str
    argv: list[str]
    base_label: str
    base_argv: list[str]
    check: Callable[[str, str], None]  # (mcphost stdout, baseline stdout) -> raises BenchFailure


def time_pair(
    pair: Pair, env: dict[str, str], runs: int, slow_runs: int, startup: list[str], sink: Path
) -> dict[str, Any]:
    """Median wall time of the mcphost command, its baseline, and `mcphost --version` (the startup the command's
    own work sits on), timed in the same rounds."""
    out, first = checked_output(pair.argv, env)
    base_out, _ = checked_output(pair.base_argv, env)
    pair.check(out, base_out)
    n = runs if first < 2.0 else min(runs, slow_runs)  # a full scan of a million records: fewer, long runs
    mine: list[float] = []
    base: list[float] = []
    start: list[float] = []
    for index in range(n):
        # Rotating which goes first spreads drift (frequency scaling, other load) over all three.
        order = [(pair.argv, mine), (pair.base_argv, base), (startup, start)]
        for argv, samples in order[index % 3 :] + order[: index % 3]:
            samples.append(run_once(argv, env, sink))
    m, b, st = statistics.median(mine), statistics.median(base), statistics.median(start)
    return {
        "label": pair.label,
        "baseline": pair.base_label,
        "runs": n,
        "ms": m * 1000,
        "min_ms": min(mine) * 1000,
        "max_ms": max(mine) * 1000,
        "baseline_ms": b * 1000,
        "ratio": m / b,
        "startup_ms": st * 1000,
        "work_ms": (m - st) * 1000,
    }


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise BenchFailure(message)


def pairs_for(log: GeneratedLog, mcphost: list[str]) -> list[Pair]:
    f = str(log.path)
    destructive = log.by_intent.get("destructive", 0)

    def tail_check(want: int, kind: str | None) -> Callable[[str, str], None]:
        def check(out: str, _: str) -> None:
            lines = out.splitlines()
            _expect(len(lines) == want, f"log tail printed {len(lines)} lines, expected {want}")
            if kind == "destructive":
                _expect(all(("💥" in x or "[D]" in x) for x in lines), "log tail --intent-type printed other intents")

        return check

    def list_check(out: str, _: str) -> None:
        rows = out.splitlines()[1:]
        _expect(len(rows) == min(50, destructive), f"activity list printed {len(rows)} rows, expected 50")
        _expect(all(NEEDLE in row for row in rows), "activity list printed other intents")

    def full_check(out: str, grep_out: str) -> None:
        records = json.loads(out)
        _expect(len(records) == destructive, f"activity list --limit 0 gave {len(records)}, expected {destructive}")
        _expect(int(grep_out.strip()) == log.needle_lines, f"grep -c counted {grep_out.strip()} lines")

    def summary_check(out: str, wc_out: str) -> None:
        total = int(out.split(" ", 1)[0])
        _expect(total == log.records, f"activity summary counted {total} records, expected {log.records}")
        _expect(int(wc_out.split()[0]) == log.records, f"wc -l counted {wc_out.strip()}")

    return [
        Pair(
            "log tail -n 20",
            [*mcphost, "log", "tail", "-n", "20"],
            "tail -n 20",
            ["tail", "-n", "20", f],
            tail_check(20, None),
        ),
        Pair(
            "log tail -n 20 --intent-type destructive",
            [*mcphost, "log", "tail", "-n", "20", "--intent-type", "destructive"],
            "tail -n 20",
            ["tail", "-n", "20", f],
            tail_check(20, "destructive"),
        ),
        Pair(
            "activity list --intent-type destructive",
            [*mcphost, "activity", "list", "--intent-type", "destructive"],
            "grep -c destructive",
            ["grep", "-c", NEEDLE, f],
            list_check,
        ),
        Pair(
            "activity list --intent-type destructive --limit 0 -o json",
            [*mcphost, "activity", "list", "--intent-type", "destructive", "--limit", "0", "-o", "json"],
            "grep -c destructive",
            ["grep", "-c", NEEDLE, f],
            full_check,
        ),
        Pair(
            "activity summary --since 100d",
            [*mcphost, "activity", "summary", "--since", "100d"],
            "wc -l",
            ["wc", "-l", f],
            summary_check,
        ),
    ]


def fixed_costs(mcphost: list[str], env: dict[str, str], runs: int, sink: Path) -> dict[str, float]:
    cases = {"python -c pass": [sys.executable, "-c", "pass"], "mcphost --version": [*mcphost, "--version"]}
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for argv in cases.values():
        run_once(argv, env, sink)
    for _ in range(runs):
        for key, argv in cases.items():
            samples[key].append(run_once(argv, env, sink))
    return {key: statistics.median(values) * 1000 for key, values in samples.items()}


def measure_reading(root: Path, sizes: list[int], runs: int, slow_runs: int) -> dict[str, Any]:
    mcphost = mcphost_command()
    base_env = {
        **os.environ,
        "MCPHOST_CONFIG": str(root / "config.toml"),
        "MCPHOST_RUNTIME_DIR": str(root / "run"),
        "MCPHOST_DATA_DIR": str(root / "data-none"),
    }
    sink = root / "stdout"
    fixed = fixed_costs(mcphost, base_env, runs, sink)
    results = []
    for size in sizes:
        data = root / f"data-{size}"
        log = generate_log(data / "activity.jsonl", size)
        # As a person runs them: the log under the data dir, no --file.
        env = {**base_env, "MCPHOST_DATA_DIR": str(data)}
        version = [*mcphost, "--version"]
        timed = [time_pair(p, env, runs, slow_runs, version, sink) for p in pairs_for(log, mcphost)]
        results.append(
            {
                "records": log.records,
                "bytes": log.bytes,
                "generate_s": log.seconds,
                "by_intent": log.by_intent,
                "needle_lines": log.needle_lines,
                "commands": timed,
            }
        )
        log.path.unlink()  # a million records is most of a gigabyte; the next size needs the room
    return {"mcphost_command": " ".join(mcphost), "fixed_ms": fixed, "sizes": results}


# ---------------------------------------------------------------------------------------------------- writing


def sample_records(count: int, worker: int = 0) -> list[ActivityRecord]:
    """Distinct call records like the gateway writes, each numbered (worker, seq) in its arguments."""
    out = []
    for seq in range(count):
        server, tool, variant, declared, ann, status, code = CALLS[seq % len(CALLS)][1:]
        record = _tool_call(server, tool, variant, declared, ann, status, code, seq)
        record.arguments = {**(record.arguments or {}), "worker": worker, "seq": seq}
        record.id = new_record_id()
        out.append(record)
    return out


def rate(count: int, seconds: float) -> dict[str, float]:
    return {"records": count, "seconds": seconds, "per_s": count / seconds, "us_per_record": seconds / count * 1e6}


def bench_serialize(records: list[ActivityRecord]) -> dict[str, float]:
    start = time.perf_counter()
    for record in records:
        record.to_json_line().encode("utf-8")
    return rate(len(records), time.perf_counter() - start)


def bench_raw_write(path: Path, lines: list[bytes], fsync: bool) -> dict[str, float]:
    """The floor: one write(2) per prepared line on an O_APPEND descriptor, and (fsync) one fsync after each."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        start = time.perf_counter()
        for line in lines:
            os.write(fd, line)
            if fsync:
                os.fsync(fd)
        return rate(len(lines), time.perf_counter() - start)
    finally:
        os.close(fd)


def bench_append(path: Path, records: list[ActivityRecord]) -> dict[str, float]:
    log = ActivityLog(path, LogSettings(fsync=False))
    try:
        start = time.perf_counter()
        for record in records:
            if log.append(record) is None:
                raise BenchFailure(f"ActivityLog.append refused a record: {log.last_error}")
        return rate(len(records), time.perf_counter() - start)
    finally:
        log.close()


@contextmanager
def counting_fdatasync() -> Iterator[list[int]]:
    """Counts the fdatasync calls the writer makes (it looks `os.fdatasync` up at each call)."""
    calls = [0]
    real = os.fdatasync

    def counted(fd: Any) -> None:
        calls[0] += 1
        real(fd)

    os.fdatasync = counted
    try:
        yield calls
    finally:
        os.fdatasync = real


def bench_write_fsync(path: Path, records: list[ActivityRecord], writers: int) -> dict[str, float]:
    """`await ActivityLog.write` with fsync on, from `writers` tasks in one asyncio loop, as concurrent calls do."""
    log = ActivityLog(path, LogSettings(fsync=True))
    per_writer = len(records) // writers
    failed = [0]

    async def writer(batch: list[ActivityRecord]) -> None:
        for record in batch:
            if not await log.write(record):
                failed[0] += 1

    async def main() -> float:
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for w in range(writers):
                tg.start_soon(writer, records[w * per_writer : (w + 1) * per_writer])
        return time.perf_counter() - start

    try:
        with counting_fdatasync() as calls:
            seconds = anyio.run(main, backend="asyncio")
    finally:
        log.close()
    if failed[0]:
        raise BenchFailure(f"ActivityLog.write returned False for {failed[0]} records: {log.last_error}")
    return {**rate(per_writer * writers, seconds), "writers": writers, "fsyncs": calls[0]}


def bench_thread_hop(count: int) -> dict[str, float]:
    """What `ActivityLog.write` pays per record on top of the fsync: one `anyio.to_thread.run_sync` round trip."""

    async def main() -> float:
        start = time.perf_counter()
        for _ in range(count):
            await anyio.to_thread.run_sync(int)
        return time.perf_counter() - start

    return rate(count, anyio.run(main, backend="asyncio"))


def _process_writer(path: str, worker: int, count: int, barrier: Any, results: Any) -> None:
    records = sample_records(count, worker)
    log = ActivityLog(Path(path), LogSettings(fsync=False))
    barrier.wait()  # interpreter start and record building are not timed
    start = time.monotonic()
    refused = sum(1 for record in records if log.append(record) is None)
    end = time.monotonic()
    log.close()
    results.put((worker, start, end, refused))


def verify_lines(path: Path, processes: int, per_process: int) -> dict[str, Any]:
    """Every line whole and parseable, every (worker, seq) exactly once, each process's records in its order."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    ends_whole = data.endswith(b"\n")
    lines = lines[:-1] if ends_whole else lines
    bad = 0
    seen: Counter[tuple[int, int]] = Counter()
    last = [-1] * processes
    out_of_order = 0
    for raw in lines:
        try:
            record = json.loads(raw)
            args = record["arguments"]
            worker, seq = int(args["worker"]), int(args["seq"])
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        seen[(worker, seq)] += 1
        if 0 <= worker < processes:
            out_of_order += seq <= last[worker]
            last[worker] = seq
    expected = processes * per_process
    missing = sum(1 for w in range(processes) for s in range(per_process) if (w, s) not in seen)
    duplicated = sum(n - 1 for n in seen.values() if n > 1)
    ok = ends_whole and bad == 0 and len(lines) == expected and not missing and not duplicated and not out_of_order
    return {
        "ok": ok,
        "expected": expected,
        "lines": len(lines),
        "unparseable": bad,
        "missing": missing,
        "duplicated": duplicated,
        "out_of_order": out_of_order,
        "ends_with_newline": ends_whole,
    }


def bench_processes(path: Path, processes: int, per_process: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")  # no inherited locks or threads from the fsync runs
    barrier = ctx.Barrier(processes + 1)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_process_writer, args=(str(path), w, per_process, barrier, results))
        for w in range(processes)
    ]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=120)
        reports = [results.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    if any(r[3] for r in reports):
        raise BenchFailure(f"ActivityLog.append refused records in a child process: {reports}")
    seconds = max(r[2] for r in reports) - min(r[1] for r in reports)
    return {
        **rate(processes * per_process, seconds),
        "processes": processes,
        "check": verify_lines(path, processes, per_process),
    }


def median_rate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median records/s (a real round, so its fsync count goes with its rate)."""
    ordered = sorted(samples, key=lambda x: x["per_s"])
    return {**ordered[len(ordered) // 2], "rounds": len(samples)}


def measure_writing(root: Path, appends: int, fsync_records: int, rounds: int) -> dict[str, Any]:
    work = root / "appends"
    work.mkdir(mode=0o700)
    records = sample_records(appends)
    lines = [r.to_json_line().encode("utf-8") for r in records]
    fsync_lines = lines[:fsync_records]
    # 1 writer gets fsync_records records; more writers more, so that each has a fair number to write.
    batches = {w: sample_records(fsync_records * {1: 1, 8: 2, 64: 4}[w]) for w in (1, 8, 64)}
    cases: dict[str, Callable[[int], dict[str, Any]]] = {
        "serialize": lambda r: bench_serialize(records),
        "raw_write": lambda r: bench_raw_write(work / f"raw-{r}.jsonl", lines, fsync=False),
        "append": lambda r: bench_append(work / f"append-{r}.jsonl", records),
        "raw_fsync": lambda r: bench_raw_write(work / f"raw-fsync-{r}.jsonl", fsync_lines, fsync=True),
        "thread_hop": lambda r: bench_thread_hop(fsync_records),
    }

    def fsync_case(writers: int) -> Callable[[int], dict[str, Any]]:
        return lambda r: bench_write_fsync(work / f"fsync-{writers}-{r}.jsonl", batches[writers], writers)

    for writers in (1, 8, 64):
        cases[f"write_fsync_{writers}"] = fsync_case(writers)
    samples: dict[str, list[dict[str, Any]]] = {key: [] for key in cases}
    keys = list(cases)
    for r in range(rounds):
        # Each round starts at another case, so drift and other load on the machine fall on all of them alike.
        for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
            samples[key].append(cases[key](r))
    out: dict[str, Any] = {"record_bytes": statistics.median(len(x) for x in lines)}
    for key in ("serialize", "raw_write", "append", "raw_fsync", "thread_hop"):
        out[key] = median_rate(samples[key])
    out["write_fsync"] = [median_rate(samples[f"write_fsync_{w}"]) for w in (1, 8, 64)]
    out["processes"] = bench_processes(work / "procs.jsonl", 4, appends)
    return out


# ---------------------------------------------------------------------------------------------------- report


def filesystem_of(path: Path) -> str:
    best, kind = "", "?"
    try:
        with Path("/proc/self/mounts").open(encoding="utf-8") as mounts:
            for entry in mounts:
                fields = entry.split()
                if (
                    len(fields) >= 3
                    and str(path).startswith(fields[1].rstrip("/") + "/")
                    and len(fields[1]) > len(best)
                ):
                    best, kind = fields[1], fields[2]
    except OSError:
        pass
    return kind


def run(opts: argparse.Namespace) -> dict[str, Any]:
    for tool in ("tail", "grep", "wc"):
        if shutil.which(tool) is None:
            raise BenchFailure(f"{tool} is not on PATH; it is the baseline")
    host = machine()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcphost-bench-log-", dir=opts.dir) as tmp:
        root = Path(tmp).resolve()
        host["temp_fs"] = filesystem_of(root)
        reading = measure_reading(root, opts.sizes, opts.runs, opts.slow_runs)
        writing = measure_writing(root, opts.appends, opts.fsync_records, opts.write_rounds)
    return {
        "benchmark": "activity_log",
        "machine": host,
        "settings": {
            "sizes": opts.sizes,
            "runs": opts.runs,
            "slow_runs": opts.slow_runs,
            "appends": opts.appends,
            "fsync_records": opts.fsync_records,
            "write_rounds": opts.write_rounds,
        },
        "reading": reading,
        "writing": writing,
        "wall_s": time.perf_counter() - started,
        "load_average_1m_at_end": os.getloadavg()[0],
    }


def verdicts(report: dict[str, Any]) -> list[tuple[str, bool]]:
    sizes = report["reading"]["sizes"]
    tails = [c["ms"] for s in sizes for c in s["commands"] if c["label"] == "log tail -n 20"]
    largest = sizes[-1]
    by_label = {c["label"]: c for c in largest["commands"]}
    listed = by_label["activity list --intent-type destructive"]
    full = by_label["activity list --intent-type destructive --limit 0 -o json"]
    w = report["writing"]["write_fsync"]
    one, many = w[0], w[-1]
    n = f"{largest['records']:,}"
    return [
        (f"log tail -n 20 under {TAIL_TARGET_MS:g} ms at every size (slowest {max(tails):.0f} ms)", max(tails) < 150),
        (
            f"activity list --intent-type destructive within {LIST_TARGET_RATIO:g}x of grep -c at {n} records "
            f"({listed['ratio']:.2f}x)",
            listed["ratio"] <= LIST_TARGET_RATIO,
        ),
        (
            f"  the same with --limit 0 -o json, every match ({full['ratio']:.2f}x; information)",
            full["ratio"] <= LIST_TARGET_RATIO,
        ),
        (
            f"group commit: 64 concurrent fsync writers at least 2x the records/s of 1 writer "
            f"({many['per_s'] / one['per_s']:.1f}x)",
            many["per_s"] > one["per_s"] * 2,
        ),
        (
            "4 processes appending: every line whole and parseable, none lost",
            report["writing"]["processes"]["check"]["ok"],
        ),
    ]


def render(report: dict[str, Any]) -> str:
    m, r, w = report["machine"], report["reading"], report["writing"]
    lines = [
        f"mcphost activity log: {m['cpus']} CPUs, {m['implementation']} {m['python']}, {m['platform']}, "
        f"load average {m['load_average_1m']:.2f} at start; temp dir on {m['temp_fs']}",
        f"fixed cost per command: python -c pass {r['fixed_ms']['python -c pass']:.0f} ms, "
        f"mcphost --version {r['fixed_ms']['mcphost --version']:.0f} ms ({r['mcphost_command']})",
        "",
        "reading: wall ms per command (median of N runs, subprocess, stdout to a file, warm page cache); "
        "ratio = mcphost / baseline;",
        "work = ms minus the median `mcphost --version` timed in the same rounds (interpreter + imports)",
    ]
    for s in r["sizes"]:
        total = s["records"]
        d = s["by_intent"].get("destructive", 0)
        lines += [
            "",
            f"{total:,} records, {s['bytes'] / 1e6:.1f} MB (generated in {s['generate_s']:.1f} s); "
            f"{d:,} destructive ({d / total:.1%}); lines containing {NEEDLE!r}: {s['needle_lines']:,} "
            f"({s['needle_lines'] / total:.1%})",
            f"  {'command':<58} {'N':>2} {'ms':>7} {'work':>7}   {'baseline':<20} {'ms':>7} {'ratio':>8}",
        ]
        for c in s["commands"]:
            lines.append(
                f"  {c['label']:<58} {c['runs']:>2} {c['ms']:>7.0f} {c['work_ms']:>7.0f}   "
                f"{c['baseline']:<20} {c['baseline_ms']:>7.1f} "
                f"{c['ratio']:>7.1f}x"
            )
    raw, raw_fsync = w["raw_write"], w["raw_fsync"]
    lines += [
        "",
        f"appends: records like the gateway's ({w['record_bytes']:.0f} bytes median), in one process unless "
        f"said; the median of {w['serialize']['rounds']} interleaved rounds; ratio = records/s against the "
        "baseline named",
        f"  {'case':<52} {'records':>8} {'records/s':>10} {'µs/rec':>8} {'fsyncs':>7}   ratio",
        _rate_line("to_json_line().encode() alone", w["serialize"], None, ""),
        _rate_line("baseline: os.write of a prepared line", raw, None, ""),
        _rate_line(
            "ActivityLog.append, fsync off, 1 thread",
            w["append"],
            None,
            f"{w['append']['per_s'] / raw['per_s']:.2f}x os.write",
        ),
        _rate_line("baseline: os.write + os.fsync per record", raw_fsync, raw_fsync["records"], ""),
        _rate_line("await anyio.to_thread.run_sync(no-op) alone", w["thread_hop"], None, ""),
    ]
    for case in w["write_fsync"]:
        lines.append(
            _rate_line(
                f"await ActivityLog.write, fsync on, {case['writers']} writer{'s' if case['writers'] > 1 else ''}",
                case,
                case["fsyncs"],
                f"{case['per_s'] / raw_fsync['per_s']:.2f}x naive fsync",
            )
        )
    p = w["processes"]
    c = p["check"]
    lines += [
        _rate_line(
            f"ActivityLog.append, fsync off, {p['processes']} processes",
            p,
            None,
            f"{p['per_s'] / w['append']['per_s']:.2f}x 1 thread",
        ),
        f"  check of the {p['processes']}-process file: {c['lines']:,} lines of {c['expected']:,} expected, "
        f"{c['unparseable']} unparseable, {c['missing']} missing, {c['duplicated']} duplicated, "
        f"{c['out_of_order']} out of order, ends with a newline: {c['ends_with_newline']} -> "
        f"{'OK' if c['ok'] else 'FAILED'}",
        "",
        "targets (information only)",
    ]
    for text, ok in verdicts(report):
        lines.append(f"  {'PASS' if ok else 'MISS'}  {text}")
    lines += ["", f"wall time {report['wall_s']:.0f} s; load average {report['load_average_1m_at_end']:.2f} at end"]
    return "\n".join(lines) + "\n"


def _rate_line(label: str, figures: dict[str, Any], fsyncs: int | None, ratio: str) -> str:
    syncs = f"{fsyncs:>7}" if fsyncs is not None else f"{'':>7}"
    return (
        f"  {label:<52} {figures['records']:>8} {figures['per_s']:>10.0f} {figures['us_per_record']:>8.1f} {syncs}   "
        f"{ratio}"
    ).rstrip()


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small logs and fewer appends: a smoke run of seconds")
    parser.add_argument("--sizes", help="comma-separated log sizes in records (default 10000,100000,1000000)")
    parser.add_argument("--runs", type=int, help="timed runs per command (default 5, --quick 3)")
    parser.add_argument("--slow-runs", type=int, default=3, help="runs for commands over 2 s (default 3)")
    parser.add_argument("--appends", type=int, help="records per fsync-off append case (default 20000)")
    parser.add_argument("--fsync-records", type=int, help="records for the 1-writer fsync case (default 1000)")
    parser.add_argument("--write-rounds", type=int, default=3, help="rounds of the append cases (default 3)")
    parser.add_argument("--dir", help="make the temporary directory here (fsync figures need a real disk)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    opts = parser.parse_args(argv)
    default_sizes = [2_000, 20_000] if opts.quick else [10_000, 100_000, 1_000_000]
    opts.sizes = [int(x) for x in opts.sizes.split(",")] if opts.sizes else default_sizes
    opts.runs = (3 if opts.quick else 5) if opts.runs is None else opts.runs
    opts.appends = (2_000 if opts.quick else 20_000) if opts.appends is None else opts.appends
    opts.fsync_records = (100 if opts.quick else 1_000) if opts.fsync_records is None else opts.fsync_records
    if (
        min(opts.sizes) < 1000
        or opts.runs < 1
        or opts.slow_runs < 1
        or opts.appends < 1
        or opts.fsync_records < 64
        or opts.write_rounds < 1
    ):
        parser.error(
            "--sizes at least 1000 each; --runs, --slow-runs, --appends, --write-rounds at least 1; "
            "--fsync-records at least 64"
        )
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_cli(argv)
    try:
        report = run(opts)
    except BenchFailure as exc:
        return failed("bench_activity_log", exc)
    emit(report, opts.json, render)
    return 0 if report["writing"]["processes"]["check"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
