"""
Signed links (attachment downloads, one-click unsubscribe): a payload and a cut HMAC-SHA256 of
it under a key derived for that kind of link, in one base64url token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

#: Bytes of HMAC-SHA256 a signed link keeps.
LINK_MAC_BYTES = 16


def signed_link(key: bytes, payload: bytes) -> str:
    """A link's token: base64url (no padding) of ``payload`` and its HMAC-SHA256 under ``key``, cut short."""
    mac = hmac.new(key, payload, hashlib.sha256).digest()[:LINK_MAC_BYTES]
    return base64.urlsafe_b64encode(payload + mac).decode("ascii").rstrip("=")


def link_payload(key: bytes, token: str) -> bytes | None:
    """The payload of a ``signed_link`` token made with ``key``; None when it is malformed or altered."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except ValueError:
        return None
    payload, mac = raw[:-LINK_MAC_BYTES], raw[-LINK_MAC_BYTES:]
    expected = hmac.new(key, payload, hashlib.sha256).digest()[:LINK_MAC_BYTES]
    if len(raw) < LINK_MAC_BYTES or not hmac.compare_digest(mac, expected):
        return None
    return payload
