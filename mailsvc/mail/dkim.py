"""
DKIM (RFC 6376) signing with relaxed/relaxed canonicalization, RSA-SHA256 and Ed25519-SHA256
(RFC 8463), and the key pairs a domain signs with.

The arithmetic is OpenSSL's through ``cryptography``: dkimpy signs RSA in pure Python at about
160 signatures a second (docs/contract/smtp.md, "DKIM arithmetic"), which would cap signed mail. dkimpy is only
the independent verifier of the tests.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from typing import Any

import attrs
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa

RSA = "rsa-sha256"
ED25519 = "ed25519-sha256"
RSA_BITS = 2048

#: Header fields signed when present; each is listed once more than it occurs ("oversigned")
#: so that a field added on the way (a second From, a forged Subject) breaks the signature.
DEFAULT_HEADERS = (
    "from", "sender", "reply-to", "subject", "date", "message-id", "to", "cc",
    "mime-version", "content-type", "content-transfer-encoding", "content-language",
    "in-reply-to", "references", "list-id", "list-unsubscribe", "list-unsubscribe-post",
    "feedback-id",
)

_FOLD_AT = 76


@attrs.frozen
class Signer:
    """One key a domain signs with; ``private_key`` is a ``cryptography`` key object."""

    selector: str
    algorithm: str  # rsa-sha256 | ed25519-sha256
    private_key: Any = attrs.field(repr=False)


@attrs.frozen
class KeyPair:
    """A new key: the private half as PKCS#8 DER (to be sealed), the public half as ``p=``."""

    selector: str
    algorithm: str
    private_der: bytes = attrs.field(repr=False)
    public_key: str


def generate(selector: str, algorithm: str) -> KeyPair:
    key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
    if algorithm == RSA:
        key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    elif algorithm == ED25519:
        key = ed25519.Ed25519PrivateKey.generate()
    else:
        raise ValueError(f"unknown DKIM algorithm {algorithm!r}")
    der = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return KeyPair(selector, algorithm, der, public_key_of(key))


def public_key_of(key) -> str:
    """The ``p=`` of the key's DNS record: SubjectPublicKeyInfo for RSA, raw 32 bytes for ed25519."""
    public = key.public_key()
    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    else:
        raw = public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    return base64.b64encode(raw).decode("ascii")


def load_private_key(der: bytes):
    # The key was generated here and comes back authenticated (AES-GCM): OpenSSL's slow RSA
    # consistency check would only cost time.
    return serialization.load_der_private_key(der, None, unsafe_skip_rsa_key_validation=True)


# Canonicalization (RFC 6376 §3.4.2 and §3.4.4)

_WSP_RUN = re.compile(rb"[ \t]+")
_WSP_AT_EOL = re.compile(rb" (?=\n|$)")
_UNFOLD = re.compile(rb"\r?\n(?=[ \t])")


def _relaxed_header(field: bytes) -> bytes:
    name, _, value = field.partition(b":")
    if b"\n" in value or b"\t" in value or b"  " in value:
        value = _WSP_RUN.sub(b" ", _UNFOLD.sub(b"", value))
    return name.strip(b" \t").lower() + b":" + value.strip(b" \r\n")


def _relaxed_body(body: bytes) -> bytes:
    if (b"\t" not in body and b"  " not in body and b" \r\n" not in body and not body.endswith(b" ")
            and body.count(b"\n") == body.count(b"\r\n") == body.count(b"\r")):
        # Already canonical but for empty lines at the end (the messages built here): the
        # same result without the regular expressions.
        body = body.rstrip(b"\r\n")
        return body + b"\r\n" if body else b""
    body = _WSP_AT_EOL.sub(b"", _WSP_RUN.sub(b" ", body.replace(b"\r\n", b"\n"))).rstrip(b"\n")
    return body.replace(b"\n", b"\r\n") + b"\r\n" if body else b""


def _split(message: bytes) -> tuple[list[bytes], bytes, bytes]:
    """(header fields with their folding, body, line separator)."""
    ends = [i for i in (message.find(b"\r\n\r\n"), message.find(b"\n\n")) if i >= 0]
    if ends:
        end = min(ends)
        head = message[:end]
        body = message[end + (4 if message.startswith(b"\r\n\r\n", end) else 2):]
    else:
        head, body = message, b""
    linesep = b"\r\n" if b"\r\n" in head else b"\n"
    fields: list[list[bytes]] = []  # each field's lines, joined once: a long folded field stays linear
    for line in head.split(linesep):
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1].append(line)
        elif line:
            fields.append([line])
    return [b"\r\n".join(lines) for lines in fields], body, linesep


def _fold(parts: list[str], linesep: str) -> str:
    """Join ``tag=value;`` parts into one header, folded before a part that would not fit."""
    text, line = "", "DKIM-Signature:"
    for part in parts:
        if len(line) + 1 + len(part) > _FOLD_AT and line.strip():
            text += line + linesep
            line = "\t" + part
        else:
            line += " " + part
    return text + line


def _h_value(names: list[str], sep: str) -> str:
    """The ``h=`` list, folded after a colon every few names."""
    lines, line = [], ""
    for name in names:
        if line and len(line) + 1 + len(name) > 60:
            lines.append(line)
            line = name
        else:
            line = f"{line}:{name}" if line else name
    lines.append(line)
    return (":" + sep + "\t").join(lines)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def sign(
    message: bytes,
    domain: str,
    signers: Iterable[Signer],
    headers_to_sign: Iterable[str] = DEFAULT_HEADERS,
    timestamp: int | None = None,
) -> bytes:
    """
    The DKIM-Signature header fields (one per signer, ending in the message's line separator)
    to put in front of ``message``. Line endings of the message may be CRLF or LF: the body is
    hashed as it will travel, in CRLF.
    """
    fields, body, linesep = _split(message)
    sep = linesep.decode("ascii")
    body_hash = base64.b64encode(hashlib.sha256(_relaxed_body(body)).digest()).decode("ascii")

    by_name: dict[str, list[bytes]] = {}
    for field in fields:
        by_name.setdefault(field.partition(b":")[0].strip().lower().decode("latin-1"), []).append(field)
    names: list[str] = []
    for name in dict.fromkeys(h.lower() for h in headers_to_sign):
        if name in by_name:
            names += [name] * (len(by_name[name]) + 1)
    # The last occurrence is signed first (RFC 6376 §5.4.2); an extra name signs "nothing".
    remaining = {name: list(found) for name, found in by_name.items()}
    signed_fields = b"".join(
        _relaxed_header(remaining[name].pop()) + b"\r\n"
        for name in names
        if remaining.get(name)
    )
    h_value = _h_value(names, sep)

    out = []
    for signer in signers:
        parts = ["v=1;", f"a={signer.algorithm};", "c=relaxed/relaxed;", f"d={domain};",
                 f"s={signer.selector};"]
        if timestamp is not None:
            parts.append(f"t={int(timestamp)};")
        parts += [f"h={h_value};", f"bh={body_hash};", "b="]
        unsigned = _fold(parts, sep)
        data = signed_fields + _relaxed_header(unsigned.encode("ascii"))
        if signer.algorithm == RSA:
            raw = signer.private_key.sign(data, padding.PKCS1v15(), hashes.SHA256())
        elif signer.algorithm == ED25519:
            raw = signer.private_key.sign(hashlib.sha256(data).digest())
        else:
            raise ValueError(f"unknown DKIM algorithm {signer.algorithm!r}")
        signature = base64.b64encode(raw).decode("ascii")
        room = _FOLD_AT - len(unsigned.rsplit(sep, 1)[-1])
        first = signature[:room] if room >= 16 else ""
        # A signature too long for the line starts on the next one (FWS is allowed in b=).
        value = (sep + "\t").join([first, *_chunks(signature[len(first):], 72)])
        out.append((unsigned + value + sep).encode("ascii"))
    return b"".join(out)
