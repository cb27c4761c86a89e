"""Tenants as the operator manages them, and the waitlist."""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.ai import AiHelper
from mailsvc.app.apikeys import KeyRing
from mailsvc.app.audit import Entry
from mailsvc.app.throttle import Limit, Throttle
from mailsvc.domain.addresses import normalize_address
from mailsvc.domain.apikeys import OPERATOR, NewKey, Token
from mailsvc.domain.errors import Conflict, Invalid, NotFound, RateLimited
from mailsvc.domain.paging import Page
from mailsvc.domain.tenant import Tenant, new_tenant_fields, tenant_changes
from mailsvc.ids import parse_uuid, uuid7
from mailsvc.store import accounts, deliveries, two_factor, usage
from mailsvc.store.accept import DELIVERIES
from mailsvc.store.database import Database, Transaction

#: Waitlist requests of one client network, counted by every node on the database: a burst of
#: 10, then one every 6 s (10 a minute).
WAITLIST = Limit(10, 6.0)


class Accounts:
    def __init__(self, clock, db: Database, keyring: KeyRing, api_rate_per_sec: int, throttle: Throttle,
                 ai: AiHelper | None = None):
        self._clock = clock
        self._ai = ai
        self._api_rate_per_sec = api_rate_per_sec
        self._db = db
        self._keyring = keyring
        self._waitlist_throttle = throttle

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    async def create_tenant(self, body: dict, key_name: str = "Default",
                            audit: Entry | None = None) -> tuple[Tenant, dict, Token]:
        """A new tenant and its first ``full_access`` key, in one transaction (with ``audit``'s entry)."""
        fields = new_tenant_fields(body, self._api_rate_per_sec)
        tenant_id = uuid7(self._clock.seconds())
        if body.get("id") is not None:
            given = parse_uuid(body["id"])
            if given is None:
                raise Invalid("id", "id must be a valid UUID")
            tenant_id = given

        async def create(txn: Transaction):
            tenant = await accounts.insert_tenant(txn, tenant_id, fields, self._now())
            if tenant is None:
                raise Conflict(f"id: a tenant with id {tenant_id} already exists")
            row, token = await self._keyring.issue(
                txn, tenant.id, NewKey(key_name, "full_access", None), OPERATOR
            )
            if audit is not None:
                await audit.write_in(txn, tenant_id=str(tenant.id), name=tenant.name, plan=tenant.plan,
                                     api_key_id=str(row["id"]))
            return tenant, row, token

        return await self._db.run("create_tenant", create)

    async def tenant(self, tenant_id: str) -> Tenant:
        parsed = parse_uuid(tenant_id)
        tenant = await accounts.get_tenant(self._db, parsed) if parsed else None
        if tenant is None:
            raise NotFound("Tenant")
        return tenant

    async def tenants(self, name_contains: str | None, status: str | None, page: Page) -> tuple[list[Tenant], bool]:
        return await accounts.list_tenants(self._db, name_contains, status, page)

    async def usage(self, tenant: Tenant) -> dict:
        """
        The tenant's sends and recipients today and this month (UTC) against its quotas
        (``GET /v1/usage``, ``GET /admin/v1/tenants/{id}/usage``), and this month's AI generations
        against the plan's AI quota.
        """
        now = self._now()
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        month = day.replace(day=1)
        found = await usage.counts(self._db, tenant.id, day, month)

        def period(start, emails: int, recipients: int, quota: int) -> dict:
            return {"start": timefmt.iso(start), "emails": emails, "recipients": recipients,
                    "quota": quota, "remaining": max(quota - recipients, 0)}

        return {
            "object": "usage",
            "tenant_id": str(tenant.id),
            "plan": tenant.plan,
            "day": period(day, found["day_emails"], found["day_recipients"], tenant.daily_quota),
            "month": period(month, found["month_emails"], found["month_recipients"], tenant.monthly_quota),
            "ai": await self._ai.usage(tenant) if self._ai is not None else {"used": 0, "quota": 0},
        }

    async def update_tenant(self, tenant_id: str, body: dict, audit: Entry | None = None) -> Tenant:
        """The changed tenant; ``audit``'s entry (with the tenant's id) is written in the change's transaction."""
        parsed = parse_uuid(tenant_id)
        if parsed is None:
            raise NotFound("Tenant")
        changes = tenant_changes(body)

        async def update(txn: Transaction) -> Tenant | None:
            now = self._now()
            tenant = await accounts.update_tenant(txn, parsed, changes, now)
            if tenant is not None:  # a suspension, a new quota: every process's cached checks go
                self._keyring.tenant_changed(txn, parsed)
            if tenant is not None and changes.get("status") == "active":
                # Mail held back while the tenant was paused goes out now (still paced).
                await deliveries.release_held(txn, parsed, now)
                txn.notify(DELIVERIES)
            if tenant is not None and audit is not None:
                await audit.write_in(txn, tenant_id=str(parsed))
            if tenant is not None and changes.get("status") == "suspended":
                # Nobody of a suspended account stays signed in (its users may sign in again to see why).
                await two_factor.revoke_tenant_sessions(txn, parsed, now)
            return tenant

        tenant = await self._db.run("update_tenant", update)
        if tenant is None:
            raise NotFound("Tenant")
        self._keyring.forget_tenant(parsed)
        return tenant

    async def join_waitlist(self, email: object, client: str) -> str:
        """
        Put the address on the waitlist and return it as stored. An address already there
        gives the same answer, so the form does not tell who has joined; ``client`` (the
        caller's network address) is rate-limited, invalid addresses included.
        """
        wait = await self._waitlist_throttle.reserve({f"waitlist:{client}": WAITLIST})
        if wait is not None:
            raise RateLimited("Too many waitlist requests from this address; try again later.", wait)
        address = normalize_address("email", email).lower()
        await accounts.join_waitlist(self._db, uuid7(self._clock.seconds()), address, self._now())
        return address

    async def waitlist(self, page: Page) -> tuple[list[dict], bool]:
        return await accounts.list_waitlist(self._db, page)
