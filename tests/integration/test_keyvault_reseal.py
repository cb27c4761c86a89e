"""
Each start seals every stored secret again under the current master key (the seals
themselves: tests/unit/test_keyvault.py).
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime

import pytest_twisted as pt
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from twisted.internet import task

from mailsvc.app.resealing import reseal
from mailsvc.app.webhooks import WebhookRegistry, secret_bound_to
from mailsvc.crypto import credentials
from mailsvc.crypto.keyvault import NONCE_BYTES
from mailsvc.domain.webhooks import new_webhook
from mailsvc.outside.addresses import PublicAddresses
from mailsvc.store import domains as domain_rows
from tests.helpers.tenants import new_tenant

OLD, NEW = b"o" * 32, b"n" * 32


def _legacy(key: bytes, plaintext: bytes, bound_to: bytes, nonce: bytes | None = None) -> bytes:
    """A value as sealed before key ids: nonce || ciphertext."""
    nonce = nonce or os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, bound_to)


@pt.ensureDeferred
async def test_a_start_reseals_every_stored_secret_under_the_current_key(db):
    clock = task.Clock()
    tenant = await new_tenant(clock, db)
    addresses = PublicAddresses(clock, None, allow_private=True)
    before = credentials.vault(OLD, (), "webhook-secrets")
    webhook, secret = await WebhookRegistry(clock, db, addresses, before).create(
        tenant.id, new_webhook({"endpoint": "https://127.0.0.1/hook", "events": ["domain.updated"]})
    )
    previous = _legacy(credentials.derive(OLD, "webhook-secrets"), b"whsec_old", secret_bound_to(webhook["id"]))
    await db.execute("UPDATE webhooks SET previous_secret = %s WHERE id = %s", (previous, webhook["id"]))
    domain_id, dkim_id, now = uuid.uuid4(), uuid.uuid4(), datetime.now(UTC)
    dkim_sealed = _legacy(credentials.derive(OLD, "dkim-keys"), b"private der", dkim_id.bytes)

    async def write(txn):
        await domain_rows.insert_domain(txn, domain_id, tenant.id, "example.com", "bounces", "opportunistic",
                                        "local", now)
        await domain_rows.insert_key(txn, dkim_id, domain_id, "sel", "ed25519-sha256", "pk", dkim_sealed, now)

    await db.run("domain", write)

    webhook_vault = credentials.vault(NEW, (OLD,), "webhook-secrets")
    dkim_vault = credentials.vault(NEW, (OLD,), "dkim-keys")
    assert await reseal(db, webhook_vault, dkim_vault) == 3
    assert await reseal(db, webhook_vault, dkim_vault) == 0

    # The old key can go: everything opens under the new one alone.
    stored = await db.fetchone("SELECT secret, previous_secret FROM webhooks WHERE id = %s", (webhook["id"],))
    dkim = await db.fetchone("SELECT private_key FROM dkim_keys WHERE id = %s", (dkim_id,))
    webhooks_now, dkim_now = (credentials.vault(NEW, (), purpose) for purpose in ("webhook-secrets", "dkim-keys"))
    bound = secret_bound_to(webhook["id"])
    assert webhooks_now.open(stored["secret"], bound).decode() == secret
    assert webhooks_now.open(stored["previous_secret"], bound) == b"whsec_old"
    assert dkim_now.open(dkim["private_key"], dkim_id.bytes) == b"private der"
