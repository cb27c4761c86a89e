"""A tenant able to send (a verified domain), and the smallest valid e-mail."""


async def sending_tenant(api, domain="acme.example.com", **tenant_fields):
    """A tenant with a verified sending domain (verification itself is tested with the domains)."""
    tenant, key = await api.tenant(**tenant_fields)
    code, created, _ = await api.json("POST", "/domains", key, json={"name": domain})
    assert code in (200, 201), created
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (created["id"],))
    return tenant, key, created["id"]


BODY = {"from": "Acme <news@acme.example.com>", "to": ["ann@example.com"], "subject": "Hello", "html": "<p>Hi Ann</p>"}
