"""
The generic cell rate algorithm every rate limit of the service is: a key's state is one number,
its theoretical arrival time (``tat``), the time by which everything counted so far would have
arrived at the rate. An arrival conforms while counting it leaves ``tat`` at most ``window``
seconds ahead of now, so a quiet key takes a burst of ``window / interval`` at once, then one
every ``interval`` seconds.

The limits kept in PostgreSQL (``mailsvc.store.api_rate``, ``mailsvc.store.throttles``) run the
same rule as one SQL statement, given ``interval`` and ``window`` from here.
"""

from __future__ import annotations

import math

import attrs


@attrs.frozen
class Gcra:
    #: Seconds between two arrivals at the rate (the emission interval).
    interval: float
    #: How far ahead of now a conforming arrival may leave ``tat`` (burst × interval).
    window: float

    @classmethod
    def of(cls, interval: float, burst: float) -> Gcra:
        """A burst of ``burst`` at once, then one every ``interval`` seconds."""
        return cls(interval, burst * interval)

    @classmethod
    def per_second(cls, rate: float, burst: float) -> Gcra:
        """``rate`` a second on average, at most ``burst`` at once after a quiet spell."""
        return cls.of(1 / rate, burst)

    def counted(self, tat: float | None, now: float, count: int = 1) -> float:
        """``tat`` once ``count`` more arrived at ``now`` (None: the key has none yet)."""
        return max(now if tat is None else tat, now) + count * self.interval

    def conforms(self, tat: float | None, now: float, count: int = 1) -> bool:
        """Whether ``count`` more arriving at ``now`` are within the rate."""
        return self.counted(tat, now, count) - now <= self.window

    def admitted(self, tat: float | None, now: float, wanted: int) -> int:
        """
        How many of ``wanted`` arriving at ``now`` conform together (0: none yet), counted whole
        through float rounding: the one an interval brings back is one, not 0.99999999999997.
        """
        ahead = max(now if tat is None else tat, now) - now
        room = math.floor((self.window - ahead) / self.interval + 1e-9)
        return max(0, min(wanted, room))

    def wait(self, tat: float | None, now: float) -> float:
        """Seconds from ``now`` until one more conforms (0: at once)."""
        if tat is None:
            return 0.0
        return max(0.0, tat + self.interval - self.window - now)

    def retry_after(self, tat: float | None, now: float) -> int:
        """``wait`` in whole seconds for a refused arrival (a Retry-After): at least 1."""
        return max(1, math.ceil(self.wait(tat, now)))

    def take(self, tat: float | None, now: float) -> tuple[bool, float | None]:
        """One arrival at ``now``: whether it conforms, and ``tat`` after it (unchanged when refused)."""
        if self.conforms(tat, now):
            return True, self.counted(tat, now)
        return False, tat
