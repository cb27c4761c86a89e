"""The account's API rate: 10/s with bursts to 20, shared by keys and nodes."""

import pytest_twisted as pt
import treq
from twisted.internet import defer, reactor, task

from mailsvc.app.ratelimit import RateLimiter
from mailsvc.app.throttle import Limit, Throttle
from mailsvc.http.access import access_kinds
from mailsvc.http.api.apikeys import ApiKeysResource
from mailsvc.http.router import Router
from mailsvc.http.site import Site
from mailsvc.ids import uuid7
from mailsvc.metrics import Metrics
from mailsvc.store.database import DatabaseUnavailable
from tests.helpers.tenants import accounts_for


async def _tenant(db, clock):
    from mailsvc.app.apikeys import KeyRing

    ring = KeyRing(clock, db, b"k" * 32, "re", 10)
    tenant, _, _ = await accounts_for(clock, db, ring).create_tenant({"name": "t"})
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
    # The API as compose wires it, but its rate limit on a clock that does not move: exactly the
    # burst (rate 10 x factor 2) gets through, shared by both keys, and nothing more.
    clock = task.Clock()
    clock.advance(api.parts.submitter.now().timestamp() + 3600)  # past what earlier requests took
    router = Router(clock, access_kinds(keyring=api.parts.keyring, limiter=RateLimiter(clock, api.parts.db, 2),
                                        operator_token="op"))
    router.mount(ApiKeysResource(api.parts.keyring))
    port = reactor.listenTCP(0, Site(router.resource(), clock, Metrics()), interface="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{port.getHost().port}/api-keys"
        responses = []
        for i in range(60):
            response = await treq.get(url, headers={"Authorization": f"Bearer {keys[i % 2]}"}, pool=api.pool)
            responses.append((response, await response.content()))
    finally:
        await port.stopListening()
    codes = [r.code for r, _ in responses]
    assert codes == [200] * 20 + [429] * 40
    limited = next(r for r, _ in responses if r.code == 429)
    assert int(limited.headers.getRawHeaders("retry-after")[0]) >= 1
    header_names = {name.lower() for name, _ in limited.headers.getAllRawHeaders()}
    assert not {n for n in header_names if n.startswith(b"ratelimit") or n.startswith(b"x-ratelimit")}
    body = next(b for r, b in responses if r.code == 429)
    assert b'"name": "rate_limit_exceeded"' in body


class _Counting:
    """A database that counts the statements run through it."""

    def __init__(self, db):
        self._db = db
        self.statements = 0

    async def fetchone(self, *args, **kwargs):
        self.statements += 1
        return await self._db.fetchone(*args, **kwargs)


class _Down(_Counting):
    """A database that counts the statements sent to it and fails each after a second on
    ``clock`` (it is down)."""

    def __init__(self, db, clock):
        super().__init__(db)
        self._clock = clock

    async def fetchone(self, *args, **kwargs):
        self.statements += 1
        await task.deferLater(self._clock, 1, lambda: None)
        raise DatabaseUnavailable("api_rate: database not answering")


class _Slow(_Counting):
    """A database whose answers come ``delay`` seconds after PostgreSQL's, on ``clock``."""

    def __init__(self, db, clock, delay):
        super().__init__(db)
        self._clock = clock
        self._delay = delay
        self._running: list[defer.Deferred] = []

    async def fetchone(self, *args, **kwargs):
        self.statements += 1
        answered = defer.Deferred()
        self._running.append(answered)
        try:
            row = await self._db.fetchone(*args, **kwargs)
        finally:
            answered.callback(None)
        await task.deferLater(self._clock, self._delay, lambda: None)
        return row

    async def answered(self):
        """Until PostgreSQL has answered every statement sent so far, and what its answers
        resumed has run (a turn of the reactor)."""
        running, self._running = self._running, []
        await defer.gatherResults(running)
        await task.deferLater(reactor, 0, lambda: None)


async def _counted_node(db):
    """A clock, a tenant and a node (burst factor 2) whose statements are counted."""
    clock = task.Clock()
    clock.advance(1_800_000_000)
    tenant = await _tenant(db, clock)
    counting = _Counting(db)
    return clock, tenant, counting, RateLimiter(clock, counting, 2)


@pt.ensureDeferred
async def test_leases_never_let_two_nodes_exceed_the_burst(db):
    """A high rate: nodes lease tokens, yet together stay within rate × (burst factor + t)."""
    from mailsvc.app.ratelimit import LEASE_SECONDS

    clock = task.Clock()
    clock.advance(1_800_000_000)
    tenant = await _tenant(db, clock)
    rate, burst_factor = 400, 2
    nodes = [RateLimiter(clock, db, burst_factor), RateLimiter(clock, db, burst_factor)]
    admitted: list[float] = []
    # All at once: the first node takes all it can, then the second.
    for node in nodes:
        while await node.take(tenant.id, rate) is None:
            admitted.append(clock.seconds())
    assert rate * (burst_factor - LEASE_SECONDS) - 1 <= len(admitted) <= rate * burst_factor
    # Then both, taking until refused, every 10 ms for 1.5 s, each round a node first.
    for step in range(150):
        clock.advance(0.01)
        for node in (nodes if step % 2 else nodes[::-1]):
            for _ in range(30):
                if await node.take(tenant.id, rate) is not None:
                    break
                admitted.append(clock.seconds())
    assert len(admitted) > rate * burst_factor + rate * 1.4
    for i, a in enumerate(admitted):  # any window [a, b]: at most rate × (burst factor + b - a)
        for b_index in range(i, len(admitted), 97):
            b = admitted[b_index]
            assert b_index - i + 1 <= rate * (burst_factor + b - a) + 1


@pt.ensureDeferred
async def test_a_lease_is_one_statement_for_many_requests_and_expires(db):
    from mailsvc.app.ratelimit import LEASE_SECONDS

    clock, tenant, counting, node = await _counted_node(db)
    for _ in range(40):  # leases double while they run out early
        assert await node.take(tenant.id, 10_000) is None
    assert counting.statements <= 7
    before = counting.statements
    for _ in range(10):  # within the lease: no statement
        clock.advance(LEASE_SECONDS / 20)
        assert await node.take(tenant.id, 10_000) is None
    assert counting.statements <= before + 1
    before = counting.statements
    clock.advance(LEASE_SECONDS)  # expired: what was left is dropped, a new lease is taken
    assert await node.take(tenant.id, 10_000) is None
    assert counting.statements == before + 1


@pt.ensureDeferred
async def test_concurrent_requests_share_one_lease_statement(db):
    clock, tenant, counting, node = await _counted_node(db)
    for _ in range(8):  # grow the lease size
        await node.take(tenant.id, 100_000)
    clock.advance(0.001)
    before = counting.statements
    results = await defer.gatherResults(
        [defer.ensureDeferred(node.take(tenant.id, 100_000)) for _ in range(8)])
    assert results == [None] * 8
    assert counting.statements == before + 1


@pt.ensureDeferred
async def test_a_busy_tenants_requests_do_not_wait_for_the_next_lease(db):
    """The next lease is asked for while half of the current one is left: once the leases have
    grown, no request waits for a lease statement, though each takes 5 ms to be answered."""
    from mailsvc.app.ratelimit import LEASE_SECONDS

    clock, tenant, _, _ = await _counted_node(db)
    slow = _Slow(db, clock, LEASE_SECONDS / 10)
    node = RateLimiter(clock, slow, 2)
    waited = []
    for _ in range(500):  # one request a millisecond: ten leases' time
        take = defer.ensureDeferred(node.take(tenant.id, 100_000))
        waited.append(not take.called)
        while not take.called:
            await slow.answered()
            clock.advance(0.001)
        assert await take is None
        await slow.answered()
        clock.advance(0.001)
    assert sum(waited[:50]) <= 6 and not any(waited[50:])
    assert slow.statements <= 30  # a statement every 20 ms at most: each lease asked for 25 ms early


@pt.ensureDeferred
async def test_requests_queued_behind_a_small_renewal_share_the_next(db):
    """Eight requests at once for a new lease: the first takes one token, the seven queued
    behind it share the next statement (not 2 tokens, then 4...); the third is the lease
    asked for ahead once half of that one is spent."""
    clock, tenant, counting, node = await _counted_node(db)
    results = await defer.gatherResults([defer.ensureDeferred(node.take(tenant.id, 100_000)) for _ in range(8)])
    assert results == [None] * 8
    assert counting.statements == 3


@pt.ensureDeferred
async def test_the_default_rate_takes_one_token_per_request(db):
    """10/s (and anything below 2 tokens a lease) is checked exactly, one statement each."""
    clock, tenant, counting, node = await _counted_node(db)
    assert [await node.take(tenant.id, 10) for _ in range(20)] == [None] * 20
    assert counting.statements == 20
    assert await node.take(tenant.id, 10) == 1


@pt.ensureDeferred
async def test_requests_waiting_for_a_lease_share_its_failure(db):
    """With the database down, requests waiting for one lease statement fail with it: one
    statement for all of them, not one after another (their waits would add up)."""
    clock, tenant, _, _ = await _counted_node(db)
    down = _Down(db, clock)
    node = RateLimiter(clock, down, 2)
    takes = [defer.ensureDeferred(node.take(tenant.id, 100_000)) for _ in range(8)]
    for _ in range(8):  # time enough for each to try in turn
        clock.advance(1)
    outcomes = await defer.DeferredList(takes, consumeErrors=True)
    assert [ok for ok, _ in outcomes] == [False] * 8
    assert all(f.check(DatabaseUnavailable) for _, f in outcomes)
    assert down.statements == 1


@pt.ensureDeferred
async def test_failure_throttle_reserves_all_keys_or_none_and_gives_back(db):
    clock = task.Clock()
    clock.advance(1_800_000_000.123)
    one, two = Throttle(clock, db), Throttle(clock, db)  # two processes
    address, client = {"address:a": Limit(2, 60.0)}, {"client:c": Limit(3, 15.0)}
    both = {**address, **client}
    assert [await (one if n % 2 else two).reserve(both) for n in range(2)] == [None, None]
    # The address is full: nothing is counted for the client either.
    assert await one.reserve(both) == 60
    assert await two.reserve(client) is None and await two.reserve(client) == 15
    # A try whose credentials were right gives its count back.
    await one.give_back(client)
    assert await two.reserve(client) is None
    clock.advance(59)
    assert await one.reserve(address) == 1
    clock.advance(1)
    assert await one.reserve(address) is None and await one.reserve(address) == 60
