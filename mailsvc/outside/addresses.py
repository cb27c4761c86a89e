"""
The one check of outside addresses (webhook endpoints, attachment ``path`` URLs, brand
import): resolve a host once through the service's resolver, refuse anything that is not a
public unicast address, and hand back the address that was checked so the caller connects
to exactly it (no second lookup a DNS rebinding could answer differently).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from twisted.internet import defer
from twisted.names import dns
from twisted.names.error import DNSNameError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Seconds per try of each DNS query (the resolver's default waits a minute in total).
DNS_TIMEOUT = (1, 3)
_CNAME_DEPTH = 8
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
#: Seconds an answer is kept at most, and how many names are kept.
CACHE_SECONDS = 30
CACHE_ENTRIES = 10_000


class TargetRefused(Exception):
    """The target is not a public address (or not an acceptable URL at all)."""

    def __init__(self, message: str, reason: str = "private_address"):
        super().__init__(message)
        self.message = message
        self.reason = reason


class Unresolvable(Exception):
    """The host name has no address, or DNS did not answer."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` must not be reached from here, or None for a public unicast address."""
    if address.version == 6:
        if address.ipv4_mapped is not None:
            return "an IPv4-mapped IPv6 address"
        embedded = address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None and refusal(embedded) is not None:
            return "an IPv6 address embedding a non-public IPv4 address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.version == 4 and address in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "a reserved address"
    return None


def literal(host: str) -> IPAddress | None:
    """The address ``host`` spells (``[v6]`` brackets allowed), or None for a name."""
    if ":" not in host and not host[-1:].isdigit():
        return None  # a name (IPv4 literals end in a digit, IPv6 ones hold a colon)
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


class PublicAddresses:
    """
    ``await check(host)`` → the one address to connect to. ``allow_private`` (the
    ``security.allow_private_targets`` test knob) lifts the address rule, not the lookup.

    Answers are kept for their TTL (at most CACHE_SECONDS) and concurrent lookups of one
    name share one query, so a burst of deliveries to one endpoint costs one lookup; what is
    kept is checked again on every use.
    """

    def __init__(self, clock, resolver, allow_private: bool = False, treated_as_public: Iterable[str] = ()):
        self._clock = clock
        self._resolver = resolver
        self._allow_private = allow_private
        # ``security.test_public_addresses``: networks a test's "public" names point into.
        self._public_for_tests = tuple(ipaddress.ip_network(n.strip(), strict=False) for n in treated_as_public)
        self._cache: dict[str, tuple[list[IPAddress], float]] = {}
        self._resolving: dict[str, list[defer.Deferred]] = {}

    def _checked(self, host: str, addresses: Iterable[IPAddress], trusted: bool = False) -> IPAddress:
        addresses = list(addresses)
        if not (self._allow_private or trusted):
            for address in addresses:
                if any(address in network for network in self._public_for_tests):
                    continue
                why = refusal(address)
                if why is not None:
                    shown = host if str(address) == host else f"{host} ({address})"
                    raise TargetRefused(f"{shown} is {why}")
        # IPv4 first: it is what most receivers reach reliably.
        addresses.sort(key=lambda a: a.version)
        return addresses[0]

    async def check(self, host: str, trusted: bool = False) -> IPAddress:
        """The address to connect to; ``trusted`` (a target the operator configured, such as
        the AI provider) is resolved and pinned the same way, without the address rule."""
        host = host.strip().rstrip(".").lower()
        if not host:
            raise TargetRefused("the URL names no host", "malformed")
        address = literal(host)
        if address is not None:
            return self._checked(host, [address], trusted)
        try:
            name = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise TargetRefused(f"{host} is not a valid host name", "malformed") from None
        return self._checked(host, await self._resolved(name), trusted)

    async def _resolved(self, name: str) -> list[IPAddress]:
        now = self._clock.seconds()
        kept = self._cache.get(name)
        if kept is not None and kept[1] > now:
            return kept[0]
        waiting = self._resolving.get(name)
        if waiting is not None:
            shared: defer.Deferred = defer.Deferred()
            waiting.append(shared)
            return await shared
        self._resolving[name] = waiting = []
        try:
            addresses, ttl = await self._addresses(name)
        except Exception as e:
            for d in waiting:
                d.errback(e)
            raise
        finally:
            del self._resolving[name]
        if len(self._cache) > CACHE_ENTRIES:
            self._cache.clear()
        self._cache[name] = (addresses, now + min(ttl, CACHE_SECONDS))
        for d in waiting:
            d.callback(addresses)
        return addresses

    async def _addresses(self, name: str) -> tuple[list[IPAddress], float]:
        """Every A and AAAA address of ``name`` (following CNAMEs the answer leaves open) and
        the shortest TTL among them."""
        for _ in range(_CNAME_DEPTH):
            results = await defer.DeferredList(
                [
                    self._resolver.lookupAddress(name, timeout=DNS_TIMEOUT),
                    self._resolver.lookupIPV6Address(name, timeout=DNS_TIMEOUT),
                ],
                consumeErrors=True,
            )
            answers, failures = [], []
            for ok, result in results:
                if ok:
                    answers.extend(result[0])
                elif not result.check(DNSNameError):
                    failures.append(result)
            if failures and len(failures) == len(results):
                raise Unresolvable(f"{name} could not be resolved (DNS did not answer)")
            addresses, target = _read_answers(name, answers)
            if addresses:
                ttl = min((r.ttl for r in answers if r.type in (dns.A, dns.AAAA)), default=0)
                return addresses, ttl
            if target is None:
                raise Unresolvable(f"{name} has no address")
            name = target
        raise Unresolvable(f"{name}: too many CNAME records in a row")


def _read_answers(name: str, answers: list) -> tuple[list[IPAddress], str | None]:
    """The addresses reachable from ``name`` through the answers' CNAMEs, and the last alias."""
    aliases = {}
    by_name: dict[str, list[IPAddress]] = {}
    for record in answers:
        owner = record.name.name.decode("ascii", "replace").rstrip(".").lower()
        if record.type == dns.CNAME:
            aliases[owner] = record.payload.name.name.decode("ascii", "replace").rstrip(".").lower()
        elif record.type in (dns.A, dns.AAAA):
            by_name.setdefault(owner, []).append(ipaddress.ip_address(record.payload.address))
    current, seen, found = name.lower(), set(), []
    while True:
        seen.add(current)
        found.extend(by_name.get(current, []))
        following = aliases.get(current)
        if following is None or following in seen:
            break
        current = following
    if found or current == name.lower():
        return found, None
    return [], current
