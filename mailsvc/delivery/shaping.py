"""
Adaptive per-destination shaping (rules in ``domain/shaping.py``). A destination is the
registered domain of an MX host (``aspmx.l.google.com`` → ``google.com``), so every MX host
of one provider shares one concurrency and one rate, for this node's sending source
(``delivery.source``). Limits start at the operator's defaults (``destination_defaults``),
shrink on 421 / 4.7.x throttling replies and grow back slowly on success; every change is
written to PostgreSQL at once and each node reads the others' changes every SYNC_SECONDS.

``Connections`` asks ``gate(host)`` for a slot before it takes or opens a connection: the slot
waits while the destination's concurrency is used up, then keeps the rate by spacing starts.
The limits are the node's; each worker of a node gates by its share of them (``Share``).
"""

from __future__ import annotations

from twisted.internet import defer, task
from twisted.logger import Logger

from mailsvc.delivery.turns import Waiters
from mailsvc.domain.domains import registered_domain
from mailsvc.domain.shaping import (
    RECOVER_SECONDS,
    Limits,
    default_for,
    is_throttling,
    recovered,
    throttled,
)
from mailsvc.domain.shares import Share
from mailsvc.store import deliverability as store
from mailsvc.store.database import Database

log = Logger()

SYNC_SECONDS = 15


class TooLateForSlot(Exception):
    """The deadline comes before the destination has room."""


class _Gate:
    def __init__(self):
        self.in_use = 0
        self.waiters = Waiters()
        self.next_start = 0.0


def destination_of(host: str) -> str:
    host = host.lower().rstrip(".")
    try:
        return registered_domain(host) or host
    except Exception:
        return host


class Shaper:
    def __init__(self, clock, db: Database, source: str, fallback: Limits, on_change=None,
                 recover_seconds: float = RECOVER_SECONDS, share: Share = Share()):
        self._clock = clock
        self._share = share
        self._db = db
        self._source = source
        self._fallback = fallback
        self._on_change = on_change
        self._recover_seconds = recover_seconds
        self._defaults: dict[str, Limits] = {}
        #: destination → (limits, changed_at)
        self._current: dict[str, tuple[Limits, float]] = {}
        self._gates: dict[str, _Gate] = {}
        #: Destinations whose waiters ``_wake`` is waking (see there).
        self._waking: set[str] = set()
        self._writes: set[defer.Deferred] = set()

    # -- limits ----------------------------------------------------------------------------

    def ceiling(self, destination: str) -> Limits:
        return default_for(destination, self._defaults, self._fallback)

    def limits(self, destination: str) -> Limits:
        kept = self._current.get(destination)
        return kept[0] if kept is not None else self.ceiling(destination)

    def current(self) -> dict[str, Limits]:
        return {d: limits for d, (limits, _) in self._current.items()}

    def own(self, destination: str) -> Limits:
        """
        This worker's share of the node's limits of ``destination``: what its slots keep. At
        least one connection: a worker with none would hold what it claimed for the destination
        until the attempt's deadline; the rate, divided exactly, still holds the node's pace.
        """
        limits = self.limits(destination)
        return Limits(max(1, self._share.of_count(limits.concurrency)), self._share.of_rate(limits.rate_per_sec))

    async def sync(self) -> None:
        """Read the operator's defaults and every node's current limits."""
        self._defaults = {r["pattern"]: Limits(r["concurrency"], r["rate_per_sec"])
                          for r in await store.destination_defaults(self._db)}
        rows = await store.destination_limits(self._db, self._source)
        self._current = {r["destination"]: (Limits(r["concurrency"], r["rate_per_sec"]), r["changed_at"])
                         for r in rows}
        for destination, (limits, _) in self._current.items():
            self._changed(destination, limits)
            self._wake(destination)

    # -- what replies say ------------------------------------------------------------------

    def observe(self, host: str, result) -> None:
        """After a transaction to ``host``: a throttling reply shrinks, a success may grow."""
        replies = [r.reply for r in result.recipients]
        destination = destination_of(host)
        if any(is_throttling(r.code, r.enhanced_code, r.text) for r in replies):
            self.throttle(destination)
        elif any(200 <= r.code < 300 for r in replies):
            self.succeed(destination)

    def throttle(self, destination: str) -> None:
        now = self._clock.seconds()
        limits = throttled(self.limits(destination))
        self._current[destination] = (limits, now)
        self._changed(destination, limits)
        self._write(store.throttle_destination(self._db, self._source, destination, limits.concurrency,
                                               limits.rate_per_sec, now))

    def succeed(self, destination: str) -> None:
        kept = self._current.get(destination)
        if kept is None:
            return
        limits, changed_at = kept
        now = self._clock.seconds()
        if now - changed_at < self._recover_seconds:
            return
        grown = recovered(limits, self.ceiling(destination))
        self._current[destination] = (grown, now)
        self._changed(destination, grown)
        self._wake(destination)
        self._write(store.recover_destination(self._db, self._source, destination, grown.concurrency,
                                              grown.rate_per_sec, now, changed_at))

    def _changed(self, destination: str, limits: Limits) -> None:
        if self._on_change is not None:
            self._on_change(destination, limits)

    def _write(self, coroutine) -> None:
        d = defer.ensureDeferred(coroutine)
        self._writes.add(d)

        def done(result):
            self._writes.discard(d)
            if isinstance(result, Exception) or hasattr(result, "getErrorMessage"):
                log.info("writing destination limits failed: {why}", why=str(result))
            return None

        d.addBoth(done)

    async def written(self) -> None:
        """Until every change so far is in PostgreSQL (tests, shutdown)."""
        while self._writes:
            await defer.DeferredList(list(self._writes))

    # -- slots -----------------------------------------------------------------------------

    async def acquire(self, host: str, deadline: float, ahead: bool = False) -> str:
        """A slot of the destination of ``host``, started within its rate; TooLateForSlot at
        ``deadline``. Waiters ``ahead`` (transactional mail) have their turn first."""
        destination = destination_of(host)
        gate = self._gates.setdefault(destination, _Gate())
        while gate.in_use >= self.own(destination).concurrency:
            waiting: defer.Deferred[None] = defer.Deferred()
            gate.waiters.append(waiting, ahead)
            left = deadline - self._clock.seconds()
            if left <= 0:
                gate.waiters.remove(waiting)
                raise TooLateForSlot()
            timer = self._clock.callLater(left, lambda w=waiting: w.called or w.errback(TooLateForSlot()))
            try:
                await waiting
            except TooLateForSlot:
                if waiting in gate.waiters:
                    gate.waiters.remove(waiting)
                self._forget_if_idle(destination)
                raise
            finally:
                if timer.active():
                    timer.cancel()
        gate.in_use += 1
        now = self._clock.seconds()
        start = max(now, gate.next_start)
        if start >= deadline:
            self.release(host)
            raise TooLateForSlot()
        rate = self.own(destination).rate_per_sec
        gate.next_start = start + (1.0 / rate if rate > 0 else 0.0)  # 0: no rate limit
        if start > now:
            await task.deferLater(self._clock, start - now, lambda: None)
        return destination

    def release(self, host: str) -> None:
        destination = destination_of(host)
        gate = self._gates.get(destination)
        if gate is None:
            return
        gate.in_use -= 1
        self._wake(destination)
        self._forget_if_idle(destination)

    def _wake(self, destination: str) -> None:
        """
        Wake waiters while the destination has room, in one loop: a woken waiter runs at once,
        and one whose deadline has passed gives its slot back there and then, which calls this
        again. Woken by that inner call, hundreds of such waiters nested one call each, deep
        enough to raise RecursionError in whatever ran next; the inner call returns instead,
        and this loop, which looks at the room after every waiter, wakes the next.
        """
        if destination in self._waking:
            return
        self._waking.add(destination)
        try:
            gate = self._gates.get(destination)
            while gate is not None and gate.waiters and gate.in_use < self.own(destination).concurrency:
                waiting = gate.waiters.popleft()
                if not waiting.called:
                    waiting.callback(None)
        finally:
            self._waking.discard(destination)

    def _forget_if_idle(self, destination: str) -> None:
        gate = self._gates.get(destination)
        if gate is not None and gate.in_use == 0 and not gate.waiters and gate.next_start <= self._clock.seconds():
            del self._gates[destination]
