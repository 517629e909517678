"""What a collector's answer may cost the OTLP exporter: at most `ANSWER_LIMIT` bytes read (a 2xx longer than that is
taken as accepted, noted, and its connection closed, the rest never read) and never more time than the export's
`timeout`, however slowly the answer comes (httpx's own timeouts bound each read, not a request). And the answer
reader refuses field number 0, which protobuf reserves (a body of zeros read as a run of them).

The exporter is the real one, against a real collector on 127.0.0.1 that misbehaves on purpose."""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import pytest

from mcphost.activity import otlp
from mcphost.activity.export import ExportSettings, OtlpExporter, RetryPolicy
from mcphost.activity.record import ActivityRecord
from mcphost.config.models import EXPORTED_RECORD_TYPES
from tests.helpers import poll
from tests.otlp_receiver import LocalHttpServer

FAST = RetryPolicy(initial=0.05, max_delay=0.2, jitter=0)

OK, HUGE, DRIP_HEAD, DRIP_BODY = "ok", "huge", "drip_head", "drip_body"
HUGE_SIZE = 64 * 1024 * 1024  # what a HUGE answer says it is, and sends for as long as the client reads
DRIP_EVERY = 0.2  # seconds between two bytes of a dripped answer
EMPTY_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"


@dataclass
class Answered:
    mode: str
    sent: int  # bytes of the answer's body (HUGE) or of the answer (drips) that went out
    client_left: bool  # the client closed the connection before the whole answer was sent


class HostileCollector(LocalHttpServer):
    """Answers each POST by `mode`: OK (an empty ExportServiceResponse, which is all an OTLP success needs), HUGE (200
    with a 64 MiB body of zeros), DRIP_HEAD (an OK answer one byte every DRIP_EVERY seconds, from its status line on),
    DRIP_BODY (headers at once, then a 1000-byte body one byte at a time). What each answer got out is in `answers`."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.answers: list[Answered] = []
        self.requests = threading.Event()  # a request came in
        self.answered = threading.Condition()
        self.stopping = threading.Event()
        self._start()

    def _closing(self) -> None:
        self.stopping.set()

    def wait_answers(self, count: int, limit: float = 5) -> list[Answered]:
        """Blocks until `count` answers are over (sent whole, or cut off by the client)."""
        with self.answered:
            assert self.answered.wait_for(lambda: len(self.answers) >= count, limit), f"{count} answers over"
            return list(self.answers)

    def _done(self, answer: Answered) -> None:
        with self.answered:
            self.answers.append(answer)
            self.answered.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                mode = collector.mode
                collector.requests.set()
                if mode == OK:
                    self.connection.sendall(EMPTY_OK)
                    return
                self.close_connection = True
                if mode == HUGE:
                    # A small send buffer: what `sent` counts is then close to what the client took.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
                    self.connection.sendall(EMPTY_OK.replace(b"Length: 0", b"Length: %d" % HUGE_SIZE))
                    chunk, sent = bytes(64 * 1024), 0
                    try:
                        while sent < HUGE_SIZE and not collector.stopping.is_set():
                            sent += self.connection.send(chunk[: HUGE_SIZE - sent])
                    except OSError:
                        collector._done(Answered(mode, sent, client_left=True))
                    else:
                        collector._done(Answered(mode, sent, client_left=False))
                    return
                if mode == DRIP_HEAD:
                    head, answer = b"", EMPTY_OK
                else:
                    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n"
                    answer = bytes(1000)
                sent = 0
                try:
                    self.connection.sendall(head)
                    for at in range(len(answer)):
                        if collector.stopping.wait(DRIP_EVERY):
                            break
                        sent += self.connection.send(answer[at : at + 1])
                except OSError:
                    collector._done(Answered(mode, sent, client_left=True))
                else:
                    collector._done(Answered(mode, sent, client_left=False))

        return Handler


def settings(endpoint: str, **changes: Any) -> ExportSettings:
    fields: dict[str, Any] = {"endpoint": endpoint, "records": frozenset(EXPORTED_RECORD_TYPES), "timeout": 5.0}
    fields.update(changes)
    return ExportSettings(**fields)


def call(n: int = 0) -> dict[str, Any]:
    payload, _ = ActivityRecord(server="probe", tool=f"tool_{n}", status="success", duration_ms=1.0).encode()
    return payload


@pytest.fixture
def start() -> Iterator[Any]:
    exporters: list[OtlpExporter] = []

    def start(s: ExportSettings) -> OtlpExporter:
        exporter = OtlpExporter(s, retry=FAST, interval=0.05)
        exporter.start()
        exporters.append(exporter)
        return exporter

    yield start
    for exporter in exporters:
        exporter.close(0.5)


async def settled(exporter: OtlpExporter, total: int, limit: float) -> None:
    def done() -> bool:
        status = exporter.status()
        return status.queued == 0 and status.exported + status.dropped == total

    await poll(done, f"{total} records exported or dropped ({exporter.status()})", limit)


# ---- a 2xx answer of tens of MB


async def test_a_huge_2xx_answer_is_taken_as_accepted_after_reading_a_bounded_part_of_it(start: Any) -> None:
    with HostileCollector(HUGE) as collector:
        tracemalloc.start()
        try:
            exporter = start(settings(collector.url))
            began = time.monotonic()
            exporter.offer(call(1))
            await settled(exporter, 1, limit=5)
            took = time.monotonic() - began
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        status = exporter.status()
        assert (status.exported, status.dropped) == (1, 0), status
        assert status.last_export_at is not None
        assert took < 3, f"the export took {took:.1f}s"
        # The client read its bound and closed the connection: the collector could not push more than what the
        # loopback's buffers hold, a small part of the 64 MiB; nor did the exporter hold more than a little.
        (answer,) = await anyio.to_thread.run_sync(collector.wait_answers, 1)
        assert answer.client_left, answer
        assert answer.sent < HUGE_SIZE // 4, answer
        assert peak < 16 * 1024 * 1024, f"{peak} bytes allocated at the peak"
        # Noted where `mcphost status` shows the collector's oddities, as a partial success is.
        assert status.last_error is not None and "more than 64 KiB" in status.last_error, status.last_error

        # The next batch goes on a new connection, and works as ever.
        collector.mode = OK
        exporter.offer(call(2))
        await settled(exporter, 2, limit=5)
        assert (exporter.status().exported, exporter.status().dropped) == (2, 0)


# ---- an answer that comes one byte at a time


@pytest.mark.parametrize("mode", [DRIP_HEAD, DRIP_BODY])
async def test_an_answer_dripped_one_byte_at_a_time_is_cut_at_the_timeout(start: Any, mode: str) -> None:
    with HostileCollector(mode) as collector:
        exporter = start(settings(collector.url, timeout=1.0))
        began = time.monotonic()
        exporter.offer(call(1))
        await settled(exporter, 1, limit=5)
        took = time.monotonic() - began
        status = exporter.status()
        assert (status.exported, status.dropped) == (0, 1), status
        assert status.last_error is not None and "timed out" in status.last_error, status.last_error
        # 1 s of timeout, plus the batch's 0.05 s to gather; each byte alone came well within any read timeout.
        assert took < 3, f"the export gave up after {took:.1f}s"
        (answer,) = await anyio.to_thread.run_sync(collector.wait_answers, 1)
        assert answer.client_left, answer

        # The connection cut is gone from the pool: the next batch goes on a new one.
        collector.mode = OK
        exporter.offer(call(2))
        await settled(exporter, 2, limit=5)
        assert (exporter.status().exported, exporter.status().dropped) == (1, 1)


async def test_shutdown_cuts_a_dripped_answer_at_its_deadline(start: Any) -> None:
    with HostileCollector(DRIP_BODY) as collector:
        exporter = start(settings(collector.url, timeout=30))
        exporter.offer(call(1))
        assert await anyio.to_thread.run_sync(collector.requests.wait, 5)
        began = time.monotonic()
        exporter.close(0.5)
        assert time.monotonic() - began < 1.5
        # The request in flight got no longer than the queue's deadline: the thread is over, not left behind.
        await poll(lambda: not exporter.alive, "the exporter's thread to end", 2)
        status = exporter.status()
        assert (status.exported, status.dropped, status.queued) == (0, 1, 0), status


# ---- field number 0


def _partial_success(rejected: int, message: bytes) -> bytes:
    """An ExportTraceServiceResponse with a partial_success, encoded by hand."""
    inner = b"\x08" + bytes([rejected]) + b"\x12" + bytes([len(message)]) + message
    return b"\x0a" + bytes([len(inner)]) + inner


@pytest.mark.parametrize("field_0", [b"\x00\x00", b"\x02\x00", b"\x00" * 64])
def test_field_number_0_makes_an_answer_malformed(field_0: bytes) -> None:
    body = _partial_success(3, b"over quota")
    assert otlp.partial_success(body) == (3, "over quota")
    assert otlp.partial_success(field_0 + body) == (0, "")
    assert otlp.partial_success(body + field_0) == (0, "")
    status = b"\x08\x03\x12\x08bad span"  # a google.rpc.Status
    assert otlp.status_message(status) == "bad span"
    assert otlp.status_message(field_0 + status) == ""
    with pytest.raises(ValueError, match="field number 0"):
        list(otlp._fields(field_0))
