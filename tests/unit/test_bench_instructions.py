"""bench_instructions reads callgrind's dumps and prints each path's count beside the upstream's and the floor's."""

from __future__ import annotations

from pathlib import Path

from bench.bench_instructions import _totals, render


def test_a_dumps_total_is_read_from_its_last_totals_line_and_an_unfinished_dump_has_none(tmp_path: Path) -> None:
    dump = tmp_path / "cg.1.1"
    dump.write_text("version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfn=(1) main\n5 120\nsummary: 300\n")
    assert _totals(dump) == 300
    dump.write_text("version: 1\nevents: Ir\nfn=(1) main\n5 120\n")  # still being written
    assert _totals(dump) is None
    assert _totals(tmp_path / "missing") is None


def test_each_mcphost_process_is_shown_against_the_floor_and_the_upstream() -> None:
    report = {
        "machine": {"cpus": 2, "python": "3.11.7"},
        "calls": 300,
        "paths": {
            "direct": {"upstream": 1_800_000.0},
            "floor": {"floor": 30_000.0},
            "relay": {"daemon": 600_000.0, "relay": 90_000.0},
        },
    }
    table = render(report)
    assert "| direct stdio | the upstream (probe.py) | 1800 | - | 1.00x |" in table
    assert "| mcphost mcp -> mcphost serve (stdio relay) | daemon | 600 | 20.00x | 0.33x |" in table
    assert "| mcphost mcp -> mcphost serve (stdio relay) | relay | 90 | 3.00x | 0.05x |" in table
