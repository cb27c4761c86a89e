"""
DKIM signing checked by an independent verifier: dkimpy verifies awkward messages against
the published key, the body hash agrees, oversigned headers cannot be added. Both selectors
through the loopback DNS server: tests/integration/test_dkim_dns.py.
"""

import dkim as dkimpy
import pytest
from cryptography.hazmat.primitives import serialization

from mailsvc.mail import dkim
from tests.helpers.dkim import MESSAGE, in_memory, keys, verify_all


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
