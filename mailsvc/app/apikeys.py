"""
Issuing and checking API keys.

Only an HMAC of a key's secret, under a key derived from the server's master key, is stored.
Checks are cached for ``cache_seconds`` (at most 30). A revocation, a key's deletion and a
change to its account (a suspension) NOTIFY every process in the transaction that makes them
(``accounts.KEYS_CHANNEL``), and each key ring that ``follow``s the channel drops the account's
cached checks at once; the cache time only bounds a change whose NOTIFY was lost (the LISTEN
connection down: then the whole cache is dropped when it is back). ``last_used_at`` is
gathered in memory and written in one statement per flush instead of once per request.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import uuid
from datetime import datetime

import attrs

from mailsvc import timefmt
from mailsvc.app.audit import record
from mailsvc.domain.apikeys import Creator, NewKey, Token, new_token, parse_token
from mailsvc.domain.audit import ACTOR_PREFIXES, API_ACTOR_PREFIX
from mailsvc.domain.errors import NotAllowed, NotFound
from mailsvc.domain.paging import Page
from mailsvc.domain.tenant import Tenant
from mailsvc.ids import parse_uuid, uuid7
from mailsvc.store import accounts
from mailsvc.store.database import Database, Transaction


@attrs.frozen
class Caller:
    """Who is calling: the account, and the key's scope (or, for a dashboard session, its user)."""

    tenant: Tenant
    key_id: uuid.UUID | None
    permission: str
    domain_id: uuid.UUID | None
    #: A dashboard session's user, role and session (None for an API key).
    user_id: uuid.UUID | None = None
    role: str | None = None
    session_id: uuid.UUID | None = None
    #: A session of a user whose account requires a second factor they have not enrolled: it
    #: may only enrol (and sign out) until they do.
    two_factor_pending: bool = False

    @property
    def full_access(self) -> bool:
        return self.permission == "full_access"

    @property
    def actor(self) -> str:
        """Who the audit log says acted: the session's user, or the API key."""
        if self.user_id is not None:
            return ACTOR_PREFIXES["user"] + str(self.user_id)
        return API_ACTOR_PREFIX + str(self.key_id)


@attrs.frozen
class _Cached:
    secret_hmac: bytes
    caller: Caller
    fetched_at: float


class KeyRing:
    def __init__(self, clock, db: Database, hmac_key: bytes, tag: str, cache_seconds: float):
        self._clock = clock
        self._db = db
        self._hmac_key = hmac_key
        self.tag = tag
        self._cache_seconds = cache_seconds
        self._cache: dict[str, _Cached] = {}
        self._used: dict[uuid.UUID, datetime] = {}
        #: Counts the changes heard of: a check read before one is not cached after it.
        self._changes = 0

    def _mac(self, secret: str) -> bytes:
        return hmac.new(self._hmac_key, secret.encode("utf-8"), hashlib.sha256).digest()

    async def authenticate(self, text: str) -> Caller | None:
        """The caller a presented key stands for, or None for an unknown or revoked key."""
        token = parse_token(text, self.tag)
        if token is None:
            return None
        now = self._clock.seconds()
        cached = self._cache.get(token.prefix)
        if cached is None or now - cached.fetched_at >= self._cache_seconds:
            cached = await self._load(token.prefix, now)
            if cached is None:
                return None
        if not hmac.compare_digest(cached.secret_hmac, self._mac(token.secret)):
            return None
        if cached.caller.key_id is not None:  # always, for a key's caller
            self._used[cached.caller.key_id] = timefmt.from_seconds(now)
        return cached.caller

    async def _load(self, prefix: str, now: float) -> _Cached | None:
        changes = self._changes
        row = await accounts.key_with_tenant(self._db, prefix)
        if changes != self._changes:  # a change was heard of while reading: use it this once, keep nothing
            return None if row is None else _Cached(bytes(row["secret_hmac"]), self._caller_of(row), now)
        if row is None:
            self._cache.pop(prefix, None)
            return None
        entry = _Cached(bytes(row["secret_hmac"]), self._caller_of(row), now)
        self._cache[prefix] = entry
        return entry

    @staticmethod
    def _caller_of(row: dict) -> Caller:
        return Caller(
            tenant=accounts.tenant_of(row),
            key_id=row["key_id"],
            permission=row["permission"],
            domain_id=row["domain_id"],
        )

    def forget_tenant(self, tenant_id: uuid.UUID) -> None:
        """Drop this process's cached checks of a tenant whose keys or settings changed."""
        self._changes += 1
        for prefix, entry in list(self._cache.items()):
            if entry.caller.tenant.id == tenant_id:
                del self._cache[prefix]

    @staticmethod
    def tenant_changed(txn: Transaction, tenant_id: uuid.UUID) -> None:
        """Inside ``txn``, which changes the tenant: every process drops its checks of it at COMMIT."""
        accounts.notify_keys_changed(txn, tenant_id)

    async def follow(self, notifications) -> None:
        """Hear the changes made by every process (``mailsvc.store.notify.Notifications``)."""
        await notifications.listen(accounts.KEYS_CHANNEL, self._heard)

    def _heard(self, payload: str) -> None:
        tenant_id = parse_uuid(payload)
        if tenant_id is not None:
            return self.forget_tenant(tenant_id)
        # The LISTEN connection is back (changes may have been missed), or a payload of no
        # account: nothing cached is trusted.
        self._changes += 1
        self._cache.clear()

    async def issue(self, txn: Transaction, tenant_id: uuid.UUID, key: NewKey,
                    creator: Creator) -> tuple[dict, Token]:
        """Store a new key inside ``txn``; the token is returned only here."""
        token = new_token(self.tag)
        row = await accounts.insert_key(
            txn,
            uuid7(self._clock.seconds()),
            tenant_id,
            key.name,
            token.prefix,
            self._mac(token.secret),
            key.permission,
            key.domain_id,
            timefmt.from_seconds(self._clock.seconds()),
            creator.kind,
            creator.user_id,
        )
        return row, token

    async def create(self, tenant_id: uuid.UUID, key: NewKey, creator: Creator,
                     actor: str | None = None) -> tuple[dict, Token]:
        """A new key; ``actor`` (who asked) is written to the audit log with it (``api_key.create``)."""
        if key.domain_id is not None:
            domain = await accounts.domain_of(self._db, tenant_id, key.domain_id)
            if domain is None:
                raise NotFound("Domain")
            if domain["status"] != "verified":
                raise NotAllowed(
                    f"domain_id: the domain {domain['name']} is not verified; verify it first",
                    reason="domain_not_verified",
                )

        async def create(txn: Transaction) -> tuple[dict, Token]:
            row, token = await self.issue(txn, tenant_id, key, creator)
            if actor is not None:
                await record(txn, self._clock.seconds(), actor, "api_key.create", **key_detail(tenant_id, row))
            return row, token

        return await self._db.run("create_api_key", create)

    async def list(self, tenant_id: uuid.UUID, page: Page) -> tuple[builtins.list[dict], bool]:
        rows, has_more = await accounts.list_keys(self._db, tenant_id, page)
        for row in rows:
            pending = self._used.get(row["id"])
            if pending is not None and (row["last_used_at"] is None or row["last_used_at"] < pending):
                row["last_used_at"] = pending
        return rows, has_more

    async def rename(self, tenant_id: uuid.UUID, key_id: uuid.UUID, name: str) -> dict:
        row = await accounts.rename_key(self._db, tenant_id, key_id, name)
        if row is None:
            raise NotFound("API key")
        return row

    async def revoke(self, tenant_id: uuid.UUID, key_id: uuid.UUID, actor: str | None = None) -> None:
        """The key goes; ``actor`` (who asked) is written to the audit log with it (``api_key.revoke``)."""
        async def delete(txn: Transaction) -> dict | None:
            row = await accounts.delete_key(txn, tenant_id, key_id)
            if row is not None:
                accounts.notify_keys_changed(txn, tenant_id)
                if actor is not None:
                    await record(txn, self._clock.seconds(), actor, "api_key.revoke", **key_detail(tenant_id, row))
            return row

        row = await self._db.run("revoke_api_key", delete)
        if row is None:
            raise NotFound("API key")
        self._forget([row])

    async def revoke_made_by(self, txn: Transaction, tenant_id: uuid.UUID, user_id: uuid.UUID) -> builtins.list[dict]:
        """Revoke, inside ``txn``, every key of the account that ``user_id`` made; their rows (id, prefix)."""
        rows = await accounts.delete_keys_made_by(txn, tenant_id, user_id)
        if rows:
            accounts.notify_keys_changed(txn, tenant_id)
        txn.after_commit(self._forget, rows)
        return rows

    def _forget(self, rows: builtins.list[dict]) -> None:
        """Revoked keys: refused by this process at once (by the others when they hear the NOTIFY)."""
        for row in rows:
            self._cache.pop(row["prefix"], None)
            self._used.pop(row["id"], None)

    async def flush_last_used(self) -> None:
        used, self._used = self._used, {}
        try:
            await accounts.record_last_used(self._db, used)
        except Exception:
            for key_id, when in used.items():
                self._used.setdefault(key_id, when)
            raise


def key_detail(tenant_id: uuid.UUID, row: dict) -> dict:
    """What the audit log keeps of an API key made or revoked (never its secret)."""
    return {"tenant_id": str(tenant_id), "key_id": str(row["id"]), "name": row["name"], "prefix": row["prefix"]}
