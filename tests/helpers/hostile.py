"""
The harness of the hostile tests: a victim tenant that sends the hostile input and a bystander
tenant that sends normal mail at the same moment, each with a verified sending domain, and
``attack`` that runs one hostile request among the bystander's sends, checks that every one of
them was accepted and that nothing was stored for the victim. Any client will do for the
attack (HTTP through ``api``, SMTP in a thread): it is a callable that returns an awaitable.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest_twisted
from twisted.internet import defer

from tests.helpers.sending import BODY, sending_tenant

#: Tables whose rows a refused request must not add for its tenant.
STORED = ("emails", "deliveries", "attachments", "events")


@attrs.frozen
class Tenant:
    id: uuid.UUID
    key: str
    domain: str
    body: dict  # a valid POST /emails body from this tenant's verified domain


async def sending(api, domain: str) -> Tenant:
    """A tenant with a verified sending ``domain`` (see tests/integration/test_sending.py)."""
    tenant, key, _ = await sending_tenant(api, domain=domain)
    return Tenant(uuid.UUID(tenant["id"]), key, domain, {**BODY, "from": f"News <news@{domain}>"})


@pytest_twisted.async_fixture
async def victim(api) -> Tenant:
    return await sending(api, "victim.example.com")


@pytest_twisted.async_fixture
async def bystander(api) -> Tenant:
    return await sending(api, "bystander.example.com")


async def stored_for(db, tenant: Tenant) -> dict[str, int]:
    """Rows per table of ``STORED`` that belong to ``tenant``."""
    counts = " , ".join(f"(SELECT count(*) FROM {table} WHERE tenant_id = %(t)s) AS {table}" for table in STORED)
    return await db.fetchone(f"SELECT {counts}", {"t": tenant.id})


async def bystander_sends_during(api, bystander: Tenant, hostile: Callable[[], Awaitable[Any]],
                                 sends: int = 5) -> Any:
    """
    ``hostile()`` started among ``sends`` POST /emails of ``bystander`` (half before it, half
    after, all in flight together); asserts each send got 200 and returns what ``hostile`` gave.
    """
    def send(n: int) -> defer.Deferred:
        body = {**bystander.body, "to": [f"friend{n}@example.com"]}
        return defer.ensureDeferred(api.json("POST", "/emails", bystander.key, json=body))

    before = [send(n) for n in range(sends // 2)]
    attack = defer.ensureDeferred(hostile())
    after = [send(n) for n in range(sends // 2, sends)]
    results = await defer.gatherResults([*before, *after])
    outcome = await attack
    assert [code for code, _, _ in results] == [200] * sends, [body for _, body, _ in results]
    return outcome


async def attack(api, victim: Tenant, bystander: Tenant, hostile: Callable[[], Awaitable[Any]]) -> Any:
    """
    ``hostile()`` among the bystander's normal sends (all must succeed); asserts that nothing was
    stored for ``victim`` meanwhile and returns what ``hostile`` gave (a response, an SMTP reply).
    """
    before = await stored_for(api.parts.db, victim)
    outcome = await bystander_sends_during(api, bystander, hostile)
    assert await stored_for(api.parts.db, victim) == before
    return outcome
