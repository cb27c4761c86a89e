"""
Time-based one-time passwords (TOTP, RFC 6238) as authenticator apps make them: HMAC-SHA-1,
6 digits, 30-second steps counted from the Unix epoch, a code of the step before or after now
accepted too (a clock a little off, a code typed as its step ends). The codes themselves are
pyotp's (RFC 4226's dynamic truncation); which step a code matched is told, so that the caller
can refuse a code of a step already used. Recovery codes: random, shown once, kept as digests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid

import pyotp

STEP_SECONDS = 30
DIGITS = 6
#: Steps either side of now whose codes are accepted.
WINDOW = 1
SECRET_BYTES = 20  # 160 bits, RFC 4226's recommended length for HMAC-SHA-1
RECOVERY_CODES = 10
#: Recovery codes are 10 characters of RFC 4648's base32 alphabet (50 bits), shown as two groups of 5.
RECOVERY_CHARS = 10


def base32(secret: bytes) -> str:
    """The secret as authenticator apps take it typed: base32 without padding."""
    return base64.b32encode(secret).decode("ascii").rstrip("=")


def step_of(seconds: float) -> int:
    return int(seconds // STEP_SECONDS)


def code_at(secret: bytes, step: int, digits: int = DIGITS) -> str:
    """The code of time step ``step`` (RFC 6238's T)."""
    return pyotp.HOTP(base32(secret), digits=digits).at(step)


def matching_step(secret: bytes, code: object, seconds: float, window: int = WINDOW) -> int | None:
    """The step within ``window`` of ``seconds`` whose code ``code`` is; None when it is none's."""
    if not isinstance(code, str):
        return None
    typed = "".join(code.split())
    if len(typed) != DIGITS or not typed.isdigit():
        return None
    now = step_of(seconds)
    found = None
    for step in range(now - window, now + window + 1):
        # Every step is compared (in constant time): how long it takes tells nothing of which matched.
        if hmac.compare_digest(code_at(secret, step).encode(), typed.encode()) and found is None:
            found = step
    return found


def provisioning_uri(secret: bytes, account: str, issuer: str) -> str:
    """The ``otpauth://totp/...`` URI authenticator apps read (Key Uri Format)."""
    return pyotp.TOTP(base32(secret), digits=DIGITS, interval=STEP_SECONDS).provisioning_uri(
        name=account, issuer_name=issuer)


def recovery_code(random: bytes) -> str:
    """A recovery code from random bytes (at least 7): ``xxxxx-xxxxx``, lower-case base32."""
    text = base64.b32encode(random).decode("ascii").lower()[:RECOVERY_CHARS]
    return f"{text[:5]}-{text[5:]}"


def recovery_digest(person_id: uuid.UUID, code: object) -> bytes | None:
    """The stored form of a recovery code as typed (any case, spaces and dashes ignored); None if it cannot be one."""
    if not isinstance(code, str) or len(code) > 40:
        return None
    typed = "".join(ch for ch in code.lower() if ch not in " -")
    if len(typed) != RECOVERY_CHARS:
        return None
    return hashlib.sha256(b"mailsvc recovery code\0" + person_id.bytes + typed.encode("ascii", "replace")).digest()
