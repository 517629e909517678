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
# Random bytes drawn 4 KiB at a time: one getrandom for 409 ids instead of one for each record.
_POOL_SIZE = 4096
_pool = b""
_pool_at = 0


def _forget_pool() -> None:
    global _pool, _pool_at
    _pool, _pool_at = b"", 0  # a forked child draws its own: two processes must never share random parts


os.register_at_fork(after_in_child=_forget_pool)


def _random_80() -> int:
    """80 random bits from the pool; the caller holds `_id_lock`."""
    global _pool, _pool_at
    if _pool_at + 10 > len(_pool):
        _pool, _pool_at = os.urandom(_POOL_SIZE), 0
    at = _pool_at
    _pool_at = at + 10
    return int.from_bytes(_pool[at : at + 10], "big")


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
            rand = _random_80()
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


def record_id(text: str) -> str:
    """An id as a person types it: ULIDs are case-insensitive, so `01jd...` names the record `01JD...`."""
    wanted = text.strip()
    upper = wanted.upper()
    return upper if len(upper) == 26 and all(c in _DIGITS for c in upper) else wanted
