"""
What the operator API (``/admin/v1``) reads and changes beyond the accounts: the adaptive
shaping's limits of each destination and the operator's starting limits (issue 23,
docs/decisions.md "Adaptive shaping"). Every node reads a change within 15 s.
"""

from __future__ import annotations

from mailsvc.store import deliverability
from mailsvc.store.database import Database


class Destinations:
    """The throttled destinations of one delivery ``source`` (this node's outbound identity)."""

    def __init__(self, db: Database, source: str):
        self._db = db
        self.source = source

    async def limits(self) -> list[dict]:
        """The current limits of every throttled destination."""
        return await deliverability.destination_limits(self._db, self.source)

    async def defaults(self) -> list[dict]:
        """The operator's starting limits, by host name or domain suffix."""
        return await deliverability.destination_defaults(self._db)

    async def set_default(self, pattern: str, concurrency: int, rate_per_sec: float) -> None:
        await deliverability.set_destination_default(self._db, pattern, concurrency, rate_per_sec)

    async def delete_default(self, pattern: str) -> bool:
        """Whether there was such a default."""
        return await deliverability.delete_destination_default(self._db, pattern)

    async def reset(self, destination: str) -> bool:
        """Back to the starting limits; whether the destination was throttled."""
        return await deliverability.forget_destination(self._db, self.source, destination)
