"""
Signing secrets and signatures of webhook requests (docs/webhooks.md, "Requests"; Standard Webhooks):
HMAC-SHA256 over ``<id>.<timestamp>.<body>``, keyed by the secret after ``whsec_``, sent as
``v1,<base64>``, one per valid secret, under both the ``webhook-*`` and ``svix-*`` headers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid

SECRET_PREFIX = "whsec_"
MESSAGE_PREFIX = "evt_"
#: 24 random bytes: 32 base64 characters without padding, which every verifier decodes.
SECRET_BYTES = 24


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The MAC key a ``whsec_`` secret stands for."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def message_id(event_id: uuid.UUID) -> str:
    """The id receivers deduplicate on: the event's, the same on every retry."""
    return MESSAGE_PREFIX + event_id.hex


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode("ascii") + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def headers(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The signature headers of one request, under both name families."""
    signed = " ".join(signature(key, msg_id, timestamp, body) for key in keys)
    stamp = str(timestamp)
    return {
        "webhook-id": msg_id, "webhook-timestamp": stamp, "webhook-signature": signed,
        "svix-id": msg_id, "svix-timestamp": stamp, "svix-signature": signed,
    }
