"""
Sealing every stored secret again under the current master key, after a rotation: run at each
start (a few rows per account: webhook secrets and DKIM private keys), so that once every node
has started with the new key, the old one can be dropped from ``security.old_master_keys``.
"""

from __future__ import annotations

import uuid

from twisted.logger import Logger

from mailsvc.app.webhooks import secret_bound_to
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.store import sealed
from mailsvc.store.database import Database

log = Logger()

BATCH = 500


async def reseal(db: Database, webhook_secrets: KeyVault, dkim_keys: KeyVault) -> int:
    """Seal again every value not sealed under the current key; returns how many were."""
    columns = [
        (sealed.WEBHOOK_SECRET, webhook_secrets, secret_bound_to),
        (sealed.WEBHOOK_PREVIOUS_SECRET, webhook_secrets, secret_bound_to),
        # As app.domains.SigningKeys seals them: bound to the key's id.
        (sealed.DKIM_PRIVATE_KEY, dkim_keys, lambda key_id: key_id.bytes),
    ]
    done = 0
    for column, vault, bound_to in columns:
        skipped: set[uuid.UUID] = set()
        while True:
            rows = await sealed.not_starting_with(db, column, vault.current_header, BATCH + len(skipped))
            rows = [row for row in rows if row["id"] not in skipped]
            if not rows:
                break
            for row in rows:
                old = bytes(row["sealed"])
                try:
                    plaintext = vault.open(old, bound_to(row["id"]))
                except Exception as e:
                    log.error("cannot open {table}.{name} of {id}: {error}", table=column[0], name=column[1],
                              id=row["id"], error=e)
                    skipped.add(row["id"])
                    continue
                if await sealed.replace(db, column, row["id"], old, vault.seal(plaintext, bound_to(row["id"]))):
                    done += 1
                else:
                    skipped.add(row["id"])  # changed meanwhile, by then under the current key
    if done:
        log.info("sealed {n} stored secrets again under the current master key", n=done)
    return done
