"""
The API request rate of an account, shared by all its keys and by every node on the database:
a GCRA in one unlogged row per tenant, where one statement decides and records.

A tenant at ``2 / LEASE_SECONDS`` per second or more would make that row a hot spot, so a node
leases a batch of tokens from it and spends them locally for at most ``LEASE_SECONDS``, each
take checked against a window ``LEASE_SECONDS`` shorter so all nodes together stay within the
documented burst; slower tenants take one token per request (docs/decisions.md, "Rate limit").
"""

from __future__ import annotations

import math
import uuid

import attrs
from twisted.internet import defer
from twisted.python.failure import Failure

from mailsvc.domain.gcra import Gcra
from mailsvc.store import api_rate
from mailsvc.store.database import Database

#: How long a node may spend leased tokens after the row counted them.
LEASE_SECONDS = 0.05
#: Nodes forget idle tenants' leases when they hold more than this many.
_MAX_LEASES = 10_000

@attrs.define
class _Lease:
    """A node's tokens of one tenant, leased from the shared row."""

    rate: int
    tokens: int = 0
    expires: float = 0.0
    size: int = 1  # tokens the next lease asks for
    used: int = 0  # tokens spent of the current lease
    single_until: float = 0.0  # no lease before this time (the row was too full)
    pending: list[defer.Deferred] | None = None  # requests waiting for a lease under way


class RateLimiter:
    def __init__(self, clock, db: Database, burst_factor: int, lease_seconds: float = LEASE_SECONDS):
        self._clock = clock
        self._db = db
        self._burst_factor = burst_factor
        self._lease_seconds = lease_seconds
        #: The window every take of a leasing tenant is checked against.
        self._lease_window = burst_factor - lease_seconds
        self._may_lease = self._lease_window >= 4 * lease_seconds
        self._leases: dict[uuid.UUID, _Lease] = {}

    def _leasing(self, rate_per_sec: int) -> bool:
        return self._may_lease and math.floor(rate_per_sec * self._lease_seconds) >= 2

    async def take(self, tenant_id: uuid.UUID, rate_per_sec: int) -> int | None:
        """None if this request may go ahead; else the seconds to wait (Retry-After)."""
        if not self._leasing(rate_per_sec):
            return await self._take_one(tenant_id, rate_per_sec, float(self._burst_factor))
        lease = self._leases.get(tenant_id)
        if lease is None or lease.rate != rate_per_sec:
            if len(self._leases) >= _MAX_LEASES:
                self._forget_idle()
            lease = self._leases[tenant_id] = _Lease(rate_per_sec)
        while True:
            now = self._clock.seconds()
            if lease.tokens > 0 and now < lease.expires:
                lease.tokens -= 1
                lease.used += 1
                return None
            if lease.pending is None:
                break
            waiting: defer.Deferred = defer.Deferred()
            lease.pending.append(waiting)
            await waiting
        lease.pending = []
        try:
            wait = await self._renew(tenant_id, lease, now)
        except Exception:
            # The requests that waited for this renewal share its failure: each trying the
            # statement again in turn would add up their waits while the database is down.
            failure = Failure()
            waiters, lease.pending = lease.pending, None
            for waiting in waiters:
                waiting.errback(failure)
            raise
        waiters, lease.pending = lease.pending, None
        for waiting in waiters:
            waiting.callback(None)
        return wait

    async def _renew(self, tenant_id: uuid.UUID, lease: _Lease, now: float) -> int | None:
        """Take a new lease (spending one of its tokens), or one token; or say how long to wait."""
        rate = lease.rate
        window = self._lease_window
        most = math.floor(rate * self._lease_seconds)
        if lease.expires <= now:
            # Expired (with tokens left, or idle): ask for what was spent of it.
            size = max(1, lease.used)
        else:
            size = lease.size * 2  # ran out early
        size = min(size, most)
        lease.tokens, lease.used, lease.size = 0, 0, size
        if size >= 2 and now >= lease.single_until:
            if await api_rate.lease(self._db, tenant_id, now, size, Gcra(1.0 / rate, window / 2)):
                lease.tokens, lease.used, lease.expires = size - 1, 1, now + self._lease_seconds
                return None
            # The row is busy: one token per request for a while, checked exactly.
            lease.single_until = now + self._lease_seconds
            lease.size = 1
        wait = await self._take_one(tenant_id, rate, window, now)
        if wait is None:
            lease.used, lease.expires = 1, now + self._lease_seconds
        return wait

    async def _take_one(self, tenant_id: uuid.UUID, rate_per_sec: int, window: float,
                        now: float | None = None) -> int | None:
        if now is None:
            now = self._clock.seconds()
        rate = Gcra(1.0 / rate_per_sec, window)
        if await api_rate.take(self._db, tenant_id, now, rate):
            return None
        return rate.retry_after(await api_rate.theoretical_arrival(self._db, tenant_id), now)

    def _forget_idle(self) -> None:
        now = self._clock.seconds()
        for tenant_id, lease in list(self._leases.items()):
            if lease.pending is None and lease.expires <= now:
                del self._leases[tenant_id]
