"""
A real authoritative DNS server (twisted.names) on 127.0.0.1, UDP and TCP on one random port,
whose zones a test changes between lookups.

    async def test_x(dns_server):
        dns_server.txt("_dmarc.example.com", "v=DMARC1; p=none")
        dns_server.mx("example.com", "mx.example.net", 10)
        config = dns_server.configure(load(None, environ={}))   # dns.servers → this server

Zones are created on first use for the registered domain of a name (``example.com`` for
``a.b.example.com``); a name under no zone answers NXDOMAIN. ``fail(name)`` makes queries
for a name answer SERVFAIL until ``heal(name)``. ``queries`` lists every (name, type) asked,
once per lookup: a client's retransmission after a timeout (the same message id and question,
which a loaded machine provokes) is answered but not listed again.
"""

from __future__ import annotations

import attrs
import pytest_twisted
from twisted.internet import defer, reactor
from twisted.internet.error import CannotListenError
from twisted.names import authority, common, dns, error, server

from mailsvc.config import Config
from mailsvc.domain.domains import registered_domain

TTL = 60


class _Zone(authority.FileAuthority):
    """A FileAuthority fed from a dict instead of a file."""

    def __init__(self, origin: str):
        common.ResolverBase.__init__(self)
        self._cache = {}
        self.soa = (origin.encode(), dns.Record_SOA(
            mname=f"ns1.{origin}", rname=f"hostmaster.{origin}", serial=1, refresh=3600,
            retry=600, expire=TTL, minimum=TTL, ttl=TTL,
        ))
        self.records = {origin.encode(): [self.soa[1], dns.Record_NS(f"ns1.{origin}", ttl=TTL)]}


class _ServerFailure(Exception):
    """Answered as SERVFAIL."""


class TLSARecord(dns.UnknownRecord):
    """A TLSA record (type 52; twisted.names has no class of its own for it)."""

    TYPE = 52


class _Factory(server.DNSServerFactory):
    #: Zones whose answers carry the AD bit (see DNSServer.sign).
    signed: set[str]
    #: Every (name, type) asked, once per lookup (see the module's docstring).
    queries: list[tuple[str, str]]
    #: (message id, (name, type)) of every query seen, to know a retransmission.
    asked: set[tuple[int, tuple[str, str]]]

    def _responseFromMessage(self, message, **kwargs):  # noqa: N802 (Twisted's name)
        response = super()._responseFromMessage(message=message, **kwargs)
        # As a validating resolver does (RFC 6840 §5.7): AD only for a query that asked for it
        # (AD or DO set), and only when every name asked is in a signed zone.
        asked = bool(getattr(message, "authenticData", 0)) or bool(getattr(message, "dnssecOK", False))
        names = [q.name.name.decode("ascii").lower().rstrip(".") for q in message.queries]
        if asked and names and all(self._is_signed(n) for n in names):
            response.authenticData = 1
        return response

    def _is_signed(self, name: str) -> bool:
        labels = name.split(".")
        return any(".".join(labels[i:]) in self.signed for i in range(len(labels)))

    def handleQuery(self, message, protocol, address):  # noqa: N802 (Twisted's name)
        for query in message.queries:
            name = query.name.name.decode("ascii").lower().rstrip(".")
            asked = (name, dns.QUERY_TYPES.get(query.type, str(query.type)))
            if (message.id, asked) not in self.asked:
                self.asked.add((message.id, asked))
                self.queries.append(asked)
        return super().handleQuery(message, protocol, address)

    def gotResolverError(self, failure, protocol, message, address):  # noqa: N802 (Twisted's name)
        if failure.check(_ServerFailure):  # asked for by the test: no error in the log
            self.sendReply(protocol, self._responseFromMessage(message=message, rCode=dns.ESERVER), address)
            return
        super().gotResolverError(failure, protocol, message, address)


class _Zones(common.ResolverBase):
    """Every test zone behind one resolver: the longest zone containing a name answers."""

    def __init__(self):
        super().__init__()
        self.zones: dict[str, _Zone] = {}
        self.failing: set[str] = set()

    def _lookup(self, name, cls, type, timeout=None):
        text = name.decode("ascii").lower().rstrip(".")
        if text in self.failing:
            return defer.fail(_ServerFailure(text))
        labels = text.split(".")
        for i in range(len(labels)):
            zone = self.zones.get(".".join(labels[i:]))
            if zone is not None:
                return zone._lookup(name, cls, type, timeout)
        return defer.fail(error.DomainError(text))


class DNSServer:
    def __init__(self):
        self._zones = _Zones()
        self._ports = []
        self.port = 0
        self.signed: set[str] = set()
        self.queries: list[tuple[str, str]] = []
        self._asked: set[tuple[int, tuple[str, str]]] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        factory = _Factory(authorities=[self._zones])
        factory.signed = self.signed
        factory.queries = self.queries
        factory.asked = self._asked
        for _ in range(20):  # a free UDP port whose TCP twin is free too
            protocol = dns.DNSDatagramProtocol(factory)  # one per attempt: a protocol binds once
            udp = reactor.listenUDP(0, protocol, interface="127.0.0.1")
            try:
                tcp = reactor.listenTCP(udp.getHost().port, factory, interface="127.0.0.1")
            except CannotListenError:
                udp.stopListening()
                continue
            self._ports = [udp, tcp]
            self.port = udp.getHost().port
            return
        raise RuntimeError("no free port for the test DNS server")

    async def stop(self) -> None:
        for port in self._ports:
            await defer.maybeDeferred(port.stopListening)
        self._ports = []

    def configure(self, config: Config) -> Config:
        """
        ``config`` with ``dns.servers`` pointing at this server only. The names it serves are the
        reserved ones (``*.example``, ``*.test``, example.com) routed to loopback peers, so mail to
        them is not refused (``mail.refuse_reserved_recipients`` off).
        """
        return attrs.evolve(config, dns=attrs.evolve(config.dns, servers=(self.address,)),
                            mail=attrs.evolve(config.mail, refuse_reserved_recipients=False))

    # Zone contents

    def _zone(self, name: str) -> _Zone:
        origin = registered_domain(name)
        if origin not in self._zones.zones:
            self._zones.zones[origin] = _Zone(origin)
        return self._zones.zones[origin]

    def add(self, name: str, record) -> None:
        name = name.lower().rstrip(".")
        self._zone(name).records.setdefault(name.encode(), []).append(record)

    def remove(self, name: str, type: int | None = None) -> None:
        """Drop the records of ``name`` (of one type, or all)."""
        name = name.lower().rstrip(".")
        records = self._zone(name).records
        kept = [r for r in records.get(name.encode(), []) if type is not None and r.TYPE != type]
        if kept:
            records[name.encode()] = kept
        else:
            records.pop(name.encode(), None)

    def txt(self, name: str, *values: str) -> None:
        """A TXT record per value; values over 255 bytes are split into several strings."""
        for value in values:
            data = value.encode()
            self.add(name, dns.Record_TXT(*[data[i:i + 255] for i in range(0, len(data), 255)] or [b""], ttl=TTL))

    def mx(self, name: str, exchange: str, preference: int = 10) -> None:
        self.add(name, dns.Record_MX(preference, exchange, ttl=TTL))

    def a(self, name: str, address: str) -> None:
        self.add(name, dns.Record_A(address, ttl=TTL))

    def aaaa(self, name: str, address: str) -> None:
        self.add(name, dns.Record_AAAA(address, ttl=TTL))

    def cname(self, name: str, target: str) -> None:
        self.add(name, dns.Record_CNAME(target, ttl=TTL))

    def tlsa(self, name: str, usage: int, selector: int, matching: int, data: bytes) -> None:
        self.add(name, TLSARecord(bytes((usage, selector, matching)) + data, ttl=TTL))

    def sign(self, zone: str) -> None:
        """Answers for names under ``zone`` carry the AD bit, as a validating resolver's answers
        for a DNSSEC-signed, validated zone do."""
        self.signed.add(zone.lower().rstrip("."))

    def fail(self, name: str) -> None:
        self._zones.failing.add(name.lower().rstrip("."))

    def heal(self, name: str) -> None:
        self._zones.failing.discard(name.lower().rstrip("."))


@pytest_twisted.async_yield_fixture
async def dns_server():
    """A running DNSServer; stopped after the test."""
    running = DNSServer()
    running.start()
    yield running
    await running.stop()
