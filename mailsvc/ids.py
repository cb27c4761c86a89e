"""Time-ordered ids (UUIDv7, RFC 9562) whose timestamp comes from the reactor clock."""

from __future__ import annotations

import os
import uuid


def uuid7(seconds: float) -> uuid.UUID:
    """A UUIDv7 for the instant ``seconds`` (Unix time, usually ``clock.seconds()``)."""
    millis = int(seconds * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = rand >> 68  # 12 bits
    rand_b = rand & ((1 << 62) - 1)
    value = (millis << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return uuid.UUID(int=value)


def parse_uuid(text: object) -> uuid.UUID | None:
    """The UUID spelled by ``text`` (canonical hyphenated form), or None."""
    if not isinstance(text, str) or len(text) != 36:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        return None
