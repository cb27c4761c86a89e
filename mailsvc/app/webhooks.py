"""
Managing webhooks: endpoints are checked where they point before they are stored, signing
secrets are stored sealed and shown again on retrieve, a rotation keeps the previous secret
signing for a day, and disabling a webhook drops what was queued for it; the dashboard's
"retry now" of one delivery (``DeliveryRetries``).
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from mailsvc import timefmt
from mailsvc.app.audit import AuditLog
from mailsvc.app.throttle import Limit, Throttle
from mailsvc.crypto import webhook_signatures as signing
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.domain.errors import Conflict, Invalid, NotAllowed, NotFound, RateLimited
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
#: Opened signing keys a registry keeps (each delivery is signed; opening a sealed secret for
#: each cost the dispatcher a decryption and a base64 decoding per request).
KEYS_KEPT = 1000


def secret_bound_to(webhook_id: uuid.UUID) -> bytes:
    """What a webhook's sealed secrets are bound to (see ``KeyVault``)."""
    return b"webhook-secret:" + webhook_id.bytes


class WebhookRegistry:
    def __init__(self, clock, db: Database, addresses: PublicAddresses, vault: KeyVault):
        self._clock = clock
        self._db = db
        self._addresses = addresses
        self._vault = vault
        #: (webhook id, sealed secret) -> its MAC key: a rotation seals a new secret, so a key
        #: is never out of date, only no longer asked for.
        self._keys: dict[tuple[uuid.UUID, bytes], bytes] = {}

    def secret_of(self, webhook_id: uuid.UUID, sealed: bytes) -> str:
        return self._vault.open(sealed, secret_bound_to(webhook_id)).decode("ascii")

    def signing_keys(self, row: dict, now: float) -> list[bytes]:
        """The MAC keys a delivery is signed with now: the secret, and a rotated-out one
        during its overlap."""
        keys = [self._key_of(row["webhook_id"], row["secret"])]
        until = row["previous_secret_until"]
        if row["previous_secret"] is not None and until is not None and until.timestamp() > now:
            keys.append(self._key_of(row["webhook_id"], row["previous_secret"]))
        return keys

    def _key_of(self, webhook_id: uuid.UUID, sealed: bytes) -> bytes:
        found = (webhook_id, bytes(sealed))  # a bytea column reads as a memoryview
        key = self._keys.get(found)
        if key is None:
            if len(self._keys) >= KEYS_KEPT:
                self._keys.clear()
            key = self._keys[found] = signing.secret_key(self.secret_of(webhook_id, sealed))
        return key

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


#: "Retry now"s one account may ask for in an hour (a burst of them, then one every
#: 3600 / n seconds): each is a request this service sends out at once, whatever the schedule.
RETRIES_PER_HOUR = 20
#: The audit log's action of a "retry now".
RETRY_ACTION = "webhook_delivery.retry"


class DeliveryRetries:
    """
    "Retry now" of one webhook delivery, from the dashboard only (docs/decisions.md, "Webhook
    attempts"): a pending or failed delivery of an enabled webhook is made due at once, and the
    dispatcher sends it as any attempt (the same ``webhook-id`` and body, a new timestamp and
    signature). Capped per account in the shared throttle (``mailsvc.app.throttle``), counted
    only when a delivery was made due; each retry is an entry in the audit log (who, which
    webhook, which event), written in its transaction.
    """

    def __init__(self, clock, db: Database, throttle: Throttle, audit_log: AuditLog,
                 per_hour: int = RETRIES_PER_HOUR):
        self._clock = clock
        self._db = db
        self._throttle = throttle
        self._audit_log = audit_log
        self._per_hour = per_hour

    def _limits(self, tenant_id: uuid.UUID) -> dict[str, Limit]:
        return {f"webhook-retry:{tenant_id}": Limit(self._per_hour, 3600 / self._per_hour)}

    async def retry_now(self, tenant_id: uuid.UUID, webhook_id: uuid.UUID, event_id: uuid.UUID,
                        actor: str) -> dict:
        """The delivery made due now (``state``, ``attempts`` made so far, ``due_at``)."""
        limits = self._limits(tenant_id)
        wait = await self._throttle.reserve(limits)
        if wait is not None:
            raise RateLimited(
                f"An account may retry at most {self._per_hour} webhook deliveries an hour; try again in {wait} s.",
                wait,
            )
        now = self._clock.seconds()

        async def apply(txn: Transaction) -> dict:
            hook, delivery = await rows.retry_now(txn, tenant_id, webhook_id, event_id, timefmt.from_seconds(now))
            if hook is None:
                raise NotFound("Webhook")
            if hook["status"] != "enabled":
                raise Conflict("The webhook is disabled: it receives nothing, so its deliveries are not retried."
                               " Enable it first.")
            if delivery is None:
                raise NotFound("Webhook delivery")
            if not delivery["retried"]:
                if delivery["state"] == "delivered":
                    raise Conflict("This delivery was delivered already; only a pending or failed one is retried.")
                raise Conflict("An attempt of this delivery is being made now; wait for its outcome.")
            await self._audit_log.write_in(txn, now, actor, RETRY_ACTION, None, None, {
                "tenant_id": str(tenant_id), "webhook_id": str(webhook_id), "event_id": str(event_id),
                "was": delivery["state"], "attempts": delivery["attempts"],
            })
            return {"state": "pending", "attempts": delivery["attempts"], "due_at": timefmt.from_seconds(now)}

        try:
            return await self._db.run("retry webhook delivery", apply)
        except Exception:
            await self._throttle.give_back(limits)  # nothing was made due
            raise
