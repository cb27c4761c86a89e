"""The loopback DNS server the tests share, through the service's own resolver."""

import socket

import pytest
import pytest_twisted as pt
from twisted.internet import reactor
from twisted.names import client, dns, error

from mailsvc.config import load
from mailsvc.dns.resolver import build_resolver


@pt.ensureDeferred
async def test_records_change_between_lookups_over_udp_and_tcp(dns_server):
    config = dns_server.configure(load(None, environ={}))
    assert config.dns.servers == (dns_server.address,)
    resolver = build_resolver(reactor, config.dns.servers)

    dns_server.txt("example.com", "v=spf1 -all", "x" * 400)
    answers, _, _ = await resolver.lookupText("example.com")
    assert sorted(b"".join(a.payload.data) for a in answers) == [b"v=spf1 -all", b"x" * 400]
    dns_server.remove("example.com", dns.TXT)
    answers, authority, _ = await resolver.lookupText("example.com")
    assert answers == [] and authority[0].type == dns.SOA  # NODATA: the name still has its SOA

    dns_server.mx("example.com", "mx.example.net", 5)
    dns_server.a("mx.example.net", "192.0.2.25")
    dns_server.aaaa("mx.example.net", "2001:db8::25")
    dns_server.cname("www.example.com", "web.example.com")
    dns_server.a("web.example.com", "192.0.2.80")
    answers, _, _ = await resolver.lookupMailExchange("example.com")
    assert [(a.payload.preference, a.payload.name.name) for a in answers] == [(5, b"mx.example.net")]
    answers, _, _ = await resolver.lookupIPV6Address("mx.example.net")
    assert [socket.inet_ntop(socket.AF_INET6, a.payload.address) for a in answers] == ["2001:db8::25"]
    assert await resolver.getHostByName("www.example.com") == "192.0.2.80"

    tcp = client.Resolver(servers=[("127.0.0.1", dns_server.port)], resolv=None, reactor=reactor)
    message = await tcp.queryTCP([dns.Query(b"mx.example.net", dns.A)])
    assert [a.payload.dottedQuad() for a in message.answers] == ["192.0.2.25"]

    with pytest.raises(error.DNSNameError):
        await resolver.lookupText("absent.example.com")
    dns_server.fail("broken.example.com")
    with pytest.raises(error.DNSServerError):
        await resolver.lookupText("broken.example.com", timeout=(1,))
    assert ("broken.example.com", "TXT") in dns_server.queries



@pt.ensureDeferred
async def test_a_retransmitted_query_is_answered_but_listed_once(dns_server):
    dns_server.a("hooks.example.com", "192.0.2.7")
    protocol = dns.DNSDatagramProtocol(controller=None, reactor=reactor)
    port = reactor.listenUDP(0, protocol, interface="127.0.0.1")
    server, question = ("127.0.0.1", dns_server.port), [dns.Query(b"hooks.example.com", dns.A)]
    try:
        first = await protocol.query(server, question, 5, 4242)
        again = await protocol.query(server, question, 5, 4242)  # as a client resends after a timeout
        assert [a.payload.dottedQuad() for a in first.answers + again.answers] == ["192.0.2.7"] * 2
        assert dns_server.queries == [("hooks.example.com", "A")]
        await protocol.query(server, question, 5, 4243)  # a new lookup
        assert dns_server.queries == [("hooks.example.com", "A")] * 2
    finally:
        await port.stopListening()
