"""The two timestamp spellings (docs/contract/README.md, "Timestamps")."""

from __future__ import annotations

import functools
from datetime import UTC, datetime


def from_seconds(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def resource(value: datetime | None) -> str | None:
    """Resource fields: ``YYYY-MM-DD HH:MM:SS.ffffff+00`` in UTC."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


@functools.lru_cache(maxsize=256)
def iso(value: datetime | None) -> str | None:
    """Webhook payloads and expiry fields: ISO 8601 with microseconds and ``Z`` (kept for the last
    instants given: an accept statement writes one per e-mail, all of the same time)."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
