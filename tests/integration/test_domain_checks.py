"""
The verification scheduler on the real store and the real loopback DNS server, with time
driven by a Clock: backoff, the verification window, daily re-checks, lookups that fail, and
exactly one node checking a domain.
"""

import uuid

import pytest_twisted as pt
from twisted.internet import defer, reactor, task

from mailsvc import timefmt
from mailsvc.app.domains import Domains, Settings, SigningKeys
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.dns.resolver import build_resolver
from mailsvc.domain.testaddresses import TestAddresses
from tests.helpers.domainsupport import MX_HOST, SPF_INCLUDE
from tests.helpers.tenants import new_tenant

WINDOW = 72 * 3600
DAY = 86400
START = 1_800_000_000


def node(clock, db, dns_server) -> Domains:
    """One node's domain service: its own clock for time, real lookups through the reactor."""
    settings = Settings("local", MX_HOST, SPF_INCLUDE, WINDOW, DAY)
    resolver = build_resolver(reactor, (dns_server.address,))
    return Domains(clock, db, SigningKeys(KeyVault(b"m" * 32)), resolver, settings, wake=lambda: None)


async def tenant(clock, db, plan="scale"):
    return (await new_tenant(clock, db, plan=plan)).id


def publish(dns_server, domains_view, skip=()):
    name = domains_view.row["name"]
    for record, _ in domains_view.records:
        if record.key in skip:
            continue
        if record.type == "TXT":
            dns_server.txt(record.fqdn(name), record.value)
        else:
            dns_server.mx(record.fqdn(name), record.value, record.priority)


async def state(db, domain_id) -> dict:
    return await db.fetchone(
        "SELECT status, record_status, next_check_at, checks, suspect_since FROM domains WHERE id = %s",
        (domain_id,),
    )


async def statuses(db) -> list[tuple[str, str]]:
    rows = await db.fetchall("SELECT data FROM events ORDER BY id")
    return [(r["data"]["previous"], r["data"]["status"]) for r in rows]


def at(seconds):
    return timefmt.from_seconds(seconds)


@pt.ensureDeferred
async def test_pending_backs_off_then_fails_after_the_window(db, dns_server):
    clock = task.Clock()
    clock.advance(START)
    domains = node(clock, db, dns_server)
    tenant_id = await tenant(clock, db)
    view = await domains.create(tenant_id, {"name": "late.example.com"})
    domain_id = view.row["id"]
    assert await domains.check_due() == 0  # not_started is never checked by itself

    await domains.verify(tenant_id, domain_id)
    assert await domains.check_due() == 1
    row = await state(db, domain_id)
    assert row["status"] == "pending" and row["next_check_at"] == at(START + 30)
    assert set(row["record_status"].values()) == {"pending"}
    clock.advance(29)
    assert await domains.check_due() == 0
    clock.advance(1)
    assert await domains.check_due() == 1
    assert (await state(db, domain_id))["next_check_at"] == at(START + 30 + 60)

    # The delays double up to an hour.
    delays = []
    for _ in range(10):
        due = (await state(db, domain_id))["next_check_at"].timestamp()
        clock.advance(due - clock.seconds())
        assert await domains.check_due() == 1
        delays.append((await state(db, domain_id))["next_check_at"].timestamp() - clock.seconds())
    assert delays == [120, 240, 480, 960, 1920, 3600, 3600, 3600, 3600, 3600]

    clock.advance(START + WINDOW - clock.seconds())
    assert await domains.check_due() == 1
    row = await state(db, domain_id)
    assert row["status"] == "failed" and row["next_check_at"] is None
    assert set(row["record_status"].values()) == {"failed"}
    assert await statuses(db) == [("pending", "failed")]
    clock.advance(DAY)
    assert await domains.check_due() == 0

    # Verifying again opens a new window.
    await domains.verify(tenant_id, domain_id)
    publish(dns_server, view)
    clock.advance(1)  # events of one millisecond have no order among them
    assert await domains.check_due() == 1
    assert (await state(db, domain_id))["status"] == "verified"
    assert await statuses(db) == [("pending", "failed"),
                                  ("failed", "pending"), ("pending", "verified")]


@pt.ensureDeferred
async def test_verified_is_rechecked_daily_and_fails_when_dkim_vanishes(db, dns_server):
    clock = task.Clock()
    clock.advance(START)
    domains = node(clock, db, dns_server)
    tenant_id = await tenant(clock, db)
    view = await domains.create(tenant_id, {"name": "daily.example.com"})
    domain_id = view.row["id"]
    publish(dns_server, view, skip=("dmarc",))
    await domains.verify(tenant_id, domain_id)
    clock.advance(1)
    assert await domains.check_due() == 1
    row = await state(db, domain_id)
    assert row["status"] == "verified" and row["next_check_at"] == at(START + 1 + DAY)
    assert row["record_status"]["dmarc"] == "failed"  # advisory: missing, yet verified

    clock.advance(DAY - 1)
    assert await domains.check_due() == 0
    clock.advance(1)
    assert await domains.check_due() == 1
    assert (await state(db, domain_id))["status"] == "verified"

    rsa = next(r for r, _ in view.records if r.purpose == "dkim")
    dns_server.remove(rsa.fqdn("daily.example.com"))
    clock.advance(DAY)
    assert await domains.check_due() == 1
    row = await state(db, domain_id)  # one bad answer is confirmed before failing
    assert row["status"] == "verified" and row["suspect_since"] is not None
    assert row["next_check_at"] == at(clock.seconds() + 300)
    clock.advance(300)
    assert await domains.check_due() == 1
    row = await state(db, domain_id)
    assert row["status"] == "failed" and row["record_status"][rsa.key] == "failed"
    assert await statuses(db) == [("pending", "verified"), ("verified", "failed")]


@pt.ensureDeferred
async def test_a_record_back_before_the_confirmation_keeps_the_domain_verified(db, dns_server):
    clock = task.Clock()
    clock.advance(START)
    domains = node(clock, db, dns_server)
    tenant_id = await tenant(clock, db)
    view = await domains.create(tenant_id, {"name": "flaky.example.com"})
    publish(dns_server, view)
    await domains.verify(tenant_id, view.row["id"])
    await domains.check_due()
    spf = next(r for r, _ in view.records if r.key == "return_path_spf")
    dns_server.remove(spf.fqdn("flaky.example.com"), 16)  # TXT only; the MX stays
    clock.advance(DAY)
    await domains.check_due()
    dns_server.txt(spf.fqdn("flaky.example.com"), spf.value)
    clock.advance(300)
    await domains.check_due()
    row = await state(db, view.row["id"])
    assert row["status"] == "verified" and row["suspect_since"] is None


@pt.ensureDeferred
async def test_failed_lookups_change_nothing(db, dns_server):
    clock = task.Clock()
    clock.advance(START)
    domains = node(clock, db, dns_server)
    tenant_id = await tenant(clock, db)
    view = await domains.create(tenant_id, {"name": "servfail.example.com"})
    await domains.verify(tenant_id, view.row["id"])
    dkim = [r for r, _ in view.records if r.purpose == "dkim"]
    for record in dkim:
        dns_server.fail(record.fqdn("servfail.example.com"))
    publish(dns_server, view)
    clock.advance(WINDOW + 1)  # past the window, yet the DKIM answer is unknown
    assert await domains.check_due() == 1
    row = await state(db, view.row["id"])
    assert row["status"] == "pending"
    assert {row["record_status"][r.key] for r in dkim} == {"temporary_failure"}
    assert row["record_status"]["return_path_mx"] == "verified"
    for record in dkim:
        dns_server.heal(record.fqdn("servfail.example.com"))
    clock.advance(3600)
    assert await domains.check_due() == 1
    assert (await state(db, view.row["id"]))["status"] == "verified"


@pt.ensureDeferred
async def test_each_due_domain_is_checked_by_exactly_one_node(db, dns_server):
    clock = task.Clock()
    clock.advance(START)
    nodes = [node(clock, db, dns_server) for _ in range(3)]
    tenant_id = await tenant(clock, db)
    names = [f"n{i}.example.com" for i in range(25)]
    for name in names:
        view = await nodes[0].create(tenant_id, {"name": name})
        publish(dns_server, view)
        await nodes[0].verify(tenant_id, view.row["id"])
    del dns_server.queries[:]

    counts = await defer.gatherResults([defer.ensureDeferred(n.check_due()) for n in nodes])
    counts += await defer.gatherResults([defer.ensureDeferred(n.check_due()) for n in nodes])
    assert sum(counts) == len(names)
    rows = await db.fetchall("SELECT status, checks FROM domains")
    assert {(r["status"], r["checks"]) for r in rows} == {("verified", 1)}
    mx_queries = [q for q in dns_server.queries if q[1] == "MX"]
    assert sorted(q[0] for q in mx_queries) == sorted(f"bounces.{n}" for n in names)
    assert len([e for e in await statuses(db) if e == ("pending", "verified")]) == len(names)


@pt.ensureDeferred
async def test_a_check_overtaken_by_a_new_request_is_dropped(db, dns_server):
    clock = task.Clock()
    clock.advance(START)
    domains = node(clock, db, dns_server)
    tenant_id = await tenant(clock, db)
    view = await domains.create(tenant_id, {"name": "overtaken.example.com"})
    await domains.verify(tenant_id, view.row["id"])
    claim = uuid.uuid4()
    from mailsvc.store import domains as store

    [row] = await store.claim_due(db, at(START), at(START + 120), claim, 5)
    clock.advance(WINDOW + 1)  # this claimed check would fail the domain...
    await domains.verify(tenant_id, view.row["id"])  # ...but a new window was asked for
    await domains.check_claimed(row, claim)
    assert (await state(db, view.row["id"]))["status"] == "pending"
    # A deleted domain's check is dropped too.
    [row] = await store.claim_due(db, at(clock.seconds()), at(clock.seconds() + 120), claim, 5)
    await domains.delete(tenant_id, view.row["id"])
    await domains.check_claimed(row, claim)
    assert await db.fetchall("SELECT id FROM domains") == []


@pt.ensureDeferred
async def test_a_domain_under_the_test_domain_fails_at_its_next_check(db, dns_server):
    clock = task.Clock()
    clock.advance(START)
    # Added and verified before the test domain was refused as a sending domain: a node whose test
    # domain is another name lets it in.
    before = Domains(clock, db, SigningKeys(KeyVault(b"m" * 32)), build_resolver(reactor, (dns_server.address,)),
                     Settings("local", MX_HOST, SPF_INCLUDE, WINDOW, DAY, TestAddresses("other.example")),
                     wake=lambda: None)
    tenant_id = await tenant(clock, db)
    views = [await before.create(tenant_id, {"name": name}) for name in ("resend.dev", "mail.resend.dev")]
    for view in views:
        publish(dns_server, view)
        await before.verify(tenant_id, view.row["id"])
    clock.advance(1)
    assert await before.check_due() == 2
    assert {(await state(db, v.row["id"]))["status"] for v in views} == {"verified"}

    domains = node(clock, db, dns_server)  # the test domain resend.dev
    del dns_server.queries[:]
    clock.advance(DAY)
    assert await domains.check_due() == 2
    assert dns_server.queries == []  # failed whatever its records say
    for view in views:
        row = await state(db, view.row["id"])
        assert row["status"] == "failed" and row["next_check_at"] is None
        assert set(row["record_status"].values()) == {"failed"}
        assert (await domains.lookup_sending_domain(tenant_id, view.row["name"])).status == "failed"
    events = [r["data"] for r in await db.fetchall("SELECT data FROM events ORDER BY id")][-2:]
    assert sorted(e["domain"] for e in events) == ["mail.resend.dev", "resend.dev"]
    assert {(e["previous"], e["status"]) for e in events} == {("verified", "failed")}
    reasons = sorted(e["reason"] for e in events)
    assert reasons[0].startswith("the domain mail.resend.dev is under the test domain resend.dev")
    assert reasons[1].startswith("the domain resend.dev is the test domain")
    assert all("cannot be a sending domain" in r for r in reasons)
    # Asking for a check again fails it again.
    await domains.verify(tenant_id, views[0].row["id"])
    assert await domains.check_due() == 1
    assert (await state(db, views[0].row["id"]))["status"] == "failed"
