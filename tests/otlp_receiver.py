"""A real OTLP/HTTP receiver for the tests: POST /v1/traces and /v1/logs, decoded with opentelemetry-proto's own
generated classes (not mcphost's encoder), answered as the OTLP/HTTP spec says. It can be told to answer 503 (with
Retry-After), 400, a partial success, or to hang; a script of answers applies first, one per request."""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import pytest

trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
logs_service = pytest.importorskip("opentelemetry.proto.collector.logs.v1.logs_service_pb2")
from google.protobuf.message import DecodeError  # noqa: E402

OK, UNAVAILABLE, BAD_REQUEST, PARTIAL, HANG = "ok", "503", "400", "partial", "hang"


def value_of(any_value: Any) -> Any:
    """An AnyValue as plain Python."""
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind)


def attributes_of(key_values: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in key_values}


@dataclass
class Received:
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    answered: str
    at: float = field(default_factory=time.monotonic)


@dataclass
class Exported:
    """One span or log record as the collector got it, with its resource's and scope's attributes."""

    resource: dict[str, Any]
    scope: tuple[str, str]
    item: Any

    @property
    def attributes(self) -> dict[str, Any]:
        return attributes_of(self.item.attributes)


class LocalHttpServer:
    """An HTTP server on 127.0.0.1 in a thread of its own, for the duration of a `with`: `_handler()` is its handler
    class, `_closing()` what to let go of before it shuts down."""

    def _start(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def _closing(self) -> None:
        pass

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._closing()
        self._server.shutdown()
        self._server.server_close()


class OtlpReceiver(LocalHttpServer):
    def __init__(self) -> None:
        self.mode = OK
        self.script: list[str] = []  # answers for the next requests, before `mode`
        self.retry_after: str | None = None
        self.rejected = 1  # per partial success
        self.requests: list[Received] = []
        self.release = threading.Event()  # lets hanging requests go (without an answer)
        self._lock = threading.Lock()
        self._spans: list[Exported] = []
        self._logs: list[Exported] = []
        self._start()

    def _closing(self) -> None:
        self.release.set()

    def spans(self) -> list[Exported]:
        with self._lock:
            return list(self._spans)

    def logs(self) -> list[Exported]:
        with self._lock:
            return list(self._logs)

    def span_named(self, name: str) -> list[Exported]:
        return [s for s in self.spans() if s.item.name == name]

    def bodies(self) -> bytes:
        """Every byte every request carried, headers aside."""
        with self._lock:
            return b"".join(r.body for r in self.requests)

    def _answer_for(self) -> str:
        with self._lock:
            return self.script.pop(0) if self.script else self.mode

    def _accept(self, path: str, body: bytes, rejected: int) -> bytes:
        """Decode and keep what was sent; the Export*ServiceResponse to answer with."""
        if path == "/v1/traces":
            request = trace_service.ExportTraceServiceRequest.FromString(body)
            with self._lock:
                for rs in request.resource_spans:
                    resource = attributes_of(rs.resource.attributes)
                    for ss in rs.scope_spans:
                        scope = (ss.scope.name, ss.scope.version)
                        self._spans.extend(Exported(resource, scope, span) for span in ss.spans)
            response = trace_service.ExportTraceServiceResponse()
            if rejected:
                response.partial_success.rejected_spans = rejected
                response.partial_success.error_message = "spans over the quota"
            return bytes(response.SerializeToString())
        request = logs_service.ExportLogsServiceRequest.FromString(body)
        with self._lock:
            for rl in request.resource_logs:
                resource = attributes_of(rl.resource.attributes)
                for sl in rl.scope_logs:
                    scope = (sl.scope.name, sl.scope.version)
                    self._logs.extend(Exported(resource, scope, log) for log in sl.log_records)
        logs_response = logs_service.ExportLogsServiceResponse()
        if rejected:
            logs_response.partial_success.rejected_log_records = rejected
            logs_response.partial_success.error_message = "logs over the quota"
        return bytes(logs_response.SerializeToString())

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":  # OTLP/HTTP receivers must take gzip
                    body = gzip.decompress(body)
                answer = receiver._answer_for()
                headers = {key.lower(): value for key, value in self.headers.items()}
                with receiver._lock:
                    receiver.requests.append(Received(self.path, headers, body, answer))
                if self.path not in ("/v1/traces", "/v1/logs"):
                    self._send(404, b"")
                elif self.headers.get("Content-Type") != "application/x-protobuf":
                    self._send(415, b"")
                elif answer == HANG:
                    receiver.release.wait(60)
                    self.close_connection = True
                elif answer == UNAVAILABLE:
                    extra = {"Retry-After": receiver.retry_after} if receiver.retry_after else {}
                    self._send(503, b"", extra)
                elif answer == BAD_REQUEST:
                    # A google.rpc.Status: code 3 (INVALID_ARGUMENT), and its message.
                    message = b"bad span"
                    self._send(400, b"\x08\x03\x12" + bytes([len(message)]) + message)
                else:
                    try:
                        accepted = receiver._accept(self.path, body, receiver.rejected if answer == PARTIAL else 0)
                    except DecodeError as exc:
                        message = str(exc).encode()[:200]
                        self._send(400, b"\x08\x03\x12" + bytes([len(message)]) + message)
                    else:
                        self._send(200, accepted)

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

        return Handler


def closed_port_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
