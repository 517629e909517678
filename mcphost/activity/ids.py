"""Record ids: ULIDs, which sort by time as strings. Kept apart from the model so readers need no pydantic."""

from __future__ import annotations

import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DIGITS = {c: i for i, c in enumerate(_CROCKFORD)}
_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)  # 10 bits -> two characters
_SHIFTS = tuple(range(120, -1, -10))  # 26 characters: the top pair holds the 128-bit value's highest 8 bits

_last_id = [0, 0]  # (ms, random part) of this process's last id
_id_lock = threading.Lock()


def new_record_id(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, so ids sort by time as strings.

    Monotonic within a process: a second id in the same millisecond is the first plus one, so the records one
    process writes sort in the order it wrote them (readers use ids as cursors).
    """
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _id_lock:
        if now_ms is None and ms <= _last_id[0]:
            ms, rand = _last_id[0], (_last_id[1] + 1) & ((1 << 80) - 1)
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        if now_ms is None:
            _last_id[0], _last_id[1] = ms, rand
    value = (ms << 80) | rand
    # Ten bits (two characters) at a time: 13 steps instead of 26 on every record's id.
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in _SHIFTS])


def id_time_ms(record_id: str) -> int | None:
    """Milliseconds since the epoch encoded in a ULID, or None for an id of another shape."""
    if len(record_id) != 26:
        return None
    value = 0
    for char in record_id[:10].upper():
        digit = _DIGITS.get(char)
        if digit is None:
            return None
        value = value * 32 + digit
    return value
