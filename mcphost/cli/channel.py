"""`mcphost status` and `mcphost grants` asking a running daemon on its editor channel, with the standard library
only (no pygls, no lsprotocol): importing those costs most of a second; this module costs a few milliseconds.

The channel is the LSP base protocol (Content-Length framing, JSON-RPC 2.0) on the daemon's owner-only Unix socket.
A command attaches as a watcher (no prompts, no activity), sends one request, and detaches as an editor does
(`shutdown`, `exit`), all within one deadline. Notifications are passed over; a request of the daemon's (a watcher
is sent none) is refused, so that nothing waits on this client.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcphost import __version__
from mcphost.discovery import NoDaemon, process_stopped, same_user, socket_is_ours

# The editor channel's methods, as mcphost.editor.protocol names them (a test keeps them equal): that module
# carries the pydantic payload models, which a command asking one question does not need.
STATUS = "mcphost/status"
GRANTS_LIST = "mcphost/grants"
GRANTS_REVOKE = "mcphost/revokeGrants"
CONFIG = "mcphost/config"
# A daemon that takes longer than this to answer one request from a command is as good as gone.
ASK_TIMEOUT = 5.0
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# The most the daemon reads in one message (mcphost.editor.wire.MAX_MESSAGE; a test keeps them equal): it closes
# the channel on a longer one unread, so one is not sent.
MAX_SENT_BYTES = 16 * 1024 * 1024
# A question that may wait long (a hook's, for a person) looks at the daemon this often, and gives up on one that
# stays stopped (SIGSTOP, Ctrl-Z, a debugger) this long: it answers nobody until resumed, and an agent whose hook
# timeout is shorter than the wait would run the call unasked.
WATCH_EVERY = 1.0
STOPPED_GRACE = 5.0
METHOD_NOT_FOUND = -32601


class ChannelError(Exception):
    pass


class MessageTooLarge(Exception):
    """A message longer than the daemon reads: not sent, and no fault of the daemon's (so no NoDaemon)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes, more than the {MAX_SENT_BYTES} the daemon's editor channel takes")
        self.size = size


class EditorChannel:
    """A blocking JSON-RPC client with LSP framing on the daemon's Unix socket, all within one deadline."""

    def __init__(self, path: Path, deadline: float, watch: Callable[[], None] | None = None) -> None:
        self._deadline = deadline
        self._watch = watch  # called every WATCH_EVERY s of waiting for the daemon; raises to give up
        self._buffer = b""
        self._ids = itertools.count(1)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(self._remaining())
            self._sock.connect(str(path))
        except BaseException:
            self._sock.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def extend(self, deadline: float) -> None:
        """What follows may take until `deadline`."""
        self._deadline = deadline

    def _remaining(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left

    def peer_is_us(self) -> bool:
        return same_user(self._sock)

    def send(self, message: dict[str, Any]) -> None:
        # ASCII: an agent's text may hold lone surrogates, which JSON escapes and UTF-8 cannot carry.
        body = json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode("ascii")
        if len(body) > MAX_SENT_BYTES:
            raise MessageTooLarge(len(body))
        self._sock.settimeout(self._remaining())
        self._sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method: str, params: Any = None) -> Any:
        request_id = next(self._ids)
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        while True:
            answer = self._receive()
            if "method" in answer:
                if "id" in answer:  # a request to us (a watcher is sent none): refused, so nothing waits on us
                    refusal = {"code": METHOD_NOT_FOUND, "message": f"not handled: {answer.get('method')}"}
                    self.send({"id": answer["id"], "error": refusal})
                continue  # notifications: status, activity, diagnostics
            if answer.get("id") != request_id:
                continue
            error = answer.get("error")
            if error is not None:
                text = error.get("message") if isinstance(error, dict) else error
                raise ChannelError(f"answered {method} with an error: {text}")
            return answer.get("result")

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def _receive(self) -> dict[str, Any]:
        while True:
            head_end = self._buffer.find(b"\r\n\r\n")
            if head_end >= 0:
                length = _content_length(self._buffer[:head_end])
                start = head_end + 4
                if len(self._buffer) >= start + length:
                    body, self._buffer = self._buffer[start : start + length], self._buffer[start + length :]
                    try:
                        message = json.loads(body)
                    except ValueError:
                        raise ChannelError("sent a message that is not JSON") from None
                    if isinstance(message, dict):
                        return message
                    continue
            remaining = self._remaining()
            if self._watch is None:
                self._sock.settimeout(remaining)
                chunk = self._sock.recv(1 << 16)
            else:
                self._sock.settimeout(min(remaining, WATCH_EVERY))
                try:
                    chunk = self._sock.recv(1 << 16)
                except TimeoutError:
                    self._watch()
                    continue
            if not chunk:
                raise ConnectionError("the daemon closed the editor channel")
            self._buffer += chunk


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                break
            if 0 <= length <= MAX_MESSAGE_BYTES:
                return length
            break
    raise ChannelError("sent a message without a valid Content-Length")


def ask(info: dict[str, Any], name: str, method: str, params: Any = None, timeout: float = ASK_TIMEOUT) -> Any:
    """One request to one daemon on its editor channel, attached as a watcher (no prompts, no activity) for just
    that long. Raises NoDaemon when the daemon cannot be reached, refuses, or does not answer within `timeout`."""
    path = Path(str(info["editor_socket"]))
    if not socket_is_ours(path):
        raise NoDaemon(f"{path} is not an editor socket owned by you and closed to others; refusing to attach")
    # Attaching does no work in the daemon: one that does not attach in ASK_TIMEOUT is stopped or hung, however long
    # the question itself may take (a hook's waits for a person).
    deadline = time.monotonic() + min(timeout, ASK_TIMEOUT)
    try:
        channel = EditorChannel(path, deadline, _stopped_watch(info.get("pid")))
    except OSError as exc:
        raise NoDaemon(f"cannot attach to the daemon at {path}: {_reason(exc)}") from None
    try:
        if not channel.peer_is_us():
            raise NoDaemon(f"{path} is served by another user's process; refusing to attach")
        channel.request(
            "initialize",
            {
                "processId": os.getpid(),
                "clientInfo": {"name": name, "version": __version__},
                "capabilities": {},
                "initializationOptions": {"approver": False, "activity": False},
            },
        )
        channel.notify("initialized", {})
        channel.extend(time.monotonic() + timeout)
        result = channel.request(method, params)
        with contextlib.suppress(OSError, ChannelError):
            # Detach as an editor does; the answer is in hand whatever happens now.
            channel.request("shutdown")
            channel.notify("exit")
        return result
    except (OSError, ChannelError) as exc:
        reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
        raise NoDaemon(f"daemon {info.get('pid')} did not answer {method}: {reason}") from None
    finally:
        channel.close()


def _stopped_watch(pid: Any) -> Callable[[], None] | None:
    """Raises ChannelError once daemon `pid` has stayed stopped for STOPPED_GRACE."""
    if type(pid) is not int:
        return None
    stopped_since: list[float] = []

    def watch() -> None:
        if not process_stopped(pid):
            stopped_since.clear()
            return
        now = time.monotonic()
        if not stopped_since:
            stopped_since.append(now)
        elif now - stopped_since[0] >= STOPPED_GRACE:
            raise ChannelError(f"it has been stopped for {STOPPED_GRACE:g} s (SIGSTOP, Ctrl-Z or a debugger)")

    return watch


def _reason(exc: OSError) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__
