"""A unique name written twice at once: the store answers the domain's ``Taken``, not the driver's error."""

import uuid
from datetime import UTC, datetime

import pytest
import pytest_twisted as pt

from mailsvc.domain.errors import Taken
from mailsvc.store import domains, templates

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pt.ensureDeferred
async def test_a_domain_name_another_account_holds_is_taken(api):
    first, _ = await api.tenant()
    second, _ = await api.tenant()

    async def add(tenant: dict):
        return await api.parts.db.run("add domain", lambda txn: domains.insert_domain(
            txn, uuid.uuid4(), uuid.UUID(tenant["id"]), "mail.example.com", "send", "opportunistic", "local", NOW))

    await add(first)
    with pytest.raises(Taken) as taken:
        await add(second)
    assert taken.value.field == "name"


@pt.ensureDeferred
async def test_an_alias_another_template_of_the_account_has_is_taken(api):
    tenant, _ = await api.tenant()
    tenant_id = uuid.UUID(tenant["id"])

    async def write(fields: dict):
        return await api.parts.db.run("add template", lambda txn: templates.insert(
            txn, uuid.uuid4(), tenant_id, {"name": "Welcome", "html": "<p>Hi</p>", **fields}, NOW))

    await write({"alias": "welcome"})
    other = await write({"alias": "other"})
    with pytest.raises(Taken):
        await write({"alias": "welcome"})
    with pytest.raises(Taken):
        await api.parts.db.run("rename", lambda txn: templates.update(txn, other["id"], {"alias": "welcome"}, NOW))
