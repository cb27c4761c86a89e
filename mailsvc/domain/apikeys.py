"""API keys: the token format and the rules of creating and renaming one."""

from __future__ import annotations

import secrets
import string
import uuid
from typing import Any

import attrs

from mailsvc.domain.errors import Invalid
from mailsvc.domain.text import refuse_control
from mailsvc.ids import parse_uuid

PERMISSIONS = ("full_access", "sending_access")
NAME_MAX = 50
_ALPHABET = string.ascii_letters + string.digits
PREFIX_LENGTH = 8
SECRET_LENGTH = 32


@attrs.frozen
class Token:
    """``<key_tag>_<prefix>_<secret>``: the prefix finds the key, the secret proves it."""

    tag: str
    prefix: str
    secret: str

    def __str__(self) -> str:
        return f"{self.tag}_{self.prefix}_{self.secret}"


def new_token(tag: str) -> Token:
    return Token(
        tag,
        "".join(secrets.choice(_ALPHABET) for _ in range(PREFIX_LENGTH)),
        "".join(secrets.choice(_ALPHABET) for _ in range(SECRET_LENGTH)),
    )


def parse_token(text: str, tag: str) -> Token | None:
    parts = text.split("_", 2)
    if len(parts) != 3 or parts[0] != tag:
        return None
    _, prefix, secret = parts
    if len(prefix) != PREFIX_LENGTH or not secret or len(secret) > 256:
        return None
    return Token(tag, prefix, secret)


@attrs.frozen
class Creator:
    """Who makes a key: the ``operator`` (an account's first key), a key (``api``), or a dashboard ``user``."""

    kind: str
    user_id: uuid.UUID | None = None


OPERATOR = Creator("operator")
API = Creator("api")


def made_by(user_id: uuid.UUID | None) -> Creator:
    """A dashboard session's user, or else (an API key) the API."""
    return Creator("user", user_id) if user_id is not None else API


@attrs.frozen
class NewKey:
    name: str
    permission: str
    domain_id: Any  # uuid.UUID | None


def key_name(value: Any) -> str:
    if value is None:
        raise Invalid("name", "name is required")
    if not isinstance(value, str) or not value.strip():
        raise Invalid("name", "name must be a non-empty string")
    if len(value) > NAME_MAX:
        raise Invalid("name", f"name must be at most {NAME_MAX} characters")
    refuse_control("name", value, line=True)
    return value


def new_key(body: dict) -> NewKey:
    """A key created with ``domain_id`` is always ``sending_access`` (docs/decisions.md, "API keys")."""
    name = key_name(body.get("name"))
    permission = body.get("permission")
    if permission is None:
        permission = "full_access"
    elif permission not in PERMISSIONS:
        raise Invalid("permission", "permission must be `full_access` or `sending_access`")
    domain_id = body.get("domain_id")
    if domain_id is not None:
        parsed = parse_uuid(domain_id)
        if parsed is None:
            raise Invalid("domain_id", "domain_id must be a valid UUID")
        if body.get("permission") == "full_access":
            raise Invalid("domain_id", "domain_id can only be used with `sending_access`")
        return NewKey(name, "sending_access", parsed)
    return NewKey(name, permission, None)
