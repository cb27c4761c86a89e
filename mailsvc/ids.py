"""Time-ordered ids (UUIDv7, RFC 9562) whose timestamp comes from the reactor clock."""

from __future__ import annotations

import os
import uuid
from datetime import datetime

_last = [0, 0]  # (milliseconds, 12-bit counter) of the previous id of this process
#: Random bytes drawn from the OS in blocks, 10 taken by each id: one ``getrandom`` call per id
#: was most of an id's cost (a contacts batch makes 2,000). A forked child draws its own.
_POOL_BYTES = 4000
_pool: list[bytes] = [b""]  # the block
_taken = [0]  # bytes of it taken
os.register_at_fork(after_in_child=lambda: (_pool.__setitem__(0, b""), _taken.__setitem__(0, 0)))


def _random80() -> int:
    """80 fresh random bits."""
    block, taken = _pool[0], _taken[0]
    if taken + 10 > len(block):
        block, taken = os.urandom(_POOL_BYTES), 0
        _pool[0] = block
    _taken[0] = taken + 10
    return int.from_bytes(block[taken:taken + 10], "big")


def uuid7(seconds: float) -> uuid.UUID:
    """
    A UUIDv7 for the instant ``seconds`` (Unix time, usually ``clock.seconds()``). Ids made in
    one process are strictly increasing, even within one millisecond (RFC 9562 §6.2, method 1:
    ``rand_a`` is a counter seeded at random each millisecond).
    """
    millis = int(seconds * 1000) & ((1 << 48) - 1)
    rand = _random80()
    if millis <= _last[0]:
        millis = _last[0]
        rand_a = _last[1] + 1
        if rand_a >= 1 << 12:  # counter exhausted: borrow the next millisecond
            millis, rand_a = millis + 1, rand >> 69
    else:
        rand_a = rand >> 69  # 11 bits, leaving room to count up
    _last[0], _last[1] = millis, rand_a
    rand_b = rand & ((1 << 62) - 1)
    value = (millis << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return uuid.UUID(int=value)


def first_id_at(instant: datetime) -> uuid.UUID:
    """The smallest UUIDv7 of ``instant``'s millisecond: ids made from then on sort at or after it
    (a lower bound on ids for a range of time, so an index on ids bounds a scan by time)."""
    return uuid.UUID(int=int(instant.timestamp() * 1000) << 80)


def start_over() -> None:
    """Forget this process's last id, as a process started afresh has none: ids made after it
    may be older than ids made before (a replayed clock that starts in the past)."""
    _last[:] = [0, 0]


def parse_uuid(text: object) -> uuid.UUID | None:
    """The UUID spelled by ``text`` (canonical hyphenated form), or None."""
    if not isinstance(text, str) or len(text) != 36:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        return None
