"""
Adaptive per-destination shaping, the rules without I/O: which replies mean "slow down", how
far a destination's limits shrink on one, and how slowly they grow back on success.

- A 421 (at any point of the session) or a 4xx whose enhanced code is 4.7.x and whose text
  speaks of connections, rates or limits throttles the destination: its concurrency halves
  (at least 1) and its rate halves (at least MIN_RATE messages a second).
- Once RECOVER_SECONDS have passed since the last change, a success grows the concurrency by
  one and the rate by RECOVER_FACTOR, never beyond the starting limits (the ceiling).
"""

from __future__ import annotations

import re

import attrs

MIN_RATE = 0.2
#: A rate of 0 is "no limit" (destinations nobody configured, until they throttle): a first
#: shrink starts from this many messages a second, and growing back past it lifts the limit.
UNLIMITED_BASE = 100.0
RECOVER_SECONDS = 60.0
RECOVER_FACTOR = 1.25
_SLOW_DOWN = re.compile(r"too many|rate|limit|throttl|slow down|temporarily deferred|unusual", re.IGNORECASE)


@attrs.frozen
class Limits:
    concurrency: int
    rate_per_sec: float

    def as_dict(self) -> dict:
        return {"concurrency": self.concurrency, "rate_per_sec": round(self.rate_per_sec, 3)}


def is_throttling(code: int, enhanced: str, text: str) -> bool:
    if code == 421:
        return True
    return 400 <= code < 500 and enhanced.startswith("4.7.") and bool(_SLOW_DOWN.search(text or ""))


def throttled(limits: Limits) -> Limits:
    rate = limits.rate_per_sec if limits.rate_per_sec > 0 else UNLIMITED_BASE
    return Limits(max(1, limits.concurrency // 2), max(MIN_RATE, rate / 2))


def recovered(limits: Limits, ceiling: Limits) -> Limits:
    concurrency = min(ceiling.concurrency, limits.concurrency + 1)
    if limits.rate_per_sec <= 0:
        return Limits(concurrency, 0.0)
    if ceiling.rate_per_sec <= 0:
        grown = limits.rate_per_sec * RECOVER_FACTOR
        return Limits(concurrency, 0.0 if grown >= UNLIMITED_BASE else grown)
    return Limits(concurrency, min(ceiling.rate_per_sec, limits.rate_per_sec * RECOVER_FACTOR))


def default_for(host: str, defaults: dict[str, Limits], fallback: Limits) -> Limits:
    """The starting limits of an MX host: the longest matching pattern (the name or a suffix)."""
    host = host.lower().rstrip(".")
    best = None
    for pattern, limits in defaults.items():
        if (host == pattern or host.endswith("." + pattern)) and (best is None or len(pattern) > len(best[0])):
            best = (pattern, limits)
    return best[1] if best else fallback
