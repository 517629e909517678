"""The shortcuts the commands take for speed give exactly what the long way gives: reading a log by searching its
blocks, the lines passed on as they are, the table's layout and cells, the local times, and a daemon's tool result
laid out as the SDK's model would."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mcphost import console
from mcphost.activity import display, reader
from mcphost.activity.query import RecordFilter, matching_entries_newest_first, matching_newest_first
from mcphost.activity.reader import LISTED, parse_entry, parse_line, records_newest_first
from mcphost.cli.call import as_dumped

# ---------------------------------------------------------------------------------------------- reading


def naive_newest_first(path: Path, needle: bytes | None) -> list[dict[str, Any]]:
    """What the reader must return: every complete line holding a JSON object, last first, from the files newest
    first; with a needle, only the lines that contain it."""
    out: list[dict[str, Any]] = []
    for file in reader.log_files(path):
        data = file.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        for line in reversed(complete.split(b"\n")):
            if line and (needle is None or needle in line):
                record = parse_line(line)
                if record is not None:
                    out.append(record)
    return out


def random_log(path: Path, rng: random.Random, count: int) -> None:
    kinds = ["read", "write", "destructive"]
    lines = []
    for i in range(count):
        op = rng.choice(kinds)
        record: dict[str, Any] = {
            "id": f"R{i:06d}",
            "type": "tool_call",
            "server": rng.choice(["fs", "gh"]),
            "tool": rng.choice(["a", "b", "write_file"]),
            "status": rng.choice(["success", "error", "denied"]),
            "metadata": {"intent": {"operation_type": op}, "tool_variant": f"call_tool_{rng.choice(kinds)}"},
            "pad": "x" * rng.choice([0, 10, 500, 5000, reader.BLOCK + 7]),
        }
        text = json.dumps(record, separators=(",", ":") if i % 2 else (", ", ": "))
        lines.append(text.encode())
        if rng.random() < 0.05:
            lines.append(rng.choice([b"not json", b"[1, 2]", b'{"nan": NaN, "destructive"', b"", b"   "]))
    path.write_bytes(b"\n".join(lines) + b'\n{"torn": "destructive"')


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_searching_blocks_for_the_needle_finds_what_reading_every_line_finds(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "activity.jsonl"
    random_log(path, rng, 120)
    random_log(tmp_path / "activity.jsonl.1", rng, 40)
    for needle in (None, b'destructive"', b'"write_file"', b'"gh"', b"absent", b"x" * 100):
        assert list(records_newest_first(path, needle)) == naive_newest_first(path, needle), needle


def test_a_line_longer_than_many_blocks_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    huge = {"id": "big", "pad": "y" * (reader.BLOCK * 3 + 5), "metadata": {"intent": {"operation_type": "write"}}}
    small = {"id": "small", "metadata": {"intent": {"operation_type": "write"}}}
    path.write_text(json.dumps(small) + "\n" + json.dumps(huge) + "\n" + json.dumps(small) + "\n", encoding="utf-8")
    assert [r["id"] for r in records_newest_first(path)] == ["small", "big", "small"]
    assert [r["id"] for r in records_newest_first(path, b'write"')] == ["small", "big", "small"]


def test_what_the_fast_parser_refuses_is_read_as_before_but_never_passed_on_raw() -> None:
    assert parse_entry(b'{"a": 1}') == ({"a": 1}, b'{"a": 1}')
    assert parse_entry(b'{"a": NaN, "b": Infinity}') == ({"a": None, "b": None}, None)
    big = 2**70
    assert parse_entry(b'{"n": %d}' % big) == ({"n": big}, None)
    assert parse_entry(b'{"s": "\\ud800"}') == ({"s": "\ud800"}, None)
    assert parse_entry(b"[1]") == (None, None)
    assert parse_entry(b"\xff{}") == (None, None)
    assert parse_entry(b'{"s": "a\xffb"}') == ({"s": "a\ufffdb"}, None), (
        "damaged bytes are shown, not the record hidden"
    )
    assert parse_entry(b"[" * 100000) == (None, None), "absurd nesting is damage, not a crash"


# A call record as the writer makes one.
CALL: dict[str, Any] = {
    "id": "01KAB",
    "timestamp": "2026-11-21T10:00:00.123Z",
    "type": "tool_call",
    "server": "github",
    "tool": "delete_file",
    "status": "success",
    "duration_ms": 3.25,
    "metadata": {"intent": {"operation_type": "write"}, "tool_variant": "call_tool_destructive"},
    "decision": {"by": "editor", "outcome": "allow", "wait_ms": 2300.0},
}


def hostile_lines(rng: random.Random) -> list[bytes]:
    """Lines as a writer, a person with an editor, or an attacker with write access to the log may leave them."""
    base: dict[str, Any] = {
        **CALL,
        "status": "denied",
        "metadata": {"intent": {"operation_type": "destructive", "reason": "r"}, "tool_variant": "call_tool_write"},
        "decision": {"by": "policy", "outcome": "deny", "rule": "permissions.destructive"},
        "error": {"code": "PERMISSION_DENIED", "message": "denied"},
        "arguments": {"path": "/x", "deep": [[[{"a": [1, 2.5, None, True]}]]]},
        "response_preview": 'a "quoted" \\ preview',
    }
    odd: list[Any] = [None, "", 0, -0.0, 2**70, -(2**64), 1e308, [], {}, [1], "x\x1b[2J", "\U0001f600", "\ud800", True]
    records: list[dict[str, Any]] = [base]
    for key in [*base, "started_id", "outcome", "details"]:
        for value in odd:
            records.append({**base, key: value})
    for key, inner in (("metadata", "intent"), ("metadata", "tool_variant"), ("decision", "by"), ("error", "code")):
        for value in odd:
            records.append({**base, key: {**base[key], inner: value}})
    records.append({**base, "metadata": {"intent": {"operation_type": "read"}, "annotations": odd}})
    records.append({"type": "config_error", "details": {"errors": [{"path": "p", "message": "m", "line": 2**65}]}})
    lines = [json.dumps(r, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass") for r in records]
    for _ in range(300):  # numbers written every way JSON allows
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 25))).lstrip("0") or "0"
        fraction = "." + "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 20)))
        exponent = rng.choice(["", "e5", "E-7", "e+300", "e-320", "e400", "E-400"])
        number = rng.choice(["", "-"]) + digits + rng.choice(["", fraction]) + exponent
        lines.append(b'{"duration_ms": %s, "decision": {"wait_ms": %s}}' % (number.encode(), number.encode()))
    lines += [
        b'{"id": 1, "id": "two", "metadata": {"tool_variant": "a", "tool_variant": "call_tool_read"}}',
        b'{"server": NaN, "tool": Infinity}',
        b'{"server": "\\ud800"}',
        b'{"server": "a\x01b"}',
        b'{"id": "x"} trailing',
        b'\xef\xbb\xbf{"id": "bom"}',
        b'{"id": "\xff"}',
        b'{"id": "u", "arguments": {"path": "caf\xe9", "ok": "caf\xc3\xa9"}, "response_preview": "\xc3"}',
        b'{"id": "v", "arguments": {"s": "\xed\xa0\x80"}}',
        b'  {"id": "spaced"}  ',
        b"[1, 2]",
        b'"a string"',
        b'{"arguments": ' + b"[" * 3000 + b"]" * 3000 + b"}",
        b'{"metadata": ' + b"[" * 600 + b"]" * 600 + b"}",
        b'{"details": {"summary": "s", "tools": 3}, "type": "upstream_connected", "server": "fs"}',
        b'{"metadata": {"intent": "destructive"}, "decision": ["by"], "error": "boom"}',
        b'{"metadata": null, "decision": null, "error": null}',
    ]
    return lines


def test_a_listing_reads_of_a_line_what_the_full_reading_reads() -> None:
    parse = reader.listed_parser()
    filters = [RecordFilter(), RecordFilter(intent_type="destructive"), RecordFilter(intent_type="read")]
    filters += [RecordFilter(status="denied"), RecordFilter(server="github"), RecordFilter(type="config_error")]
    for line in hostile_lines(random.Random(11)):
        full, _raw = parse_entry(line)
        view, raw = parse(line)
        if full is None:
            assert view is None and raw is None, line[:80]
            continue
        # As far as a listing reads it, or whole (what msgspec refused is read in full); and whole where it is not
        # passed on as it is (it is then shown as JSON re-encoded).
        assert view == listed(full) or view == full, line[:80]
        if raw is None:
            assert view == full, line[:80]
        else:  # passed on as it is: strict JSON holding exactly what the full reading read
            assert raw == line and json.loads(raw) == full, line[:80]
        for plain in (False, True):
            assert display.row(view, plain) == display.row(full, plain), line[:80]
        assert [f.matches(view) for f in filters] == [f.matches(full) for f in filters], line[:80]
        assert display.intent_type(view) == display.intent_type(full)


def test_only_an_untouched_record_keeps_its_line(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    started = {"id": "S1", "type": "tool_call_started", "status": "started", "metadata": {"tool_variant": "x"}}
    done = {"id": "D1", "type": "tool_call", "status": "success", "started_id": "S0"}
    path.write_text("".join(json.dumps(r) + "\n" for r in (started, done)), encoding="utf-8")
    entries = list(matching_entries_newest_first(path, RecordFilter()))
    assert [(r["id"], line is not None) for r, line in entries] == [("D1", True), ("S1", False)]
    assert entries[1][0]["outcome"] == "unknown"
    assert [r for r, _ in entries] == list(matching_newest_first(path, RecordFilter()))


def test_activity_list_json_holds_the_same_records_as_before(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "activity.jsonl"
    random_log(path, random.Random(7), 60)
    flt = RecordFilter(intent_type="destructive")
    expected = list(matching_newest_first(path, flt))
    env = {**os.environ, "MCPHOST_DATA_DIR": str(tmp_path), "MCPHOST_CONFIG": str(tmp_path / "c.toml")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcphost",
            "activity",
            "list",
            "--intent-type",
            "destructive",
            "--limit",
            "0",
            "-o",
            "json",
        ],
        capture_output=True,
        env=env,
        check=True,
    )
    assert json.loads(done.stdout) == expected
    assert done.stdout.startswith(b"[\n{") and done.stdout.endswith(b"}\n]\n")


@pytest.mark.parametrize("columns", ["", "80"])
def test_activity_list_of_every_match_is_the_table_of_the_newest_n(tmp_path: Path, columns: str) -> None:
    import subprocess
    import sys

    random_log(tmp_path / "activity.jsonl", random.Random(8), 300)
    env = {**os.environ, "MCPHOST_DATA_DIR": str(tmp_path), "MCPHOST_CONFIG": str(tmp_path / "c.toml")}
    env["COLUMNS"] = columns
    base = [sys.executable, "-m", "mcphost", "activity", "list", "--intent-type", "write"]
    every = subprocess.run([*base, "--limit", "0"], capture_output=True, env=env, check=True)
    newest = subprocess.run([*base, "--limit", "1000"], capture_output=True, env=env, check=True)
    assert every.stdout == newest.stdout and every.stdout.count(b"\n") > 50
    assert every.stderr == newest.stderr == b""
    none = subprocess.run([*base[:-2], "--tool", "nothing", "--limit", "0"], capture_output=True, env=env, check=True)
    assert none.stdout == b"" and b"no matching activity" in none.stderr


# ---------------------------------------------------------------------------------------------- display


def test_the_quick_safe_is_console_safe() -> None:
    samples = ["plain", "tab\there", "x" * 60, "中文", "emoji 💥", "", "\u00a0nbsp", "soft\u00adhyphen"]
    samples += [chr(c) for c in range(0x00, 0x250)] + [chr(c) for c in range(0x2000, 0x2070)] + ["\ufeff", "\u2028"]
    for text in samples:
        for limit in (None, 3, 48):
            assert display.safe(text, limit) == console.safe(text, limit), repr(text)
    for value in (None, 3, 2.5, ["a\x1b"], {"k": "v"}):
        assert display.safe(value) == console.safe(value)


def cell_by_cell(columns: tuple[console.Column, ...], rows: list[tuple[str, ...]], width: int | None) -> list[str]:
    """What console.Table lays out column by column, the long way: every cell escaped, measured, cut and padded on
    its own, with the widths the table settled on."""
    table = console.Table(columns, width=width)
    table.lines(rows)
    out = []
    for cells in [tuple(c.header for c in columns), *rows]:
        shown = [i for i, keep in enumerate(table.shown) if keep]
        parts = []
        for i in shown:
            cell = console.cut(console.safe(cells[i]), table.widths[i])
            parts.append(cell if i == shown[-1] else cell + " " * (table.widths[i] - console.cell_width(cell)))
        out.append("  ".join(parts).rstrip())
    return out


@pytest.mark.parametrize("width", [None, 60, 100, 200])
def test_the_table_laid_out_by_column_is_the_table_laid_out_cell_by_cell(width: int | None) -> None:
    rng = random.Random(width)
    words = ["todo:add_task", "中文:工具", "allow by policy", "deny by person after 2.3s", "x\x1b[2J", "", "💥"]
    words += ["line 2, column 1: permissions.wrte: unknown key 'wrte'", "a" * 60, "one two three four five six"]
    rows = [tuple(rng.choice(words) for _ in display.TABLE_COLUMNS) for _ in range(40)]
    rows.append(("", "·· config_reload", "", "", "", "", ""))
    table = console.Table(display.TABLE_COLUMNS, width=width)
    assert table.lines(rows) == cell_by_cell(display.TABLE_COLUMNS, rows, width)
    assert console.Table(display.TABLE_COLUMNS).lines([]) == ["TIME  INTENT  TOOL  STATUS  DETAIL"]


def exact_local_time(record: dict[str, Any]) -> str:
    """local_time as it was before its cache: one conversion per record (a time the conversion would move past the
    calendar's end is shown as written)."""
    when = display.record_time(record)
    if when is not None:
        try:
            return when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        except OverflowError:
            pass
    return console.safe(record.get("timestamp", "?"), 23)


@pytest.fixture
def zones() -> Iterator[list[str]]:
    before = os.environ.get("TZ")
    yield ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Asia/Kathmandu"]
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()
    display._local_hours.clear()


def test_local_times_by_the_hour_are_the_times_one_by_one(zones: list[str]) -> None:
    # Around the 2026 daylight saving changes of Europe, the US and Lord Howe (half an hour), and plain hours.
    starts = [datetime(2026, 3, 29, 0, tzinfo=UTC), datetime(2026, 3, 8, 6, tzinfo=UTC)]
    starts += [datetime(2026, 4, 4, 14, tzinfo=UTC), datetime(2026, 10, 3, 15, tzinfo=UTC)]
    stamps = []
    for start in starts:
        for minutes in range(0, 240, 7):
            when = start + timedelta(minutes=minutes, seconds=minutes % 60)
            stamps.append(when.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
            stamps.append(when.isoformat())
    stamps += ["2026-02-30T10:00:00Z", "2026-11-21T24:00:00Z", "2026-11-21T10:00:60Z", "2026-11-21", "garbled"]
    stamps += ["2026-11-21T10:00:00+02:00", "2026-11-21T10:00:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]
    for zone in zones:
        os.environ["TZ"] = zone
        time.tzset()
        display._local_hours.clear()
        for stamp in stamps:
            record = {"timestamp": stamp}
            assert display.local_time(record) == exact_local_time(record), (zone, stamp)


def _call_records() -> list[dict[str, Any]]:
    """Call records as the writer makes them and every way a field can be odd: missing, empty, another type, holding
    a control character; one field varied at a time, so the one-pass row is compared field by field."""
    base: dict[str, Any] = dict(CALL)
    odd: list[Any] = [None, "", 0, 1.5, True, [], {}, "x\x1b[2J", "\u202e", "ok"]
    variants: dict[str, list[Any]] = {
        "id": odd,
        "server": odd,
        "tool": odd,
        "status": odd,
        "duration_ms": [*odd, 12, 999.5, 1000.0, 10.0, 9.95, -1.0, float("nan")],
        "metadata": [*odd, {"intent": "destructive"}, {"tool_variant": "call_tool_read"}, {"intent": {}}],
        "decision": [
            *odd,
            {"by": "policy", "outcome": "deny"},
            {"by": "editor", "outcome": "", "wait_ms": 12},
            {"by": "editor", "wait_ms": True},
            {"by": "editor", "outcome": None, "wait_ms": "3"},
            {"by": "somebody", "outcome": "allow"},
            {"by": "remembered_grant", "outcome": "allow\x07"},
            {"by": "timeout", "wait_ms": 5},
        ],
        "error": [
            *odd,
            {"code": "PERMISSION_DENIED", "message": "denied by policy"},
            {"code": "", "message": "no code"},
            {"code": 7, "message": None},
            {"message": ["a list"]},
            {"code": "E\x1b", "message": "bell\x07"},
        ],
        "outcome": ["unknown", None],
        "type": ["tool_call", "hook_decision", "tool_call_started"],
    }
    records: list[dict[str, Any]] = [base]
    for key, values in variants.items():
        for value in values:
            records.append({**base, key: value})
            if key == "metadata" and isinstance(value, dict):
                records.append({**base, key: {**value, "intent": {"operation_type": "destructive"}}})
            if key == "error":
                records.append({k: v for k, v in {**base, key: value}.items() if k != "decision"})
    records.append({k: v for k, v in base.items() if k not in ("decision", "duration_ms", "id")})
    return records


def test_a_row_has_the_cells_the_functions_make(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = [
        {
            "id": "01X",
            "timestamp": "2026-11-21T10:00:00.123Z",
            "type": "tool_call",
            "server": "fs",
            "tool": "t" * 60,
            "status": "success",
            "duration_ms": 1234.5,
            "metadata": {"intent": {"operation_type": "destructive"}},
            "decision": {"by": "editor", "outcome": "allow", "wait_ms": 2300},
        },
        {"type": "config_reload", "details": {"summary": "x"}},
        {"type": "tool_call_started", "status": "started", "outcome": "unknown", "error": {"code": "E\x1b"}},
        {"type": "weird\x1b[2J", "decision": {"by": "somebody\x07"}},
    ]
    for record in [*records, *_call_records()]:
        for plain in (False, True):
            kind = display.intent_type(record) if display.is_call(record) else None
            icon = display.icon(record, plain)
            intent = f"{icon} {kind}" if kind else f"{icon} {console.safe(record.get('type'))}"
            expected = (
                display.local_time(record),
                intent,
                display.target(record),  # cut to 48 by the table's TOOL column
                display.status(record),
                display.duration(record),
                display.detail_cell(record),
                console.safe(record.get("id", "")),
            )
            assert display.row(record, plain) == expected


# ---------------------------------------------------------------------------------------------- call -o json

RESULTS: list[dict[str, Any]] = [
    {"content": [{"type": "text", "text": "hi"}]},
    {"content": [{"type": "text", "text": "hi"}], "isError": False, "structuredContent": {"a": None, "b": [1.5]}},
    {"content": [], "isError": True, "resultType": "complete", "_meta": {"k": None}},
    {"content": [{"type": "text", "text": "x", "_meta": {"m": 1}}], "structuredContent": None, "_meta": None},
    {"resultType": "complete", "isError": False, "content": [{"text": "order", "type": "text"}]},
    # Off the quick path, through the SDK's model:
    {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]},
    {"content": [{"type": "text", "text": "a", "annotations": {"priority": 0.5, "audience": ["user"]}}]},
    {"content": [{"type": "resource", "resource": {"uri": "file:///x", "text": "t", "mimeType": "text/plain"}}]},
    {"content": [{"type": "resource_link", "uri": "file:///y", "name": "y", "icons": [{"src": "data:,"}]}]},
    {"content": [{"type": "text", "text": "x", "unknown": 1}], "extra": True},
    {"content": [], "isError": 1},
]


@pytest.mark.parametrize("result", RESULTS)
def test_a_daemons_result_is_printed_as_the_sdk_model_dumps_it(result: dict[str, Any]) -> None:
    import mcp_types

    expected = mcp_types.CallToolResult.model_validate(result).model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped = as_dumped(result)
    assert dumped == expected
    assert json.dumps(dumped) == json.dumps(expected), "the same keys in the same order"


def test_what_is_not_a_tool_result_is_said_so() -> None:
    with pytest.raises(ValueError):
        as_dumped({"isError": False})


# ---------------------------------------------------------------------------------------------- all cores


def history(path: Path, rng: random.Random, count: int) -> datetime:
    """Calls over ten days, in time order: some writes start, and their outcome (naming the start) follows a few
    records later, or never comes. Returns the time of the last record."""
    now = datetime.now(UTC)
    first = now - timedelta(days=10)
    lines: list[str] = []
    pending: list[tuple[int, str]] = []
    for i in range(count):
        when = (first + timedelta(days=10) * i / count).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        op = rng.choice(["read", "write", "destructive"])
        record: dict[str, Any] = {
            "id": f"R{i:06d}",
            "timestamp": when,
            "type": "tool_call",
            "server": "s",
            "tool": rng.choice(["a", "b"]),
            "status": "success",
            "metadata": {"intent": {"operation_type": op}, "tool_variant": f"call_tool_{op}"},
            "pad": "p" * rng.randrange(0, 3000),
        }
        due = [p for p in pending if p[0] <= i]
        if due:
            pending.remove(due[0])
            record["started_id"] = due[0][1]
        elif op != "read" and rng.random() < 0.3:
            record.update(type="tool_call_started", status="started")
            if rng.random() < 0.8:
                pending.append((i + rng.randrange(1, 40), record["id"]))
        lines.append(json.dumps(record))
    cut = len(lines) // 3
    (path.parent / (path.name + ".1")).write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
    path.write_text("\n".join(lines[cut:]) + "\n", encoding="utf-8")
    return now


def listed(record: dict[str, Any], fields: dict[str, Any] = LISTED) -> dict[str, Any]:
    """What a listing's reading keeps of a record (reader.listed_parser)."""
    return {
        key: listed(value, fields[key]) if isinstance(value, dict) and fields[key] is not None else value
        for key, value in record.items()
        if key in fields
    }


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_reading_on_all_cores_gives_what_one_process_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    from mcphost.activity.query import parse_filter
    from mcphost.cli import scan

    path = tmp_path / "activity.jsonl"
    now = history(path, random.Random(workers), 1500)
    monkeypatch.setattr(scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "_workers", lambda: workers)
    rendered_here: list[str] = []  # a helper's list is its own: this one holds this process's renders only

    def render(record: dict[str, Any], line: bytes | None) -> tuple[dict[str, Any], bytes | None]:
        rendered_here.append(record["id"])
        return record, line

    for params in ({}, {"intent_type": "destructive"}, {"status": "started"}, {"since": "3d"}, {"tool": "a"}):
        flt = parse_filter(params, now)
        # A start shown with its outcome unknown is shown whole; any other record, as far as a listing reads it.
        expected = [(r if line is None else listed(r), line) for r, line in matching_entries_newest_first(path, flt)]
        rendered_here.clear()
        assert list(scan.rendered_newest_first(path, flt, render)) == expected, params
        if not params:
            assert 0 < len(rendered_here) < len(expected) / (workers - 1), "the older parts were read by helpers"


# Lines that hold no record: a JSON value that is no object, a record cut short, nesting past any parser, text.
NOT_RECORDS = [b"[1,2,3]", b"42", b"null", b'{"id":"D1","type":"tool_call","tool":"wipe"', b"[" * 5000, b"hello"]


@pytest.mark.parametrize("workers", [1, 3])
def test_lines_that_hold_no_record_are_counted_by_every_scan_whichever_process_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    from mcphost.cli import scan

    path = tmp_path / "activity.jsonl"
    history(path, random.Random(workers), 900)
    for file in (path, path.parent / (path.name + ".1")):  # spread over the parts the helpers read
        lines = file.read_bytes().splitlines()
        for n, junk in enumerate(NOT_RECORDS):
            lines.insert(len(lines) * n // len(NOT_RECORDS), junk)
        file.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "_workers", lambda: workers)
    every = RecordFilter()
    scans = {
        "rendered": lambda: list(scan.rendered_newest_first(path, every, lambda r, _l: r["id"])),
        "laid out": lambda: list(
            scan.laid_out_newest_first(path, every, lambda r, _l: display.row(r), display.listing())
        ),
        "folded": lambda: scan.folded_newest_first(path, every, lambda r, _l: 1, sum),
    }
    for name, run in scans.items():
        reader._counts.n = 0
        assert run(), name
        assert reader.not_records() == 2 * len(NOT_RECORDS), name
    reader._counts.n = 0
    assert list(reader.entries_newest_first(path)) and reader.not_records() == 2 * len(NOT_RECORDS)


@pytest.mark.parametrize(("workers", "width"), [(1, None), (2, None), (3, 70), (4, 120)])
def test_a_table_laid_out_on_all_cores_is_the_table_laid_out_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, width: int | None
) -> None:
    from mcphost.activity.query import parse_filter
    from mcphost.cli import scan

    path = tmp_path / "activity.jsonl"
    now = history(path, random.Random(workers), 1500)
    monkeypatch.setattr(scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "_workers", lambda: workers)
    for params in ({}, {"intent_type": "write"}, {"status": "started"}, {"since": "3d"}, {"tool": "nothing"}):
        flt = parse_filter(params, now)
        rows = [display.row(record) for record, _line in matching_entries_newest_first(path, flt)]
        expected = display.listing(width=width).lines(rows) if rows else []
        laid = scan.laid_out_newest_first(path, flt, lambda r, _l: display.row(r), display.listing(width=width))
        text = "\n".join(laid)
        assert (text.split("\n") if text else []) == expected, params


def test_a_table_helper_that_fails_at_any_step_leaves_its_part_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcphost.cli import scan

    path = tmp_path / "activity.jsonl"
    history(path, random.Random(8), 900)
    monkeypatch.setattr(scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "_workers", lambda: 3)
    parent = os.getpid()
    rows = [display.row(record) for record, _line in matching_entries_newest_first(path, RecordFilter())]
    expected = display.listing().lines(rows)

    class Breaking(console.Table):
        def __init__(self, step: str) -> None:
            super().__init__(display.TABLE_COLUMNS)
            self.step = step

        def measure(self, rows: Any) -> console.Measures:
            if self.step == "measure" and os.getpid() != parent:
                os._exit(3)
            return super().measure(rows)

        def render(self, rows: Any) -> list[str]:
            if self.step == "render" and os.getpid() != parent:
                raise RuntimeError("a helper that breaks after measuring")
            return super().render(rows)

    for step in ("measure", "render"):
        laid = scan.laid_out_newest_first(path, RecordFilter(), lambda r, _l: display.row(r), Breaking(step))
        assert "\n".join(laid).split("\n") == expected, step


def test_parts_of_a_table_measured_apart_lay_out_as_one() -> None:
    rng = random.Random(3)
    words = ["todo:add_task", "中文:工具", "allow by policy", "x\x1b[2J", "", "💥 destructive", "a" * 70, "b c d"]
    rows = [tuple(rng.choice(words) for _ in display.TABLE_COLUMNS) for _ in range(90)]
    for width in (None, 50, 90):
        whole = display.listing(width=width).lines(rows)
        here, there = display.listing(width=width), display.listing(width=width)
        parts = [rows[:30], rows[30:31], rows[31:]]
        here.fit([here.measure(parts[0]), there.measure(parts[1]), there.measure(parts[2])])
        there.follow(here.plan())
        laid = [here.header(), *here.render(parts[0]), *there.render(parts[1]), *there.render(parts[2])]
        assert laid == whole, width


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_counting_on_all_cores_gives_what_one_process_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    from mcphost.activity.query import facts, parse_filter, summarize, summary_of, tally
    from mcphost.cli import scan

    path = tmp_path / "activity.jsonl"
    now = history(path, random.Random(workers + 10), 1500)
    monkeypatch.setattr(scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "_workers", lambda: workers)
    parent = os.getpid()

    def counted(record: dict[str, Any], _line: bytes | None) -> Any:
        if workers == 4 and os.getpid() != parent and record["id"].endswith("7"):
            raise RuntimeError("a helper that breaks: its part is counted here")
        return facts(record)

    for params in ({}, {"intent_type": "write"}, {"status": "started"}, {"since": "3d"}, {"tool": "nothing"}):
        flt = parse_filter(params, now)
        expected = summarize(matching_newest_first(path, flt))
        assert summary_of(scan.folded_newest_first(path, flt, counted, tally)) == expected, params
        assert expected.total or params == {"tool": "nothing"}


def test_a_helper_that_fails_leaves_its_part_to_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcphost.cli import scan

    path = tmp_path / "activity.jsonl"
    history(path, random.Random(5), 800)
    monkeypatch.setattr(scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "_workers", lambda: 3)
    parent = os.getpid()

    def render(record: dict[str, Any], line: bytes | None) -> str:
        if os.getpid() != parent:
            raise RuntimeError("a helper that breaks")
        return str(record["id"])

    expected = [str(r["id"]) for r, _ in matching_entries_newest_first(path, RecordFilter())]
    assert list(scan.rendered_newest_first(path, RecordFilter(), render)) == expected


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The helpers a reading on four cores starts, as they are started."""
    from mcphost.cli import scan

    monkeypatch.setattr(scan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(scan, "_workers", lambda: 4)
    helpers: list[scan.Helper] = []
    real_start = scan.Helper.start

    def start(*args: Any) -> scan.Helper:
        helper = real_start(*args)
        helpers.append(helper)
        return helper

    monkeypatch.setattr(scan.Helper, "start", start)
    return helpers


def test_a_reader_that_stops_early_leaves_no_helper_behind(tmp_path: Path, started: list[Any]) -> None:
    from mcphost.cli import scan

    path = tmp_path / "activity.jsonl"
    history(path, random.Random(6), 800)
    reading = scan.rendered_newest_first(path, RecordFilter(), lambda record, _line: record["id"])
    assert next(reading)
    reading.close()
    assert len(started) == 3 and all(h.pid == 0 and h.fd is None for h in started)


def test_a_table_reader_that_stops_early_leaves_no_helper_behind(tmp_path: Path, started: list[Any]) -> None:
    from mcphost.cli import scan

    path = tmp_path / "activity.jsonl"
    history(path, random.Random(9), 800)
    laid = scan.laid_out_newest_first(path, RecordFilter(), lambda r, _l: display.row(r), display.listing())
    assert next(laid).startswith("TIME")
    laid.close()
    assert len(started) == 3 and all(h.pid == 0 and h.fd is None and h.plan_fd is None for h in started)
