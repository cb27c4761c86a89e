"""
The API request rate of an account, shared by all its keys and by every node on the database:
a GCRA in one unlogged row per tenant, where one statement decides and records.

A tenant at ``2 / LEASE_SECONDS`` per second or more would make that row a hot spot, so a node
leases a batch of tokens from it and spends them locally for at most ``LEASE_SECONDS``, each
take checked against a window ``LEASE_SECONDS`` shorter so all nodes together stay within the
documented burst; slower tenants take one token per request (docs/decisions.md, "Rate limit").
The next lease is asked for while half of the current one is left, so that the requests of a
busy tenant do not all wait for the statement each time a lease runs out.
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
    since: float = 0.0  # when this node began to spend it
    size: int = 1  # tokens the next lease asks for
    used: int = 0  # tokens spent of the current lease
    single_until: float = 0.0  # no lease before this time (the row was too full)
    pending: list[defer.Deferred] | None = None  # requests waiting for a lease under way
    queued: int = 0  # requests that waited for the last renewal: the next one is for them too
    #: The next lease, asked for before this one ran out: under way, then its tokens and expiry.
    ahead: defer.Deferred | None = None
    next: tuple[int, float] | None = None


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
        #: Seconds the last lease asked for ahead took to be answered.
        self._round_trip = 0.0

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
            if (lease.tokens <= 0 or now >= lease.expires) and lease.next is not None:
                (tokens, expires), lease.next = lease.next, None
                if now < expires:
                    lease.tokens, lease.expires, lease.size, lease.used, lease.since = tokens, expires, tokens, 0, now
            if lease.tokens > 0 and now < lease.expires:
                lease.tokens -= 1
                lease.used += 1
                self._ask_ahead(tenant_id, lease, now)
                return None
            waiting: defer.Deferred = defer.Deferred()
            if lease.pending is not None:
                lease.pending.append(waiting)
            elif lease.ahead is not None:  # the next lease, asked for ahead, has not come yet
                lease.ahead.chainDeferred(waiting)
            else:
                break
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
        lease.queued = len(waiters)
        for waiting in waiters:
            waiting.callback(None)
        return wait

    def _ask_ahead(self, tenant_id: uuid.UUID, lease: _Lease, now: float) -> None:
        """
        With half of the lease spent (its tokens or its time), ask for the next one, sized from
        the pace of this one, without making anyone wait for it: a refusal or an error leaves
        the next take to renew as usual.
        """
        short = lease.tokens <= lease.used
        # Time enough for the statement: half the lease, or twice its last round trip if longer.
        margin = max(self._lease_seconds / 2, 2 * self._round_trip)
        if lease.ahead is not None or lease.next is not None or now < lease.single_until or not (
                short or lease.expires - now <= margin):
            return
        # Twice the pace (requests come in bursts), or twice the size when half of it went early.
        pace = lease.used * self._lease_seconds / max(now - lease.since, self._lease_seconds / 8)
        wanted = 2 * lease.size if short else math.ceil(2 * pace)
        size = min(max(2, wanted), math.floor(lease.rate * self._lease_seconds))
        rate = Gcra(1.0 / lease.rate, self._lease_window / 2)

        async def ask() -> None:
            try:
                if await api_rate.lease(self._db, tenant_id, now, size, rate):
                    lease.next = (size, now + self._lease_seconds)
            finally:
                lease.ahead = None
                self._round_trip = self._clock.seconds() - now

        # An error is not this request's: the next renewal meets it, if it lasts.
        ahead = defer.ensureDeferred(ask()).addErrback(lambda _: None)
        lease.ahead = None if ahead.called else ahead

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
        # Requests that queued behind the last renewal and found it too small (or expired)
        # each wait for this one: as many tokens, or they would go one statement at a time.
        size = min(max(size, lease.queued + 1), most)
        lease.tokens, lease.used, lease.size = 0, 0, size
        if size >= 2 and now >= lease.single_until:
            if await api_rate.lease(self._db, tenant_id, now, size, Gcra(1.0 / rate, window / 2)):
                lease.tokens, lease.used, lease.expires, lease.since = size - 1, 1, now + self._lease_seconds, now
                return None
            # The row is busy: one token per request for a while, checked exactly.
            lease.single_until = now + self._lease_seconds
            lease.size = 1
        wait = await self._take_one(tenant_id, rate, window, now)
        if wait is None:
            lease.used, lease.expires, lease.since = 1, now + self._lease_seconds, now
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
