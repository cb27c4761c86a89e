"""Domains through the official Python SDK (and plain HTTP where the SDK has no call)."""

import uuid

import pytest
import pytest_twisted as pt
import resend
import resend.exceptions

from mailsvc.app import domains as domains_module
from tests.helpers.domainsupport import MX_HOST, SPF_INCLUDE, domain_config, publish
from tests.helpers.polling import async_until
from tests.helpers.sdk import call


@pytest.fixture
def config(dns_server):
    return domain_config(dns_server)


async def sdk_error(api, key, fn, *args) -> resend.exceptions.ResendError:
    with pytest.raises(resend.exceptions.ResendError) as e:
        await call(api, key, fn, *args)
    return e.value


async def domain_events(api) -> list[dict]:
    rows = await api.parts.db.fetchall("SELECT data FROM events WHERE type = 'domain.updated' ORDER BY id")
    return [row["data"] for row in rows]


@pt.ensureDeferred
async def test_create_retrieve_list_update_delete_with_the_sdk(api):
    _, key = await api.tenant(plan="starter")
    created = await call(api, key, resend.Domains.create, {"name": "Example.COM."})
    assert "object" not in created
    assert created["name"] == "example.com" and created["status"] == "not_started"
    assert created["open_tracking"] is False and created["click_tracking"] is False
    assert created["capabilities"] == {"sending": "enabled", "receiving": "disabled"}
    assert created["region"] == "local" and created["tls"] == "opportunistic"
    records = created["records"]
    dkim = [r for r in records if r["record"] == "DKIM"]
    assert len(dkim) == 2
    assert {r["value"].split(";")[1].strip() for r in dkim} == {"k=rsa", "k=ed25519"}
    assert all(r["name"].endswith("._domainkey") and r["type"] == "TXT" for r in dkim)
    spf = [r for r in records if r["record"] == "SPF"]
    assert {(r["name"], r["type"], r["value"]) for r in spf} == {
        ("bounces", "MX", MX_HOST), ("bounces", "TXT", f"v=spf1 include:{SPF_INCLUDE} ~all"),
    }
    assert next(r for r in spf if r["type"] == "MX")["priority"] == 10
    assert [(r["name"], r["value"]) for r in records if r["record"] == "DMARC"] == [
        ("_dmarc", f"v=DMARC1; p=none; rua=mailto:dmarc@bounces.{created['name']};")]
    assert all(r["status"] == "not_started" and r["ttl"] == "Auto" for r in records)

    got = await call(api, key, resend.Domains.get, created["id"])
    assert got["object"] == "domain" and got["records"] == records

    second = await call(api, key, resend.Domains.create, {"name": "mail.example.org", "custom_return_path": "Rp"})
    assert {r["name"] for r in second["records"] if r["record"] == "SPF"} == {"rp"}
    listed = await call(api, key, resend.Domains.list)
    assert [d["id"] for d in listed["data"]] == [second["id"], created["id"]]
    assert all("records" not in d and "object" not in d for d in listed["data"])
    page = await call(api, key, resend.Domains.list, {"limit": 1})
    assert page["has_more"] is True and len(page["data"]) == 1

    updated = await call(api, key, resend.Domains.update,
                         {"id": created["id"], "tls": "enforced", "open_tracking": True})
    assert updated["object"] == "domain" and updated["id"] == created["id"]
    got = await call(api, key, resend.Domains.get, created["id"])
    assert got["tls"] == "enforced" and got["open_tracking"] is False

    removed = await call(api, key, resend.Domains.remove, created["id"])
    assert removed == {**removed, "object": "domain", "id": created["id"], "deleted": True}
    error = await sdk_error(api, key, resend.Domains.get, created["id"])
    assert (error.code, error.error_type, error.message) == (404, "not_found", "Domain not found")
    error = await sdk_error(api, key, resend.Domains.remove, created["id"])
    assert error.code == 404
    assert await api.parts.db.fetchall("SELECT * FROM dkim_keys WHERE domain_id = %s", (created["id"],)) == []


@pt.ensureDeferred
async def test_name_and_field_rules(api):
    _, key = await api.tenant(plan="scale")
    bad = [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": 7}, "name"),
        ({"name": "192.0.2.1"}, "name"),
        ({"name": "[2001:db8::1]"}, "name"),
        ({"name": "localhost"}, "name"),
        ({"name": "example.test"}, "name"),  # no public suffix
        ({"name": "co.uk"}, "name"),  # a public suffix itself
        ({"name": "github.io"}, "name"),  # a private-section suffix
        ({"name": "-bad.example.com"}, "name"),
        ({"name": "a..example.com"}, "name"),
        ({"name": ("a" * 60 + ".") * 4 + "example.com"}, "name"),  # over 253
        ({"name": "ok.example.com", "custom_return_path": "two.labels"}, "custom_return_path"),
        ({"name": "ok.example.com", "custom_return_path": "_x"}, "custom_return_path"),
        ({"name": "ok.example.com", "tls": "always"}, "tls"),
        ({"name": "ok.example.com", "capabilities": {"receiving": "enabled"}}, "capabilities.receiving"),
        ({"name": "ok.example.com", "open_tracking": "yes"}, "open_tracking"),
    ]
    for body, field in bad:
        code, reply, _ = await api.json("POST", "/domains", key, json=body)
        assert (code, reply["name"]) == (422, "validation_error"), body
        assert reply["message"].startswith(field), (body, reply)
    error = await sdk_error(api, key, resend.Domains.create, {"name": "example.test"})
    assert isinstance(error, resend.exceptions.ValidationError)

    idn = await call(api, key, resend.Domains.create, {"name": "Bücher.de", "tls": "enforced",
                                                        "click_tracking": True, "region": "eu-west-1"})
    assert idn["name"] == "xn--bcher-kva.de" and idn["tls"] == "enforced" and idn["click_tracking"] is False
    under_private = await call(api, key, resend.Domains.create, {"name": "project.github.io"})
    assert under_private["name"] == "project.github.io"


@pt.ensureDeferred
async def test_plan_limit_and_names_of_other_accounts(api):
    tenant_a, key_a = await api.tenant(name="Alpha Corp")
    _, key_b = await api.tenant(name="Beta")
    await call(api, key_a, resend.Domains.create, {"name": "alpha.example.com"})
    error = await sdk_error(api, key_a, resend.Domains.create, {"name": "second.example.com"})
    assert (error.code, error.error_type) == (403, "validation_error")
    assert "plan allows 1 domain" in error.message

    error = await sdk_error(api, key_b, resend.Domains.create, {"name": "ALPHA.example.com"})
    assert (error.code, error.error_type) == (403, "validation_error")
    assert error.message.startswith("name") and "another account" in error.message
    assert "Alpha" not in error.message and tenant_a["id"] not in error.message
    error = await sdk_error(api, key_a, resend.Domains.create, {"name": "alpha.example.com"})
    assert error.code == 403 and "this account" in error.message

    code, reply, _ = await api.json("POST", "/v1/domains", key_a, json={"name": "third.example.com"})
    assert (code, reply["error"]["code"]) == (403, "plan_limit")


@pt.ensureDeferred
async def test_the_test_domain_and_names_under_it_are_no_sending_domain(api):
    _, key = await api.tenant(plan="scale")
    for name, why in [("resend.dev", "is the test domain"), ("RESEND.dev.", "is the test domain"),
                      ("mail.resend.dev", "is under the test domain resend.dev")]:
        error = await sdk_error(api, key, resend.Domains.create, {"name": name})
        assert (error.code, error.error_type) == (403, "validation_error"), name
        assert error.message.startswith(f"name: the domain {name.lower().rstrip('.')} {why}"), error.message
        assert "cannot be a sending domain" in error.message
    code, reply, _ = await api.json("POST", "/v1/domains", key, json={"name": "resend.dev"})
    assert code == 403 and reply["error"]["message"].startswith("name: the domain resend.dev"), reply
    assert await api.parts.db.fetchall("SELECT name FROM domains") == []
    # A name that only ends like it is another name.
    assert (await call(api, key, resend.Domains.create, {"name": "notresend.dev"}))["name"] == "notresend.dev"


@pt.ensureDeferred
async def test_a_claim_never_verified_lapses_after_the_verification_window(api, config):
    _, key_a = await api.tenant(name="Squatter", plan="scale")
    _, key_b = await api.tenant(name="Owner", plan="scale")
    code, squatted, _ = await api.json("POST", "/domains", key_a, json={"name": "owned.example.com"})
    code, verified, _ = await api.json("POST", "/domains", key_a, json={"name": "kept.example.com"})
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (verified["id"],))
    window = config.domains.verification_window
    # Within the window the claim holds, however often its account asks for checks.
    await api.parts.db.execute(
        "UPDATE domains SET created_at = created_at - %s * interval '1 second' + interval '1 minute'", (window,))
    code, body, _ = await api.json("POST", "/domains", key_b, json={"name": "owned.example.com"})
    assert code == 403 and "another account" in body["message"]
    # Past it, a never-verified claim goes to whoever adds the name; a verified one never does.
    await api.parts.db.execute("UPDATE domains SET created_at = created_at - interval '2 minutes'")
    code, taken, _ = await api.json("POST", "/domains", key_b, json={"name": "owned.example.com"})
    assert code == 201 and taken["id"] != squatted["id"]
    code, _, _ = await api.json("GET", f"/domains/{squatted['id']}", key_a)
    assert code == 404
    code, body, _ = await api.json("POST", "/domains", key_b, json={"name": "kept.example.com"})
    assert code == 403 and "another account" in body["message"]


@pt.ensureDeferred
async def test_verification_through_the_dns_server(api, dns_server):
    tenant, key = await api.tenant()
    created = await call(api, key, resend.Domains.create, {"name": "verify.example.com"})
    publish(dns_server, created, skip=("bounces/MX",))

    answer = await call(api, key, resend.Domains.verify, created["id"])
    assert answer == {**answer, "object": "domain", "id": created["id"]}
    got = await call(api, key, resend.Domains.get, created["id"])
    assert got["status"] == "pending"
    assert await api.parts.domains.check_due() == 1
    got = await call(api, key, resend.Domains.get, created["id"])
    assert got["status"] == "pending"
    statuses = {(r["record"], r["type"]): r["status"] for r in got["records"]}
    assert statuses == {("DKIM", "TXT"): "verified", ("SPF", "MX"): "pending", ("SPF", "TXT"): "verified",
                        ("DMARC", "TXT"): "verified"}

    dns_server.mx(f"bounces.{created['name']}", MX_HOST.upper() + ".")
    await call(api, key, resend.Domains.verify, created["id"])
    assert await api.parts.domains.check_due() == 1
    got = await call(api, key, resend.Domains.get, created["id"])
    assert got["status"] == "verified"
    assert {r["status"] for r in got["records"]} == {"verified"}
    # The first verify (not_started to pending) reports nothing: `previous` is never not_started.
    assert await domain_events(api) == [
        {"domain_id": created["id"], "domain": "verify.example.com", "status": "verified", "previous": "pending"},
    ]
    # Verifying a verified domain checks it again without leaving "verified".
    await call(api, key, resend.Domains.verify, created["id"])
    assert (await call(api, key, resend.Domains.get, created["id"]))["status"] == "verified"
    assert len(await domain_events(api)) == 1


@pt.ensureDeferred
async def test_verify_wakes_the_scheduler_loop(api, dns_server):
    _, key = await api.tenant()
    created = await call(api, key, resend.Domains.create, {"name": "woken.example.com"})
    publish(dns_server, created)
    loop = next(loop for loop in api.parts.loops if loop.desc == "check domains")
    loop.start()
    await call(api, key, resend.Domains.verify, created["id"])

    async def verified() -> bool:
        return (await call(api, key, resend.Domains.get, created["id"]))["status"] == "verified"

    await async_until(verified, 10, "the domain verified by the woken check loop")


@pt.ensureDeferred
async def test_native_surface(api):
    _, key = await api.tenant()
    code, created, _ = await api.json("POST", "/v1/domains", key, json={"name": "native.example.com"})
    assert code == 201 and created["object"] == "domain" and len(created["records"]) == 5
    code, listed, _ = await api.json("GET", "/v1/domains", key)
    assert code == 200 and listed["data"][0]["object"] == "domain" and "records" not in listed["data"][0]
    code, got, _ = await api.json("GET", f"/v1/domains/{created['id']}", key)
    assert code == 200 and got["records"] == created["records"]
    code, answer, _ = await api.json("POST", f"/v1/domains/{created['id']}/verify", key)
    assert (code, answer) == (202, {"object": "domain", "id": created["id"], "status": "pending"})
    response, body = await api.request("DELETE", f"/v1/domains/{created['id']}", key)
    assert (response.code, body) == (204, b"")
    code, error, _ = await api.json("GET", f"/v1/domains/{created['id']}", key)
    assert code == 404 and error["error"]["code"] == "not_found"
    code, error, _ = await api.json("POST", "/v1/domains", key, json={"name": "1.2.3.4"})
    assert code == 422 and error["error"]["field"] == "name"
    code, error, _ = await api.json("GET", "/v1/domains/not-a-uuid", key)
    assert code == 404


@pt.ensureDeferred
async def test_tenant_isolation(api):
    _, key_a = await api.tenant(name="A")
    _, key_b = await api.tenant(name="B")
    mine = await call(api, key_a, resend.Domains.create, {"name": "iso.example.com"})
    for fn, arg in [(resend.Domains.get, mine["id"]), (resend.Domains.remove, mine["id"]),
                    (resend.Domains.verify, mine["id"]),
                    (resend.Domains.update, {"id": mine["id"], "tls": "enforced"})]:
        error = await sdk_error(api, key_b, fn, arg)
        assert error.code == 404, fn
    assert (await call(api, key_b, resend.Domains.list))["data"] == []


@pt.ensureDeferred
async def test_api_key_domain_must_be_a_verified_domain_of_the_tenant(api):
    tenant, key = await api.tenant()
    _, other_key = await api.tenant(name="Other")
    created = await call(api, key, resend.Domains.create, {"name": "keys.example.com"})
    error = await sdk_error(api, key, resend.ApiKeys.create,
                            {"name": "restricted", "permission": "sending_access", "domain_id": created["id"]})
    assert (error.code, error.error_type) == (403, "validation_error")
    assert error.message.startswith("domain_id") and "not verified" in error.message
    code, reply, _ = await api.json("POST", "/v1/api-keys", key, json={"name": "r", "domain_id": created["id"]})
    assert (code, reply["error"]["code"]) == (403, "domain_not_verified")

    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (created["id"],))
    restricted = await call(api, key, resend.ApiKeys.create, {"name": "restricted", "domain_id": created["id"]})
    assert restricted["token"]
    error = await sdk_error(api, other_key, resend.ApiKeys.create, {"name": "x", "domain_id": created["id"]})
    assert (error.code, error.error_type) == (404, "not_found")

    # Deleting the domain deletes the keys restricted to it.
    await call(api, key, resend.Domains.remove, created["id"])
    names = {k["name"] for k in (await call(api, key, resend.ApiKeys.list))["data"]}
    assert names == {"Default"}


@pt.ensureDeferred
async def test_sending_domain_opens_the_sealed_keys(api):
    tenant, key = await api.tenant()
    created = await call(api, key, resend.Domains.create, {"name": "send.example.com", "tls": "enforced"})
    tenant_id = uuid.UUID(tenant["id"])
    found = await api.parts.domains.lookup_sending_domain(tenant_id, "SEND.example.com")
    assert found.id == uuid.UUID(created["id"]) and found.name == "send.example.com"
    assert (found.status, found.tls, found.return_path_host) == ("not_started", "enforced", "bounces.send.example.com")
    assert [(s.algorithm, s.selector) for s in found.signers] == [
        ("rsa-sha256", next(r["name"] for r in created["records"] if "k=rsa" in r["value"]).split(".")[0]),
        ("ed25519-sha256", next(r["name"] for r in created["records"] if "k=ed25519" in r["value"]).split(".")[0]),
    ]
    assert await api.parts.domains.lookup_sending_domain(tenant_id, "other.example.com") is None
    assert await api.parts.domains.lookup_sending_domain(uuid.uuid4(), "send.example.com") is None

    # At rest the private keys are sealed: their DER is nowhere in the table, and a sealed
    # key moved to another row does not open.
    from cryptography.hazmat.primitives import serialization

    rows = await api.parts.db.fetchall("SELECT id, private_key FROM dkim_keys ORDER BY id")
    for signer in found.signers:
        der = signer.private_key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        assert all(der not in bytes(row["private_key"]) for row in rows)


def test_a_sealed_key_opens_only_for_its_own_row():
    from cryptography.exceptions import InvalidTag

    from mailsvc.crypto.keyvault import KeyVault
    from mailsvc.mail import dkim

    keys = domains_module.SigningKeys(KeyVault(b"k" * 32))
    pair = dkim.generate("sel", dkim.ED25519)
    mine, other = uuid.uuid4(), uuid.uuid4()
    sealed = keys.seal(mine, pair.private_der)
    assert dkim.public_key_of(keys.signer(mine, "sel", dkim.ED25519, sealed).private_key) == pair.public_key
    with pytest.raises(InvalidTag):
        keys.signer(other, "sel", dkim.ED25519, sealed)
    with pytest.raises(InvalidTag):
        domains_module.SigningKeys(KeyVault(b"z" * 32)).signer(mine, "sel", dkim.ED25519, sealed)
