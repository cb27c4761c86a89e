"""
The account's activity (``GET /dashboard/activity``): what its members, its API keys, the
operator and the service did to it, from the audit log and its members' sessions, newest
first, filtered by kind and member, a page at a time, on the real PostgreSQL and the loopback DNS.
"""

from __future__ import annotations

import uuid

import pytest
import pytest_twisted as pt

from tests.helpers.dashboard import PASSWORD, Session, cookie_of, link_token, signed_in
from tests.helpers.domainsupport import domain_config, publish


@pytest.fixture
def config(dns_server):
    return domain_config(dns_server)


async def activity(session: Session, query: str = "") -> dict:
    code, body, _ = await session.json("GET", f"/dashboard/activity?{query}")
    assert code == 200, body
    return body


def said(body: dict) -> list[tuple]:
    """(action, who, what) of each entry, newest first."""
    out = []
    for entry in body["data"]:
        actor = entry["actor"]
        who = actor.get("email") or actor.get("name") or actor["type"]
        what = entry["detail"].get("name") or entry["detail"].get("domain") or entry["detail"].get("email")
        out.append((entry["action"], who, what))
    return out


async def member_signed_in(api, invited: dict) -> Session:
    code, body, response = await api.json("POST", "/auth/password",
                                          json={"token": link_token(invited), "password": PASSWORD})
    assert code == 200, body
    return Session(api, cookie_of(response)[1], body["csrf_token"], body)


@pt.ensureDeferred
async def test_what_was_done_to_the_account_is_told_newest_first(api, dns_server):
    tenant, key, owner = await signed_in(api, "ana@acme.example")
    other_tenant, _, other = await signed_in(api, "zed@other.example")
    # Keys: one made and revoked from the dashboard, one made with the API (by the first key).
    code, made, _ = await owner.json("POST", "/dashboard/api-keys", json={"name": "ci"})
    assert code == 200, made
    code, _, _ = await owner.json("DELETE", f"/dashboard/api-keys/{made['id']}")
    assert code == 200
    code, by_key, _ = await api.json("POST", "/api-keys", key, json={"name": "deploy"})
    assert code == 200, by_key
    # A member invited, signed in, making a key; then removed with their keys.
    code, invited, _ = await owner.json("POST", "/dashboard/users", json={"email": "bo@acme.example", "role": "member"})
    assert code == 201, invited
    bo = await member_signed_in(api, invited)
    code, bos, _ = await bo.json("POST", "/dashboard/api-keys", json={"name": "bo's"})
    assert code == 200, bos
    # A domain added, checked and verified by the service's check.
    code, domain, _ = await owner.json("POST", "/dashboard/domains", json={"name": "acme.example.com"})
    assert code == 201, domain
    publish(dns_server, domain)
    code, _, _ = await owner.json("POST", f"/dashboard/domains/{domain['id']}/verify")
    assert code == 200
    assert await api.parts.domains.check_due() == 1
    code, _, _ = await owner.json("DELETE", f"/dashboard/users/{invited['id']}?revoke_keys=true")
    assert code == 200
    # The other account's doings are not this one's.
    await other.json("POST", "/dashboard/api-keys", json={"name": "theirs"})

    body = await activity(owner)
    assert body["has_more"] is False
    ana, bo_id = "ana@acme.example", invited["id"]
    assert said(body) == [
        ("user.remove", ana, "bo@acme.example"),
        ("domain.verified", "system", "acme.example.com"),
        ("domain.check", ana, "acme.example.com"),
        ("domain.create", ana, "acme.example.com"),
        # bo is removed: no address to show any more, and bo's sessions (sign-ins) went with bo.
        ("api_key.create", "user", "bo's"),
        ("user.link", ana, "bo@acme.example"),
        ("api_key.create", "Default", "deploy"),  # by the account's first key, named Default
        ("api_key.revoke", ana, "ci"),
        ("api_key.create", ana, "ci"),
        ("user.sign_in", ana, None),
        ("user.link", "operator", ana),
        ("tenant.update", "operator", None),
        ("tenant.create", "operator", "Acme"),
    ]
    entries = body["data"]
    assert [(k["key_id"], k["name"]) for k in entries[0]["detail"]["revoked_keys"]] == [(bos["id"], "bo's")]
    assert entries[4]["actor"] == {"type": "user", "id": bo_id, "email": None, "removed": True}
    assert entries[6]["actor"]["type"] == "api_key" and entries[6]["actor"]["removed"] is False
    assert entries[5]["detail"]["invited"] is True and entries[5]["detail"]["role"] == "member"
    assert all("tenant_id" not in e["detail"] for e in entries)
    # An owner sees where a sign-in came from (what the session kept: none by a set-password link).
    assert set(entries[9]["detail"]) == {"client", "user_agent"}
    assert [e["at"] for e in entries] == sorted((e["at"] for e in entries), reverse=True)

    # Filtered by kind, by member, both.
    assert [a for a, _, _ in said(await activity(owner, "kind=api_keys"))] == [
        "api_key.create", "api_key.create", "api_key.revoke", "api_key.create"]
    assert [a for a, _, _ in said(await activity(owner, "kind=sign_ins"))] == ["user.sign_in"]
    assert [a for a, _, _ in said(await activity(owner, "kind=domains"))] == [
        "domain.verified", "domain.check", "domain.create"]
    mine = await activity(owner, f"member={owner.user['id']}")
    assert {e["actor"].get("email") for e in mine["data"]} == {ana} and len(mine["data"]) == 7
    assert [a for a, _, _ in said(await activity(owner, f"member={bo_id}"))] == ["api_key.create"]
    # The other account sees only its own.
    assert [a for a, _, _ in said(await activity(other))] == [
        "api_key.create", "user.sign_in", "user.link", "tenant.update", "tenant.create"]
    assert other_tenant["id"] != tenant["id"]

    # A page at a time, both ways, as the API's lists.
    first = await activity(owner, "limit=5")
    assert first["has_more"] is True and first["data"] == entries[:5]
    second = await activity(owner, f"limit=5&after={first['data'][-1]['id']}")
    assert second["data"] == entries[5:10] and second["has_more"] is True
    back = await activity(owner, f"limit=5&before={second['data'][0]['id']}")
    assert back["data"] == entries[:5]
    last = await activity(owner, f"limit=5&after={second['data'][-1]['id']}")
    assert last["data"] == entries[10:] and last["has_more"] is False

    for query, field in (("kind=robots", "kind"), ("member=bo", "member")):
        code, body, _ = await owner.json("GET", f"/dashboard/activity?{query}")
        assert code == 422 and field in body["message"], body


@pt.ensureDeferred
async def test_a_member_sees_the_activity_but_not_where_others_signed_in_from(api):
    _, _, owner = await signed_in(api, "ana@acme.example")
    code, invited, _ = await owner.json("POST", "/dashboard/users", json={"email": "bo@acme.example", "role": "member"})
    assert code == 201
    bo = await member_signed_in(api, invited)
    body = await activity(bo, "kind=sign_ins")
    assert len(body["data"]) == 2
    assert all(set(e["detail"]) == set() for e in body["data"]), body
    code, body, _ = await api.json("GET", "/dashboard/activity")
    assert code == 401


def _rows_read(plan: dict, table: str) -> int:
    """Rows the plan's nodes read from ``table`` (an index or the table, kept or filtered out), over all their loops."""
    read = plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
    own = read * plan.get("Actual Loops", 1) if plan.get("Relation Name") == table else 0
    return own + sum(_rows_read(child, table) for child in plan.get("Plans", ()))


class _Explained:
    """The store's connection, but each read is run under EXPLAIN ANALYZE and its plan kept."""

    def __init__(self, db):
        self._db = db
        self.plan: dict = {}

    async def fetchall(self, statement, args, desc=None):
        (row,) = await self._db.fetchall("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, args, desc=desc)
        self.plan = row["QUERY PLAN"][0]["Plan"]
        return []


@pt.ensureDeferred
async def test_a_page_reads_the_accounts_own_entries_not_every_accounts(api, db):
    """With 20,000 log entries and 5,000 sign-ins of another account beside it, a page of one
    account's activity reads about a page of rows from each (migration 0029's indexes)."""
    from mailsvc.domain.audit import ActivityFilter
    from mailsvc.domain.paging import Page
    from mailsvc.store import audit

    tenant, _, _ = await signed_in(api, "ana@acme.example")
    other, _, other_owner = await signed_in(api, "bo@other.example")
    await db.execute(
        "INSERT INTO audit_log (id, at, actor, action, detail)"
        " SELECT gen_random_uuid(), now(), 'service', 'domain.checked', jsonb_build_object('tenant_id', %s::text)"
        " FROM generate_series(1, 20000)", (other["id"],))
    await db.execute(
        "INSERT INTO sessions (id, token_hash, user_id, tenant_id, created_at, last_seen_at, expires_at)"
        " SELECT gen_random_uuid(), decode(md5(n::text), 'hex'), %s, %s, now(), now(), now()"
        " FROM generate_series(1, 5000) n", (other_owner.user["id"], other["id"]))
    await db.execute("ANALYZE audit_log")
    await db.execute("ANALYZE sessions")
    explained = _Explained(db)
    await audit.activity(explained, uuid.UUID(tenant["id"]), Page(20), ActivityFilter())
    assert _rows_read(explained.plan, "audit_log") < 50
    assert _rows_read(explained.plan, "sessions") < 50
