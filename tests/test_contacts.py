"""
Contacts, segments and audiences (issue 16) on the real database through the official Python
SDK (``resend.Contacts``, ``resend.Contacts.Segments``, ``resend.Segments``, ``resend.Audiences``)
and plain HTTP: upsert by address, typed properties, keys by id or address, segments in both
shapes, membership, the legacy audience paths, topics, the batch (and its statement count),
tenant isolation on every path, and the suppression list kept in step both ways.
"""

import uuid
from urllib.parse import quote

import pytest
import pytest_twisted as pt
import resend
import resend.exceptions

from tests.sdk import call


def _body(reply: dict) -> dict:
    return {k: v for k, v in reply.items() if k != "http_headers"}


async def _sdk_error(api, key, fn, *args) -> resend.exceptions.ResendError:
    with pytest.raises(resend.exceptions.ResendError) as e:
        await call(api, key, fn, *args)
    return e.value


async def _events(api, type_: str) -> list[dict]:
    rows = await api.parts.db.fetchall("SELECT data FROM events WHERE type = %s ORDER BY id", (type_,))
    return [row["data"] for row in rows]


@pt.ensureDeferred
async def test_create_get_update_list_remove_with_the_sdk(api):
    _, key = await api.tenant()
    created = _body(await call(api, key, resend.Contacts.create, {
        "email": "Steve.Wozniak@Example.COM", "first_name": "Steve", "last_name": "Wozniak",
        "unsubscribed": False, "properties": {"company_name": "Acme Corp", "seats": 3, "vip": True}}))
    assert set(created) == {"object", "id"} and created["object"] == "contact"
    contact_id = created["id"]
    assert uuid.UUID(contact_id).version == 7

    got = _body(await call(api, key, resend.Contacts.get, None, contact_id))
    assert got == {
        "object": "contact", "id": contact_id, "email": "steve.wozniak@example.com", "first_name": "Steve",
        "last_name": "Wozniak", "created_at": got["created_at"], "unsubscribed": False,
        "properties": {"company_name": {"value": "Acme Corp", "type": "string"},
                       "seats": {"value": 3, "type": "number"}, "vip": {"value": True, "type": "boolean"}},
    }
    assert got["created_at"].endswith("+00") and len(got["created_at"]) == 29
    # By address, in any spelling (the SDK percent-encodes it; raw works too).
    assert _body(await call(api, key, resend.Contacts.get, None, None, "STEVE.wozniak@example.com")) == got
    code, raw, _ = await api.json("GET", "/contacts/steve.wozniak@example.com", key)
    assert code == 200 and raw == got

    # Upsert by address: same id; given fields change, the rest stays.
    again = _body(await call(api, key, resend.Contacts.create, {
        "email": "steve.wozniak@example.com", "last_name": "Woz", "properties": {"seats": 5}}))
    assert again == {"object": "contact", "id": contact_id}

    # The Python SDK repeats email and audience_id-less params in the PATCH body: ignored.
    updated = _body(await call(api, key, resend.Contacts.update, {
        "email": "steve.wozniak@example.com", "first_name": "Stephen",
        "properties": {"vip": None, "plan": "pro"}}))
    assert updated == {"object": "contact", "id": contact_id}
    got = _body(await call(api, key, resend.Contacts.get, None, contact_id))
    assert (got["first_name"], got["last_name"]) == ("Stephen", "Woz")
    assert got["properties"] == {"company_name": {"value": "Acme Corp", "type": "string"},
                                 "seats": {"value": 5, "type": "number"},
                                 "plan": {"value": "pro", "type": "string"}}

    other = _body(await call(api, key, resend.Contacts.create, {"email": "ada@example.com", "first_name": "Ada"}))
    listed = _body(await call(api, key, resend.Contacts.list))
    assert listed["object"] == "list" and listed["has_more"] is False
    assert [c["id"] for c in listed["data"]] == [other["id"], contact_id]
    assert set(listed["data"][0]) == {"id", "email", "first_name", "last_name", "created_at", "unsubscribed"}
    page = _body(await call(api, key, resend.Contacts.list, None, {"limit": 1}))
    assert page["has_more"] is True and [c["id"] for c in page["data"]] == [other["id"]]
    after = _body(await call(api, key, resend.Contacts.list, None, {"limit": 1, "after": other["id"]}))
    assert [c["id"] for c in after["data"]] == [contact_id] and after["has_more"] is False

    removed = _body(await call(api, key, resend.Contacts.remove, None, None, "steve.wozniak@example.com"))
    assert removed == {"object": "contact", "contact": contact_id, "id": contact_id, "deleted": True}
    error = await _sdk_error(api, key, resend.Contacts.get, None, contact_id)
    assert (error.code, error.error_type, error.message) == (404, "not_found", "Contact not found")

    assert [e["id"] for e in await _events(api, "contact.created")] == [contact_id, other["id"]]
    assert [e["id"] for e in await _events(api, "contact.updated")] == [contact_id, contact_id]
    (deleted,) = await _events(api, "contact.deleted")
    assert deleted == {**deleted, "id": contact_id, "email": "steve.wozniak@example.com", "first_name": "Stephen",
                       "last_name": "Woz", "unsubscribed": False}
    assert deleted["created_at"].endswith("Z") and deleted["updated_at"].endswith("Z")


@pt.ensureDeferred
async def test_q_searches_a_prefix_of_address_first_or_last_name(api):
    _, key = await api.tenant()
    for email, first, last in (("ann@example.com", "Ann", "Lee"), ("bob@example.com", "Robert", "Annis"),
                               ("carl@example.com", "Carl", None), ("an_x@example.com", None, None)):
        await api.json("POST", "/contacts", key, json={"email": email, "first_name": first, "last_name": last})

    async def search(q):
        code, body, _ = await api.json("GET", f"/contacts?q={quote(q)}", key)
        assert code == 200, body
        return sorted(c["email"] for c in body["data"])

    assert await search("AN") == ["an_x@example.com", "ann@example.com", "bob@example.com"]
    assert await search("rob") == ["bob@example.com"]
    assert await search("an_") == ["an_x@example.com"]  # `_` is no wildcard
    assert await search("%") == []
    assert await search("carl@") == ["carl@example.com"]
    assert len(await search("")) == 4


@pt.ensureDeferred
async def test_field_rules(api):
    _, key = await api.tenant()

    async def refused(body, method="POST", path="/contacts"):
        code, reply, _ = await api.json(method, path, key, json=body)
        assert code == 422, reply
        assert reply["name"] == "validation_error"
        return reply["message"]

    assert (await refused({})).startswith("email")
    assert (await refused({"email": "not an address"})).startswith("email")
    assert (await refused({"email": "a@example.com", "first_name": "x" * 201})).startswith("first_name")
    assert (await refused({"email": "a@example.com", "properties": {"1st": "x"}})).startswith("properties.1st")
    assert (await refused({"email": "a@example.com", "properties": {"k": "x" * 2001}})).startswith("properties.k")
    many = {f"k{i}": i for i in range(101)}
    assert (await refused({"email": "a@example.com", "properties": many})).startswith("properties")
    assert (await refused({"email": "a@example.com", "properties": {"k": [1]}})).startswith("properties.k")
    assert (await refused({"email": "a@example.com", "topics": [{"id": str(uuid.uuid4()),
                                                                 "subscription": "opt_in"}]})).startswith("topics")
    assert (await refused({"email": "a@example.com", "segments": [str(uuid.uuid4())]})).startswith("segments")
    # A key keeps its first type, account-wide.
    code, _, _ = await api.json("POST", "/contacts", key, json={"email": "a@example.com", "properties": {"age": 3}})
    assert code == 201
    assert (await refused({"email": "b@example.com", "properties": {"age": "three"}})).startswith("properties.age")
    assert (await refused({"properties": {"age": True}}, "PATCH", "/contacts/a@example.com")).startswith(
        "properties.age")
    # 100 keys in all: adding to 99 existing ones counts the merge.
    code, _, _ = await api.json("PATCH", "/contacts/a@example.com", key,
                                json={"properties": {f"p{i}": "v" for i in range(99)}})
    assert code == 200
    assert (await refused({"properties": {"one_more": "v"}}, "PATCH", "/contacts/a@example.com")).startswith(
        "properties")
    code, _, _ = await api.json("PATCH", "/contacts/a@example.com", key,
                                json={"properties": {"one_more": "v", "age": None}})
    assert code == 200
    # Topics paths do not exist, whatever the body.
    for method, body in (("GET", None), ("PATCH", [{"id": "t", "subscription": "opt_in"}])):
        code, reply, _ = await api.json(method, "/contacts/a@example.com/topics", key, json=body)
        assert (code, reply["name"]) == (404, "not_found") and set(reply) == {"statusCode", "name", "message"}
