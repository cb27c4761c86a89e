"""contact.created, contact.updated and contact.deleted leave through the outbox and arrive at a
real HTTPS receiver signed like every other event, verified with ``svix`` and the Resend SDK."""

import json
import re

import pytest_twisted as pt
import resend
import svix.webhooks

from mailsvc.app import suppressions
from mailsvc.app.contacts import Contacts

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pt.ensureDeferred
async def test_contact_events_are_delivered_signed(rig):  # noqa: F811 (fixture)
    node = rig.node()
    _, secret = await rig.webhook(node, ("contact.created", "contact.updated", "contact.deleted"))
    contacts = Contacts(rig.clock, rig.db)
    contact_id = await contacts.create(rig.tenant_id, {"email": "Ann@Example.com", "first_name": "Ann"})
    await contacts.update(rig.tenant_id, "ann@example.com", {"last_name": "Lee"})
    # A bounce suppresses the address: the contact is unsubscribed, and hears of it.
    await rig.db.run("bounce", suppressions.add, rig.clock, rig.tenant_id, "ann@example.com", "hard_bounce")
    await contacts.delete(rig.tenant_id, str(contact_id))
    await node.run()

    documents = []
    for request in sorted(rig.received, key=lambda r: r.headers["webhook-id"]):
        headers = {k: v for k, v in request.headers.items() if k.startswith("svix-")}
        svix.webhooks.Webhook(secret).verify(request.body, headers)  # raises unless signed with the secret
        documents.append(json.loads(request.body))
        resend.Webhooks.verify({
            "payload": request.body.decode(), "webhook_secret": secret,
            "headers": {"id": request.headers["svix-id"], "timestamp": request.headers["svix-timestamp"],
                        "signature": request.headers["svix-signature"]}})
    assert [d["type"] for d in documents] == ["contact.created", "contact.updated", "contact.updated",
                                              "contact.deleted"]
    for document in documents:
        data = document["data"]
        assert set(data) == {"id", "email", "first_name", "last_name", "unsubscribed", "created_at", "updated_at"}
        assert data["id"] == str(contact_id) and data["email"] == "ann@example.com"
        assert ISO.match(data["created_at"]) and ISO.match(data["updated_at"])
    assert [(d["data"]["last_name"], d["data"]["unsubscribed"]) for d in documents] == [
        ("", False), ("Lee", False), ("Lee", True), ("Lee", True)]
