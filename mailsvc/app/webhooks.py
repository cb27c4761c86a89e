"""
Managing webhooks: endpoints are checked where they point before they are stored, signing
secrets are stored sealed and shown again on retrieve, a rotation keeps the previous secret
signing for a day, and disabling a webhook drops what was queued for it.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from mailsvc import timefmt
from mailsvc.crypto import webhook_signatures as signing
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.domain.errors import Invalid, NotAllowed, NotFound
from mailsvc.domain.paging import Page
from mailsvc.domain.webhooks import NewWebhook, WebhookChange
from mailsvc.ids import uuid7
from mailsvc.outside.addresses import PublicAddresses, TargetRefused, Unresolvable
from mailsvc.store import webhooks as rows
from mailsvc.store.database import Database, Transaction

#: How long the previous secret keeps signing after a rotation.
ROTATION_OVERLAP_SECONDS = 24 * 3600

#: Webhooks one account may have: each is a stream of requests this service sends out.
MAX_WEBHOOKS = 20


def secret_bound_to(webhook_id: uuid.UUID) -> bytes:
    """What a webhook's sealed secrets are bound to (see ``KeyVault``)."""
    return b"webhook-secret:" + webhook_id.bytes


class WebhookRegistry:
    def __init__(self, clock, db: Database, addresses: PublicAddresses, vault: KeyVault):
        self._clock = clock
        self._db = db
        self._addresses = addresses
        self._vault = vault

    def secret_of(self, webhook_id: uuid.UUID, sealed: bytes) -> str:
        return self._vault.open(sealed, secret_bound_to(webhook_id)).decode("ascii")

    def signing_keys(self, row: dict, now: float) -> list[bytes]:
        """The MAC keys a delivery is signed with now: the secret, and a rotated-out one
        during its overlap."""
        keys = [signing.secret_key(self.secret_of(row["webhook_id"], row["secret"]))]
        until = row["previous_secret_until"]
        if row["previous_secret"] is not None and until is not None and until.timestamp() > now:
            keys.append(signing.secret_key(self.secret_of(row["webhook_id"], row["previous_secret"])))
        return keys

    async def _check_endpoint(self, url: str) -> None:
        """The endpoint's host must resolve to public addresses (docs/webhooks.md, "Management")."""
        try:
            await self._addresses.check(urlsplit(url).hostname or "")
        except TargetRefused as e:
            raise Invalid("endpoint", f"endpoint must be a public address: {e.message}") from None
        except Unresolvable as e:
            raise Invalid("endpoint", f"endpoint does not resolve: {e.message}") from None

    async def create(self, tenant_id: uuid.UUID, new: NewWebhook) -> tuple[dict, str]:
        await self._check_endpoint(new.endpoint)
        webhook_id = uuid7(self._clock.seconds())
        secret = signing.new_secret()
        sealed = self._vault.seal(secret.encode("ascii"), secret_bound_to(webhook_id))
        now = timefmt.from_seconds(self._clock.seconds())

        async def insert(txn: Transaction) -> dict:
            if await rows.count_locking_tenant(txn, tenant_id) >= MAX_WEBHOOKS:
                raise NotAllowed(
                    f"endpoint: an account has at most {MAX_WEBHOOKS} webhooks; remove one to add another",
                    reason="plan_limit",
                )
            return await rows.insert(
                txn, webhook_id, tenant_id, new.endpoint, new.events, new.naming, sealed, now
            )

        return await self._db.run("create webhook", insert), secret

    async def list(self, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
        return await rows.list_page(self._db, tenant_id, page)

    async def get(self, tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> tuple[dict, str]:
        row = await rows.get(self._db, tenant_id, webhook_id)
        if row is None:
            raise NotFound("Webhook")
        return row, self.secret_of(webhook_id, row["secret"])

    async def update(self, tenant_id: uuid.UUID, webhook_id: uuid.UUID, change: WebhookChange) -> dict:
        if change.endpoint is not None:
            await self._check_endpoint(change.endpoint)
        changes = {
            column: value
            for column, value in (
                ("endpoint", change.endpoint),
                ("events", list(change.events) if change.events is not None else None),
                ("status", change.status),
            )
            if value is not None
        }
        now = timefmt.from_seconds(self._clock.seconds())

        async def apply(txn: Transaction) -> dict | None:
            row = await rows.update(txn, tenant_id, webhook_id, changes, now)
            if row is not None and row["status"] == "disabled":
                await rows.drop_pending(txn, webhook_id)
            return row

        row = await self._db.run("update webhook", apply)
        if row is None:
            raise NotFound("Webhook")
        return row

    async def delete(self, tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> None:
        if not await rows.delete(self._db, tenant_id, webhook_id):
            raise NotFound("Webhook")

    async def rotate(self, tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> str:
        secret = signing.new_secret()
        sealed = self._vault.seal(secret.encode("ascii"), secret_bound_to(webhook_id))
        now = self._clock.seconds()

        async def apply(txn: Transaction) -> dict | None:
            return await rows.rotate(
                txn, tenant_id, webhook_id, sealed,
                timefmt.from_seconds(now + ROTATION_OVERLAP_SECONDS), timefmt.from_seconds(now),
            )

        if await self._db.run("rotate webhook secret", apply) is None:
            raise NotFound("Webhook")
        return secret
