"""
Signing in with a password, for each kind of person who does (the dashboard's users, the
console's operators: ``People`` names their rows): argon2id in the thread pool; set-password
links signed with the password version they set, so each works once; failed sign-ins throttled
per address and client network before the password is checked; sessions as random cookie tokens
stored as their SHA-256, ending idle, at their lifetime, at sign-out or when the password is set
again; CSRF tokens as an HMAC of the session token (docs/decisions.md, "Dashboard").

A person with two-factor sign-in on (``mailsvc.app.twofactor``) gets no session for a password
alone: a ``Challenge``, a signed token of five minutes bound to the password it was given for,
which a right code (or recovery code) turns into a session; a set-password link alike. One's
own sessions are listed and revoked here too.
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
from mailsvc.app.audit import Entry
from mailsvc.app.throttle import Limit, Throttle
from mailsvc.app.twofactor import TwoFactor
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.crypto.links import link_payload, signed_link
from mailsvc.domain.errors import Invalid, NotFound, RateLimited, SignInRefused
from mailsvc.domain.users import user_address
from mailsvc.ids import uuid7
from mailsvc.store import two_factor
from mailsvc.store.database import Database, Transaction

#: Failed sign-ins: an address gets 5 tries, then one a minute; a client network 20, then one
#: every 15 s.
ADDRESS_LIMIT = Limit(5, 60.0)
CLIENT_LIMIT = Limit(20, 15.0)
#: A session's ``last_seen_at`` is written at most this often (its idle expiry is that coarse).
TOUCH_SECONDS = 60
REFUSED = "The e-mail address or the password is wrong."
#: How long a password's challenge waits for its code.
CHALLENGE_SECONDS = 300
CHALLENGE_REFUSED = "This sign-in has expired; sign in again."


@attrs.frozen
class SessionSettings:
    idle_seconds: int = 2 * 3600
    lifetime_seconds: int = 7 * 86400
    link_seconds: int = 3 * 86400


@attrs.frozen
class SignedIn:
    """A new session: its cookie token and the row of the person it belongs to."""

    token: str
    user: dict


@attrs.frozen
class Challenge:
    """A right password of a person with two-factor sign-in: the token that their code completes."""

    token: str
    user: dict


@attrs.frozen
class People:
    """
    The rows of one kind of person who signs in: its store's functions (one table of people, one
    of their sessions), and the prefix of its keys in the shared failure throttle.
    """

    throttle_prefix: str
    by_email: Callable[[Database, str], Awaitable[dict | None]]
    set_password: Callable[[Transaction, uuid.UUID, int, str, Any], Awaitable[dict | None]]
    rehash: Callable[[Database, uuid.UUID, str, str], Awaitable[None]]
    insert_session: Callable[[Database, uuid.UUID, bytes, dict, Any, Any, str | None, str | None], Awaitable[None]]
    live_session: Callable[[Database, bytes, Any, Any], Awaitable[dict | None]]
    touch_session: Callable[[Database, uuid.UUID, Any], Awaitable[None]]
    revoke_session: Callable[[Database, bytes, Any], Awaitable[None]]
    revoke_sessions_of: Callable[[Transaction, uuid.UUID, Any], Awaitable[None]]
    by_id: Callable[[Database, uuid.UUID], Awaitable[dict | None]]
    tables: two_factor.Tables


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class PasswordSignIn:
    def __init__(self, clock, db: Database, people: People, link_key: bytes, csrf_key: bytes,
                 settings: SessionSettings, throttle: Throttle,
                 run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
                 hasher: argon2.PasswordHasher | None = None, vault: KeyVault | None = None,
                 issuer: str = "mailsvc"):
        self._clock = clock
        self._db = db
        self._people = people
        self._link_key = link_key
        self._csrf_key = csrf_key
        self.settings = settings
        self._throttle = throttle
        self._run_blocking = run_blocking
        self._hasher = hasher or argon2.PasswordHasher()
        self._dummy_hash: str | None = None
        self._challenge_key = hmac.new(link_key, b"mailsvc two-factor challenge", hashlib.sha256).digest()
        #: None without a vault to seal secrets in: nobody can enrol then.
        self.two_factor = (TwoFactor(clock, db, vault, people.tables, issuer, throttle, people.throttle_prefix)
                           if vault is not None else None)

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    # Passwords

    async def _hash(self, password: str) -> str:
        return await self._run_blocking(lambda: self._hasher.hash(password))

    async def verify(self, password_hash: str, password: str) -> bool:
        def verify() -> bool:
            try:
                return self._hasher.verify(password_hash, password)
            except (VerifyMismatchError, VerificationError, InvalidHashError):
                return False

        return await self._run_blocking(verify)

    async def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = await self._hash(secrets.token_urlsafe(16))
        return self._dummy_hash

    # Set-password links

    def password_token(self, row: dict) -> str:
        expires = int(self._clock.seconds() + self.settings.link_seconds)
        return signed_link(self._link_key, row["id"].bytes + struct.pack(">IQ", row["password_version"], expires))

    def link_target(self, token: object) -> tuple[uuid.UUID, int]:
        """The person and password version a link's ``token`` sets; refused when invalid or expired."""
        payload = link_payload(self._link_key, token) if isinstance(token, str) and len(token) <= 200 else None
        if payload is not None and len(payload) == 28:
            version, expires = struct.unpack(">IQ", payload[16:])
            if expires >= self._clock.seconds():
                return uuid.UUID(bytes=payload[:16]), version
        raise SignInRefused("This link is not valid or has expired; ask for a new one.")

    async def store_password(self, person_id: uuid.UUID, version: int, password: str,
                             signed_in: bool = False) -> SignedIn | Challenge:
        """
        Set the password if it is still at ``version``: every session of the person ends, a new
        one begins (with a link: after the second factor, if the person has one).
        """
        hashed = await self._hash(password)

        async def store_it(txn: Transaction):
            row = await self._people.set_password(txn, person_id, version, hashed, self._now())
            if row is None:
                raise SignInRefused("This link was already used; ask for a new one.")
            await self._people.revoke_sessions_of(txn, person_id, self._now())
            return row

        row = await self._db.run("set_password", store_it)
        if row.get("two_factor") and not signed_in:
            return self.challenge(row)
        return await self.open_session(row)

    # Sign-in and sessions

    async def login(self, body: dict, client: str, user_agent: str | None = None) -> SignedIn | Challenge:
        email, password = body.get("email"), body.get("password")
        try:
            address = user_address(email)
        except Invalid:
            address = str(email)[:320].lower()
        prefix = self._people.throttle_prefix
        limits = {f"{prefix}address:{address}": ADDRESS_LIMIT, f"{prefix}client:{client}": CLIENT_LIMIT}
        # Counted as a failure before the password is checked: sign-ins at once wait on the count.
        wait = await self._throttle.reserve(limits)
        if wait is not None:
            raise RateLimited("Too many failed sign-ins; try again later.", wait)
        row = await self._people.by_email(self._db, address)
        stored = row["password_hash"] if row is not None else None
        # An unknown address costs the same hash as a known one.
        typed = password if isinstance(password, str) else ""
        ok = await self.verify(stored or await self._dummy(), typed)
        if not ok or row is None or stored is None:
            raise SignInRefused(REFUSED)
        await self._throttle.give_back(limits)
        if self._hasher.check_needs_rehash(stored):
            await self._people.rehash(self._db, row["id"], stored, await self._hash(typed))
        if row.get("two_factor"):
            return self.challenge(row)
        return await self.open_session(row, user_agent, client)

    def challenge(self, row: dict) -> Challenge:
        expires = int(self._clock.seconds() + CHALLENGE_SECONDS)
        payload = b"2fa" + row["id"].bytes + struct.pack(">IQ", row["password_version"], expires)
        return Challenge(signed_link(self._challenge_key, payload), row)

    async def second_step(self, body: dict, client: str, user_agent: str | None = None) -> SignedIn:
        """A challenge's ``code`` (or ``recovery_code``): the session its password was for."""
        token = body.get("challenge")
        payload = link_payload(self._challenge_key, token) if isinstance(token, str) and len(token) <= 200 else None
        if payload is None or len(payload) != 31 or payload[:3] != b"2fa":
            raise SignInRefused(CHALLENGE_REFUSED)
        version, expires = struct.unpack(">IQ", payload[19:])
        person_id = uuid.UUID(bytes=payload[3:19])
        row = await self._people.by_id(self._db, person_id) if expires >= self._clock.seconds() else None
        if row is None or row["password_version"] != version or not row.get("two_factor") or self.two_factor is None:
            raise SignInRefused(CHALLENGE_REFUSED)
        if not await self.two_factor.check(person_id, client, body.get("code"), body.get("recovery_code")):
            raise SignInRefused("The code is wrong, or was used already.")
        return await self.open_session(row, user_agent, client)

    async def open_session(self, row: dict, user_agent: str | None = None, client: str | None = None) -> SignedIn:
        token = secrets.token_urlsafe(32)
        now = self._clock.seconds()
        await self._people.insert_session(self._db, uuid7(now), token_hash(token), row, timefmt.from_seconds(now),
                                          timefmt.from_seconds(now + self.settings.lifetime_seconds),
                                          user_agent[:300] if user_agent else None, client)
        return SignedIn(token, row)

    # Two-factor sign-in of one's own

    def _enrolment(self) -> TwoFactor:
        if self.two_factor is None:
            raise NotFound("Two-factor sign-in")
        return self.two_factor

    async def disable_two_factor(self, person_id: uuid.UUID, body: dict, client: str) -> None:
        """Turn two-factor sign-in off: with the password and a code (or a recovery code)."""
        enrolment = self._enrolment()
        row = await self._people.by_id(self._db, person_id)
        if row is None or not row["password_hash"] or not await self.verify(row["password_hash"],
                                                                           str(body.get("password") or "")):
            raise Invalid("password", "password is wrong")
        if not await enrolment.check(person_id, client, body.get("code"), body.get("recovery_code")):
            raise Invalid("code", "The code is wrong, or was used already.")
        await enrolment.disable(person_id)

    async def reset_two_factor(self, email: object, kind: str, audit: Entry) -> dict:
        """
        The operator turns off the second factor of the person with ``email`` (a lost device): their
        row. ``audit`` is written in the same transaction (no reset without its entry).
        """
        try:
            address = user_address(email)
        except Invalid:
            raise NotFound(kind) from None
        row = await self._people.by_email(self._db, address)
        if row is None:
            raise NotFound(kind)

        async def reset(txn: Transaction) -> None:
            await two_factor.disable(txn, self._people.tables, row["id"])
            await audit.write_in(txn, **_reset_detail(row))

        await self._db.run("reset_two_factor", reset)
        return row

    # One's sessions

    async def sessions(self, person_id: uuid.UUID) -> list[dict]:
        now = self._clock.seconds()
        return await two_factor.sessions_of(self._db, self._people.tables, person_id, timefmt.from_seconds(now),
                                            timefmt.from_seconds(now - self.settings.idle_seconds))

    async def revoke_own_session(self, person_id: uuid.UUID, session_id: uuid.UUID | None) -> None:
        if session_id is None or not await two_factor.revoke(self._db, self._people.tables, person_id, session_id,
                                                             self._now()):
            raise NotFound("Session")

    async def revoke_other_sessions(self, person_id: uuid.UUID, current: uuid.UUID) -> int:
        """Sign out everywhere but here: how many sessions ended."""
        return await two_factor.revoke_others(self._db, self._people.tables, person_id, current, self._now())

    async def logout(self, token: str) -> None:
        await self._people.revoke_session(self._db, token_hash(token), self._now())

    async def live_session(self, token: str) -> dict | None:
        """The session a cookie token stands for; None when unknown, expired, idle or revoked."""
        if not token or len(token) > 100:
            return None
        now = self._clock.seconds()
        row = await self._people.live_session(self._db, token_hash(token), timefmt.from_seconds(now),
                                              timefmt.from_seconds(now - self.settings.idle_seconds))
        if row is not None and now - row["last_seen_at"].timestamp() >= TOUCH_SECONDS:
            await self._people.touch_session(self._db, row["id"], timefmt.from_seconds(now))
        return row

    def csrf_token(self, token: str) -> str:
        mac = hmac.new(self._csrf_key, token.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode("ascii").rstrip("=")

    def csrf_matches(self, token: str, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(self.csrf_token(token).encode(), presented.encode())


def _reset_detail(row: dict) -> dict:
    """What a second factor's reset records of whose it was (a user's row has its account)."""
    if "tenant_id" in row:
        return {"tenant_id": str(row["tenant_id"]), "user_id": str(row["id"]), "email": row["email"]}
    return {"operator_id": str(row["id"]), "email": row["email"]}
