"""Reading the log: from the end, tolerant of other versions and damage; filters; display for a terminal."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mcphost.activity import display
from mcphost.activity.query import (
    FilterError,
    RecordFilter,
    intent_type,
    parse_filter,
    parse_limit,
    parse_time,
    select,
    summarize,
)
from mcphost.activity.reader import (
    BLOCK,
    LOOK_OVER_FROM,
    Follower,
    NonFinite,
    loads_exact,
    looked_over,
    may_hold_wide_int,
    opening_brackets,
    records_newest_first,
    tail,
)
from mcphost.activity.record import ActivityRecord, new_record_id


def call(op: str, i: int = 0, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": new_record_id(),
        "timestamp": datetime.now(UTC).isoformat(),
        "type": "tool_call",
        "server": extra.pop("server", "todo"),
        "tool": extra.pop("tool", f"t{i}"),
        "status": extra.pop("status", "success"),
        "metadata": {"intent": {"operation_type": op}, "tool_variant": f"call_tool_{op}"},
    }
    record.update(extra)
    return record


def write(path: Path, records: list[dict[str, Any]], tail_bytes: bytes = b"") -> None:
    with path.open("ab") as f:
        for record in records:
            f.write(json.dumps(record).encode() + b"\n")
        f.write(tail_bytes)


def test_tail_returns_the_last_matches_oldest_first_and_skips_damage(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", i) for i in range(5)])
    with path.open("ab") as f:
        f.write(b"not json at all\n[1, 2]\n")
    write(path, [call("destructive", 5), call("read", 6)], tail_bytes=b'{"id": "partial", "ty')
    records, position = tail(path, 3, lambda r: True)
    assert [r["tool"] for r in records] == ["t4", "t5", "t6"]
    assert position is not None and position.offset == path.stat().st_size - len(b'{"id": "partial", "ty')
    only, _ = tail(path, 10, RecordFilter(intent_type="destructive").matches)
    assert [r["tool"] for r in only] == ["t5"]


def test_reading_from_the_end_handles_lines_across_block_boundaries(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    records = [call("read", i, pad="y" * (BLOCK // 3 + i)) for i in range(12)]
    write(path, records)
    assert [r["tool"] for r in records_newest_first(path)] == [f"t{i}" for i in reversed(range(12))]
    assert [r["tool"] for r in records_newest_first(path, b"t7")] == ["t7"]


def test_records_of_other_versions_are_kept_whole(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(path, [{"id": "x", "type": "future_event", "shiny_new_field": {"a": 1}}, {"timestamp": "garbled"}])
    records, _ = tail(path, 5, lambda r: True)
    assert records[0]["shiny_new_field"] == {"a": 1}
    assert "shiny_new_field" in display.detail(records[0])
    assert display.line(records[1])  # no time, no type, no id: still a line, not a crash
    assert display.table(records)


def test_tail_continues_into_rotated_files(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(tmp_path / "activity.jsonl.2", [call("read", 0)])
    write(tmp_path / "activity.jsonl.1", [call("read", 1), call("read", 2)])
    write(path, [call("read", 3)])
    records, _ = tail(path, 10, lambda r: True)
    assert [r["tool"] for r in records] == ["t0", "t1", "t2", "t3"]


def test_follower_emits_a_line_only_once_it_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", 0)])
    _, position = tail(path, 1, lambda r: True)
    follower = Follower(path, position)
    line = json.dumps(call("write", 1)).encode() + b"\n"
    with path.open("ab") as f:
        f.write(line[:20])
    assert follower.poll() == []
    with path.open("ab") as f:
        f.write(line[20:])
    assert [r["tool"] for r in follower.poll()] == ["t1"]
    assert follower.poll() == []
    follower.close()


def test_intent_type_falls_back_to_the_variant_for_calls_rejected_before_their_intent_parsed() -> None:
    assert intent_type(call("write")) == "write"
    rejected = {"metadata": {"intent": {"raw": "nonsense"}, "tool_variant": "call_tool_destructive"}}
    assert intent_type(rejected) == "destructive"
    assert intent_type({"type": "config_reload"}) is None


@pytest.mark.parametrize(
    ("params", "parameter", "listed"),
    [
        ({"intent_type": "delete"}, "intent_type", "read, write, destructive"),
        ({"status": "ok"}, "status", "success, error, rejected, denied, expired"),
        ({"type": "call"}, "type", "tool_call, tool_call_started, config_reload"),
        ({"since": "yesterday"}, "since", "15m"),
    ],
)
def test_a_bad_filter_value_names_the_parameter_and_the_valid_values(
    params: dict[str, str], parameter: str, listed: str
) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(params)
    assert caught.value.parameter == parameter
    assert listed in caught.value.message


def test_limits_outside_the_range_are_refused() -> None:
    assert parse_limit(None) == 50 and parse_limit("7") == 7
    for bad in ("0", "1001", "x", "-1"):
        with pytest.raises(FilterError):
            parse_limit(bad)


def test_since_takes_ages_and_times() -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    assert parse_time("15m", now) == now - timedelta(minutes=15)
    assert parse_time("2d", now) == now - timedelta(days=2)
    assert parse_time("2026-11-21T10:00:00Z") == datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    assert parse_time("2026-11-21T11:00:00+01:00") == datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def test_every_filter_selects_exactly_its_records(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    old = call("read", 0)
    old["timestamp"] = (datetime.now(UTC) - timedelta(hours=3)).isoformat()
    write(
        path,
        [
            old,
            call("write", 1, status="denied"),
            call("destructive", 2, server="gh"),
            call("read", 3, tool="special"),
            {"id": new_record_id(), "timestamp": datetime.now(UTC).isoformat(), "type": "config_reload"},
        ],
    )

    def tools(**params: str) -> list[str | None]:
        return [r.get("tool") for r in select(path, parse_filter(params), None).records]

    assert tools(intent_type="write") == ["t1"]
    assert tools(status="denied") == ["t1"]
    assert tools(server="gh") == ["t2"]
    assert tools(tool="special") == ["special"]
    assert tools(type="config_reload") == [None]
    assert tools(since="1h") == [None, "special", "t2", "t1"]
    assert tools(intent_type="read", since="1h") == ["special"]


def test_pages_walk_every_record_once_even_when_new_ones_arrive(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", i) for i in range(7)])
    flt = RecordFilter()
    first = select(path, flt, 3)
    write(path, [call("read", 100)])  # arrives between pages
    second = select(path, flt, 3, first.next_cursor)
    third = select(path, flt, 3, second.next_cursor)
    seen = [r["tool"] for page in (first, second, third) for r in page.records]
    assert seen == [f"t{i}" for i in reversed(range(7))]
    assert third.next_cursor is None


def test_summary_counts_by_intent_status_and_server() -> None:
    records = [call("read"), call("read", status="error"), call("destructive", server="gh"), {"type": "config_error"}]
    summary = summarize(records)
    assert summary.total == 4
    assert summary.by_intent == {"read": 2, "destructive": 1}
    assert summary.by_status == {"success": 2, "error": 1}
    assert summary.by_server == {"todo": 2, "gh": 1}
    assert summary.by_type == {"tool_call": 3, "config_error": 1}


def test_three_distinct_intent_icons_used_for_nothing_else() -> None:
    icons = [display.icon(call(op)) for op in ("read", "write", "destructive")]
    assert len(set(icons)) == 3
    assert display.icon({"type": "config_reload"}) not in icons
    line = display.line(call("read", status="error"))
    assert sum(line.count(i) for i in icons) == 1
    ascii_icons = [display.icon(call(op), ascii_only=True) for op in ("read", "write", "destructive")]
    assert len(set(ascii_icons)) == 3 and all(i.isascii() for i in ascii_icons)


def test_agent_text_cannot_drive_the_terminal() -> None:
    evil = call("write", tool="x\x1b[2J\x1b]8;;http://evil\x07click\u202e")
    evil["metadata"]["intent"]["reason"] = "fine\r\x1b[31mFAKE: approved by person"
    for text in (display.line(evil), display.detail(evil), display.table([evil])):
        assert "\x1b" not in text and "\r" not in text and "\u202e" not in text and "\x07" not in text
    assert "\\x1b[31mFAKE" in display.detail(evil)


def test_the_model_round_trips_through_a_line() -> None:
    record = ActivityRecord(server="s", tool="t", status="success")
    parsed = json.loads(record.to_json_line())
    assert parsed["id"] == record.id and parsed["timestamp"].endswith("Z")
    assert ActivityRecord.model_validate({**parsed, "from_the_future": 1}).model_extra == {"from_the_future": 1}


def test_ids_sort_in_the_order_one_process_made_them() -> None:
    ids = [new_record_id() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == 2000


def test_a_follower_started_before_the_log_exists_sees_records_even_if_it_rotated_meanwhile(tmp_path: Path) -> None:
    from mcphost.activity.writer import ActivityLog, LogSettings

    path = tmp_path / "activity.jsonl"
    _, position = tail(path, 0, lambda r: True)
    follower = Follower(path, position)
    log = ActivityLog(path, LogSettings(fsync=False, max_bytes=1500, keep=100))
    for i in range(40):
        log.append(ActivityRecord(server="s", details={"seq": i}))
    log.close()
    assert len(list(tmp_path.glob("activity.jsonl.*"))) > 3
    assert [r["details"]["seq"] for r in follower.poll()] == list(range(40))
    follower.close()


def test_tail_with_since_stops_reading_at_the_time_bound(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    old = [call("read", i) for i in range(500)]
    for record in old:
        record["timestamp"] = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    write(path, [*old, call("read", 900), call("read", 901)])
    flt = parse_filter({"since": "1h"})
    looked_at: list[str] = []

    def keep(record: dict[str, Any]) -> bool:
        looked_at.append(record["tool"])
        return flt.matches(record)

    records, _ = tail(path, 20, keep, flt.needle(), flt.is_past)
    assert [r["tool"] for r in records] == ["t900", "t901"]
    assert looked_at == ["t901", "t900"], "nothing older than the bound was even considered"


def test_the_prefilter_needle_skips_look_alikes_but_keeps_every_match() -> None:
    read = call("read")
    read["metadata"]["annotations"] = {"readOnlyHint": True}
    needle = RecordFilter(intent_type="destructive").needle()
    assert needle is not None
    destructive_variant_only = {"metadata": {"intent": {"raw": "x"}, "tool_variant": "call_tool_destructive"}}
    for record in (call("destructive"), destructive_variant_only):
        assert needle in json.dumps(record).encode() and needle in json.dumps(record, separators=(",", ":")).encode()
    look_alike = call("read")
    look_alike["metadata"]["annotations"] = {"destructiveHint": False}
    assert needle not in json.dumps(look_alike).encode()
    assert RecordFilter(tool="add_task").needle() == b'"add_task"'


def test_record_ids_are_crockford_ulids_that_carry_their_time_and_sort_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcphost.activity import ids

    def reference(value: int) -> str:  # the ULID spec's way: one character per 5 bits, most significant first
        return "".join(ids._CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))

    when = 1_763_900_000_123
    for random_part in (bytes(10), b"\xff" * 10, bytes(range(1, 11)), b"\x80" + bytes(9)):
        monkeypatch.setattr(ids, "_random_80", lambda part=random_part: int.from_bytes(part, "big"))
        made = ids.new_record_id(when)
        assert made == reference((when << 80) | int.from_bytes(random_part, "big"))
        assert ids.id_time_ms(made) == when
    monkeypatch.undo()
    live = [new_record_id() for _ in range(200)]
    assert live == sorted(live) and len(set(live)) == len(live)


@pytest.mark.parametrize("now", [0.0, 1_763_900_000.0, 1_763_900_000.123456, 1_763_900_000.9999, 4_102_444_799.5])
def test_record_times_are_utc_with_milliseconds_cut_not_rounded(monkeypatch: pytest.MonkeyPatch, now: float) -> None:
    from mcphost.activity import record

    monkeypatch.setattr(record.time, "time", lambda: now)
    expected = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert record.utc_now() == expected
    assert record.utc_now() == expected  # the second's text, now remembered, is the same


def test_a_listing_that_misses_the_followed_file_mid_rotation_skips_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A directory listing taken while another process renames files may miss a renamed entry. The followed file not
    # being listed does not mean retention deleted it: only a file with no name left is gone.
    import mcphost.activity.reader as reader

    path = tmp_path / "activity.jsonl"
    write(path, [call("read", 0)])
    _, position = tail(path, 1, lambda r: True)
    follower = Follower(path, position)
    write(path, [call("read", 1)])
    path.rename(tmp_path / "activity.jsonl.2")  # two rotations since the last poll
    write(tmp_path / "activity.jsonl.1", [call("read", 2)])
    write(path, [call("read", 3)])
    real = reader.log_files
    missed: list[bool] = []

    def listing_that_misses_ours(where: Path) -> list[Path]:
        found = real(where)
        if not missed:
            missed.append(True)
            return [p for p in found if p.name != "activity.jsonl.2"]
        return found

    monkeypatch.setattr(reader, "log_files", listing_that_misses_ours)
    seen = follower.poll() + follower.poll()
    assert missed and [r["tool"] for r in seen] == ["t1", "t2", "t3"]
    follower.close()


def test_a_follower_whose_file_retention_deleted_goes_on_with_the_oldest_file_left(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", 0)])
    _, position = tail(path, 1, lambda r: True)
    follower = Follower(path, position)
    write(path, [call("read", 1)])
    path.unlink()  # rotated past `keep` between two polls
    write(tmp_path / "activity.jsonl.2", [call("read", 2)])
    write(tmp_path / "activity.jsonl.1", [call("read", 3)])
    write(path, [call("read", 4)])
    assert [r["tool"] for r in follower.poll()] == ["t1", "t2", "t3", "t4"], "what the deleted file held is read too"
    follower.close()


def test_a_follower_whose_rotated_file_is_deleted_by_hand_never_replays_the_older_ones(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(tmp_path / "activity.jsonl.2", [call("read", 0)])
    write(tmp_path / "activity.jsonl.1", [call("read", 1)])
    write(path, [call("read", 2)])
    _, position = tail(path, 1, lambda r: True)
    follower = Follower(path, position)
    write(path, [call("read", 3)])
    for n in (2, 1):  # a rotation between two polls
        (tmp_path / f"activity.jsonl.{n}").rename(tmp_path / f"activity.jsonl.{n + 1}")
    path.rename(tmp_path / "activity.jsonl.1")
    write(path, [call("read", 4)])
    (tmp_path / "activity.jsonl.1").unlink()  # the file followed, deleted by hand: older ones are left
    assert [r["tool"] for r in follower.poll()] == ["t3", "t4"]
    follower.close()


@pytest.mark.parametrize("pad", [0, 30_000])
def test_a_follower_reads_a_record_whole_after_its_writer_took_back_the_part_a_full_disk_left(
    tmp_path: Path, pad: int
) -> None:
    # The writer cuts a short write back off (writer._append_line); a follower that read that part between the
    # write and the cut holds it as a line being written, and must not glue the next record's tail onto it. With
    # `pad`, the part held is long and only its ends are looked at again; the next record shares its middle.
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", 0)])
    _, position = tail(path, 1, lambda r: True)
    follower = Follower(path, position)
    size = path.stat().st_size
    torn = json.dumps({"id": "torn", "padding": "p" * pad, "tool": "torn"}).encode()[: 40 + pad // 2]
    write(path, [], tail_bytes=torn)
    assert follower.poll() == []
    with path.open("r+b") as f:
        f.truncate(size)
    after = {"id": "next", "padding": "p" * (pad + 30), "tool": "next"}
    write(path, [after])  # longer than the part taken back: the file is past where the follower stopped
    assert [r["id"] for r in follower.poll()] == [after["id"]]
    write(path, [call("read", 3)])
    assert [r["tool"] for r in follower.poll()] == ["t3"]
    follower.close()


def test_a_follower_notices_a_log_emptied_in_place_and_reads_it_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", i) for i in range(3)])
    _, position = tail(path, 3, lambda r: True)
    cuts: list[Path] = []
    follower = Follower(path, position, on_cut=cuts.append)
    path.write_bytes(b"")  # `: > activity.jsonl`: same file, cut to nothing
    fresh = [call("write", i, tool=f"new{i}") for i in range(5)]
    write(path, fresh)  # by the next poll the file is longer than where the follower stopped
    assert [r["id"] for r in follower.poll()] == [r["id"] for r in fresh]
    assert cuts == [path]
    write(path, [call("read", 9)])
    assert [r["tool"] for r in follower.poll()] == ["t9"] and cuts == [path]
    follower.close()


def test_a_log_emptied_between_the_followers_check_and_its_read_is_read_from_its_start(tmp_path: Path) -> None:
    # The follower stopped (SIGSTOP, a busy machine) right after it found its anchor in place: by its read, the file
    # was emptied and written again past its offset. Read from the old offset, it printed only the last records.
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", i) for i in range(3)])
    _, position = tail(path, 3, lambda r: True)
    cuts: list[Path] = []
    follower = Follower(path, position, on_cut=cuts.append)
    fresh = [call("write", i, tool=f"new{i}") for i in range(5)]
    checked = follower._check_appended_only

    def check_then_cut() -> None:
        checked()
        path.write_bytes(b"")
        write(path, fresh)

    follower._check_appended_only = check_then_cut  # type: ignore[method-assign]
    assert [r["id"] for r in follower.poll()] == [r["id"] for r in fresh]
    assert cuts == [path]
    follower.close()


def test_a_log_emptied_between_the_tail_and_the_follower_is_noticed_too(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", i) for i in range(3)])
    _, position = tail(path, 1, lambda r: True)
    path.write_bytes(b"")
    fresh = [call("write", i, tool=f"new{i}") for i in range(5)]
    write(path, fresh)
    cuts: list[Path] = []
    follower = Follower(path, position, on_cut=cuts.append)
    assert [r["id"] for r in follower.poll()] == [r["id"] for r in fresh] and cuts == [path]
    follower.close()


def test_a_follower_of_a_file_only_appended_to_never_reports_a_cut(tmp_path: Path) -> None:
    path = tmp_path / "activity.jsonl"
    write(path, [call("read", 0)])
    _, position = tail(path, 1, lambda r: True)
    cuts: list[Path] = []
    follower = Follower(path, position, on_cut=cuts.append)
    seen: list[str] = []
    for i in range(1, 40):
        line = json.dumps(call("read", i, padding="x" * (i * 7))).encode() + b"\n"
        half = len(line) // 2
        write(path, [], tail_bytes=line[:half])  # a poll between the two halves holds a line being written
        seen += [r["tool"] for r in follower.poll()]
        write(path, [], tail_bytes=line[half:])
        seen += [r["tool"] for r in follower.poll()]
    assert seen == [f"t{i}" for i in range(1, 40)] and cuts == []
    follower.close()


@pytest.mark.parametrize(
    ("text", "wide"),
    [
        (b'{"a": 922337203685477580}', False),  # 18 digits: every such integer fits in 64 bits
        (b'{"a": 9223372036854775807, "b": -1}', True),  # 19: it may not, so the exact parser reads it
        (b'{"a": 1180591620717411303424}', True),
        (b'{"a": "12345678901234567890"}', True),  # in a string: only time is lost
        (b'{"a": 1234567890.123456789, "b": 12345678901234567.8}', False),  # runs of 10, 9, 17 and 1
        (b"", False),
    ],
)
def test_a_line_that_may_hold_an_integer_past_64_bits_is_told_apart(text: bytes, wide: bool) -> None:
    assert may_hold_wide_int(text) is wide


def test_the_brackets_that_bound_a_texts_nesting_are_counted_as_count_counts_them() -> None:
    rng = random.Random(5)
    for _ in range(500):
        data = bytes(rng.choice(b'[]{}"x\\\x00\xff') for _ in range(rng.randint(0, 300)))
        assert opening_brackets(data) == data.count(b"[") + data.count(b"{")


def test_what_the_look_guards_against_is_real() -> None:
    # If orjson ever reads such an integer exactly, the look costs time for nothing and can go.
    import orjson

    text = b'{"a": 1180591620717411303425}'
    assert json.loads(text)["a"] == 2**70 + 1 and orjson.loads(text)["a"] != 2**70 + 1


FILE = "".join(f"    rows[{n}] = {{'id': [{n}], 'ok': \"items\"}}\n" for n in range(200))  # over LOOK_OVER_FROM


def exact_pairs(value: Any) -> Any:
    """`value` with every number as (its type, its value): 1 and 1.0 compare equal, but are not the same reading."""
    if isinstance(value, dict):
        return {k: exact_pairs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exact_pairs(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (type(value).__name__, repr(value))
    return value


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"n": 2**70},  # past 64 bits: orjson would round it
        {"deep": [[[{"n": -(2**64) - 1}]]]},
        {"n": 2**64 - 1, "m": -(2**63), "f": 1.5, "g": -0.0, "h": 1e19, "i": 9.3e18},  # exact in both, or a float
        {"digits": "12345678901234567890123"},  # a run of digits in a string: nothing rounded
        {"many": list(range(400))},  # more values than are looked over: the scan decides
        {"many": [*range(400), 2**70]},
        {"nan": float("nan")},
    ],
    ids=lambda e: ",".join(e) or "plain",
)
def test_a_long_text_is_read_with_every_digit_kept_whichever_way_it_is_checked(extra: dict[str, Any]) -> None:
    # Long texts are read first and their values looked over; short ones scanned first. Either way the reading is
    # Python's own, number for number.
    for text in (FILE, "short"):
        data = json.dumps({"file": text, **extra}).encode()
        expected = json.loads(data)
        got = loads_exact(data)
        assert exact_pairs(got) == exact_pairs(expected) or "nan" in extra
        assert ("nan" not in extra) or got["nan"] != got["nan"]
        assert len(data) >= LOOK_OVER_FROM or text == "short"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1E+999"])
def test_a_finite_reading_refuses_nan_and_the_infinities_whichever_way_it_is_read(number: str) -> None:
    # Short and long texts, and one whose wide integer sends it to Python's parser first: each way, the number is
    # refused by name, never read as a float that is written again as a null.
    for text in (FILE, "short"):
        for extra in ("", f', "wide": {2**70}'):
            data = f'{{"file": {json.dumps(text)}, "n": [1.5, {number}]{extra}}}'.encode()
            with pytest.raises(NonFinite, match=re.escape(number)):
                loads_exact(data, finite=True)
            assert loads_exact(data)["n"][0] == 1.5
    assert loads_exact(b'{"n": [1e308, -2.5e-300]}', finite=True) == {"n": [1e308, -2.5e-300]}


def test_looking_over_a_value_finds_what_orjson_rounded_and_how_deep_it_nests() -> None:
    import orjson

    for depth in range(1, 8):
        value = orjson.loads("[" * depth + "]" * depth)
        assert looked_over(value) == (False, depth)
    for rounded in (b'{"a": [1, {"b": 1180591620717411303424}]}', b'{"a": -9223372036854775809}'):
        seen = looked_over(orjson.loads(rounded))
        assert seen is not None and seen[0] is True  # how deep it went before it found one says nothing
    assert looked_over(orjson.loads(b'{"a": [1, 2.5, 9223372036854775807, -9223372036854775808]}')) == (False, 2)
    assert looked_over({"a": list(range(300))}) is None
    assert looked_over({"a": list(range(300))}, at_most=400) == (False, 2)


def test_what_damage_leaves_of_a_record_is_read_by_every_reader_alike() -> None:
    # Each line below was read by msgspec's listing (and counted in `summary`) but skipped without a word by the
    # standard parser behind `log tail`, `activity list`, `show` and the API, or skipped by all of them.
    from mcphost.activity.reader import listed_parser, parse_entry

    base = b'{"id":"A","type":"tool_call","server":"probe","status":"success"}'
    lines = {
        "an integer past 4300 digits": base.replace(b'"status"', b'"n":' + b"9" * 5000 + b',"status"'),
        "a raw escape in a string": base.replace(b'"probe"', b'"pro\x1b[2Jbe"'),
        "a raw tab in a string": base.replace(b'"probe"', b'"pro\tbe"'),
        "NULs after it": base + b"\x00\x00",
        "NULs before it": b"\x00" + base,
    }
    listed = listed_parser()
    for why, line in lines.items():
        record, passed_on = parse_entry(line)
        assert record is not None and record["id"] == "A" and record["status"] == "success", why
        assert listed(line)[0] is not None, why
        if why == "an integer past 4300 digits":
            assert record["n"] == "9" * 5000 and passed_on == line  # kept as its digits; the line is JSON as it is
        else:
            assert passed_on is None, why  # written again for -o json: the line itself is no JSON
