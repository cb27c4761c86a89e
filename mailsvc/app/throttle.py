"""
Throttles counted in PostgreSQL (the unlogged ``login_throttle``) so that every process of
every node sees one count: failed sign-ins per address and per client network, failed SMTP
AUTH exchanges per client network (docs/decisions.md, "Sign-in and SMTP AUTH throttles"), and
the waitlist form's requests per client network.

Each key is a GCRA (``mailsvc.domain.gcra``): a burst of ``burst`` tries, then one every
``interval`` seconds. A try is counted (reserved) *before* its credentials are checked, for all
its keys in one transaction (all or none), so tries that run at once cannot pass a limit
together: the row lock orders them, and each sees the count the one before it left. A try whose
credentials turn out right gives its reservation back, so only failures are limited (a waitlist
request has none to check: each one counts).
"""

from __future__ import annotations

import attrs
from twisted.internet import task

from mailsvc.domain.gcra import Gcra
from mailsvc.store import throttles as store
from mailsvc.store.database import Database, Transaction

#: Slack on every window, so that rounding times in seconds never refuses the last of a burst.
_ROUNDING = 1e-3


@attrs.frozen
class Limit:
    """A burst of ``burst`` tries, then one every ``interval`` seconds."""

    burst: int
    interval: float

    @property
    def rate(self) -> Gcra:
        return Gcra.of(self.interval, self.burst)


#: Failed SMTP AUTH exchanges of a client network: 10 at once, then one every 6 s (10 a minute).
SMTP_AUTH = Limit(10, 6.0)
#: Pauses (seconds) after which a refused SMTP AUTH exchange asks again before its 421: the
#: count may be full only of exchanges whose keys are being checked (a few milliseconds each),
#: and a client that opens many connections at once (32, as the sending benchmark does: 22 of
#: them got 421 without these) should see no 421 for its right key.
SMTP_AUTH_RETRY_PAUSES = (0.02, 0.04, 0.08, 0.16)


class _Refused(Exception):
    def __init__(self, wait: int):
        self.wait = wait


class Throttle:
    def __init__(self, clock, db: Database):
        self._clock = clock
        self._db = db

    async def reserve(self, limits: dict[str, Limit]) -> int | None:
        """
        One more try for every key of ``limits``, all or none: None when each key is within its
        limit; else the whole seconds until one more would be (nothing is counted then).
        """
        now = self._clock.seconds()

        async def take(txn: Transaction | Database) -> None:
            for key in sorted(limits):  # one order everywhere: no deadlock between two tries
                rate = limits[key].rate
                tat = await store.reserve(txn, key, now, attrs.evolve(rate, window=rate.window + _ROUNDING))
                if tat is not None:
                    raise _Refused(rate.retry_after(tat, now))

        try:
            if len(limits) == 1:
                await take(self._db)  # one statement: no transaction to hold
            else:
                await self._db.run("reserve_throttle", take)
        except _Refused as refused:
            return refused.wait
        return None

    async def give_back(self, limits: dict[str, Limit]) -> None:
        """Uncount a try ``reserve`` counted: its credentials were right."""
        for key in sorted(limits):
            await store.give_back(self._db, key, limits[key].rate)


class SmtpAuthFailures:
    """Failed SMTP AUTH exchanges per client network, shared by every listener, process and node."""

    def __init__(self, throttle: Throttle, clock):
        self._throttle = throttle
        self._clock = clock  # for the pauses only: the throttle keeps its own time

    def _limits(self, client: str) -> dict[str, Limit]:
        return {f"smtp_auth:{client}": SMTP_AUTH}

    async def reserve(self, client: str) -> int | None:
        """Count an exchange of ``client`` as failed before its key is checked; None, or the seconds to wait."""
        for pause in (*SMTP_AUTH_RETRY_PAUSES, None):
            wait = await self._throttle.reserve(self._limits(client))
            if wait is None or pause is None:
                return wait
            await task.deferLater(self._clock, pause, lambda: None)
        raise AssertionError("unreachable")

    async def give_back(self, client: str) -> None:
        """The exchange succeeded: it was no failure."""
        await self._throttle.give_back(self._limits(client))
