"""
DKIM signing checked by an independent verifier: dkimpy verifies every signature against the
TXT records the service publishes, served by the loopback DNS server.
"""

import uuid

import dkim as dkimpy
import dns.resolver
import pytest
import pytest_twisted as pt
import resend
from cryptography.hazmat.primitives import serialization
from twisted.internet import threads

from mailsvc.mail import dkim
from tests.domainsupport import domain_config, publish
from tests.helpers.dkim import in_memory, keys, verify_all
from tests.sdk import call

MESSAGE = (
    b"From: Sender <hello@signed.example.com>\r\n"
    b"To: one@example.org,\r\n"
    b"\ttwo@example.org\r\n"
    b"Subject:   A   folded\r\n"
    b"  subject line  \r\n"
    b"Date: Sun, 22 Nov 2026 10:00:00 +0000\r\n"
    b"Message-ID: <m1@signed.example.com>\r\n"
    b"MIME-Version: 1.0\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"\r\n"
    b"Hello  there,   \r\n"
    b"\r\n"
    b".a line with\ttabs\t \r\n"
    b"\r\n"
    b"\r\n"
)


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


@pytest.mark.parametrize("message", [
    MESSAGE,
    MESSAGE.replace(b"\r\n", b"\n"),  # LF line ends: hashed as they will travel, in CRLF
    b"From: a@signed.example.com\r\nSubject: empty body\r\n\r\n",
    b"From: a@signed.example.com\r\nSubject: no separator\r\n",
    b"From: a@signed.example.com\r\nReceived: x\r\nReceived: y\r\nTo: b@example.org\r\n\r\nbody",
    b"FROM:a@signed.example.com\r\nto:  b@example.org \r\n\r\n \t \r\n  x  \r\n",
])
def test_dkimpy_verifies_awkward_messages(message):
    signers, records = keys()
    signature = dkim.sign(message, "signed.example.com", signers, timestamp=1_795_000_000)
    signed = signature + message
    assert verify_all(signed, in_memory(records)) == [True, True]


def test_body_hash_agrees_with_dkimpy():
    signers, records = keys()
    ours = dkim.sign(MESSAGE, "signed.example.com", signers[:1])
    theirs = dkimpy.sign(MESSAGE, b"rsa1", b"signed.example.com",
                         signers[0].private_key.private_bytes(
                             serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()),
                         canonicalize=(b"relaxed", b"relaxed"), include_headers=[b"from"])

    def bh(header: bytes) -> bytes:
        unfolded = b"".join(header.split())
        return unfolded.split(b"bh=")[1].split(b";")[0]

    assert bh(ours) == bh(theirs)


def test_oversigned_headers_cannot_be_added():
    signers, records = keys()
    signed = dkim.sign(MESSAGE, "signed.example.com", signers) + MESSAGE
    assert verify_all(signed, in_memory(records)) == [True, True]
    forged = signed.replace(b"Subject:", b"From: boss@signed.example.com\r\nSubject:", 1)
    assert verify_all(forged, in_memory(records)) == [False, False]
    forged = signed.replace(b"Subject:", b"Subject: another\r\nSubject:", 1)
    assert verify_all(forged, in_memory(records)) == [False, False]


def test_signature_header_shape():
    signers, _ = keys()
    signature = dkim.sign(MESSAGE, "signed.example.com", signers, timestamp=1_795_000_000)
    lines = signature.split(b"\r\n")
    assert lines[-1] == b"" and all(len(line) <= 78 for line in lines)
    assert all(line.startswith((b"DKIM-Signature: ", b"\t")) for line in lines[:-1])
    first = b" ".join(signature.split(b"DKIM-Signature:")[1].split())
    assert b"a=rsa-sha256; c=relaxed/relaxed; d=signed.example.com; s=rsa1; t=1795000000;" in first
    assert b"h=from:from:subject:subject:date:date:message-id:message-id:to:" in first.replace(b": ", b":")
    lf = dkim.sign(MESSAGE.replace(b"\r\n", b"\n"), "signed.example.com", signers)
    assert b"\r" not in lf
