"""
A delivery step's statements: the leases renewed before DATA share statements (each caller
told about its own rows), and a claim reads what its rows send in the statement that writes
it. Mail is accepted through the API (whose worker is not running); the queue is driven by
hand on a Clock."""

import time
import uuid

import pytest_twisted as pt
from twisted.internet import defer
from twisted.internet.task import Clock

from mailsvc.store import deliveries as store
from tests.helpers.sending import BODY, sending_tenant


async def queued(api, count: int) -> str:
    tenant, key, _ = await sending_tenant(api)
    await api.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", api.operator_token,
                   json={"send_rate_per_sec": 1000, "daily_quota": 100000})
    code, sent, _ = await api.json("POST", "/emails", key, json={
        **BODY, "to": [f"r{i}@example.net" for i in range(count)]})
    assert code == 200
    return sent["id"]


class Counted:
    """The database, its statements outside transactions counted."""

    def __init__(self, db):
        self._db = db
        self.statements = 0

    async def fetchall(self, *args, **kwargs):
        self.statements += 1
        return await self._db.fetchall(*args, **kwargs)


@pt.ensureDeferred
async def test_renewals_waiting_for_a_statement_share_the_next_and_each_hears_of_its_own_rows(api):
    await queued(api, 5)
    clock = Clock()
    clock.advance(time.time() + 1)
    token = uuid.uuid4()
    claimed = await store.claim(api.parts.db, clock, "node-a", token, 100, 60)
    ids = [w.id for w in claimed.work]
    db = Counted(api.parts.db)
    renewals = store.Renewals(db, clock, 600)
    clock.advance(10)
    # Two statements run at once; the three renewals behind them share the third.
    asks = [([ids[0]], token), ([ids[1]], token), ([ids[2]], token), ([ids[3]], uuid.uuid4()), ([ids[4]], token)]
    held = await defer.gatherResults([defer.ensureDeferred(renewals.renew(i, t)) for i, t in asks])
    assert held == [True, True, True, False, True]
    assert db.statements == 3
    rows = await api.parts.db.fetchall(
        "SELECT id, extract(epoch FROM claimed_until) AS until FROM deliveries WHERE id = ANY(%s::uuid[])", (ids,))
    until = {r["id"]: float(r["until"]) for r in rows}
    assert [round(until[i] - clock.seconds()) for i in ids] == [600, 600, 600, 50, 600]


@pt.ensureDeferred
async def test_a_claim_returns_what_its_rows_send(api):
    email_id = await queued(api, 3)
    clock = Clock()
    clock.advance(time.time() + 1)
    claimed = await store.claim(api.parts.db, clock, "node-a", uuid.uuid4(), 100, 60)
    assert len(claimed.work) == 3
    contents = claimed.contents
    (email,) = contents.emails.values()
    assert str(email.id) == email_id and email.subject == BODY["subject"]
    (keys,) = contents.keys.values()  # the sending domain's, once however many e-mails it signs
    assert {k.algorithm for k in keys} == {"rsa-sha256", "ed25519-sha256"}
    assert contents.own == {} and contents.broadcasts == {}
