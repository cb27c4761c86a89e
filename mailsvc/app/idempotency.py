"""
Idempotency keys (SPEC send rule 5, COMPAT.md §1): the first request with a key claims it in
a committed row (so a concurrent twin sees the claim), its outcome is stored in the same
transaction as the emails it created, and later requests with the key get that outcome back
for 24 hours. A claim whose request died is taken over once its lease ran out.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta

import attrs

from mailsvc import timefmt
from mailsvc.domain.errors import IdempotencyKeyInFlight, IdempotencyKeyInvalid, IdempotencyKeyReused
from mailsvc.store.database import Database, Transaction

MAX_KEY_LENGTH = 256
REPLAY_WINDOW = timedelta(hours=24)
CLAIM_LEASE = timedelta(seconds=90)








@attrs.frozen
class Claim:
    tenant_id: uuid.UUID
    key: str


@attrs.frozen
class Replay:
    status: int
    body: bytes


def request_hash(scope: str, body: object) -> bytes:
    """A digest of what was asked: the endpoint and the canonical JSON of its body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{scope}\n{canonical}".encode()).digest()


def check_key(key: str) -> str:
    if not key or len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyInvalid("Idempotency-Key must be between 1 and 256 characters")
    return key


class IdempotencyKeys:
    def __init__(self, clock, db: Database):
        self._clock = clock
        self._db = db

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    async def claim(self, tenant_id: uuid.UUID, key: str, digest: bytes) -> Claim | Replay:
        """Claim ``key`` for this request, or return the stored outcome to replay."""
        check_key(key)
        now = self._now()
        row = await self._db.fetchone(
            "INSERT INTO idempotency_keys AS k (tenant_id, key, request_hash, state, locked_until, expires_at)"
            " VALUES (%(t)s, %(k)s, %(h)s, 'pending', %(lock)s, %(exp)s)"
            " ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = %(h)s, state = 'pending',"
            "   status = NULL, response = NULL, locked_until = %(lock)s, expires_at = %(exp)s"
            " WHERE k.expires_at <= %(now)s"
            "    OR (k.state = 'pending' AND k.locked_until <= %(now)s AND k.request_hash = %(h)s)"
            " RETURNING state",
            {"t": tenant_id, "k": key, "h": digest, "now": now,
             "lock": now + CLAIM_LEASE, "exp": now + REPLAY_WINDOW},
            desc="claim_idempotency_key",
        )
        if row is not None:
            return Claim(tenant_id, key)
        existing = await self._db.fetchone(
            "SELECT request_hash, state, status, response FROM idempotency_keys"
            " WHERE tenant_id = %s AND key = %s",
            (tenant_id, key),
        )
        if existing is None:  # expired and removed in between: try once more
            return await self.claim(tenant_id, key, digest)
        if bytes(existing["request_hash"]) != digest:
            raise IdempotencyKeyReused(
                "This idempotency key has already been used on a request with a different body. "
                "Retry with a new key."
            )
        if existing["state"] == "pending":
            raise IdempotencyKeyInFlight("A request with this idempotency key is still being processed.")
        return Replay(existing["status"], bytes(existing["response"]))

    async def complete(self, txn: Transaction | Database, claim: Claim, status: int, body: bytes) -> None:
        """Store the outcome (inside the accepting transaction when emails were created)."""
        await txn.execute(
            "UPDATE idempotency_keys SET state = 'done', status = %s, response = %s, locked_until = NULL"
            " WHERE tenant_id = %s AND key = %s",
            (status, body, claim.tenant_id, claim.key),
        )

    async def release(self, claim: Claim) -> None:
        """Forget a claim whose request failed with a server error (5xx is never stored)."""
        await self._db.execute(
            "DELETE FROM idempotency_keys WHERE tenant_id = %s AND key = %s AND state = 'pending'",
            (claim.tenant_id, claim.key),
        )
