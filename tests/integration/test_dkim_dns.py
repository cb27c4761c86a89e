"""
DKIM signing checked by an independent verifier: dkimpy verifies both selectors' signatures
against the TXT records the service publishes, served by the loopback DNS server.
"""

import uuid

import dns.resolver
import pytest
import pytest_twisted as pt
import resend
from twisted.internet import threads

from mailsvc.mail import dkim
from tests.helpers.dkim import MESSAGE, verify_all
from tests.helpers.domainsupport import domain_config, publish
from tests.helpers.sdk import call


@pytest.fixture
def config(dns_server):
    return domain_config(dns_server)


@pt.ensureDeferred
async def test_dkimpy_verifies_both_selectors_through_the_dns_server(api, dns_server):
    tenant, key = await api.tenant()
    created = await call(api, key, resend.Domains.create, {"name": "signed.example.com"})
    publish(dns_server, created)
    domain = await api.parts.domains.lookup_sending_domain(uuid.UUID(tenant["id"]), "signed.example.com")
    signature = dkim.sign(MESSAGE, domain.name, domain.signers, timestamp=1_795_000_000)
    assert signature.count(b"DKIM-Signature:") == 2
    signed = signature + MESSAGE

    def lookup(name, timeout=5):
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = ["127.0.0.1"]
        resolver.port = dns_server.port
        answer = resolver.resolve(name.decode().rstrip("."), "TXT", lifetime=timeout)
        return b"".join(b"".join(rr.strings) for rr in answer)

    # dkimpy is synchronous and the DNS server runs on this reactor: verify in a thread.
    results = await threads.deferToThread(verify_all, signed, lookup)
    assert results == [True, True]
    selectors = {q[0].split(".")[0] for q in dns_server.queries if q[1] == "TXT"}
    assert selectors == {s.selector for s in domain.signers}
    tampered = signed.replace(b"Hello  there", b"Hello where")
    assert await threads.deferToThread(verify_all, tampered, lookup) == [False, False]


