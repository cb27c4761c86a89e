"""
VERP return paths: the envelope sender of every delivery attempt names the delivery it
belongs to, so a bounce that comes back days later finds it. The local part is
``b-<delivery id>-<mac>`` in lower-case base32 (mailbox providers may fold case), the MAC
keeping strangers from forging bounces for our deliveries.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import uuid

_TOKEN = re.compile(r"^b-([a-z2-7]{26})-([a-z2-7]{8})$")


def _b32(data: bytes) -> str:
    return base64.b32encode(data).decode("ascii").rstrip("=").lower()


def _mac(key: bytes, delivery_id: uuid.UUID) -> str:
    return _b32(hmac.new(key, delivery_id.bytes, hashlib.sha256).digest()[:5])


def local_part(key: bytes, delivery_id: uuid.UUID) -> str:
    return f"b-{_b32(delivery_id.bytes)}-{_mac(key, delivery_id)}"


def envelope_sender(key: bytes, delivery_id: uuid.UUID, return_path_host: str) -> str:
    return f"{local_part(key, delivery_id)}@{return_path_host}"


def delivery_of(key: bytes, address: str) -> uuid.UUID | None:
    """The delivery a return-path address names, or None when it is not one of ours."""
    local, _, _ = address.rpartition("@")
    match = _TOKEN.match(local.lower())
    if match is None:
        return None
    raw = base64.b32decode(match.group(1).upper() + "======")
    delivery_id = uuid.UUID(bytes=raw)
    if not hmac.compare_digest(match.group(2), _mac(key, delivery_id)):
        return None
    return delivery_id
