"""The floor of mcphost's design, for bench_paths: the least a stdio proxy with a durable record can do.

It passes the agent's lines to the upstream unread, and each line the upstream writes back is appended to a log
file and made durable (fdatasync) before it reaches the agent: the same process hops and the same durable append as
`mcphost mcp --in-process`, with nothing checked, decided or parsed. One thread, one epoll; plain blocking writes.

    python bench/floor_relay.py LOG [--no-fsync] -- COMMAND [ARG ...]
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys

CHUNK = 256 * 1024


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main(argv: list[str]) -> int:
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    log_path, fsync = options[0], "--no-fsync" not in options
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    upstream = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert upstream.stdin is not None and upstream.stdout is not None
    to_upstream, from_upstream = upstream.stdin.fileno(), upstream.stdout.fileno()
    agent_in, agent_out = sys.stdin.fileno(), sys.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(agent_in, selectors.EVENT_READ)
    selector.register(from_upstream, selectors.EVENT_READ)
    pending = b""  # the upstream's bytes after its last whole line
    while True:
        for key, _ in selector.select():
            data = os.read(key.fd, CHUNK)
            if key.fd == agent_in:
                if not data:
                    upstream.stdin.close()
                    return upstream.wait()
                write_all(to_upstream, data)
                continue
            if not data:
                return upstream.wait()
            pending += data
            cut = pending.rfind(b"\n") + 1
            if not cut:
                continue
            lines, pending = pending[:cut], pending[cut:]
            write_all(log, lines)
            if fsync:
                os.fdatasync(log)
            write_all(agent_out, lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
