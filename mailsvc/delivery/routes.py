"""
Where mail for a domain goes: its MX hosts through the one resolver (``dns.servers``), in
preference order with equal preferences shuffled; a null MX (RFC 7505) or a domain that does
not exist bounces; no MX at all falls back to the domain's own address (RFC 5321 §5.1).
Hosts that refused a connection are remembered for a while and tried last; an attempt tries
at most MAX_HOSTS of them (a domain may list any number, each costing a connect timeout).
"""

from __future__ import annotations

import random

import attrs
from twisted.internet import defer
from twisted.names import dns
from twisted.names.error import DNSNameError

#: Seconds an MX answer is kept at most.
CACHE_SECONDS = 300
#: Seconds a host that could not be reached is put behind the others.
BAD_HOST_SECONDS = 300
DNS_TIMEOUT = (2, 5)
#: Hosts tried per attempt, at most: the first ones in order (remembered bad hosts drop off first).
MAX_HOSTS = 5


class NoRoute(Exception):
    """The domain cannot receive mail: a permanent failure (bounce)."""

    def __init__(self, code: int, enhanced: str, message: str):
        super().__init__(message)
        self.code, self.enhanced, self.message = code, enhanced, message


class RouteUnknown(Exception):
    """DNS gave no usable answer: try again later."""


@attrs.frozen
class Route:
    domain: str
    hosts: tuple[str, ...]


class Routes:
    def __init__(self, clock, resolver, rng: random.Random | None = None):
        self._clock = clock
        self._resolver = resolver
        self._rng = rng or random.Random()
        self._cache: dict[str, tuple[float, list[tuple[int, str]] | NoRoute]] = {}
        self._bad: dict[str, float] = {}
        self._resolving: dict[str, list[defer.Deferred[list[tuple[int, str]] | NoRoute]]] = {}

    def mark_bad(self, host: str) -> None:
        now = self._clock.seconds()
        if len(self._bad) > 10_000:
            self._bad = {h: until for h, until in self._bad.items() if until > now}
        self._bad[host] = now + BAD_HOST_SECONDS

    def is_bad(self, host: str) -> bool:
        until = self._bad.get(host)
        if until is None:
            return False
        if until <= self._clock.seconds():
            del self._bad[host]
            return False
        return True

    async def route(self, domain: str) -> Route:
        domain = domain.rstrip(".").lower()
        now = self._clock.seconds()
        kept = self._cache.get(domain)
        if kept is None or kept[0] <= now:
            if len(self._cache) > 10_000:
                self._cache.clear()
            kept = (now + CACHE_SECONDS, await self._shared_lookup(domain))
            self._cache[domain] = kept
        answer = kept[1]
        if isinstance(answer, NoRoute):
            raise answer
        return Route(domain, self._ordered(answer))

    async def first_host(self, domain: str) -> str | None:
        """The MX a delivery to ``domain`` tries first (the operator's queue shows it); None if DNS does not say."""
        try:
            return (await self.route(domain)).hosts[0]
        except (NoRoute, RouteUnknown, IndexError):
            return None

    async def _shared_lookup(self, domain: str) -> list[tuple[int, str]] | NoRoute:
        """Concurrent deliveries to one domain share one query."""
        waiting = self._resolving.get(domain)
        if waiting is not None:
            d: defer.Deferred[list[tuple[int, str]] | NoRoute] = defer.Deferred()
            waiting.append(d)
            return await d
        self._resolving[domain] = []
        try:
            result = await self._lookup(domain)
        except Exception as e:
            for d in self._resolving.pop(domain):
                d.errback(e)
            raise
        for d in self._resolving.pop(domain):
            d.callback(result)
        return result

    async def _lookup(self, domain: str) -> list[tuple[int, str]] | NoRoute:
        try:
            answers, _, _ = await self._resolver.lookupMailExchange(domain, timeout=DNS_TIMEOUT)
        except DNSNameError:
            return NoRoute(550, "5.1.2", f"the domain {domain} does not exist")
        except Exception as e:
            raise RouteUnknown(f"MX lookup for {domain} failed: {type(e).__name__}") from None
        # A CNAME'd domain answers with the MX records of the name it leads to.
        exchanges = [(r.payload.preference, _name(r.payload.name)) for r in answers if r.type == dns.MX]
        if not exchanges:
            return [(0, domain)]
        if any(host == "" for _, host in exchanges):
            return NoRoute(556, "5.1.10", f"the domain {domain} accepts no mail (null MX)")
        return exchanges

    def _ordered(self, exchanges: list[tuple[int, str]]) -> tuple[str, ...]:
        shuffled = list(exchanges)
        self._rng.shuffle(shuffled)
        shuffled.sort(key=lambda e: e[0])  # stable: equal preferences stay shuffled
        hosts = [host for _, host in shuffled]
        return tuple(sorted(hosts, key=self.is_bad)[:MAX_HOSTS])  # stable: bad hosts go last


def _name(name: dns.Name) -> str:
    return name.name.decode("ascii", "replace").rstrip(".").lower()
