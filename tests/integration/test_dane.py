"""DANE (RFC 7672) outbound, end to end. The tests' DNS server plays the validating resolver:
for a zone marked signed (``dns_server.sign``) it sets the AD bit on answers to queries that
asked for it (AD or DO), as unbound does for a validated zone (docs/decisions.md
"MTA-STS and DANE" says why that is faithful); TLSA records of the MX host are served from it,
and the sink presents certificates that match them or not."""

import pytest
import pytest_twisted as pt
from cryptography import x509
from twisted.internet import reactor, ssl

from mailsvc.crypto import peers
from mailsvc.dns.secure import TLSA, SecureResolver
from tests.helpers.mta_sts import policy, serve
from tests.helpers.outside import ThrowawayCA

DOMAIN = "dane.example.org"
MX = f"mx.{DOMAIN}"


def certificate(ca: ThrowawayCA, name: str, with_chain: bool = False):
    """(server TLS options, leaf certificate): the CA's certificate is sent too with ``with_chain``."""
    pem = ca.server_pem(name)
    private = ssl.PrivateCertificate.loadPEM(pem)
    leaf = x509.load_pem_x509_certificate(pem[pem.index(b"-----BEGIN CERTIFICATE"):])
    extra = [ssl.Certificate.loadPEM(ca.pem).original] if with_chain else []
    options = ssl.CertificateOptions(privateKey=private.privateKey.original, certificate=private.original,
                                     extraCertChain=extra)
    return options, leaf


@pt.async_yield_fixture
async def dane(start_mta_with, dns_server):
    mta = await start_mta_with()
    mta.route(DOMAIN)
    yield mta


def publish(mta, record: peers.Tlsa, host: str = MX, signed: bool = True) -> None:
    mta.dns.tlsa(f"_{mta.sink.port}._tcp.{host}", record.usage, record.selector, record.matching, record.data)
    if signed:
        mta.dns.sign(DOMAIN.split(".", 1)[1])


@pytest.mark.parametrize(("usage", "selector", "matching"), [
    (peers.DANE_EE, peers.SPKI, peers.SHA256),
    (peers.DANE_EE, peers.FULL, peers.SHA512),
    (peers.DANE_EE, peers.SPKI, peers.EXACT),
    (peers.DANE_TA, peers.SPKI, peers.SHA256),
    (peers.DANE_TA, peers.FULL, peers.SHA256),
])
@pt.ensureDeferred
async def test_a_matching_tlsa_record_delivers(dane, usage, selector, matching):
    ca = ThrowawayCA("not trusted by anyone")  # DANE needs no public CA
    options, leaf = certificate(ca, MX, with_chain=True)
    dane.sink.certificate = options
    designated = ca.cert if usage == peers.DANE_TA else leaf
    publish(dane, peers.tlsa_for(designated, usage, selector, matching))
    _, key = await dane.sender()
    (row,) = await dane.settled_past(await dane.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "delivered" and dane.sink.messages[0].tls
    await dane.parts.tls_reports.flush()
    (count,) = await dane.parts.db.fetchall("SELECT policy_type, mx_host, result FROM tls_report_counts")
    assert count == {"policy_type": "tlsa", "mx_host": MX, "result": "success"}


@pt.ensureDeferred
async def test_dane_ta_needs_the_mx_name(dane):
    ca = ThrowawayCA()
    options, _ = certificate(ca, "other.example.net", with_chain=True)
    dane.sink.certificate = options
    publish(dane, peers.tlsa_for(ca.cert, peers.DANE_TA))
    _, key = await dane.sender()
    (row,) = await dane.settled_past(await dane.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "deferred"


@pt.ensureDeferred
async def test_a_tlsa_record_without_a_match_defers(dane):
    options, _ = certificate(ThrowawayCA(), MX)
    dane.sink.certificate = options
    _, other = certificate(ThrowawayCA(), MX)
    publish(dane, peers.tlsa_for(other))
    _, key = await dane.sender()
    email_id = await dane.send(key, [f"ann@{DOMAIN}"])
    (row,) = await dane.settled_past(email_id)
    assert row["status"] == "deferred" and not dane.sink.messages
    (event,) = await dane.events("email.delivery_delayed")
    assert event["class"] == "blocked" and "DANE policy not met: tlsa-invalid" in event["message"]
    assert not await dane.parts.db.fetchall("SELECT 1 FROM suppressions")


@pt.ensureDeferred
async def test_an_unsigned_zone_falls_back(dane):
    _, other = certificate(ThrowawayCA(), MX)
    publish(dane, peers.tlsa_for(other), signed=False)  # no AD bit: the records are not trusted
    _, key = await dane.sender()
    (row,) = await dane.settled_past(await dane.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "delivered"


@pt.ensureDeferred
async def test_only_unusable_records_still_require_tls(dane):
    publish(dane, peers.Tlsa(1, 1, 1, b"\x00" * 32))  # PKIX-EE: not usable for SMTP
    dane.sink.starttls = False
    _, key = await dane.sender()
    (row,) = await dane.settled_past(await dane.send(key, [f"ann@{DOMAIN}"]))
    assert row["status"] == "deferred"
    (event,) = await dane.events("email.delivery_delayed")
    assert event["class"] == "blocked"


@pt.ensureDeferred
async def test_dane_wins_over_mta_sts(sts):  # noqa: F811 (the fixture imported above)
    from tests.helpers.mta_sts import DOMAIN as STS_DOMAIN
    from tests.helpers.mta_sts import MX as STS_MX

    serve(sts, policy(mx="mail.elsewhere.example"))  # MTA-STS alone would defer
    options, leaf = certificate(ThrowawayCA(), STS_MX)
    sts.sink.certificate = options
    record = peers.tlsa_for(leaf)
    sts.dns.tlsa(f"_{sts.sink.port}._tcp.{STS_MX}", record.usage, record.selector, record.matching, record.data)
    sts.dns.sign("example.org")
    _, key = await sts.sender()
    (row,) = await sts.settled_past(await sts.send(key, [f"ann@{STS_DOMAIN}"]))
    assert row["status"] == "delivered"


@pt.ensureDeferred
async def test_the_secure_resolver_trusts_only_the_ad_bit(dns_server):
    dns_server.tlsa("_25._tcp.mx.signed.example", 3, 1, 1, b"\x01" * 32)
    dns_server.tlsa("_25._tcp.mx.plain.example", 3, 1, 1, b"\x02" * 32)
    dns_server.sign("signed.example")
    resolver = SecureResolver(reactor, (dns_server.address,))
    signed = await resolver.lookup("_25._tcp.mx.signed.example", TLSA)
    plain = await resolver.lookup("_25._tcp.mx.plain.example", TLSA)
    missing = await resolver.lookup("_25._tcp.nothing.signed.example", TLSA)
    assert signed.authentic and signed.rdata == (bytes((3, 1, 1)) + b"\x01" * 32,)
    assert not plain.authentic and len(plain.rdata) == 1
    assert missing.empty and missing.authentic
