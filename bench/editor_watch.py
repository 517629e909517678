"""An editor that watches a daemon's activity, as the VS Code extension does, for bench_paths' `--editor`.

    python bench/editor_watch.py EDITOR_SOCKET

Attaches to the daemon's editor socket with the extension's initializationOptions (`activity: true`, `batch: true`;
`approver: false`: the bench's policy asks nobody, and a watcher that could be asked would only change that), prints
`attached` once the daemon has attached it (its first status), then reads every message the daemon sends, with the
standard library alone, as the bench's agents are: what the run pays for is the daemon telling an editor, not an LSP
library reading it. Ends at SIGTERM or when the daemon closes the socket, printing how many `mcphost/activity`
notifications it read and how many of them were tool calls' records.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
from typing import Any

ACTIVITY = "mcphost/activity"


class Channel:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def read(self) -> dict[str, Any] | None:
        """The next message, or None once the daemon has closed the socket."""
        while b"\r\n\r\n" not in self.buffer:
            if not self._more():
                return None
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        while len(self.buffer) < length:
            if not self._more():
                return None
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        message: dict[str, Any] = json.loads(body)
        return message

    def _more(self) -> bool:
        chunk = self.sock.recv(1 << 16)
        self.buffer += chunk
        return bool(chunk)


def main() -> int:
    channel = Channel(sys.argv[1])
    counts = {"activity": 0, "tool_calls": 0}

    def report(*_: Any) -> None:
        print(json.dumps(counts), flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, report)
    channel.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "processId": None,
                "capabilities": {},
                "clientInfo": {"name": "bench-editor", "version": "0"},
                "initializationOptions": {"approver": False, "activity": True, "batch": True},
            },
        }
    )
    while (message := channel.read()) is not None and message.get("id") != 1:
        pass
    channel.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    # The daemon sends its status to an editor as it attaches it.
    while (message := channel.read()) is not None and message.get("method") != "mcphost/status":
        pass
    print("attached", flush=True)
    while (message := channel.read()) is not None:
        if message.get("method") == ACTIVITY:
            counts["activity"] += 1
            counts["tool_calls"] += message["params"].get("type") == "tool_call"
        elif "id" in message and "method" in message:
            channel.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
