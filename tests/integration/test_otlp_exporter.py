"""The OTLP exporter against a real OTLP/HTTP receiver: offering a record never waits for the collector, batches go by
size and by time, retryable answers are retried within the timeout, the rest dropped and counted, and shutdown sends
what is queued within its deadline."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcphost.activity.export import ExportSettings, OtlpExporter, RetryPolicy
from mcphost.activity.record import ActivityRecord
from mcphost.config.models import EXPORTED_RECORD_TYPES
from tests.helpers import poll
from tests.otlp_receiver import BAD_REQUEST, HANG, PARTIAL, UNAVAILABLE, OtlpReceiver, closed_port_url

FAST = RetryPolicy(initial=0.05, max_delay=0.2, jitter=0)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as r:
        yield r


def settings(endpoint: str, **changes: Any) -> ExportSettings:
    fields: dict[str, Any] = {"endpoint": endpoint, "records": frozenset(EXPORTED_RECORD_TYPES), "timeout": 5.0}
    fields.update(changes)
    return ExportSettings(**fields)


def call(n: int = 0, **changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"server": "probe", "tool": f"tool_{n}", "status": "success", "duration_ms": 1.0}
    payload, _ = ActivityRecord(**{**fields, **changes}).encode()
    return payload


def event(kind: str = "upstream_connected") -> dict[str, Any]:
    payload, _ = ActivityRecord(type=kind, server="probe", details={"tools": 3}).encode()
    return payload


class Running:
    """An exporter started for one test and always closed."""

    def __init__(self) -> None:
        self.exporters: list[OtlpExporter] = []

    def __call__(self, s: ExportSettings, **kwargs: Any) -> OtlpExporter:
        kwargs.setdefault("retry", FAST)
        kwargs.setdefault("interval", 0.05)
        exporter = OtlpExporter(s, **kwargs)
        exporter.start()
        self.exporters.append(exporter)
        return exporter


@pytest.fixture
def start() -> Iterator[Running]:
    running = Running()
    yield running
    for exporter in running.exporters:
        exporter.close(0.5)


async def settled(exporter: OtlpExporter, total: int, limit: float = 10) -> None:
    def done() -> bool:
        status = exporter.status()
        return status.queued == 0 and status.exported + status.dropped == total

    await poll(done, f"{total} records exported or dropped ({exporter.status()})", limit)


async def test_calls_become_spans_and_events_logs_at_the_collector(receiver: OtlpReceiver, start: Running) -> None:
    exporter = start(settings(receiver.url, headers={"Authorization": "Bearer collector-token"}))
    exporter.offer(call(1))
    exporter.offer(event())
    await settled(exporter, 2)
    assert [s.item.name for s in receiver.spans()] == ["execute_tool probe:tool_1"]
    assert [log.item.body.string_value for log in receiver.logs()] == ["upstream probe connected (3 tools)"]
    assert {r.path for r in receiver.requests} == {"/v1/traces", "/v1/logs"}
    for request in receiver.requests:
        assert request.headers["content-type"] == "application/x-protobuf"
        assert request.headers["authorization"] == "Bearer collector-token"
    status = exporter.status()
    assert (status.exported, status.dropped, status.queued, status.last_error) == (2, 0, 0, None)
    assert status.last_export_at is not None
    assert receiver.spans()[0].resource["service.name"] == "mcphost"


async def test_records_not_chosen_are_not_exported(receiver: OtlpReceiver, start: Running) -> None:
    exporter = start(settings(receiver.url, records=frozenset({"tool_call"})))
    exporter.offer(event())
    exporter.offer(call())
    await settled(exporter, 1)
    assert len(receiver.spans()) == 1 and receiver.logs() == []


async def test_a_batch_fills_by_size_and_goes_without_waiting_for_the_interval(
    receiver: OtlpReceiver, start: Running
) -> None:
    exporter = start(settings(receiver.url), batch_size=10, interval=60)
    for n in range(10):
        exporter.offer(call(n))
    # A full batch goes at once; five more wait for the interval (a minute here), or for shutdown.
    await settled(exporter, 10)
    for n in range(10, 15):
        exporter.offer(call(n))
    assert len(receiver.spans()) == 10 and len(receiver.requests) == 1
    exporter.close(2)
    assert len(receiver.spans()) == 15
    assert exporter.status().exported == 15


async def test_a_batch_that_does_not_fill_goes_after_the_interval(receiver: OtlpReceiver, start: Running) -> None:
    exporter = start(settings(receiver.url), batch_size=100, interval=0.2)
    exporter.offer(call())
    await settled(exporter, 1)
    assert len(receiver.requests) == 1


async def test_an_unavailable_collector_is_retried_until_it_takes_the_batch(
    receiver: OtlpReceiver, start: Running
) -> None:
    receiver.script = [UNAVAILABLE, UNAVAILABLE]
    exporter = start(settings(receiver.url))
    exporter.offer(call())
    await settled(exporter, 1)
    assert [r.answered for r in receiver.requests] == [UNAVAILABLE, UNAVAILABLE, "ok"]
    status = exporter.status()
    assert (status.exported, status.dropped) == (1, 0)
    assert status.last_error is not None and "503" in status.last_error


async def test_retry_after_is_honoured(receiver: OtlpReceiver, start: Running) -> None:
    receiver.script = [UNAVAILABLE]
    receiver.retry_after = "1"
    exporter = start(settings(receiver.url))
    exporter.offer(call())
    await settled(exporter, 1)
    first, second = receiver.requests
    assert second.at - first.at >= 0.9  # FAST alone would have retried after 50 ms


async def test_a_retry_after_past_the_timeout_gives_the_batch_up_at_once(
    receiver: OtlpReceiver, start: Running
) -> None:
    receiver.mode = UNAVAILABLE
    receiver.retry_after = "120"
    exporter = start(settings(receiver.url, timeout=5.0))
    began = time.monotonic()
    exporter.offer(call())
    await settled(exporter, 1)
    assert time.monotonic() - began < 4
    assert exporter.status().dropped == 1 and len(receiver.requests) == 1


async def test_a_rejected_batch_is_dropped_without_retry_and_says_why(receiver: OtlpReceiver, start: Running) -> None:
    receiver.mode = BAD_REQUEST
    exporter = start(settings(receiver.url))
    exporter.offer(call())
    await settled(exporter, 1)
    assert len(receiver.requests) == 1
    status = exporter.status()
    assert (status.exported, status.dropped) == (0, 1)
    assert status.last_error is not None and "400" in status.last_error and "bad span" in status.last_error


async def test_a_partial_success_counts_the_rejected_as_dropped(receiver: OtlpReceiver, start: Running) -> None:
    receiver.mode = PARTIAL
    receiver.rejected = 2
    exporter = start(settings(receiver.url))
    for n in range(5):
        exporter.offer(call(n))
    await settled(exporter, 5)
    status = exporter.status()
    assert (status.exported, status.dropped) == (3, 2)
    assert status.last_error is not None and "spans over the quota" in status.last_error


async def test_a_collector_that_is_down_costs_the_batch_after_the_timeout(start: Running) -> None:
    exporter = start(settings(closed_port_url(), timeout=0.5))
    exporter.offer(call())
    await settled(exporter, 1)
    status = exporter.status()
    assert status.dropped == 1
    assert status.last_error is not None and "cannot reach the collector" in status.last_error


async def test_a_hanging_collector_never_holds_up_offer_and_costs_the_batch_after_the_timeout(
    receiver: OtlpReceiver, start: Running
) -> None:
    receiver.mode = HANG
    # A timeout the 5000 offers finish well within, on a busy machine too (they took 0.6 s once under a full test
    # run): the hanging request then holds its batch throughout, and the queue cannot drain while they are made.
    exporter = start(settings(receiver.url, timeout=2.0), queue_limit=1000)
    exporter.offer(call(0))
    await poll(lambda: receiver.requests, "the first request to hang")
    records = [call(n) for n in range(5000)]
    slowest = 0.0
    for record in records:
        began = time.perf_counter()
        exporter.offer(record)
        slowest = max(slowest, time.perf_counter() - began)
    # An offer held up by the hanging request would wait out its 2 s timeout.
    assert slowest < 1.0, f"an offer took {slowest:.3f}s"
    # The queue holds 1000: the rest were dropped on the spot, and counted.
    assert exporter.status().dropped >= 4000
    await settled(exporter, 5001, limit=30)


async def test_offer_never_raises_and_a_record_that_cannot_be_mapped_costs_only_itself(
    receiver: OtlpReceiver, start: Running
) -> None:
    exporter = start(settings(receiver.url))
    exporter.offer(call(1, duration_ms=float("inf")))
    exporter.offer(call(2))
    exporter.offer({"type": object()})  # unhashable type name: offer logs it and goes on
    await settled(exporter, 2)
    assert [s.item.name for s in receiver.spans()] == ["execute_tool probe:tool_2"]
    assert exporter.status().dropped == 1


async def test_new_settings_apply_to_the_next_batch(receiver: OtlpReceiver, start: Running) -> None:
    with OtlpReceiver() as other:
        exporter = start(settings(receiver.url))
        exporter.offer(call(1))
        await settled(exporter, 1)
        exporter.configure(settings(other.url, headers={"X-Team": "core"}))
        exporter.offer(call(2))
        await settled(exporter, 2)
        assert [s.item.name for s in other.spans()] == ["execute_tool probe:tool_2"]
        assert other.requests[0].headers["x-team"] == "core"
        assert exporter.status().endpoint == other.url


async def test_shutdown_sends_what_is_queued(receiver: OtlpReceiver, start: Running) -> None:
    exporter = start(settings(receiver.url), interval=60)
    for n in range(3):
        exporter.offer(call(n))
    exporter.close(2)
    assert len(receiver.spans()) == 3
    assert exporter.status().exported == 3


async def test_shutdown_with_a_hanging_collector_ends_within_its_deadline(
    receiver: OtlpReceiver, start: Running
) -> None:
    receiver.mode = HANG
    exporter = start(settings(receiver.url, timeout=30))
    exporter.offer(call())
    await poll(lambda: receiver.requests, "the request to hang")
    for n in range(10):
        exporter.offer(call(n))
    began = time.monotonic()
    exporter.close(0.5)
    assert time.monotonic() - began < 1.5
    # Its thread may still wait on the request in flight (it ends with the process); it counts nothing more.
    status = exporter.status()
    assert (status.exported, status.dropped, status.queued) == (0, 11, 0)


async def test_shutdown_with_a_collector_that_is_down_does_not_wait_for_retries(start: Running) -> None:
    exporter = start(settings(closed_port_url(), timeout=30), interval=60)
    exporter.offer(call())
    began = time.monotonic()
    exporter.close(5)
    assert time.monotonic() - began < 2
    assert exporter.status().dropped == 1


def test_a_password_in_the_endpoint_is_not_shown() -> None:
    exporter = OtlpExporter(settings("https://user:s3cret@collector.example:4318/otlp"))
    assert exporter.status().endpoint == "https://***@collector.example:4318/otlp"
