"""A second process appending to an activity log, as a daemon or `mcphost call` does.

python tests/servers/log_writer.py PATH NAME COUNT [MAX_BYTES] [KEEP]   append COUNT records, then exit
python tests/servers/log_writer.py PATH --torn                          write half a line, say so, hang
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mcphost.activity.record import ActivityRecord, RecordIntent, RecordMetadata
from mcphost.activity.writer import ActivityLog, LogSettings


def main() -> None:
    path = Path(sys.argv[1])
    if sys.argv[2] == "--torn":
        # What a writer killed by SIGKILL in the middle of its write(2) leaves behind.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, b'{"id": "torn", "type": "tool_call", "server": "half')
        print("torn", flush=True)
        time.sleep(60)
        return
    name, count = sys.argv[2], int(sys.argv[3])
    max_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    keep = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    log = ActivityLog(path, LogSettings(fsync=False, max_bytes=max_bytes, keep=keep))
    for i in range(count):
        log.append(
            ActivityRecord(
                server=name,
                tool=f"t{i}",
                status="success",
                metadata=RecordMetadata(intent=RecordIntent(operation_type="read"), tool_variant="call_tool_read"),
                details={"seq": i, "pad": "x" * (i % 300)},
            )
        )
    log.close()


if __name__ == "__main__":
    main()
