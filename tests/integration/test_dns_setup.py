"""
DNS provider set-up against a faithful fake of Cloudflare's v4 API on loopback, then a DNS
check through the loopback DNS server serving what the set-up wrote.
"""

import json

import pytest
import pytest_twisted as pt
import resend
from twisted.logger import globalLogPublisher

from tests.helpers.domainsupport import MX_HOST, SPF_INCLUDE, domain_config
from tests.helpers.fake_cloudflare import cloudflare  # noqa: F401 (fixture)
from tests.helpers.sdk import call

TOKEN = "cf-secret-token-4c7e9a1b2d3f"


@pytest.fixture
def config(dns_server, cloudflare):  # noqa: F811
    return domain_config(dns_server, cloudflare.base_url)


async def new_domain(api, domain="setup.example.com", **tenant):
    _, key = await api.tenant(**tenant)
    created = await call(api, key, resend.Domains.create, {"name": domain})
    return key, created


async def setup(api, key, domain_id, token=TOKEN):
    return await api.json("POST", f"/domains/{domain_id}/dns-provider/cloudflare", key, json={"api_token": token})


def by_purpose(result) -> dict:
    out = {}
    for record in result["records"]:
        out.setdefault(record["purpose"], []).append(record)
    return out


@pt.ensureDeferred
async def test_setup_writes_the_records_and_the_check_verifies_them(api, cloudflare, dns_server):  # noqa: F811
    cloudflare.token(TOKEN)
    zone = cloudflare.zone("example.com")
    cloudflare.zone("example.org")
    key, created = await new_domain(api)

    code, result, _ = await setup(api, key, created["id"])
    assert code == 200, result
    assert result["object"] == "dns_setup" and result["zone"] == "example.com"
    records = by_purpose(result)
    assert {p: [r["action"] for r in rs] for p, rs in records.items()} == {
        "dkim": ["created", "created"], "return_path": ["created"], "spf": ["created"], "dmarc": ["created"],
    }
    assert records["return_path"][0] == {
        "purpose": "return_path", "type": "MX", "name": "bounces.setup.example.com", "content": MX_HOST,
        "priority": 10, "action": "created",
    }
    assert records["spf"][0]["content"] == f"v=spf1 include:{SPF_INCLUDE} ~all"
    assert len(zone.records) == 5
    dkim_values = {r["value"] for r in created["records"] if r["record"] == "DKIM"}
    assert {r["content"] for r in records["dkim"]} == dkim_values

    # A check is planned: the domain is pending, and verified once the zone is served.
    got = await call(api, key, resend.Domains.get, created["id"])
    assert got["status"] == "pending"
    cloudflare.publish(dns_server)
    assert await api.parts.domains.check_due() == 1
    assert (await call(api, key, resend.Domains.get, created["id"]))["status"] == "verified"

    # Running it again changes nothing.
    writes = len([r for r in cloudflare.requests if r[0] != "GET"])
    code, again, _ = await setup(api, key, created["id"])
    assert code == 200
    assert {r["action"] for r in again["records"]} == {"unchanged"}
    assert len([r for r in cloudflare.requests if r[0] != "GET"]) == writes
    assert len(zone.records) == 5


@pt.ensureDeferred
async def test_existing_spf_is_merged_dmarc_kept_stale_dkim_updated(api, cloudflare):  # noqa: F811
    cloudflare.token(TOKEN)
    zone = cloudflare.zone("example.com")
    key, created = await new_domain(api, "mail.example.com")
    selector = next(r["name"] for r in created["records"] if "k=rsa" in r["value"])
    unrelated = cloudflare.add_record(zone, "TXT", "bounces.mail.example.com", '"google-site-verification=abc"')
    spf = cloudflare.add_record(zone, "TXT", "bounces.mail.example.com",
                                '"v=spf1 include:_spf.google.com" " -all"')
    cloudflare.add_record(zone, "TXT", "_dmarc.mail.example.com", "v=DMARC1; p=reject; rua=mailto:d@example.com")
    stale = cloudflare.add_record(zone, "TXT", f"{selector}.mail.example.com", "v=DKIM1; k=rsa; p=OLDKEY")
    other_mx = cloudflare.add_record(zone, "MX", "bounces.mail.example.com", "inbound.example.com", 5)
    cloudflare.max_per_page = 1  # every list is paged

    code, result, _ = await setup(api, key, created["id"])
    assert code == 200, result
    records = by_purpose(result)
    assert records["spf"] == [{
        "purpose": "spf", "type": "TXT", "name": "bounces.mail.example.com",
        "content": f"v=spf1 include:_spf.google.com include:{SPF_INCLUDE} -all", "action": "updated",
        "previous": "v=spf1 include:_spf.google.com -all",
    }]
    assert records["dmarc"][0]["action"] == "kept"
    assert records["dmarc"][0]["content"] == "v=DMARC1; p=reject; rua=mailto:d@example.com"
    rsa = next(r for r in records["dkim"] if "k=rsa" in r["content"])
    assert rsa["action"] == "updated" and rsa["previous"] == "v=DKIM1; k=rsa; p=OLDKEY"
    assert records["return_path"][0]["action"] == "created"

    spf_records = [r for r in cloudflare.records("bounces.mail.example.com")
                   if r["type"] == "TXT" and "spf1" in r["content"]]
    assert [r["id"] for r in spf_records] == [spf["id"]]  # never a second SPF record
    assert unrelated["content"] == '"google-site-verification=abc"' and other_mx["content"] == "inbound.example.com"
    assert stale["content"] == rsa["content"]
    pages = [q for m, p, q in cloudflare.requests if p.endswith("/dns_records") and m == "GET"
             and q["name"] == "bounces.mail.example.com"]
    assert [q["page"] for q in pages] == ["1", "2", "3"]

    code, again, _ = await setup(api, key, created["id"])
    assert {r["action"] for r in again["records"]} == {"unchanged", "kept"}


@pt.ensureDeferred
async def test_setup_errors(api, cloudflare):  # noqa: F811
    cloudflare.zone("example.com")
    cloudflare.zone("example.org")
    cloudflare.token("disabled", status="disabled")
    cloudflare.token("no-zone-read", permissions=frozenset({"dns:edit"}))
    cloudflare.token("read-only", permissions=frozenset({"zone:read", "dns:read"}))
    cloudflare.token("other-zone", zones=frozenset({"example.org"}))
    key, created = await new_domain(api, plan="scale")

    expected = [
        ("unknown", 422, "dnsprov_invalid_token"),
        ("disabled", 422, "dnsprov_invalid_token"),
        ("no-zone-read", 422, "dnsprov_missing_permission"),
        ("read-only", 422, "dnsprov_missing_permission"),
        ("other-zone", 422, "dnsprov_zone_not_found"),
    ]
    for token, status, name in expected:
        code, body, _ = await setup(api, key, created["id"], token)
        assert (code, body["name"]) == (status, name), token
        if status == 422:
            assert body["message"].startswith("api_token")
    lonely = await call(api, key, resend.Domains.create, {"name": "elsewhere.example.net"})
    cloudflare.token(TOKEN)
    code, body, _ = await setup(api, key, lonely["id"])
    assert (code, body["name"]) == (422, "dnsprov_zone_not_found")

    cloudflare.down = True
    code, body, _ = await setup(api, key, created["id"])
    assert (code, body["name"]) == (502, "dnsprov_unavailable")
    cloudflare.down = False

    code, body, _ = await api.json("POST", f"/domains/{created['id']}/dns-provider/cloudflare", key, json={})
    assert (code, body["name"]) == (422, "validation_error") and body["message"].startswith("api_token")
    code, body, _ = await setup(api, key, "0190a2b4-0000-7000-8000-000000000000")
    assert (code, body["name"]) == (404, "not_found")


@pt.ensureDeferred
async def test_unreachable_provider(api, cloudflare):  # noqa: F811
    key, created = await new_domain(api)
    await cloudflare.stop()
    code, body, _ = await setup(api, key, created["id"])
    assert (code, body["name"]) == (502, "dnsprov_unavailable")
    cloudflare.start()  # for the fixture's stop


@pt.ensureDeferred
async def test_at_most_ten_setups_a_minute(api, cloudflare):  # noqa: F811
    cloudflare.token(TOKEN)
    cloudflare.zone("example.com")
    key, created = await new_domain(api)
    for _ in range(10):
        code, _, _ = await setup(api, key, created["id"], "wrong")
        assert code == 422
    code, body, response = await setup(api, key, created["id"])
    assert (code, body["name"]) == (429, "rate_limit_exceeded")
    assert 1 <= int(response.headers.getRawHeaders("Retry-After")[0]) <= 60
    # Another tenant has its own allowance.
    other_key, other = await new_domain(api, "other.example.com", name="Other")
    code, _, _ = await setup(api, other_key, other["id"])
    assert code == 200


@pt.ensureDeferred
async def test_the_token_is_never_stored_logged_or_echoed(api, cloudflare):  # noqa: F811
    cloudflare.token(TOKEN)
    cloudflare.zone("example.com")
    key, created = await new_domain(api)
    logged = []
    globalLogPublisher.addObserver(logged.append)
    try:
        replies = [await setup(api, key, created["id"])]
        cloudflare.down = True
        replies.append(await setup(api, key, created["id"]))
        cloudflare.down = False
        cloudflare.tokens.clear()
        replies.append(await setup(api, key, created["id"]))
    finally:
        globalLogPublisher.removeObserver(logged)
    assert [code for code, _, _ in replies] == [200, 502, 422]
    for _, body, response in replies:
        assert TOKEN not in json.dumps(body)
        assert TOKEN not in repr(list(response.headers.getAllRawHeaders()))
    from twisted.logger import formatEvent

    assert logged, "the set-up logs something (so this search could find the token)"
    assert all(TOKEN not in formatEvent(e) and TOKEN not in repr(e) for e in logged)
    tables = await api.parts.db.fetchall(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    for table in (t["table_name"] for t in tables):
        rows = await api.parts.db.fetchall(f'SELECT row_to_json(t)::text AS j FROM "{table}" t')
        assert all(TOKEN not in r["j"] for r in rows), table
