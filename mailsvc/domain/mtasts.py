"""
MTA-STS (RFC 8461) and TLS reporting (RFC 8460) records and policies, read without I/O: the
``_mta-sts`` and ``_smtp._tls`` TXT records, the policy file, and which MX hosts a policy
lets mail go to.
"""

from __future__ import annotations

import re

import attrs

#: A policy file is small (RFC 8461 §3.3 suggests 64 KiB at most).
MAX_POLICY_BYTES = 64 * 1024
#: max_age is at most a year (RFC 8461 §3.2).
MAX_AGE_LIMIT = 31_557_600
MODES = ("enforce", "testing", "none")
_ID = re.compile(r"^[A-Za-z0-9]{1,32}$")


class PolicyInvalid(Exception):
    """The policy file is not a valid STSv1 policy."""


@attrs.frozen
class StsPolicy:
    id: str
    mode: str
    mx: tuple[str, ...]
    max_age: int

    def allows(self, host: str) -> bool:
        return any(mx_matches(pattern, host) for pattern in self.mx)

    def text(self) -> str:
        """The policy as TLS-RPT's ``policy-string`` lines."""
        return "\n".join(["version: STSv1", f"mode: {self.mode}", *(f"mx: {m}" for m in self.mx),
                          f"max_age: {self.max_age}"])


def _tags(record: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for part in record.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep:
            tags.setdefault(key.strip(), value.strip())
    return tags


def sts_record_id(texts: list[str]) -> str | None:
    """The ``id`` of the one ``v=STSv1`` TXT record; None when there is none (or several)."""
    found = [t for t in texts if t.strip().startswith("v=STSv1")]
    if len(found) != 1:
        return None
    value = _tags(found[0]).get("id", "")
    return value if _ID.match(value) else None


def tlsrpt_destinations(texts: list[str]) -> tuple[str, ...]:
    """The ``rua`` URIs (mailto: or https:) of the one ``v=TLSRPTv1`` record."""
    found = [t for t in texts if t.strip().startswith("v=TLSRPTv1")]
    if len(found) != 1:
        return ()
    rua = _tags(found[0]).get("rua", "")
    return tuple(u.strip() for u in rua.split(",") if u.strip().startswith(("mailto:", "https:")))


def parse_policy(text: str, record_id: str) -> StsPolicy:
    """The policy file (``key: value`` lines, CRLF or LF); unknown keys are ignored."""
    version, mode, max_age, mx = None, None, None, []
    for line in text.replace("\r\n", "\n").split("\n"):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "version" and version is None:
            version = value
        elif key == "mode" and mode is None:
            mode = value
        elif key == "max_age" and max_age is None:
            max_age = value
        elif key == "mx" and value:
            mx.append(value.lower().rstrip("."))
    if version != "STSv1":
        raise PolicyInvalid("version must be STSv1")
    if mode not in MODES:
        raise PolicyInvalid(f"mode must be one of {', '.join(MODES)}")
    if max_age is None or not max_age.isdigit() or len(max_age) > 10:
        raise PolicyInvalid("max_age must be a number of seconds")
    if mode != "none" and not mx:
        raise PolicyInvalid("a policy in enforce or testing mode needs mx lines")
    return StsPolicy(record_id, mode, tuple(mx), min(int(max_age), MAX_AGE_LIMIT))


def mx_matches(pattern: str, host: str) -> bool:
    """``mail.example.com`` matches itself; ``*.example.com`` matches exactly one more label."""
    pattern, host = pattern.lower().rstrip("."), host.lower().rstrip(".")
    if pattern.startswith("*."):
        first, _, rest = host.partition(".")
        return bool(first) and rest == pattern[2:]
    return pattern == host
