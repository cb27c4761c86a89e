"""DKIM keys for a test, dkimpy's verdict on every signature, and a DNS lookup answered from a dict."""

import dkim as dkimpy

from mailsvc.mail import dkim

#: A message with what canonicalisation must get right: folding, runs of white space, tabs, a
#: leading dot, trailing empty lines.
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


def keys():
    pairs = [dkim.generate("rsa1", dkim.RSA), dkim.generate("ed1", dkim.ED25519)]
    signers = [dkim.Signer(p.selector, p.algorithm, dkim.load_private_key(p.private_der)) for p in pairs]
    records = {
        f"{p.selector}._domainkey.signed.example.com.".encode(): (
            f"v=DKIM1; k={'rsa' if p.algorithm == dkim.RSA else 'ed25519'}; p={p.public_key}".encode()
        )
        for p in pairs
    }
    return signers, records


def verify_all(message: bytes, dnsfunc) -> list[bool]:
    """dkimpy's verdict on each signature (a broken body hash raises: that is a False)."""
    checker = dkimpy.DKIM(message)
    results = []
    for i in range(message.count(b"DKIM-Signature:")):
        try:
            results.append(checker.verify(idx=i, dnsfunc=dnsfunc))
        except dkimpy.DKIMException:
            results.append(False)
    return results


def in_memory(records):
    return lambda name, timeout=5: records.get(name if name.endswith(b".") else name + b".")
