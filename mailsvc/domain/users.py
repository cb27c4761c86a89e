"""Dashboard users: roles, addresses and the password rule."""

from __future__ import annotations

from mailsvc.domain.addresses import normalize_address
from mailsvc.domain.errors import Invalid

ROLES = ("owner", "member")
#: Characters of a password, at least and at most (argon2 takes any length; a bound keeps a
#: sign-in from being an expensive hash of megabytes).
PASSWORD_MIN = 10
PASSWORD_MAX = 1024


def user_address(value: object) -> str:
    """A user's address as stored and looked up: normalized, then lower-cased whole."""
    return normalize_address("email", value).lower()


def role_of(value: object) -> str:
    if value is None:
        return "member"
    if value not in ROLES:
        raise Invalid("role", "role must be `owner` or `member`")
    return value


def new_password(value: object) -> str:
    if not isinstance(value, str):
        raise Invalid("password", "password is required")
    if len(value) < PASSWORD_MIN:
        raise Invalid("password", f"password must have at least {PASSWORD_MIN} characters")
    if len(value) > PASSWORD_MAX:
        raise Invalid("password", f"password must have at most {PASSWORD_MAX} characters")
    return value
