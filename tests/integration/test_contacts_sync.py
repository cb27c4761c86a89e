"""
A contact's ``unsubscribed`` and the suppression list move together, whichever side is
written: a PATCH of the contact, the suppressions API (one and batch, add and remove), the
public one-click unsubscribe link (RFC 8058 POST), and the MTA's hard bounces (DSN) and
complaints (ARF) received on the real return-path listener. Each change of a contact's
``unsubscribed`` made from the list side records one ``contact.updated``.
"""

import pytest_twisted as pt
from twisted.internet import reactor

from mailsvc.app import suppressions
from mailsvc.store import suppressions as suppression_rows
from tests.helpers.returns import delivered, port, sample, submit  # noqa: F401 (port: a fixture)
from tests.helpers.sending import sending_tenant
from tests.helpers.unsubscribe import BROADCAST, deliveries, link_of, parse, path_of


async def _contact(api, key, key_or_email: str) -> dict:
    code, got, _ = await api.json("GET", f"/contacts/{key_or_email}", key)
    assert code == 200, got
    return got


async def _record(api, key, address: str) -> dict | None:
    code, record, _ = await api.json("GET", f"/suppressions/{address}", key)
    return record if code == 200 else None


async def _updates(api, contact_id: str) -> list[dict]:
    rows = await api.parts.db.fetchall(
        "SELECT data FROM events WHERE type = 'contact.updated' AND data->>'id' = %s ORDER BY id", (contact_id,))
    return [row["data"] for row in rows]


@pt.ensureDeferred
async def test_patching_unsubscribed_writes_the_suppression_list(api):
    _, key = await api.tenant()
    code, created, _ = await api.json("POST", "/contacts", key, json={"email": "Ann@Example.com"})
    assert code == 201
    assert (await _contact(api, key, "ann@example.com"))["unsubscribed"] is False

    code, _, _ = await api.json("PATCH", "/contacts/ann@example.com", key, json={"unsubscribed": True})
    assert code == 200
    record = await _record(api, key, "ann@example.com")
    assert record["origin"] == "unsubscribe" and record["source_id"] is None
    assert (await _contact(api, key, created["id"]))["unsubscribed"] is True
    assert [e["unsubscribed"] for e in await _updates(api, created["id"])] == [True]

    code, _, _ = await api.json("PATCH", "/contacts/ann@example.com", key, json={"unsubscribed": False})
    assert code == 200
    assert await _record(api, key, "ann@example.com") is None
    assert (await _contact(api, key, created["id"]))["unsubscribed"] is False
    assert [e["unsubscribed"] for e in await _updates(api, created["id"])] == [True, False]

    # A hard bounce or a complaint is evidence: a contact's `false` does not lift it.
    tenant_id = (await api.parts.db.fetchone(
        "SELECT tenant_id FROM contacts WHERE id = %s", (created["id"],)))["tenant_id"]
    await api.parts.db.run("bounce", suppressions.add, reactor, tenant_id, "ann@example.com", "hard_bounce")
    assert (await _contact(api, key, created["id"]))["unsubscribed"] is True
    code, refused, _ = await api.json("PATCH", "/contacts/ann@example.com", key,
                                      json={"unsubscribed": False, "first_name": "Ann"})
    assert (code, refused["name"]) == (422, "validation_error") and refused["message"].startswith("unsubscribed")
    assert (await _contact(api, key, created["id"]))["first_name"] == ""  # nothing of it was written
    assert (await _record(api, key, "ann@example.com"))["origin"] == "hard_bounce"


@pt.ensureDeferred
async def test_the_suppressions_api_moves_the_contact(api):
    _, key = await api.tenant()
    # Suppressed before the contact exists: the contact reads unsubscribed, and a create with
    # `unsubscribed: false` does not lift it.
    await api.json("POST", "/suppressions", key, json={"email": "bob@example.com"})
    code, bob, _ = await api.json("POST", "/contacts", key, json={"email": "bob@example.com", "unsubscribed": False})
    assert code == 201
    assert (await _contact(api, key, bob["id"]))["unsubscribed"] is True
    code, listed, _ = await api.json("GET", "/contacts", key)
    assert listed["data"][0]["unsubscribed"] is True

    code, ann, _ = await api.json("POST", "/contacts", key, json={"email": "ann@example.com"})
    await api.json("POST", "/suppressions", key, json={"email": "ANN@example.com"})
    assert (await _contact(api, key, ann["id"]))["unsubscribed"] is True
    # Adding it again changes nothing: no second event.
    await api.json("POST", "/suppressions/batch/add", key, json={"emails": ["ann@example.com", "zed@example.com"]})
    assert [e["unsubscribed"] for e in await _updates(api, ann["id"])] == [True]

    code, _, _ = await api.json("DELETE", "/suppressions/ann@example.com", key)
    assert code == 200
    assert (await _contact(api, key, ann["id"]))["unsubscribed"] is False
    code, _, _ = await api.json("POST", "/suppressions/batch/remove", key, json={"emails": ["bob@example.com"]})
    assert code == 200
    assert (await _contact(api, key, bob["id"]))["unsubscribed"] is False
    assert [e["unsubscribed"] for e in await _updates(api, ann["id"])] == [True, False]
    assert [e["unsubscribed"] for e in await _updates(api, bob["id"])] == [False]
    # Deleting a contact leaves its suppression record.
    await api.json("PATCH", f"/contacts/{ann['id']}", key, json={"unsubscribed": True})
    await api.json("DELETE", f"/contacts/{ann['id']}", key)
    assert (await _record(api, key, "ann@example.com"))["origin"] == "unsubscribe"


@pt.ensureDeferred
async def test_a_one_click_unsubscribe_unsubscribes_the_contact(api):
    _, key, _ = await sending_tenant(api)
    code, ann, _ = await api.json("POST", "/contacts", key, json={"email": "ann@example.com", "first_name": "Ann"})
    _, sent, _ = await api.json("POST", "/emails", key, json=BROADCAST)
    path = path_of(api, link_of(parse((await deliveries(api, sent["id"]))["ann@example.com"])))
    response, _ = await api.request(
        "POST", path, data=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.code == 200
    assert (await _contact(api, key, "ann@example.com"))["unsubscribed"] is True
    (event,) = await _updates(api, ann["id"])
    assert event == {**event, "id": ann["id"], "email": "ann@example.com", "first_name": "Ann", "unsubscribed": True}
    # Once more: already on the list, nothing changes.
    await api.request("POST", path)
    assert len(await _updates(api, ann["id"])) == 1


@pt.ensureDeferred
async def test_a_hard_bounce_and_a_complaint_unsubscribe_the_contact(mta, port):  # noqa: F811 (fixture)
    _, key = await mta.sender()
    for address in ("nobody@example.net", "reader@example.net"):
        code, _, _ = await mta.json("POST", "/contacts", key, json={"email": address})
        assert code == 201
    email_id, return_path = await delivered(mta, key, ["nobody@example.net"])
    dsn = sample("postfix_hard_511.eml", **{
        "b-agaz4pqxjbdmtmgqz3h7k2wvnm-q7xk2mfa@bounces.acme.example": return_path,
        "nobody@example.org": "nobody@example.net"})
    assert await submit(port, "", [return_path], dsn) == {}
    bounced = await _contact(mta, key, "nobody@example.net")
    assert bounced["unsubscribed"] is True
    assert [e["unsubscribed"] for e in await _updates(mta, bounced["id"])] == [True]

    await mta.send(key, ["reader@example.net"])
    await mta.sink.wait_for(2)
    await mta.settled()
    return_path = mta.sink.messages[-1].mail_from
    arf = sample("yahoo_arf.eml", **{
        "b-agaz4pqxjbdmtmgqz3h7k2wvnm-q7xk2mfa@bounces.acme.example": return_path,
        "reader@yahoo.com": "reader@example.net", "fbl@bounces.acme.example": "fbl@bounces.acme.example.com"})
    await submit(port, "feedback@arf.mail.yahoo.com", ["fbl@bounces.acme.example.com"], arf)
    complained = await _contact(mta, key, "reader@example.net")
    assert complained["unsubscribed"] is True
    assert (await _record(mta, key, "reader@example.net"))["origin"] == "complaint"
    code, refused, _ = await mta.json("PATCH", "/contacts/reader@example.net", key, json={"unsubscribed": False})
    assert code == 422


@pt.ensureDeferred
async def test_contacts_follow_the_list_by_the_use_case_not_the_rows(api):
    _, key = await api.tenant()
    code, created, _ = await api.json("POST", "/contacts", key, json={"email": "ann@example.com"})
    assert code == 201
    tenant_id = (await api.parts.db.fetchone(
        "SELECT tenant_id FROM contacts WHERE id = %s", (created["id"],)))["tenant_id"]
    # The rows alone are the list's: the contacts' own writes record their events themselves.
    row = await api.parts.db.run("rows", suppression_rows.add, reactor, tenant_id, "ann@example.com", "manual")
    assert await _updates(api, created["id"]) == []
    await api.parts.db.run("rows", suppression_rows.delete, tenant_id, row["id"])
    assert await _updates(api, created["id"]) == []

    await api.parts.db.run("add", suppressions.add_many, reactor, tenant_id, ["Ann@Example.com"], "hard_bounce")
    assert [e["unsubscribed"] for e in await _updates(api, created["id"])] == [True]
    await suppressions.remove(api.parts.db, tenant_id, "ann@example.com", clock=reactor)
    assert [e["unsubscribed"] for e in await _updates(api, created["id"])] == [True, False]
