"""The account's API rate: 10/s with bursts to 20, shared by keys and nodes."""

import pytest_twisted as pt
from twisted.internet import defer, task

from mailsvc.ids import uuid7
from mailsvc.ratelimit import RateLimiter


async def _tenant(db, clock):
    from mailsvc.accounts import Accounts
    from mailsvc.apikeys import KeyRing

    ring = KeyRing(clock, db, b"k" * 32, "re", 10)
    tenant, _, _ = await Accounts(clock, db, ring, 10).create_tenant({"name": "t"})
    return tenant


@pt.ensureDeferred
async def test_burst_then_steady_rate_across_nodes(db):
    clock = task.Clock()
    clock.advance(1_800_000_000)
    tenant = await _tenant(db, clock)
    node_a = RateLimiter(clock, db, burst_factor=2)
    node_b = RateLimiter(clock, db, burst_factor=2)
    results = []
    for i in range(20):
        results.append(await (node_a if i % 2 else node_b).take(tenant.id, 10))
    assert results == [None] * 20
    assert await node_a.take(tenant.id, 10) == 1
    assert await node_b.take(tenant.id, 10) == 1
    clock.advance(0.1)
    assert await node_b.take(tenant.id, 10) is None
    assert await node_a.take(tenant.id, 10) == 1
    clock.advance(1.0)
    taken = [await node_a.take(tenant.id, 10) for _ in range(11)]
    assert taken[:10] == [None] * 10 and taken[10] == 1


@pt.ensureDeferred
async def test_tenants_do_not_share_a_bucket(db):
    clock = task.Clock()
    clock.advance(1_800_000_000)
    limiter = RateLimiter(clock, db, 2)
    one, two = await _tenant(db, clock), await _tenant(db, clock)
    for _ in range(4):
        assert await limiter.take(one.id, 2) is None
    assert await limiter.take(one.id, 2) is not None
    assert await limiter.take(two.id, 2) is None
    assert await limiter.take(uuid7(clock.seconds()), 2) is None


@pt.ensureDeferred
async def test_http_429_with_retry_after_shared_by_all_keys(api):
    created, key = await api.tenant(api_rate_per_sec=10)
    _, second, _ = await api.json("POST", "/api-keys", key, json={"name": "second"})
    keys = [key, second["token"]]
    responses = await defer.gatherResults(
        [defer.ensureDeferred(api.request("GET", "/api-keys", keys[i % 2])) for i in range(40)]
    )
    codes = [r.code for r, _ in responses]
    assert 429 in codes and codes.count(200) <= 20
    limited = next(r for r, _ in responses if r.code == 429)
    assert int(limited.headers.getRawHeaders("retry-after")[0]) >= 1
    header_names = {name.lower() for name, _ in limited.headers.getAllRawHeaders()}
    assert not {n for n in header_names if n.startswith(b"ratelimit") or n.startswith(b"x-ratelimit")}
    body = next(b for r, b in responses if r.code == 429)
    assert b'"name": "rate_limit_exceeded"' in body
    # The operator raises the tenant's rate: the change applies at once on this node.
    await api.json("PATCH", f"/admin/v1/tenants/{created['id']}", api.operator_token,
                   json={"api_rate_per_sec": 100000})
    code, _, _ = await api.json("GET", "/api-keys", key)
    assert code == 200
