"""
Lookups whose answers must be DNSSEC-authenticated (TLSA for DANE, RFC 7672): asked of the
configured resolver (``dns.servers``) with the AD bit set in the query (RFC 6840 §5.7), and
trusted only when the answer comes back with the AD bit. The resolver must validate and the
path to it must be trusted (a validating resolver on the node, e.g. unbound on loopback):
that is the operator's set-up, see docs/decisions.md "MTA-STS and DANE".
"""

from __future__ import annotations

import attrs
from twisted.internet import defer
from twisted.names import dns

from mailsvc.dns.resolver import parse_server

TLSA = 52
TIMEOUT = 5


@attrs.frozen
class SecureAnswer:
    #: The resolver vouched for the answer (AD bit): the zone is signed and validated.
    authentic: bool
    #: NXDOMAIN or no records of the type.
    empty: bool
    #: The records' wire data (RDATA) of the asked type.
    rdata: tuple[bytes, ...]


class LookupFailed(Exception):
    """No answer (timeout, SERVFAIL: e.g. a bogus signature)."""


class _AskAuthentic(dns.DNSDatagramProtocol):
    def writeMessage(self, message, address):  # noqa: N802 (Twisted's name)
        message.authenticData = 1
        super().writeMessage(message, address)


class _Controller:
    def messageReceived(self, message, protocol, address=None):  # noqa: N802 (Twisted's name)
        pass


class SecureResolver:
    def __init__(self, reactor, servers: tuple[str, ...]):
        self._reactor = reactor
        self._servers = [parse_server(s) for s in servers] or [("127.0.0.1", 53)]

    async def lookup(self, name: str, rtype: int) -> SecureAnswer:
        last: Exception | None = None
        for server in self._servers:
            protocol = _AskAuthentic(_Controller(), reactor=self._reactor)
            port = self._reactor.listenUDP(0, protocol, interface="")
            try:
                message = await protocol.query(server, [dns.Query(name, rtype, dns.IN)], timeout=TIMEOUT)
            except (defer.TimeoutError, dns.DNSQueryTimeoutError, OSError) as e:
                last = e
                continue
            finally:
                await defer.maybeDeferred(port.stopListening)
            if message.rCode == dns.ENAME:
                return SecureAnswer(bool(message.authenticData), True, ())
            if message.rCode != dns.OK:
                last = LookupFailed(f"{name}: DNS error {message.rCode}")
                continue
            rdata = []
            for answer in message.answers:
                if answer.type == rtype:
                    rdata.append(getattr(answer.payload, "data", b""))
            return SecureAnswer(bool(message.authenticData), not rdata, tuple(rdata))
        raise LookupFailed(f"no answer for {name}: {last}")
