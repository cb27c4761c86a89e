"""
The operator console's people (issue 31 §3; docs/decisions.md, "Operator console"): operators'
accounts, their sign-in, sessions and set-password links. As the dashboard's
(mailsvc.app.dashboard), but apart: its own table, cookie, CSRF key and link key, so that
neither kind of session can stand for the other; a session ends after an hour idle.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import argon2
import attrs
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from mailsvc import timefmt
from mailsvc.app.dashboard import ADDRESS_LIMIT, CLIENT_LIMIT, REFUSED, TOUCH_SECONDS, SignedIn, token_hash
from mailsvc.app.throttle import Throttle
from mailsvc.crypto.links import link_payload, signed_link
from mailsvc.domain.errors import Conflict, Invalid, NotFound, RateLimited, SignInRefused
from mailsvc.domain.users import new_password, user_address
from mailsvc.ids import uuid7
from mailsvc.store import console as store
from mailsvc.store.database import Database, Transaction

#: The audit log's name of an operator signed in to the console.
ACTOR_PREFIX = "operator:"
NAME_MAX = 100


@attrs.frozen
class ConsoleSettings:
    idle_seconds: int = 3600
    lifetime_seconds: int = 12 * 3600
    link_seconds: int = 86400


def actor_of(email: str) -> str:
    return ACTOR_PREFIX + email


class Console:
    def __init__(self, clock, db: Database, link_key: bytes, csrf_key: bytes, throttle: Throttle,
                 run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
                 settings: ConsoleSettings = ConsoleSettings(), hasher: argon2.PasswordHasher | None = None):
        self._clock = clock
        self._db = db
        self._link_key = link_key
        self._csrf_key = csrf_key
        self._throttle = throttle
        self._run_blocking = run_blocking
        self.settings = settings
        self._hasher = hasher or argon2.PasswordHasher()
        self._dummy_hash: str | None = None

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    async def _hash(self, password: str) -> str:
        return await self._run_blocking(lambda: self._hasher.hash(password))

    async def _verify(self, password_hash: str, password: str) -> bool:
        def verify() -> bool:
            try:
                return self._hasher.verify(password_hash, password)
            except (VerifyMismatchError, VerificationError, InvalidHashError):
                return False

        return await self._run_blocking(verify)

    # Accounts and their set-password links

    async def create(self, body: dict) -> tuple[dict, str]:
        """A new operator without a password, and its set-password token; 409 when the address has one."""
        email = user_address(body.get("email"))
        name = body.get("name", email)
        if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
            raise Invalid("name", f"name must be a non-empty string of at most {NAME_MAX} characters")
        row = await store.insert_operator(self._db, uuid7(self._clock.seconds()), email, name.strip(), self._now())
        if row is None:
            raise Conflict("email: an operator with this address already exists")
        return row, self.password_token(row)

    async def link(self, body: dict) -> tuple[dict, str]:
        """A new set-password token for an existing operator (a forgotten password)."""
        row = await store.operator_by_email(self._db, user_address(body.get("email")))
        if row is None:
            raise NotFound("Operator")
        return row, self.password_token(row)

    async def operator(self, email: str) -> dict:
        row = await store.operator_by_email(self._db, email)
        if row is None:
            raise NotFound("Operator")
        return row

    def password_token(self, row: dict) -> str:
        expires = int(self._clock.seconds() + self.settings.link_seconds)
        return signed_link(self._link_key, row["id"].bytes + struct.pack(">IQ", row["password_version"], expires))

    def _link_target(self, token: object) -> tuple[uuid.UUID, int] | None:
        if not isinstance(token, str) or len(token) > 200:
            return None
        payload = link_payload(self._link_key, token)
        if payload is None or len(payload) != 28:
            return None
        version, expires = struct.unpack(">IQ", payload[16:])
        if expires < self._clock.seconds():
            return None
        return uuid.UUID(bytes=payload[:16]), version

    async def set_password(self, body: dict) -> SignedIn:
        """Set a password with a link's ``token``: every session of the operator ends, a new one begins."""
        password = new_password(body.get("password"))
        target = self._link_target(body.get("token"))
        if target is None:
            raise SignInRefused("This link is not valid or has expired; ask for a new one.")
        operator_id, version = target
        hashed = await self._hash(password)

        async def store_it(txn: Transaction):
            row = await store.set_password(txn, operator_id, version, hashed, self._now())
            if row is None:
                raise SignInRefused("This link was already used; ask for a new one.")
            await store.revoke_sessions_of(txn, operator_id, self._now())
            return row

        return await self._open_session(await self._db.run("set_operator_password", store_it))

    # Sign-in and sessions

    async def login(self, body: dict, client: str) -> SignedIn:
        email, password = body.get("email"), body.get("password")
        try:
            address = user_address(email)
        except Invalid:
            address = str(email)[:320].lower()
        # The dashboard's limits, on keys of their own.
        limits = {f"operator-address:{address}": ADDRESS_LIMIT, f"operator-client:{client}": CLIENT_LIMIT}
        wait = await self._throttle.reserve(limits)
        if wait is not None:
            raise RateLimited("Too many failed sign-ins; try again later.", wait)
        row = await store.operator_by_email(self._db, address)
        stored = row["password_hash"] if row is not None else None
        ok = await self._verify(stored or await self._dummy(), password if isinstance(password, str) else "")
        if not ok or stored is None:
            raise SignInRefused(REFUSED)
        await self._throttle.give_back(limits)
        if self._hasher.check_needs_rehash(stored):
            await store.rehash(self._db, row["id"], stored, await self._hash(password))
        return await self._open_session(row)

    async def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = await self._hash(secrets.token_urlsafe(16))
        return self._dummy_hash

    async def _open_session(self, row: dict) -> SignedIn:
        token = secrets.token_urlsafe(32)
        now = self._clock.seconds()
        await store.insert_session(self._db, uuid7(now), token_hash(token), row["id"], timefmt.from_seconds(now),
                                   timefmt.from_seconds(now + self.settings.lifetime_seconds))
        return SignedIn(token, row)

    async def logout(self, token: str) -> None:
        await store.revoke_session(self._db, token_hash(token), self._now())

    async def authenticate(self, token: str) -> str | None:
        """The operator's e-mail address a console cookie stands for; None when unknown, expired, idle or revoked."""
        if not token or len(token) > 100:
            return None
        now = self._clock.seconds()
        row = await store.live_session(self._db, token_hash(token), timefmt.from_seconds(now),
                                       timefmt.from_seconds(now - self.settings.idle_seconds))
        if row is None:
            return None
        if now - row["last_seen_at"].timestamp() >= TOUCH_SECONDS:
            await store.touch_session(self._db, row["id"], timefmt.from_seconds(now))
        return row["email"]

    def csrf_token(self, token: str) -> str:
        mac = hmac.new(self._csrf_key, token.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode("ascii").rstrip("=")

    def csrf_matches(self, token: str, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(self.csrf_token(token).encode(), presented.encode())
