"""The suppression list: the SDK's calls, plain HTTP, the native surface, and the module the
sending paths and the MTA call, all on the real database."""

import uuid
from urllib.parse import quote

import pytest
import pytest_twisted as pt
import resend
import resend.exceptions
from twisted.internet import defer, task

from mailsvc.app import suppressions
from mailsvc.domain.suppression import normal_form
from mailsvc.store import suppressions as suppression_rows
from tests.helpers.sdk import call
from tests.helpers.tenants import new_tenant


async def _tenant_id(api, key) -> uuid.UUID:
    caller = await api.parts.keyring.authenticate(key)
    return caller.tenant.id


def _body(reply: dict) -> dict:
    """An SDK reply without the response headers the SDK adds to it."""
    return {k: v for k, v in reply.items() if k != "http_headers"}


async def _add(api, tenant_id, address, origin, source_id=None, clock=None):
    from twisted.internet import reactor

    return await api.parts.db.run(
        "add", suppressions.add, clock or reactor, tenant_id, address, origin, source_id
    )


@pt.ensureDeferred
async def test_add_get_list_remove_with_the_sdk(api):
    _, key = await api.tenant()
    added = await call(api, key, resend.Suppressions.add, {"email": "Steve.Wozniak@Example.com"})
    assert added["object"] == "suppression"
    again = await call(api, key, resend.Suppressions.add, {"email": "steve.wozniak@EXAMPLE.com "})
    assert again["id"] == added["id"]  # one record per address

    by_id = _body(await call(api, key, resend.Suppressions.get, added["id"]))
    by_address = _body(await call(api, key, resend.Suppressions.get, "STEVE.wozniak@example.com"))
    assert by_id == by_address
    assert {k: by_id[k] for k in ("object", "id", "email", "origin", "source_id")} == {
        "object": "suppression", "id": added["id"], "email": "steve.wozniak@example.com",
        "origin": "manual", "source_id": None,
    }
    assert by_id["created_at"].endswith("+00") and len(by_id["created_at"]) == 29

    listed = await call(api, key, resend.Suppressions.list)
    assert listed["object"] == "list" and listed["has_more"] is False
    assert listed["data"] == [{k: v for k, v in by_id.items() if k in
                               ("id", "email", "origin", "source_id", "created_at")}]

    batch = await call(api, key, resend.Suppressions.Batch.add,
                       {"emails": ["a@example.com", "B@example.com", "b@example.com"]})
    assert [item["object"] for item in batch["data"]] == ["suppression", "suppression"]
    removed = await call(api, key, resend.Suppressions.Batch.remove, {"ids": [batch["data"][0]["id"]]})
    assert removed["data"] == [{"object": "suppression", "id": batch["data"][0]["id"], "deleted": True}]
    removed = await call(api, key, resend.Suppressions.Batch.remove, {"emails": ["b@EXAMPLE.com", "gone@x.com"]})
    assert removed["data"] == [{"object": "suppression", "id": batch["data"][1]["id"], "deleted": True}]

    gone = await call(api, key, resend.Suppressions.remove, "Steve.Wozniak@example.com")
    assert _body(gone) == {"object": "suppression", "id": added["id"], "deleted": True}
    with pytest.raises(resend.exceptions.ResendError) as e:
        await call(api, key, resend.Suppressions.get, added["id"])
    assert (e.value.code, e.value.error_type, e.value.message) == (404, "not_found", "Suppression not found")
    assert (await call(api, key, resend.Suppressions.list))["data"] == []


@pt.ensureDeferred
async def test_status_codes_and_shapes_over_plain_http(api):
    _, key = await api.tenant()
    code, body, response = await api.json("POST", "/suppressions", key, json={"email": "x@example.com"})
    assert code == 201 and set(body) == {"object", "id"}
    assert response.headers.getRawHeaders("content-type") == ["application/json"]
    code, body, _ = await api.json("POST", "/suppressions/batch/add", key, json={"emails": ["y@example.com"]})
    assert code == 201 and set(body) == {"data"} and set(body["data"][0]) == {"object", "id"}
    code, body, _ = await api.json("POST", "/suppressions/batch/remove", key, json={"emails": ["y@example.com"]})
    assert code == 200 and body["data"][0]["deleted"] is True
    code, body, _ = await api.json("DELETE", "/suppressions/x@example.com", key)
    assert code == 200 and body["deleted"] is True and body["object"] == "suppression"
    code, body, _ = await api.json("DELETE", "/suppressions/x@example.com", key)
    assert (code, body) == (404, {"statusCode": 404, "name": "not_found", "message": "Suppression not found"})
    for path in ["/suppressions/nothing-here", "/suppressions/" + str(uuid.uuid4())]:
        code, body, _ = await api.json("GET", path, key)
        assert (code, body["message"]) == (404, "Suppression not found"), path

    code, body, _ = await api.json("POST", "/suppressions", key, json={})
    assert (code, body["name"]) == (422, "validation_error") and body["message"].startswith("email")
    code, body, _ = await api.json("POST", "/suppressions", key, json={"email": "not an address"})
    assert code == 422 and body["message"].startswith("email")

    _, sender, _ = await api.json("POST", "/api-keys", key, json={"name": "s", "permission": "sending_access"})
    for method, path in [("GET", "/suppressions"), ("POST", "/suppressions"),
                         ("DELETE", "/suppressions/x@example.com"), ("GET", "/v1/suppressions")]:
        code, body, _ = await api.json(method, path, sender["token"], json={"email": "z@example.com"})
        assert code == 401, (method, path)


@pt.ensureDeferred
async def test_addresses_in_paths_may_be_percent_encoded(api):
    _, key = await api.tenant()
    addresses = ["Bob+Tag@Example.com", "a/b@example.com", "anne@bücher.de", "o'neil@example.com",
                 "50%off@example.com"]
    for address in addresses:
        await api.json("POST", "/suppressions", key, json={"email": address})
    for address in addresses:
        code, body, _ = await api.json("GET", "/suppressions/" + quote(address, safe=""), key)
        assert code == 200, (address, body)
        assert body["email"] == normal_form(address)
    # A plus sign in a path is a plus, not a space; an unencoded @ works too.
    code, body, _ = await api.json("GET", "/suppressions/bob+tag@example.com", key)
    assert (code, body["email"]) == (200, "bob+tag@example.com")
    code, body, _ = await api.json("GET", "/suppressions/anne@xn--bcher-kva.de", key)
    assert code == 200
    for address in addresses:
        code, _, _ = await api.json("DELETE", "/suppressions/" + quote(address.upper(), safe=""), key)
        assert code == 200, address
    _, listed, _ = await api.json("GET", "/suppressions", key)
    assert listed["data"] == []


@pt.ensureDeferred
async def test_batch_limits_and_errors(api):
    _, key = await api.tenant()
    hundred = [f"user{i}@example.com" for i in range(100)]
    code, added, _ = await api.json("POST", "/suppressions/batch/add", key, json={"emails": hundred})
    assert code == 201 and len(added["data"]) == 100
    rows = await api.parts.db.fetchall("SELECT count(*) AS n FROM suppressions")
    assert rows[0]["n"] == 100

    for path, payload, field in [
        ("add", {}, "emails"),
        ("add", {"emails": []}, "emails"),
        ("add", {"emails": "a@example.com"}, "emails"),
        ("add", {"emails": hundred + ["one-more@example.com"]}, "emails"),
        ("add", {"emails": ["ok@example.com", "bad"]}, "emails[1]"),
        ("remove", {}, "emails"),
        ("remove", {"emails": ["a@example.com"], "ids": [str(uuid.uuid4())]}, "emails"),
        ("remove", {"emails": []}, "emails"),
        ("remove", {"ids": [str(uuid.uuid4()) for _ in range(101)]}, "ids"),
        ("remove", {"ids": ["nope"]}, "ids[0]"),
        ("remove", {"emails": ["x@example.com", "@"]}, "emails[1]"),
    ]:
        code, body, _ = await api.json("POST", f"/suppressions/batch/{path}", key, json=payload)
        assert (code, body["name"]) == (422, "validation_error"), (path, payload)
        assert body["message"].startswith(field + " "), (body, field)
    code, body, _ = await api.json("POST", "/suppressions/batch/add", key, data=b"[1, 2]",
                                   headers={"Content-Type": "application/json"})
    assert code == 422
    # Nothing of a refused batch was written.
    rows = await api.parts.db.fetchall("SELECT count(*) AS n FROM suppressions")
    assert rows[0]["n"] == 100

    code, removed, _ = await api.json("POST", "/suppressions/batch/remove", key, json={"emails": hundred})
    assert code == 200
    assert [item["id"] for item in removed["data"]] == [item["id"] for item in added["data"]]
    _, listed, _ = await api.json("GET", "/suppressions", key)
    assert listed["data"] == []


@pt.ensureDeferred
async def test_batch_results_follow_the_request_order(api):
    _, key = await api.tenant()
    emails = ["m@example.com", "c@example.com", "x@example.com", "a@example.com"]
    _, added, _ = await api.json("POST", "/suppressions/batch/add", key, json={"emails": emails})
    ids = [item["id"] for item in added["data"]]
    for email, item_id in zip(emails, ids, strict=True):
        _, one, _ = await api.json("GET", f"/suppressions/{email}", key)
        assert one["id"] == item_id
    # Adding again returns the same records.
    _, again, _ = await api.json("POST", "/suppressions/batch/add", key, json={"emails": emails[::-1]})
    assert [item["id"] for item in again["data"]] == ids[::-1]
    _, removed, _ = await api.json("POST", "/suppressions/batch/remove", key,
                                   json={"ids": [ids[2], str(uuid.uuid4()), ids[0]]})
    assert [item["id"] for item in removed["data"]] == [ids[2], ids[0]]


@pt.ensureDeferred
async def test_origin_filter_and_pagination(api):
    _, key = await api.tenant()
    tenant_id = await _tenant_id(api, key)
    clock = task.Clock()
    clock.advance(1_800_000_000)
    email_id = uuid.uuid4()
    origins = ["manual", "hard_bounce", "complaint", "unsubscribe", "hard_bounce", "manual", "manual"]
    for i, origin in enumerate(origins):
        clock.advance(1)  # distinct, increasing ids
        await _add(api, tenant_id, f"u{i}@example.com", origin,
                   None if origin == "manual" else email_id, clock)

    _, everything, _ = await api.json("GET", "/suppressions", key)
    assert [item["email"] for item in everything["data"]] == [f"u{i}@example.com" for i in range(6, -1, -1)]
    for origin in ["manual", "hard_bounce", "complaint", "unsubscribe"]:
        code, body, _ = await api.json("GET", f"/suppressions?origin={origin}", key)
        assert code == 200
        assert [item["origin"] for item in body["data"]] == [o for o in origins[::-1] if o == origin]
    _, bounced, _ = await api.json("GET", "/suppressions?origin=bounce", key)
    assert [item["email"] for item in bounced["data"]] == ["u4@example.com", "u1@example.com"]
    assert bounced["data"][0]["source_id"] == str(email_id)
    code, body, _ = await api.json("GET", "/suppressions?origin=soft", key)
    assert (code, body["name"]) == (422, "validation_error") and body["message"].startswith("origin")
    code, body, _ = await api.json("GET", "/v1/suppressions?origin=soft", key)
    assert code == 422 and body["error"]["field"] == "origin"

    # Pages of two manual records at a time, forwards then backwards.
    _, first, _ = await api.json("GET", "/suppressions?origin=manual&limit=2", key)
    assert [i["email"] for i in first["data"]] == ["u6@example.com", "u5@example.com"] and first["has_more"]
    _, second, _ = await api.json("GET", f"/suppressions?origin=manual&limit=2&after={first['data'][-1]['id']}", key)
    assert [i["email"] for i in second["data"]] == ["u0@example.com"] and not second["has_more"]
    _, back, _ = await api.json("GET", f"/suppressions?origin=manual&limit=2&before={second['data'][0]['id']}", key)
    assert back["data"] == first["data"] and not back["has_more"]
    for query in ["limit=0", "limit=101", "limit=x", "after=nope", f"after={email_id}&before={email_id}"]:
        code, body, _ = await api.json("GET", f"/suppressions?{query}", key)
        assert (code, body["name"]) == (422, "validation_error"), query


@pt.ensureDeferred
async def test_native_surface(api):
    _, key = await api.tenant()
    code, created, _ = await api.json("POST", "/v1/suppressions", key, json={"email": "N@Example.com"})
    assert code == 201
    assert created["object"] == "suppression" and created["email"] == "n@example.com"
    assert created["origin"] == "manual" and created["source_id"] is None
    code, listed, _ = await api.json("GET", "/v1/suppressions", key)
    assert code == 200 and listed["data"] == [created]
    code, body, _ = await api.json("POST", "/v1/suppressions", key, json={"email": "nope"})
    assert code == 422 and body["error"]["code"] == "validation_error" and body["error"]["field"] == "email"
    response, raw = await api.request("DELETE", "/v1/suppressions/n%40example.com", key)
    assert (response.code, raw) == (204, b"")
    code, body, _ = await api.json("DELETE", "/v1/suppressions/n%40example.com", key)
    assert code == 404 and body["error"]["code"] == "not_found"


@pt.ensureDeferred
async def test_another_accounts_list_never_affects_this_one(api):
    _, key_a = await api.tenant(name="A")
    _, key_b = await api.tenant(name="B")
    tenant_a, tenant_b = await _tenant_id(api, key_a), await _tenant_id(api, key_b)
    _, mine, _ = await api.json("POST", "/suppressions", key_a, json={"email": "shared@example.com"})
    await _add(api, tenant_a, "bounced@example.com", "hard_bounce", uuid.uuid4())

    for path in [f"/suppressions/{mine['id']}", "/suppressions/shared@example.com"]:
        code, _, _ = await api.json("GET", path, key_b)
        assert code == 404
        code, _, _ = await api.json("DELETE", path, key_b)
        assert code == 404
    _, listed, _ = await api.json("GET", "/suppressions", key_b)
    assert listed["data"] == []
    _, removed, _ = await api.json("POST", "/suppressions/batch/remove", key_b, json={"ids": [mine["id"]]})
    assert removed["data"] == []
    _, removed, _ = await api.json("POST", "/suppressions/batch/remove", key_b, json={"emails": ["shared@example.com"]})
    assert removed["data"] == []
    recipients = ["shared@example.com", "bounced@example.com"]
    assert await suppressed_among(api.parts.db, tenant_b, recipients) == {}

    # B suppressing the same address makes a record of its own; removing it leaves A's.
    _, theirs, _ = await api.json("POST", "/suppressions", key_b, json={"email": "shared@example.com"})
    assert theirs["id"] != mine["id"]
    await api.json("DELETE", "/suppressions/shared@example.com", key_b)
    assert await suppressed_among(api.parts.db, tenant_a, recipients) == {
        "shared@example.com": "manual", "bounced@example.com": "hard_bounce",
    }


class CountingStatements:
    """The database, counting the statements a caller runs through it."""

    def __init__(self, db):
        self._db = db
        self.statements = 0

    async def fetchall(self, sql, args=None):
        self.statements += 1
        return await self._db.fetchall(sql, args)


async def suppressed_among(db_or_txn, tenant_id, addresses) -> dict:
    """One account's suppressed addresses among ``addresses``, as ``suppressed_for`` answers."""
    return (await suppression_rows.suppressed_for(db_or_txn, {tenant_id: addresses})).get(tenant_id, {})


@pt.ensureDeferred
async def test_suppressed_for_in_one_query_on_the_database_or_in_a_transaction(api):
    _, key = await api.tenant()
    tenant_id = await _tenant_id(api, key)
    _, other_key = await api.tenant()
    other_id = await _tenant_id(api, other_key)
    await _add(api, other_id, "fine@example.com", "manual")
    await _add(api, tenant_id, "gone@example.com", "hard_bounce", uuid.uuid4())
    await _add(api, tenant_id, "angry@bücher.de", "complaint", uuid.uuid4())
    await _add(api, tenant_id, "left@example.com", "unsubscribe")
    given = ["Gone@EXAMPLE.com", "fine@example.com", "ANGRY@xn--bcher-kva.de", "left@example.com.",
             "not an address", "gone@example.com"]
    expected = {"Gone@EXAMPLE.com": "hard_bounce", "ANGRY@xn--bcher-kva.de": "complaint",
                "left@example.com.": "unsubscribe", "gone@example.com": "hard_bounce"}

    counting = CountingStatements(api.parts.db)
    assert await suppression_rows.suppressed_for(counting, {tenant_id: given, other_id: given}) == {
        tenant_id: expected, other_id: {"fine@example.com": "manual"}}
    assert counting.statements == 1
    assert await suppressed_among(counting, tenant_id, []) == {}
    assert await suppressed_among(counting, tenant_id, ["nope"]) == {}
    assert counting.statements == 1

    async def accept(txn):
        return await suppressed_among(txn, tenant_id, given)

    assert await api.parts.db.run("accept", accept) == expected

    # A removal through the API is seen by the very next lookup: nothing is cached.
    await api.json("DELETE", "/suppressions/gone@example.com", key)
    assert "gone@example.com" not in await suppressed_among(api.parts.db, tenant_id, given)


@pt.ensureDeferred
async def test_add_keeps_one_record_and_honours_the_strength_order(db):
    clock = task.Clock()
    clock.advance(1_800_000_000)
    tenant = await new_tenant(clock, db)
    first_email, second_email, third_email = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()

    async def add(address, origin, source_id=None):
        clock.advance(1)
        return await db.run("add", suppression_rows.add, clock, tenant.id, address, origin, source_id)

    manual = await add("Z@example.com", "manual")
    assert (manual["email"], manual["origin"], manual["source_id"]) == ("z@example.com", "manual", None)
    bounced = await add("z@EXAMPLE.com", "hard_bounce", first_email)
    assert (bounced["id"], bounced["created_at"]) == (manual["id"], manual["created_at"])
    assert (bounced["origin"], bounced["source_id"]) == ("hard_bounce", first_email)
    # Weaker or equal origins leave the record as it is, source included.
    for origin, source in [("unsubscribe", None), ("manual", None), ("hard_bounce", second_email)]:
        kept = await add("z@example.com", origin, source)
        assert (kept["id"], kept["origin"], kept["source_id"]) == (manual["id"], "hard_bounce", first_email)
    complained = await add("z@example.com", "complaint", third_email)
    assert (complained["id"], complained["origin"], complained["source_id"]) == (
        manual["id"], "complaint", third_email)
    rows = await db.fetchall("SELECT email, origin FROM suppressions")
    assert rows == [{"email": "z@example.com", "origin": "complaint"}]

    with pytest.raises(ValueError):
        await add("z@example.com", "soft_bounce")

    # Many adds of one address at once: one record, of the strongest origin.
    async def add_now(origin):
        return await db.run("add", suppression_rows.add, clock, tenant.id, "race@example.com", origin,
                            None if origin == "manual" else first_email)

    racing = ["manual", "unsubscribe", "hard_bounce", "manual", "complaint", "unsubscribe", "hard_bounce"] * 2
    results = await defer.gatherResults(
        [defer.ensureDeferred(add_now(origin)) for origin in racing], consumeErrors=True
    )
    assert len({row["id"] for row in results}) == 1
    final = await suppressions.get(db, tenant.id, "race@example.com")
    assert final["origin"] == "complaint"

    # A record removed is gone for good; adding again makes a new one.
    removed = await suppressions.remove(db, tenant.id, "Z@Example.com", clock=clock)
    assert removed["id"] == manual["id"]
    assert await suppressions.remove(db, tenant.id, "z@example.com", clock=clock) is None
    assert await suppressions.remove(db, tenant.id, "no address", clock=clock) is None
    again = await add("z@example.com", "manual")
    assert again["id"] != manual["id"] and again["origin"] == "manual"
