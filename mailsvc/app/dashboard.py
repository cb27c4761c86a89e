"""
The dashboard's people: users, sign-in, sessions and set-password links (docs/decisions.md,
"Dashboard"). Passwords are hashed with argon2id in the thread pool. A session is a random
cookie token, stored as its SHA-256, ending when idle (``idle_seconds``), at
``lifetime_seconds``, at sign-out, or when the user's password is set again; its CSRF token
is an HMAC of it. A set-password link is signed with the password version it sets, so it works
once. Failed sign-ins are throttled per address and per client network, counted before the
password is checked (``mailsvc.app.throttle``), and a refusal never says what was wrong.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import argon2
import attrs
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller, KeyRing
from mailsvc.app.throttle import Limit, Throttle
from mailsvc.crypto.links import link_payload, signed_link
from mailsvc.domain.errors import Conflict, Invalid, NotAllowed, NotFound, RateLimited, SignInRefused
from mailsvc.domain.tenant import Tenant
from mailsvc.domain.users import new_password, role_of, user_address
from mailsvc.ids import uuid7
from mailsvc.store import accounts
from mailsvc.store import dashboard as store
from mailsvc.store.database import Database, Transaction

#: Failed sign-ins: an address gets 5 tries, then one a minute; a client network 20, then one
#: every 15 s.
ADDRESS_LIMIT = Limit(5, 60.0)
CLIENT_LIMIT = Limit(20, 15.0)
#: A session's ``last_seen_at`` is written at most this often (its idle expiry is that coarse).
TOUCH_SECONDS = 60
REFUSED = "The e-mail address or the password is wrong."


@attrs.frozen
class SessionSettings:
    idle_seconds: int = 2 * 3600
    lifetime_seconds: int = 7 * 86400
    link_seconds: int = 3 * 86400


@attrs.frozen
class SignedIn:
    """A new session: its cookie token and the user it belongs to."""

    token: str
    user: dict


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class Dashboard:
    def __init__(self, clock, db: Database, link_key: bytes, csrf_key: bytes, settings: SessionSettings,
                 run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]], throttle: Throttle, keys: KeyRing,
                 hasher: argon2.PasswordHasher | None = None):
        self._clock = clock
        self._db = db
        self._throttle = throttle
        self._keys = keys
        self._link_key = link_key
        self._csrf_key = csrf_key
        self.settings = settings
        self._run_blocking = run_blocking
        self._hasher = hasher or argon2.PasswordHasher()
        self._dummy_hash: str | None = None

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    # Passwords

    async def _hash(self, password: str) -> str:
        return await self._run_blocking(lambda: self._hasher.hash(password))

    async def _verify(self, password_hash: str, password: str) -> bool:
        def verify() -> bool:
            try:
                return self._hasher.verify(password_hash, password)
            except (VerifyMismatchError, VerificationError, InvalidHashError):
                return False

        return await self._run_blocking(verify)

    # Users

    async def create_user(self, tenant_id: uuid.UUID, body: dict, txn: Transaction | None = None) -> dict:
        """A user without a password yet (the link sets it); 409 when the address has one."""
        email = user_address(body.get("email"))
        role = role_of(body.get("role"))
        if await accounts.get_tenant(txn or self._db, tenant_id) is None:
            raise NotFound("Tenant")
        row = await store.insert_user(txn or self._db, uuid7(self._clock.seconds()), tenant_id, email, role,
                                      self._now())
        if row is None:
            raise Conflict("email: a user with this address already exists")
        return row

    async def users(self, tenant_id: uuid.UUID) -> list[dict]:
        return await store.users_of(self._db, tenant_id)

    async def user(self, user_id: uuid.UUID) -> dict:
        row = await store.user_by_id(self._db, user_id)
        if row is None:
            raise NotFound("User")
        return row

    async def tenant_user(self, tenant_id: uuid.UUID, user_id: uuid.UUID | None) -> dict:
        row = await store.tenant_user(self._db, tenant_id, user_id) if user_id is not None else None
        if row is None:
            raise NotFound("User")
        return row

    async def remove_user(self, caller: Caller, user_id: uuid.UUID | None, revoke_keys: bool = False) -> list[dict]:
        """
        Remove a user of the account (their sessions end with them) and, if ``revoke_keys``, the
        API keys they made, in one transaction; the keys revoked (id, prefix) are returned.
        Kept keys go on working, still showing who made them.
        """
        _owner(caller)
        if user_id == caller.user_id:
            raise NotAllowed("You cannot remove yourself.", reason="validation_error")

        async def remove(txn: Transaction) -> list[dict]:
            revoked = await self._keys.revoke_made_by(txn, caller.tenant.id, user_id) if revoke_keys and user_id else []
            row = await store.delete_user(txn, caller.tenant.id, user_id) if user_id else None
            if row is None:
                raise NotFound("User")
            return revoked

        return await self._db.run("remove_user", remove)

    async def invite(self, caller: Caller, body: dict) -> tuple[dict, str]:
        _owner(caller)
        row = await self.create_user(caller.tenant.id, body)
        return row, self.password_token(row)

    async def reset_link(self, caller: Caller, user_id: uuid.UUID | None) -> tuple[dict, str]:
        _owner(caller)
        row = await self.tenant_user(caller.tenant.id, user_id)
        return row, self.password_token(row)

    async def operator_link(self, body: dict) -> tuple[dict, str]:
        """The operator's set-password link for the user with ``email`` (addresses are unique
        across tenants): how an operator gets a locked-out owner back in."""
        row = await store.user_by_email(self._db, user_address(body.get("email")))
        if row is None:
            raise NotFound("User")
        return row, self.password_token(row)

    # Set-password links

    def password_token(self, user: dict) -> str:
        expires = int(self._clock.seconds() + self.settings.link_seconds)
        payload = user["id"].bytes + struct.pack(">IQ", user["password_version"], expires)
        return signed_link(self._link_key, payload)

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

    async def set_password(self, body: dict, caller: Caller | None = None) -> SignedIn:
        """
        Set a password with a link's ``token``, or (signed in) with the ``current_password``;
        every session of the user ends, and a new one begins.
        """
        password = new_password(body.get("password"))
        if body.get("token") is not None:
            target = self._link_target(body.get("token"))
            if target is None:
                raise SignInRefused("This link is not valid or has expired; ask for a new one.")
            user_id, version = target
        elif caller is not None and caller.user_id is not None:
            user = await self.user(caller.user_id)
            if not user["password_hash"] or not await self._verify(user["password_hash"],
                                                                    str(body.get("current_password") or "")):
                raise Invalid("current_password", "current_password is wrong")
            user_id, version = user["id"], user["password_version"]
        else:
            raise Invalid("token", "token is required")
        hashed = await self._hash(password)

        async def store_it(txn: Transaction):
            row = await store.set_password(txn, user_id, version, hashed, self._now())
            if row is None:
                raise SignInRefused("This link was already used; ask for a new one.")
            await store.revoke_sessions_of(txn, user_id, self._now())
            return row

        user = await self._db.run("set_password", store_it)
        return await self._open_session(user)

    # Sign-in and sessions

    async def login(self, body: dict, client: str) -> SignedIn:
        email, password = body.get("email"), body.get("password")
        try:
            address = user_address(email)
        except Invalid:
            address = str(email)[:320].lower()
        limits = {f"address:{address}": ADDRESS_LIMIT, f"client:{client}": CLIENT_LIMIT}
        # Counted as a failure before the password is checked: sign-ins at once wait on the count.
        wait = await self._throttle.reserve(limits)
        if wait is not None:
            raise RateLimited("Too many failed sign-ins; try again later.", wait)
        user = await store.user_by_email(self._db, address)
        stored = user["password_hash"] if user is not None else None
        # An unknown address costs the same hash as a known one.
        ok = await self._verify(stored or await self._dummy(), password if isinstance(password, str) else "")
        if not ok or stored is None:
            raise SignInRefused(REFUSED)
        await self._throttle.give_back(limits)
        if self._hasher.check_needs_rehash(stored):
            await store.rehash(self._db, user["id"], stored, await self._hash(password))
        return await self._open_session(user)

    async def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = await self._hash(secrets.token_urlsafe(16))
        return self._dummy_hash

    async def _open_session(self, user: dict) -> SignedIn:
        token = secrets.token_urlsafe(32)
        now = self._clock.seconds()
        await store.insert_session(
            self._db, uuid7(now), token_hash(token), user, timefmt.from_seconds(now),
            timefmt.from_seconds(now + self.settings.lifetime_seconds),
        )
        return SignedIn(token, user)

    async def logout(self, token: str) -> None:
        await store.revoke_session(self._db, token_hash(token), self._now())

    async def authenticate(self, token: str) -> Caller | None:
        """The caller a session cookie stands for; None when it is unknown, expired, idle or revoked."""
        if not token or len(token) > 100:
            return None
        now = self._clock.seconds()
        row = await store.live_session(
            self._db, token_hash(token), timefmt.from_seconds(now),
            timefmt.from_seconds(now - self.settings.idle_seconds),
        )
        if row is None:
            return None
        tenant = await accounts.get_tenant(self._db, row["tenant_id"])
        if tenant is None:
            return None
        if now - row["last_seen_at"].timestamp() >= TOUCH_SECONDS:
            await store.touch_session(self._db, row["id"], timefmt.from_seconds(now))
        return Caller(tenant=tenant, key_id=None, permission="full_access", domain_id=None,
                      user_id=row["user_id"], role=row["role"], session_id=row["id"])

    def csrf_token(self, token: str) -> str:
        mac = hmac.new(self._csrf_key, token.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode("ascii").rstrip("=")

    def csrf_matches(self, token: str, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(self.csrf_token(token).encode(), presented.encode())

    # Reads of the overview

    async def usage(self, tenant: Tenant) -> dict:
        now = self._now()
        day, month = f"day:{now:%Y-%m-%d}", f"month:{now:%Y-%m}"
        counts = await store.usage_counts(self._db, tenant.id, day, month)
        return {"day": counts.get(day, 0), "daily_quota": tenant.daily_quota,
                "month": counts.get(month, 0), "monthly_quota": tenant.monthly_quota}

    async def daily(self, tenant_id: uuid.UUID, days: int = 30) -> list[dict]:
        today = self._now().date()
        since = today - timedelta(days=days - 1)
        found = await store.daily_stats(self._db, tenant_id, since)
        out = []
        for n in range(days):
            day = since + timedelta(days=n)
            counts = found.get(day, {})
            out.append({"day": day.isoformat(), **{k: counts.get(k, 0) for k in
                                                    ("sent", "delivered", "bounced", "complained")}})
        return out


def _owner(caller: Caller) -> None:
    if caller.role != "owner":
        raise NotAllowed("Only an owner of the account may do this.", reason="owner_required")


@attrs.frozen
class FirstOwner:
    """A fresh install's first user: its set-password token while it has no password, and the
    first key of its account (plain text) when that account was made by this start."""

    user: dict
    password_token: str | None
    api_key: str | None


async def first_owner(dashboard: Dashboard, db: Database, email: str,
                      create_tenant: Callable[..., Awaitable[Any]], key_name: str = "Default") -> FirstOwner | None:
    """
    On a fresh install (no user at all), an account "Default" owned by ``email``, its first
    full-access key named ``key_name``; while that first user has set no password, a fresh
    set-password token at every start. None without ``email``.
    """
    if not email:
        return None
    user = await store.first_user(db)
    api_key = None
    if user is None:
        tenant, _, token = await create_tenant({"name": "Default"}, key_name=key_name)
        user = await dashboard.create_user(tenant.id, {"email": email, "role": "owner"})
        api_key = str(token)
    token = dashboard.password_token(user) if user["password_hash"] is None else None
    return FirstOwner(user, token, api_key)
