"""MX routing rules, on a resolver that answers from a table and a Clock."""

import random

import pytest
import pytest_twisted as pt
from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.names import dns
from twisted.names.error import DNSNameError, DNSServerError

from mailsvc.delivery.routes import CACHE_SECONDS, MAX_HOSTS, NoRoute, Routes, RouteUnknown


class TableResolver:
    def __init__(self, table):
        self.table = table
        self.asked = []
        self.pending: list[defer.Deferred] = []
        self.hold = False

    def lookupMailExchange(self, name, timeout=None):  # noqa: N802 (twisted.names' name)
        self.asked.append(name)
        answer = self.table.get(name)
        if self.hold:
            d = defer.Deferred()
            self.pending.append((d, answer))
            return d
        return self._answer(answer)

    def release(self):
        for d, answer in self.pending:
            self._answer(answer).chainDeferred(d)

    def _answer(self, answer):
        if isinstance(answer, Exception):
            return defer.fail(answer)
        records = [dns.RRHeader(b"x", dns.MX, payload=dns.Record_MX(p, h.encode())) for p, h in answer or []]
        return defer.succeed((records, [], []))


def routes(table, seed=0, clock=None):
    resolver = TableResolver(table)
    return Routes(clock or Clock(), resolver, random.Random(seed)), resolver


@pt.ensureDeferred
async def test_preference_order_with_equal_preferences_shuffled():
    table = {"x.test": [(20, "c.x.test"), (10, "a.x.test"), (10, "b.x.test")]}
    orders = set()
    for seed in range(20):
        r, _ = routes(table, seed)
        route = await r.route("X.test.")
        assert route.hosts[2] == "c.x.test"
        orders.add(route.hosts[:2])
    assert orders == {("a.x.test", "b.x.test"), ("b.x.test", "a.x.test")}


@pt.ensureDeferred
async def test_hosts_that_failed_go_last_for_a_while():
    clock = Clock()
    r, _ = routes({"x.test": [(10, "a.x.test"), (20, "b.x.test")]}, clock=clock)
    r.mark_bad("a.x.test")
    assert (await r.route("x.test")).hosts == ("b.x.test", "a.x.test")
    clock.advance(301)
    assert (await r.route("x.test")).hosts == ("a.x.test", "b.x.test")


@pt.ensureDeferred
async def test_at_most_five_hosts_are_tried_and_bad_ones_drop_off_first():
    clock = Clock()
    r, _ = routes({"x.test": [(i, f"h{i}.x.test") for i in range(50)]}, clock=clock)
    assert MAX_HOSTS == 5
    assert (await r.route("x.test")).hosts == tuple(f"h{i}.x.test" for i in range(5))
    r.mark_bad("h0.x.test")
    r.mark_bad("h3.x.test")
    assert (await r.route("x.test")).hosts == ("h1.x.test", "h2.x.test", "h4.x.test", "h5.x.test", "h6.x.test")


@pt.ensureDeferred
async def test_null_mx_missing_domain_no_mx_and_dns_failure():
    r, _ = routes({
        "null.test": [(0, "")], "gone.test": DNSNameError(), "plain.test": [],
        "broken.test": DNSServerError(),
    })
    with pytest.raises(NoRoute) as null:
        await r.route("null.test")
    assert (null.value.code, null.value.enhanced) == (556, "5.1.10")
    with pytest.raises(NoRoute) as gone:
        await r.route("gone.test")
    assert (gone.value.code, gone.value.enhanced) == (550, "5.1.2")
    assert (await r.route("plain.test")).hosts == ("plain.test",)  # RFC 5321 §5.1: the domain itself
    with pytest.raises(RouteUnknown):
        await r.route("broken.test")


@pt.ensureDeferred
async def test_answers_are_shared_and_kept():
    clock = Clock()
    r, resolver = routes({"x.test": [(10, "a.x.test")]}, clock=clock)
    resolver.hold = True
    both = defer.gatherResults([defer.ensureDeferred(r.route("x.test")) for _ in range(2)])
    resolver.release()
    first, second = await both
    assert first == second and resolver.asked == ["x.test"]
    resolver.hold = False
    await r.route("x.test")
    assert resolver.asked == ["x.test"]
    clock.advance(CACHE_SECONDS)
    await r.route("x.test")
    assert resolver.asked == ["x.test", "x.test"]
