"""Sends the activity stream to an OpenTelemetry collector (OTLP http/protobuf), off the call path.

The activity log hands every record it writes (redacted, as on disk) to `OtlpExporter.offer`, on the writer's
thread, in the middle of a call: offer only appends to a bounded deque (a full one counts the record as dropped)
and wakes the exporter when the deque stops being empty or fills a batch. Everything else happens on the exporter's
own thread: mapping records to spans and logs (`otlp.py`), encoding, and blocking HTTP posts with their retries. So
a collector that is down, hangs or refuses costs a call nothing: not a lock, not an await, not the event loop.

Delivery: a batch (up to `BATCH_SIZE` records, or what came within `INTERVAL` seconds) is one POST to
<endpoint>/v1/traces for its spans and one to <endpoint>/v1/logs for its logs. 429, 502, 503, 504 and connection
failures are retried with exponential backoff (Retry-After when the collector gives one), all within `timeout`
seconds per batch; then, or on any other answer that is not 2xx, the batch is dropped. Every record ends up counted
once: exported, or dropped (queue full, refused, given up, or rejected in a 2xx's partial_success).

A collector's answer costs the exporter at most `ANSWER_LIMIT` bytes and never more than the time left: the answer is
streamed and read up to the limit (a 2xx longer than that is taken as accepted, noted, and its connection closed),
and each request is cut at its deadline (`_Cutoff`), however slowly the collector sends.

Shutdown (`close`): what is queued gets one attempt each, no retries, within a short deadline; then the thread is
left behind (a daemon thread), so a hanging collector never holds up an exit.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import random
import socket
import sys
import threading
import time
import uuid
import weakref
from collections import deque
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from mcphost import __version__
from mcphost.activity import otlp
from mcphost.activity.record import utc_now

if TYPE_CHECKING:
    import httpx2

logger = logging.getLogger(__name__)

QUEUE_LIMIT = 10_000  # records waiting; past it, new ones are dropped (and counted), never the call slowed
BATCH_SIZE = 512
INTERVAL = 0.5  # seconds a batch gathers after its first record, unless it fills first
FLUSH_DEADLINE = 2.0  # seconds `close` gives what is still queued
RETRYABLE = frozenset({429, 502, 503, 504})
TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
CONTENT_TYPE = "application/x-protobuf"
# Bytes of a collector's answer read, at most. An Export*ServiceResponse is a few bytes, one with a partial_success or
# a google.rpc.Status a few hundred: anything longer is not an OTLP answer, and is neither kept nor parsed.
ANSWER_LIMIT = 64 * 1024

# Once per process: the collector tells this daemon's records from another's on the same machine.
_INSTANCE_ID = str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class ExportSettings:
    endpoint: str
    headers: dict[str, str] = field(default_factory=dict)
    records: frozenset[str] = frozenset()
    timeout: float = 10.0
    capture_content: bool = False
    resource: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, otlp_config: Any) -> ExportSettings:
        """From the config's `[export.otlp]` table (any object with its fields)."""
        return cls(
            endpoint=otlp_config.endpoint.rstrip("/"),
            headers=dict(otlp_config.headers),
            records=frozenset(otlp_config.records),
            timeout=float(otlp_config.timeout),
            capture_content=otlp_config.capture_content,
            resource=dict(otlp_config.resource),
        )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    initial: float = 0.5
    factor: float = 2.0
    max_delay: float = 5.0
    jitter: float = 0.2  # +-20%: many developers' daemons must not retry a recovering collector in step


@dataclass(frozen=True, slots=True)
class ExportStatus:
    """What `mcphost status` shows of the export. `queued` counts records not yet settled (waiting, or in the
    batch being sent); every other record offered is in `exported` or `dropped`."""

    endpoint: str
    queued: int
    exported: int
    dropped: int
    last_error: str | None = None
    last_error_at: str | None = None
    last_export_at: str | None = None


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: bytes  # at most ANSWER_LIMIT bytes
    whole: bool  # False: the answer went on past ANSWER_LIMIT, and the rest was not read
    retry_after: str | None


class _TimedOut(Exception):
    """A request that ran past its deadline: the collector had not answered in full by then."""


class _Cutoff:
    """Ends the exporter's request at its deadline, however the collector sends its answer.

    httpx's timeouts bound each read and write, not a request: a collector sending a byte now and then (of its status
    line, or of its body) holds a blocking request for as long as it likes. So each request is armed with its
    deadline, and past it a thread of this class's own shuts the exporter's connections down: a shut down socket
    wakes the thread blocked reading it (closing it would not), and its request fails; `disarm` then says it was cut,
    and the exporter counts it as timed out. Only the exporter's thread makes requests, one at a time, so every
    connection of its client is the one in use or an idle one, and shutting an idle one down costs nothing: the pool
    sees it is closed and opens another.

    The sockets come from httpcore's `trace` extension, which hands over each stream a connection makes (TCP, then
    TLS over it; or a proxy's) as it is made: every connection of the exporter's client is made by one of its
    requests, and each of them carries `trace`."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._deadline: float | None = None  # monotonic; None: no request in flight
        self._cut = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if not event.endswith(".complete"):
            return
        get_extra_info = getattr(info.get("return_value"), "get_extra_info", None)
        try:
            sock = get_extra_info("socket") if callable(get_extra_info) else None
        except Exception:  # a stream of a kind without one: nothing to cut but by the timeouts
            return
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sockets.add(sock)

    def arm(self, deadline: float) -> None:
        with self._lock:
            self._deadline, self._cut = deadline, False
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._watch, name="mcphost-otlp-cutoff", daemon=True)
                self._thread.start()
            self._lock.notify()

    def hurry(self, deadline: float) -> None:
        """Bring the request in flight's deadline forward to `deadline` (shutting down)."""
        with self._lock:
            if self._deadline is not None and deadline < self._deadline:
                self._deadline = deadline
                self._lock.notify()

    def disarm(self) -> bool:
        """The request is over; True when it was cut at its deadline."""
        with self._lock:
            self._deadline = None
            return self._cut

    def close(self) -> None:
        with self._lock:
            self._closed, self._deadline = True, None
            self._lock.notify()

    def _watch(self) -> None:
        with self._lock:
            while not self._closed:
                if self._deadline is None:
                    self._lock.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._lock.wait(left)
                    continue
                self._deadline, self._cut = None, True
                for sock in list(self._sockets):
                    with contextlib.suppress(OSError):  # already closed by its connection: nothing to cut
                        sock.shutdown(socket.SHUT_RDWR)


def describe_endpoint(endpoint: str) -> str:
    """The endpoint as shown: without a password in its URL."""
    scheme, sep, rest = endpoint.partition("://")
    host, slash, path = rest.partition("/")
    if "@" in host:
        host = "***@" + host.rpartition("@")[2]
    return f"{scheme}{sep}{host}{slash}{path}"


class OtlpExporter:
    def __init__(
        self,
        settings: ExportSettings,
        *,
        queue_limit: int = QUEUE_LIMIT,
        batch_size: int = BATCH_SIZE,
        interval: float = INTERVAL,
        retry: RetryPolicy | None = None,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self._settings = settings
        self._queue_limit = queue_limit
        self._batch_size = batch_size
        self._interval = interval
        self._retry = retry or RetryPolicy()
        self._transport = transport  # tests hand in a mock transport; None: the network
        self._queue: deque[dict[str, Any]] = deque()
        self._wake = threading.Event()  # the queue has something
        self._full = threading.Event()  # the queue has a batch, or we are stopping
        self._stop = threading.Event()
        self._flush_by = float("inf")  # monotonic deadline for everything, once stopping
        self._thread: threading.Thread | None = None
        self._client: httpx2.Client | None = None
        self._client_for: tuple[str, ...] | None = None
        self._cutoff = _Cutoff()
        # Counters, each written by one thread only: the writers' (offer) or the exporter's.
        self._dropped_full = 0
        self._dropped_sent = 0
        self._dropped_at_close = 0
        self._abandoned = False  # set by `close` when it gave up waiting for the thread
        self._exported = 0
        self._in_flight = 0
        self._last_error: str | None = None
        self._last_error_at: str | None = None
        self._last_export_at: str | None = None
        self._failing = False
        self._resource = self._resource_for(settings)

    # ---- the writers' side: O(1), never blocks, never raises

    def offer(self, payload: dict[str, Any]) -> None:
        try:
            if payload.get("type", "tool_call") not in self._settings.records:
                return
            queue = self._queue
            if len(queue) >= self._queue_limit:
                self._dropped_full += 1
                return
            queue.append(payload)
            size = len(queue)
            if size == 1:
                self._wake.set()
            if size >= self._batch_size:
                self._full.set()
        except Exception:  # an activity listener must never fail a write; and a bug here must not cost a call
            logger.exception("OTLP export: could not queue a record")

    # ---- life cycle

    def configure(self, settings: ExportSettings) -> None:
        """New settings apply from the next batch on; the queue and the counts carry over."""
        if settings != self._settings:
            self._resource = self._resource_for(settings)
            self._settings = settings

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mcphost-otlp-export", daemon=True)
            self._thread.start()

    def stop(self, deadline: float = FLUSH_DEADLINE) -> None:
        """Ask the thread to send what is queued within `deadline` seconds, then end. Returns at once."""
        if not self._stop.is_set():
            self._flush_by = time.monotonic() + deadline
            self._stop.set()
            self._cutoff.hurry(self._flush_by)  # a request in flight gets no longer than the queue
        self._wake.set()
        self._full.set()

    def close(self, deadline: float = FLUSH_DEADLINE) -> None:
        """`stop`, and wait (at most `deadline` seconds and a little) for the thread to be done. A request in flight
        is cut at the deadline (`_Cutoff`); a thread still busy after it all the same (a machine too loaded to run
        it, a request the cutoff cannot reach) is left to end with the process, and what it held is counted as
        dropped now."""
        self.stop(deadline)
        if self._thread is None:
            return
        self._thread.join(max(0.0, self._flush_by - time.monotonic()) + 0.2)
        if self._thread.is_alive():
            self._abandoned = True
            self._dropped_at_close = len(self._queue) + self._in_flight
            self._queue.clear()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def settings(self) -> ExportSettings:
        return self._settings

    def status(self) -> ExportStatus:
        return ExportStatus(
            endpoint=describe_endpoint(self._settings.endpoint),
            queued=0 if self._abandoned else len(self._queue) + self._in_flight,
            exported=self._exported,
            dropped=self._dropped_full + self._dropped_sent + self._dropped_at_close,
            last_error=self._last_error,
            last_error_at=self._last_error_at,
            last_export_at=self._last_export_at,
        )

    # ---- the exporter's thread

    def _run(self) -> None:
        try:
            while True:
                self._wake.clear()
                if not self._queue:
                    if self._stop.is_set():
                        break
                    self._wake.wait()
                    continue
                # Let a batch gather, unless one is already there or we are stopping.
                if len(self._queue) < self._batch_size and not self._stop.is_set():
                    self._full.wait(self._interval)
                self._full.clear()
                while self._queue:
                    if self._stop.is_set() and time.monotonic() >= self._flush_by:
                        self._abandon_queue()
                        break
                    self._send_batch()
        except Exception:
            logger.exception("OTLP export stopped unexpectedly")
        finally:
            self._abandon_queue()
            self._cutoff.close()
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()

    def _abandon_queue(self) -> None:
        left = len(self._queue)
        if left:
            self._queue.clear()
            self._dropped_sent += left
            self._error(f"{left} records were still queued at shutdown and were not exported")

    def _send_batch(self) -> None:
        batch: list[dict[str, Any]] = []
        while self._queue and len(batch) < self._batch_size:
            batch.append(self._queue.popleft())
        self._in_flight = len(batch)
        try:
            settings, now = self._settings, time.time_ns()
            spans: list[otlp.Span] = []
            logs: list[otlp.LogRecord] = []
            for record in batch:
                try:
                    if otlp.is_span(record):
                        spans.append(otlp.to_span(record, now_ns=now, capture_content=settings.capture_content))
                    else:
                        logs.append(otlp.to_log(record, now_ns=now))
                except Exception as exc:  # a record of a shape this version does not expect costs itself only
                    self._dropped_sent += 1
                    self._error(f"a {record.get('type')} record could not be converted: {type(exc).__name__}")
            if spans:
                body = otlp.encode_traces(self._resource, spans, __version__)
                self._deliver(TRACES_PATH, body, len(spans))
            if logs:
                body = otlp.encode_logs(self._resource, logs, __version__)
                self._deliver(LOGS_PATH, body, len(logs))
        finally:
            self._in_flight = 0

    def _deliver(self, path: str, body: bytes, count: int) -> None:
        """POST one request, retrying what is worth retrying within the batch's time; count the outcome."""
        settings = self._settings
        url = settings.endpoint + path
        give_up_at = time.monotonic() + settings.timeout
        delay = self._retry.initial
        while True:
            stopping = self._stop.is_set()
            if stopping:
                give_up_at = min(give_up_at, self._flush_by)
            remaining = give_up_at - time.monotonic()
            if remaining <= 0:
                self._drop(
                    count,
                    f"gave up on {count} records for {describe_endpoint(url)}: {self._last_error or 'out of time'}",
                )
                return
            retry_after: float | None = None
            try:
                answer = self._post(settings, url, body, give_up_at)
            except Exception as exc:  # connection refused, reset, timed out, TLS: all worth another try
                if self._abandoned:
                    return
                self._error(f"cannot reach the collector at {describe_endpoint(url)}: {_describe(exc)}")
            else:
                if self._abandoned:
                    return
                status = answer.status
                if 200 <= status < 300:
                    # An answer past the limit is not one to read; its 2xx still says the collector took the batch.
                    rejected, message = otlp.partial_success(answer.body) if answer.whole else (0, "")
                    rejected = min(rejected, count)
                    self._exported += count - rejected
                    self._last_export_at = utc_now()
                    if rejected:  # counted and shown in the status; the export itself works
                        self._dropped_sent += rejected
                        self._note(f"the collector rejected {rejected} of {count}: {message or 'no reason'}")
                    elif not answer.whole:  # shown in the status, as a partial success is
                        self._note(
                            f"the collector answered {status} to {describe_endpoint(url)} with more than "
                            f"{ANSWER_LIMIT // 1024} KiB, which is no OTLP answer: taken as accepted, the rest not read"
                        )
                    elif self._failing:
                        self._failing = False
                        _say(f"OTLP export to {describe_endpoint(settings.endpoint)} works again")
                    return
                reason = otlp.status_message(answer.body) or _text(answer.body)
                problem = f"the collector answered {status} to {describe_endpoint(url)}" + (
                    f": {reason}" if reason else ""
                )
                if status not in RETRYABLE:
                    self._drop(count, problem)
                    return
                self._error(problem)
                retry_after = _retry_after(answer.retry_after)
            if stopping:
                self._drop(count, f"not exported at shutdown: {self._last_error}")
                return
            jitter = self._retry.jitter
            wait = retry_after if retry_after is not None else delay * random.uniform(1 - jitter, 1 + jitter)
            if time.monotonic() + wait >= give_up_at:
                self._drop(count, f"gave up on {count} records for {describe_endpoint(url)}: {self._last_error}")
                return
            self._stop.wait(wait)
            delay = min(delay * self._retry.factor, self._retry.max_delay)

    def _post(self, settings: ExportSettings, url: str, body: bytes, deadline: float) -> _Answer:
        """POST `body` to `url` and read the answer, all by `deadline` (monotonic): past it, the request is cut
        (`_Cutoff`) and raises `_TimedOut`, as it does when the answer is not complete by then."""
        cutoff = self._cutoff
        began = time.monotonic()
        cutoff.arm(deadline)
        cutoff.hurry(self._flush_by)  # `stop` came between the caller's look at it and `arm`: its deadline holds
        try:
            answer = self._exchange(settings, url, body, deadline)
        except Exception as exc:
            if cutoff.disarm() or isinstance(exc, _TimedOut):
                raise _TimedOut(_late(began)) from exc
            raise
        if cutoff.disarm():  # cut as the answer ended: it may have ended for being cut, so it is not taken
            raise _TimedOut(_late(began))
        return answer

    def _exchange(self, settings: ExportSettings, url: str, body: bytes, deadline: float) -> _Answer:
        with self._http(settings).stream(
            "POST",
            url,
            content=body,
            headers={**settings.headers, "Content-Type": CONTENT_TYPE},
            timeout=max(deadline - time.monotonic(), 0.001),  # each connect, write and read; the cutoff, the whole
            extensions={"trace": self._cutoff.trace},
        ) as response:
            # Decoded in bounded pieces (httpx's decoders give at most 1 MiB at a time, however compressed).
            parts: list[bytes] = []
            size = 0
            for part in response.iter_bytes():
                parts.append(part)
                size += len(part)
                if size > ANSWER_LIMIT:
                    break  # leaving `stream` closes the response, and so its connection: the rest is never read
                if time.monotonic() >= deadline:
                    raise _TimedOut("past the deadline")  # for a transport the cutoff cannot reach (tests' mocks)
            return _Answer(
                status=response.status_code,
                body=b"".join(parts)[:ANSWER_LIMIT],
                whole=size <= ANSWER_LIMIT,
                retry_after=response.headers.get("retry-after"),
            )

    def _http(self, settings: ExportSettings) -> httpx2.Client:
        import httpx2

        key = (settings.endpoint,)
        if self._client is None or self._client_for != key:
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
            # No redirects: an export answered with a redirect is misconfigured, and headers may hold a token.
            self._client = httpx2.Client(transport=self._transport, follow_redirects=False)
            self._client_for = key
        return self._client

    def _drop(self, count: int, problem: str) -> None:
        self._dropped_sent += count
        self._error(problem)

    def _error(self, problem: str) -> None:
        # Said once when it starts failing, not once per batch: a collector down for a day must not fill stderr.
        if not self._failing:
            self._failing = True
            _say(f"OTLP export failing: {problem}; calls go on, `mcphost status` counts what is dropped")
        self._note(problem)

    def _note(self, problem: str) -> None:
        self._last_error = problem
        self._last_error_at = utc_now()

    @staticmethod
    def _resource_for(settings: ExportSettings) -> dict[str, Any]:
        return otlp.resource_attributes(
            version=__version__,
            instance_id=_INSTANCE_ID,
            host_name=socket.gethostname(),
            owner=_login(),
            pid=os.getpid(),
            extra=settings.resource,
        )


def _say(message: str) -> None:
    with contextlib.suppress(Exception):  # stderr closed: nothing to tell, and no reason to stop exporting
        print(f"mcphost: {message}", file=sys.stderr, flush=True)


def _login() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no USER variable and no passwd entry (a container's arbitrary uid)
        return None


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _late(began: float) -> str:
    return f"timed out after {time.monotonic() - began:.1f}s without a complete answer"


def _text(body: bytes) -> str:
    text = body[:200].decode("utf-8", "replace").strip()
    return "".join(c if c.isprintable() else " " for c in text)


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (a number, or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
