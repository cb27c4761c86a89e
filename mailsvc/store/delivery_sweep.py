"""
The delivery queue's sweep, what the claim leaves to it (docs/decisions.md, "A fair claim"): a
suspended account's queue failed in bulk, and a held account's new mail held, a chunk per
transaction (the delivery policy, ``domain/policy.py``, says which accounts; this carries it out).
"""

from __future__ import annotations

import uuid

from mailsvc import timefmt
from mailsvc.domain.delivery import ACCOUNT_SUSPENDED, LAST_EVENT_ORDER
from mailsvc.ids import uuid7
from mailsvc.store import events
from mailsvc.store.database import Database, Transaction

#: Rows a suspended account's queue fails in (or a held account's new mail is held in), each
#: chunk a transaction of its own, taken in the order of the claim's index (``bulk, due_at``:
#: ``deliveries_tenant_stream_due``), so that a chunk is a range of it, not a sort of the queue.
SWEEP_CHUNK = 2000


async def hold_held_accounts(db: Database, clock, chunk: int = SWEEP_CHUNK) -> int:
    """
    The mail queued for an account under a standing hold since the hold was made, held as the
    operator's hold holds it (``held_reason``, out of the claim's index, no event), a chunk at
    a time; rows in flight are left to their attempts. How many were held.
    """
    holds = await db.fetchall("SELECT value, reason FROM queue_holds WHERE kind = 'tenant'", desc="account holds")
    held = 0
    for hold in holds:
        while True:
            rows = await db.fetchall(
                "UPDATE deliveries SET held_reason = %(reason)s, due_at = NULL WHERE id IN ("
                " SELECT d.id FROM deliveries d WHERE d.tenant_id = %(tenant)s::uuid"
                " AND d.status IN ('queued', 'deferred') AND d.held_reason IS NULL"
                " AND (d.claim IS NULL OR d.due_at <= %(at)s)"
                " ORDER BY d.bulk, d.due_at LIMIT %(chunk)s FOR UPDATE SKIP LOCKED) RETURNING id",
                {"reason": hold["reason"], "tenant": hold["value"], "chunk": chunk,
                 "at": timefmt.from_seconds(clock.seconds())},
                desc="hold a held account's mail",
            )
            held += len(rows)
            if len(rows) < chunk:
                break
    return held


async def fail_suspended(db: Database, clock, chunk: int = SWEEP_CHUNK) -> int:
    """
    Every suspended account's queue (but the rows in flight, whose attempts decide them, and the
    rows an operator holds) failed with ``account_suspended``, one statement and one transaction
    per chunk (``_FAIL_SUSPENDED_CHUNK``); how many failed.
    """
    suspended = await db.fetchall(
        "SELECT t.id FROM tenants t WHERE t.status = 'suspended' AND EXISTS (SELECT 1 FROM deliveries d"
        " WHERE d.tenant_id = t.id AND d.status IN ('queued', 'deferred') AND d.held_reason IS NULL)",
        desc="suspended accounts with queued mail",
    )
    failed = 0
    for row in suspended:
        while True:
            done = await db.run("fail_suspended_mail", _fail_suspended_chunk, clock, row["id"], chunk)
            failed += done
            if done < chunk:
                break
    return failed


#: One chunk of a suspended account's queue failed in one statement, written as ``_write`` writes
#: a failure that no attempt made (``attempted`` false, no claim): the rows ``failed`` with the
#: response ``account suspended`` and no attempt counted, an ``email.failed`` event each (ids in
#: delivery id order, as ``_write`` gives them; the outbox the webhooks are sent from), the
#: e-mails' ``last_event`` moved forward to ``failed``. Rows another transaction holds (a claim
#: writing its outcome) are skipped; rows in flight are left to their attempts.
_FAIL_SUSPENDED_CHUNK = (
    "WITH chosen AS ("
    "   SELECT d.id FROM deliveries d JOIN tenants t ON t.id = d.tenant_id AND t.status = 'suspended'"
    "   WHERE d.tenant_id = %(tenant)s AND d.status IN ('queued', 'deferred') AND d.held_reason IS NULL"
    "   AND (d.claim IS NULL OR d.due_at <= %(at)s)"
    "   ORDER BY d.bulk, d.due_at LIMIT %(chunk)s FOR UPDATE OF d SKIP LOCKED"
    " ), failed AS ("
    "   UPDATE deliveries d SET status = 'failed', due_at = NULL, claim = NULL, claimed_by = NULL,"
    "   claimed_until = NULL, last_response = %(response)s, updated_at = %(at)s"
    "   FROM chosen WHERE d.id = chosen.id RETURNING d.id, d.email_id, d.tenant_id, d.recipient"
    " ), numbered AS ("
    "   SELECT f.*, row_number() OVER (ORDER BY f.id) AS n FROM failed f"
    " ), recorded AS ("
    "   INSERT INTO events (id, tenant_id, type, data, created_at)"
    "   SELECT (%(ids)s::uuid[])[n], tenant_id, 'email.failed', jsonb_build_object("
    "     'email_id', email_id::text, 'delivery_id', id::text, 'created_at', %(created_at)s::text,"
    "     'to', jsonb_build_array(recipient), 'recipient', recipient, 'reason', %(reason)s::text), %(at)s"
    "   FROM numbered"
    " ), advanced AS ("
    "   UPDATE emails e SET last_event = 'failed' FROM (SELECT DISTINCT email_id FROM failed) f"
    "   WHERE e.id = f.email_id"
    "   AND array_position(%(order)s::text[], e.last_event) < array_position(%(order)s::text[], 'failed')"
    " )"
    " SELECT count(*) AS failed FROM failed"
)


async def _fail_suspended_chunk(txn: Transaction, clock, tenant_id: uuid.UUID, chunk: int) -> int:
    now = clock.seconds()
    at = timefmt.from_seconds(now)
    row = await txn.fetchrow(_FAIL_SUSPENDED_CHUNK, {
        "tenant": tenant_id, "at": at, "chunk": chunk, "response": "account suspended",
        "ids": [uuid7(now) for _ in range(chunk)], "created_at": timefmt.iso(at), "reason": ACCOUNT_SUSPENDED,
        "order": list(LAST_EVENT_ORDER),
    })
    if row["failed"]:
        txn.notify(events.CHANNEL)
    return row["failed"]
