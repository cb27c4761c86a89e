"""
The dashboard's people: users (made, invited, removed by an owner, their set-password links),
their sign-in and sessions on the shared password sign-in (``mailsvc.app.signin``), and the
overview's reads (docs/decisions.md, "Dashboard").
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import argon2
import attrs

from mailsvc.app.apikeys import Caller, KeyRing
from mailsvc.app.audit import Entry, record
from mailsvc.app.signin import Challenge, PasswordSignIn, People, SessionSettings, SignedIn
from mailsvc.app.throttle import Limit, Throttle
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.domain.delivery import GUARD_DAYS
from mailsvc.domain.errors import Conflict, Invalid, NotAllowed, NotFound, RateLimited
from mailsvc.domain.tenant import Tenant
from mailsvc.domain.users import new_password, role_of, user_address
from mailsvc.ids import uuid7
from mailsvc.store import accounts, delivery_outcomes, two_factor
from mailsvc.store import dashboard as store
from mailsvc.store.database import Database, Transaction

#: The overview's periods, in days.
OVERVIEW_PERIODS = (7, 30, 90)
_DOMAIN = re.compile(r"[A-Za-z0-9.-]{1,253}")

#: Users, their sessions and their throttle keys (``address:…``, ``client:…``).
USERS = People("", store.user_by_email, store.set_password, store.rehash, store.insert_session, store.live_session,
               store.touch_session, store.revoke_session, store.revoke_sessions_of, store.user_by_id,
               two_factor.USERS)


@attrs.frozen
class LinkCaps:
    """
    Set-password links an owner may ask for in an hour, per user and per account (each is an
    entry in the operator's audit log): counted in the shared throttle (``mailsvc.app.throttle``).
    """

    per_user: int = 5
    per_tenant: int = 20

    def limits(self, tenant_id: uuid.UUID, user_id: uuid.UUID | None) -> dict[str, Limit]:
        limits = {f"link-tenant:{tenant_id}": Limit(self.per_tenant, 3600 / self.per_tenant)}
        if user_id is not None:
            limits[f"link-user:{user_id}"] = Limit(self.per_user, 3600 / self.per_user)
        return limits


class Dashboard(PasswordSignIn):
    def __init__(self, clock, db: Database, link_key: bytes, csrf_key: bytes, settings: SessionSettings,
                 run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]], throttle: Throttle, keys: KeyRing,
                 hasher: argon2.PasswordHasher | None = None, link_caps: LinkCaps = LinkCaps(),
                 vault: KeyVault | None = None, issuer: str = "mailsvc"):
        super().__init__(clock, db, USERS, link_key, csrf_key, settings, throttle, run_blocking, hasher, vault,
                         issuer)
        self._keys = keys
        self._link_caps = link_caps

    # Users

    async def create_user(self, tenant_id: uuid.UUID, body: dict, txn: Transaction | None = None,
                          audit: Entry | None = None) -> dict:
        """
        A user without a password yet (the link sets it); 409 when the address has one.
        ``audit``'s entry (the user's set-password link) is written in the same transaction.
        """
        if txn is None and audit is not None:
            async def create(txn: Transaction) -> dict:
                return await self.create_user(tenant_id, body, txn, audit)

            return await self._db.run("create_user", create)
        email = user_address(body.get("email"))
        role = role_of(body.get("role"))
        if await accounts.get_tenant(txn or self._db, tenant_id) is None:
            raise NotFound("Tenant")
        row = await store.insert_user(txn or self._db, uuid7(self._clock.seconds()), tenant_id, email, role,
                                      self._now())
        if row is None:
            raise Conflict("email: a user with this address already exists")
        if audit is not None:
            assert txn is not None  # an audited creation re-entered above with its transaction
            await audit.write_in(txn, **link_detail(row))
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
        Kept keys go on working, still showing who made them. The removal is audited (``user.remove``).
        """
        _owner(caller)
        if user_id == caller.user_id:
            raise NotAllowed("You cannot remove yourself.", reason="validation_error")

        async def remove(txn: Transaction) -> list[dict]:
            revoked = await self._keys.revoke_made_by(txn, caller.tenant.id, user_id) if revoke_keys and user_id else []
            row = await store.delete_user(txn, caller.tenant.id, user_id) if user_id else None
            if row is None:
                raise NotFound("User")
            await record(txn, self._clock.seconds(), caller.actor, "user.remove", **link_detail(row),
                         revoked_keys=[{"key_id": str(k["id"]), "name": k["name"], "prefix": k["prefix"]}
                                       for k in revoked])
            return revoked

        return await self._db.run("remove_user", remove)

    async def invite(self, caller: Caller, body: dict, audit: Entry | None = None) -> tuple[dict, str]:
        """A new user and its set-password link, within the account's cap of links."""
        _owner(caller)
        limits = self._link_caps.limits(caller.tenant.id, None)
        await self._within_link_caps(limits)
        try:
            row = await self.create_user(caller.tenant.id, body, audit=audit)
        except Exception:
            await self._throttle.give_back(limits)  # no link was made
            raise
        return row, self.password_token(row)

    async def reset_link(self, caller: Caller, user_id: uuid.UUID | None) -> tuple[dict, str]:
        """A new set-password link for a user of the account, within the caps per user and account."""
        _owner(caller)
        row = await self.tenant_user(caller.tenant.id, user_id)
        await self._within_link_caps(self._link_caps.limits(caller.tenant.id, row["id"]))
        return row, self.password_token(row)

    async def _within_link_caps(self, limits: dict[str, Limit]) -> None:
        wait = await self._throttle.reserve(limits)
        if wait is not None:
            caps = self._link_caps
            raise RateLimited(
                f"Too many set-password links (at most {caps.per_user} an hour for one user and"
                f" {caps.per_tenant} for the account); try again in {wait} seconds.", wait)

    async def operator_link(self, body: dict) -> tuple[dict, str]:
        """The operator's set-password link for the user with ``email`` (addresses are unique
        across tenants): how an operator gets a locked-out owner back in."""
        row = await store.user_by_email(self._db, user_address(body.get("email")))
        if row is None:
            raise NotFound("User")
        return row, self.password_token(row)

    async def set_password(self, body: dict, caller: Caller | None = None) -> SignedIn | Challenge:
        """
        Set a password with a link's ``token``, or (signed in) with the ``current_password``;
        every session of the user ends, and a new one begins.
        """
        password = new_password(body.get("password"))
        if body.get("token") is not None:
            user_id, version = self.link_target(body.get("token"))
        elif caller is not None and caller.user_id is not None:
            user = await self.user(caller.user_id)
            if not user["password_hash"] or not await self.verify(user["password_hash"],
                                                                   str(body.get("current_password") or "")):
                raise Invalid("current_password", "current_password is wrong")
            user_id, version = user["id"], user["password_version"]
        else:
            raise Invalid("token", "token is required")
        return await self.store_password(user_id, version, password, signed_in=caller is not None)

    # Sessions

    async def authenticate(self, token: str) -> Caller | None:
        """The caller a session cookie stands for; None when it is unknown, expired, idle or revoked."""
        row = await self.live_session(token)
        if row is None:
            return None
        tenant = await accounts.get_tenant(self._db, row["tenant_id"])
        if tenant is None:
            return None
        return Caller(tenant=tenant, key_id=None, permission="full_access", domain_id=None,
                      user_id=row["user_id"], role=row["role"], session_id=row["id"],
                      two_factor_pending=bool(row["require_two_factor"] and not row["two_factor"]))

    # The account's rule

    async def require_two_factor(self, caller: Caller, required: object) -> None:
        """An owner requires a second factor of every member (their own first), or no longer does."""
        _owner(caller)
        if not isinstance(required, bool):
            raise Invalid("require_two_factor", "require_two_factor must be true or false")
        assert caller.user_id is not None  # a role (an owner's) comes only with a session's user
        if required and not (await self.user(caller.user_id))["two_factor"]:
            raise NotAllowed("Turn on two-factor sign-in for yourself first.", reason="two_factor_required")
        await two_factor.require(self._db, caller.tenant.id, required)

    async def two_factor_required(self, tenant_id: uuid.UUID) -> bool:
        return await two_factor.required(self._db, tenant_id)

    # Reads of the overview

    async def usage(self, tenant: Tenant) -> dict:
        now = self._now()
        day, month = f"day:{now:%Y-%m-%d}", f"month:{now:%Y-%m}"
        counts = await store.usage_counts(self._db, tenant.id, day, month)
        return {"day": counts.get(day, 0), "daily_quota": tenant.daily_quota,
                "month": counts.get(month, 0), "monthly_quota": tenant.monthly_quota}

    async def guard(self, tenant_id: uuid.UUID) -> dict:
        """The reputation guard's lines as it judges the account now, from the very figures it
        reads (``delivery_outcomes.reputation``): what the overview sets beside its pause lines."""
        standing = await delivery_outcomes.reputation(self._db, tenant_id, self._now())
        return {"days": GUARD_DAYS, **standing.lines()}

    async def daily(self, tenant_id: uuid.UUID, days: int = 30, domain: str | None = None) -> list[dict]:
        """Sends and outcomes per day over the last ``days`` (7, 30 or 90), of the whole account or of
        the mail sent from one ``domain``."""
        if days not in OVERVIEW_PERIODS:
            raise Invalid("days", f"days must be one of {', '.join(map(str, OVERVIEW_PERIODS))}")
        if domain is not None and not _DOMAIN.fullmatch(domain):
            raise Invalid("domain", "domain must be a domain name, such as example.com")
        today = self._now().date()
        since = today - timedelta(days=days - 1)
        if domain is None:
            found = await store.daily_stats(self._db, tenant_id, since)
        else:
            found = await store.daily_stats_from(self._db, tenant_id, since, domain.lower())
        out = []
        for n in range(days):
            day = since + timedelta(days=n)
            counts = found.get(day, {})
            out.append({"day": day.isoformat(), **{k: counts.get(k, 0) for k in
                                                    ("sent", "delivered", "bounced", "complained")}})
        return out


def link_detail(row: dict) -> dict:
    """What the audit log keeps of a user's set-password link (or removal)."""
    return {"tenant_id": str(row["tenant_id"]), "user_id": str(row["id"]), "email": row["email"], "role": row["role"]}


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
