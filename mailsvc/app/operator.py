"""
What the operator API (``/admin/v1``) reads and changes beyond the accounts: the adaptive
shaping's limits of each destination and the operator's starting limits
(docs/decisions.md "Adaptive shaping"). Every node reads a change within 15 s. Each change is
audited in its own transaction (``mailsvc.app.audit.Entry``).
"""

from __future__ import annotations

from mailsvc.app.audit import Entry
from mailsvc.store import deliverability
from mailsvc.store.database import Database, Transaction


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

    async def set_default(self, pattern: str, concurrency: int, rate_per_sec: float, audit: Entry) -> None:
        async def put(txn: Transaction) -> None:
            await deliverability.set_destination_default(txn, pattern, concurrency, rate_per_sec)
            await audit.write_in(txn)

        await self._db.run("set_destination_default", put)

    async def delete_default(self, pattern: str, audit: Entry) -> bool:
        """Whether there was such a default."""

        async def delete(txn: Transaction) -> bool:
            found = await deliverability.delete_destination_default(txn, pattern)
            if found:
                await audit.write_in(txn)
            return found

        return await self._db.run("delete_destination_default", delete)

    async def reset(self, destination: str, audit: Entry) -> bool:
        """Back to the starting limits; whether the destination was throttled."""

        async def forget(txn: Transaction) -> bool:
            found = await deliverability.forget_destination(txn, self.source, destination)
            if found:
                await audit.write_in(txn, source=self.source)
            return found

        return await self._db.run("forget_destination", forget)
