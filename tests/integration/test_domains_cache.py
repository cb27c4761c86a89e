"""A node's cache of verified sending domains: a few seconds, forgotten at once where changed."""

import uuid

import pytest_twisted as pt
from twisted.internet import task

from mailsvc.app import domains as domains_module

BODY = {"from": "Acme <news@acme.example.com>", "to": ["ann@example.com"], "subject": "Hello", "html": "<p>Hi</p>"}


async def _verified(api, key, name="acme.example.com") -> str:
    code, created, _ = await api.json("POST", "/domains", key, json={"name": name})
    assert code in (200, 201), created
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (created["id"],))
    return created["id"]


async def _sending(api) -> tuple[str, str]:
    """A tenant's key and verified domain, which this node now keeps: it has sent from it once."""
    _, key = await api.tenant()
    domain_id = await _verified(api, key)
    code, _, _ = await api.json("POST", "/emails", key, json=BODY)
    assert code == 200
    return key, domain_id


@pt.ensureDeferred
async def test_verified_domains_are_kept_a_few_seconds_others_never(api):
    tenant, key = await api.tenant()
    tenant_id = uuid.UUID(tenant["id"])
    code, created, _ = await api.json("POST", "/domains", key, json={"name": "acme.example.com"})
    lookups = []

    async def lookup(tenant_id, name):
        lookups.append(name)
        return await api.parts.domains.lookup_sending_domain(tenant_id, name)

    clock = task.Clock()
    clock.advance(1_800_000_000)
    cache = domains_module.SendingDomainCache(clock, 5, lookup)
    db = api.parts.db
    # Not verified (and unknown names): looked up every time, so verifying applies at once.
    assert (await cache(tenant_id, "acme.example.com")).status == "not_started"
    assert await cache(tenant_id, "other.example.com") is None
    assert len(lookups) == 2
    await db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (created["id"],))
    assert (await cache(tenant_id, "ACME.example.com.")).status == "verified"
    assert len(lookups) == 3
    clock.advance(4.9)
    found = await cache(tenant_id, "acme.example.com")
    assert found.status == "verified" and len(found.signers) == 2 and len(lookups) == 3
    assert await cache(uuid.uuid4(), "acme.example.com") is None  # per tenant
    # Deleted on another node: this node may still sign with it until its entry is 5 s old.
    await db.execute("DELETE FROM domains WHERE id = %s", (created["id"],))
    assert (await cache(tenant_id, "acme.example.com")).status == "verified"
    clock.advance(0.1)
    assert await cache(tenant_id, "acme.example.com") is None


@pt.ensureDeferred
async def test_a_domain_deleted_or_changed_on_this_node_stops_sending_at_once(api):
    key, domain_id = await _sending(api)
    # Unverified behind the API's back (as another node's check would): still cached here.
    await api.parts.db.execute("UPDATE domains SET status = 'failed' WHERE id = %s", (domain_id,))
    code, _, _ = await api.json("POST", "/emails", key, json=BODY)
    assert code == 200
    # A change through this node (PATCH) forgets the tenant's domains at once.
    code, _, _ = await api.json("PATCH", f"/domains/{domain_id}", key, json={"tls": "enforced"})
    assert code == 200
    code, reply, _ = await api.json("POST", "/emails", key, json=BODY)
    assert code == 403 and "not verified" in reply["message"]

    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (domain_id,))
    code, _, _ = await api.json("POST", "/emails", key, json=BODY)
    assert code == 200
    code, _, _ = await api.json("DELETE", f"/domains/{domain_id}", key)
    assert code == 200
    code, reply, _ = await api.json("POST", "/emails", key, json=BODY)
    assert code == 403 and "not verified" in reply["message"]


@pt.ensureDeferred
async def test_a_domain_deleted_on_another_node_is_refused_not_stored(api):
    """Still cached here, but its row is gone: the accept statement refuses it (403, not 500)."""
    key, domain_id = await _sending(api)
    await api.parts.db.execute("DELETE FROM domains WHERE id = %s", (domain_id,))
    for path, body in (("/emails", BODY), ("/emails/batch", [BODY, BODY])):
        code, reply, _ = await api.json("POST", path, key, json=body)
        assert code == 403 and "acme.example.com domain is not verified" in reply["message"], reply
    (row,) = await api.parts.db.fetchall("SELECT count(*) AS n FROM emails")
    assert row["n"] == 1
