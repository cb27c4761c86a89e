"""
Idempotency keys (docs/contract/main-api.md, "Sending", rule 5): the first request with a key claims it in
a committed row (so a concurrent twin sees the claim), its outcome is stored in the same
transaction as the emails it created, and later requests with the key get that outcome back
for 24 hours. A claim whose request died is taken over once its lease ran out; the claim
carries a token, so the request that lost it can neither store nor release anything.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timedelta

import attrs

from mailsvc import timefmt
from mailsvc.domain.errors import (
    IdempotencyClaimLost,
    IdempotencyKeyInFlight,
    IdempotencyKeyInvalid,
    IdempotencyKeyReused,
)
from mailsvc.store import idempotency as rows
from mailsvc.store.database import Database, Transaction

MAX_KEY_LENGTH = 256
REPLAY_WINDOW = timedelta(hours=24)
CLAIM_LEASE = timedelta(seconds=90)


@attrs.frozen
class IdempotencyKey:
    """A key as a request presents it, and the digest of what that request asks."""

    key: str
    request_hash: bytes


@attrs.frozen
class Claim:
    tenant_id: uuid.UUID
    key: str
    #: The claim's ``locked_until``: it holds while the row still has it.
    token: datetime


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

    async def claim(self, tenant_id: uuid.UUID, asked: IdempotencyKey) -> Claim | Replay:
        """Claim the key for this request, or return the stored outcome to replay."""
        key = check_key(asked.key)
        now = timefmt.from_seconds(self._clock.seconds())
        token = await rows.claim(self._db, tenant_id, key, asked.request_hash, now, now + CLAIM_LEASE,
                                 now + REPLAY_WINDOW)
        if token is not None:
            return Claim(tenant_id, key, token)
        existing = await rows.get(self._db, tenant_id, key)
        if existing is None:  # expired and removed in between: try once more
            return await self.claim(tenant_id, asked)
        if bytes(existing["request_hash"]) != asked.request_hash:
            raise IdempotencyKeyReused(
                "This idempotency key has already been used on a request with a different body. "
                "Retry with a new key."
            )
        if existing["state"] == "pending":
            raise IdempotencyKeyInFlight("A request with this idempotency key is still being processed.")
        return Replay(existing["status"], bytes(existing["response"]))

    async def complete(self, txn: Transaction | Database, claim: Claim, status: int, body: bytes) -> None:
        """Store an outcome that created no email (a refusal, an empty batch)."""
        if not await rows.complete(txn, claim.tenant_id, claim.key, claim.token, status, body):
            raise IdempotencyClaimLost()

    async def release(self, claim: Claim) -> None:
        """Forget a claim whose request failed in a way a client may retry (5xx, 429)."""
        await rows.release(self._db, claim.tenant_id, claim.key, claim.token)

