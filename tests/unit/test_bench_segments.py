"""bench_segments' reading of the stamps: each point is the first stamp of its name, in its process, after the
previous point and within the call; a call missing a point is left out rather than measured wrong."""

from __future__ import annotations

from bench.bench_segments import ROUTES, stretches


def test_each_stretch_runs_from_a_point_to_the_first_stamp_of_the_next_after_it() -> None:
    route = ROUTES["relay"]
    stamps = {
        # Two calls' worth: the second call's stamps must not be taken for the first's.
        "relay": [(110, "line"), (120, "passed"), (1110, "line"), (1120, "passed")],
        "mcphost": [
            (100, "reply"),  # the previous call's answer, before this call started: not this call's
            (130, "line"),
            (140, "call"),
            (142, "checked"),
            (144, "resolving"),
            (146, "resolved"),
            (147, "authorizing"),
            (149, "authorized"),
            (150, "forward"),
            (400, "answer"),
            (402, "resumed"),
            (410, "record"),
            (420, "fsync"),
            (520, "synced"),
            (530, "reply"),
            (1130, "line"),
        ],
    }
    found, whole = stretches(route, [(105, 560), (1105, 1200)], stamps)
    assert whole == 1, "the second call lacks most of its points"
    assert found == [[5], [10], [10], [10], [2], [2], [2], [1], [2], [1], [250], [2], [8], [10], [100], [10], [30]]


def test_an_http_call_is_split_where_the_door_claims_it_and_where_its_answer_is_made() -> None:
    route = ROUTES["http"]
    core = ["call", "checked", "resolving", "resolved", "authorizing", "authorized", "forward", "answer", "resumed"]
    stamps = {
        "mcphost": [
            (110, "recv"),
            (150, "claimed"),
            (160, "line"),
            *[(200 + i, name) for i, name in enumerate(core)],
            (300, "record"),
            (310, "fsync"),
            (400, "synced"),
            (420, "reply"),
            (500, "body"),
        ]
    }
    found, whole = stretches(route, [(100, 600)], stamps)
    assert whole == 1
    names = [name for _, name, _ in route]
    assert names[:4] == ["start", "recv", "claimed", "line"]
    assert names[-3:] == ["reply", "body", "end"]
    assert [f[0] for f in found[:3]] == [10, 40, 10]
    assert [f[0] for f in found[-3:]] == [20, 80, 100]
