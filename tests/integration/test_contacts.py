"""
Contacts, segments and audiences on the real database through the official Python
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
from twisted.internet import reactor

from mailsvc.app.contacts import Contacts
from mailsvc.store.database import Database
from tests.helpers.sdk import call


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


@pt.ensureDeferred
async def test_segments_and_membership_with_the_sdk(api):
    _, key = await api.tenant()
    segment = _body(await call(api, key, resend.Segments.create, {"name": "Newsletter"}))
    assert segment["object"] == "segment" and segment["name"] == "Newsletter"
    segment_id = segment["id"]
    got = _body(await call(api, key, resend.Segments.get, segment_id))
    assert got == {"object": "segment", "id": segment_id, "name": "Newsletter", "created_at": got["created_at"]}
    assert _body(await call(api, key, resend.Segments.update, segment_id, {"name": "News"})) == {
        "object": "segment", "id": segment_id}
    other = _body(await call(api, key, resend.Segments.create, {"name": "Other"}))
    listed = _body(await call(api, key, resend.Segments.list))
    assert [(s["id"], s["name"]) for s in listed["data"]] == [(other["id"], "Other"), (segment_id, "News")]
    assert set(listed["data"][0]) == {"id", "name", "created_at"}

    # Segments on create, in both shapes.
    ann = _body(await call(api, key, resend.Contacts.create, {"email": "ann@example.com",
                                                              "segments": [{"id": segment_id}]}))
    code, bob, _ = await api.json("POST", "/contacts", key, json={"email": "bob@example.com",
                                                                  "segments": [segment_id, other["id"]]})
    assert code == 201
    await call(api, key, resend.Contacts.create, {"email": "carl@example.com"})
    members = _body(await call(api, key, resend.Contacts.list, None, None, segment_id))
    assert [c["email"] for c in members["data"]] == ["bob@example.com", "ann@example.com"]
    code, same, _ = await api.json("GET", f"/contacts?segment_id={segment_id}", key)
    assert [c["id"] for c in same["data"]] == [c["id"] for c in members["data"]]
    page = _body(await call(api, key, resend.Contacts.list, None, {"limit": 1, "after": bob["id"]}, segment_id))
    assert [c["email"] for c in page["data"]] == ["ann@example.com"] and page["has_more"] is False

    added = _body(await call(api, key, resend.Contacts.Segments.add,
                             {"segment_id": other["id"], "email": "carl@example.com"}))
    assert added["id"] == other["id"] and added["object"] == "contact_segment"
    # Again: nothing changes, same answer.
    assert _body(await call(api, key, resend.Contacts.Segments.add,
                            {"segment_id": other["id"], "contact_id": ann["id"]}))["id"] == other["id"]
    of_bob = _body(await call(api, key, resend.Contacts.Segments.list, {"email": "bob@example.com"}))
    assert sorted(s["name"] for s in of_bob["data"]) == ["News", "Other"]
    removed = _body(await call(api, key, resend.Contacts.Segments.remove,
                               {"segment_id": segment_id, "email": "bob@example.com"}))
    assert removed == {"object": "contact_segment", "id": bob["id"], "audienceId": segment_id,
                       "contact_id": bob["id"], "segment_id": segment_id, "deleted": True}
    error = await _sdk_error(api, key, resend.Contacts.Segments.remove,
                             {"segment_id": segment_id, "email": "bob@example.com"})
    assert error.code == 404
    code, members, _ = await api.json("GET", f"/segments/{other['id']}/contacts", key)
    assert sorted(c["email"] for c in members["data"]) == ["ann@example.com", "bob@example.com", "carl@example.com"]

    # Deleting a segment keeps its contacts.
    assert _body(await call(api, key, resend.Segments.remove, other["id"])) == {
        "object": "segment", "id": other["id"], "deleted": True}
    assert len(_body(await call(api, key, resend.Contacts.list))["data"]) == 3
    for path in (f"/segments/{other['id']}", f"/segments/{other['id']}/contacts", "/segments/not-a-uuid",
                 f"/contacts?segment_id={other['id']}"):
        code, reply, _ = await api.json("GET", path, key)
        assert (code, reply["name"]) == (404, "not_found"), path


@pt.ensureDeferred
async def test_legacy_audience_paths_share_the_segments(api):
    _, key = await api.tenant()
    code, audience, _ = await api.json("POST", "/audiences", key, json={"name": "Registered"})
    assert code == 201 and audience["object"] == "audience" and audience["name"] == "Registered"
    audience_id = audience["id"]
    # The same id is a segment, and the SDK's Audiences (which call /segments) see it.
    assert _body(await call(api, key, resend.Audiences.get, audience_id))["name"] == "Registered"
    code, got, _ = await api.json("GET", f"/audiences/{audience_id}", key)
    assert got == {"object": "audience", "id": audience_id, "name": "Registered", "created_at": got["created_at"]}
    code, listed, _ = await api.json("GET", "/audiences", key)
    assert [a["id"] for a in listed["data"]] == [audience_id]

    # The SDK's audience_id builds the legacy contact paths.
    created = _body(await call(api, key, resend.Contacts.create, {"email": "ann@example.com",
                                                                  "audience_id": audience_id}))
    assert created["object"] == "audience_contact"
    members = _body(await call(api, key, resend.Contacts.list, audience_id))
    assert [c["email"] for c in members["data"]] == ["ann@example.com"]
    code, of_segment, _ = await api.json("GET", f"/segments/{audience_id}/contacts", key)
    assert [c["id"] for c in of_segment["data"]] == [created["id"]]
    # The audience id does not filter a retrieval: a contact outside it is found too.
    outside = _body(await call(api, key, resend.Contacts.create, {"email": "out@example.com"}))
    got = _body(await call(api, key, resend.Contacts.get, audience_id, None, "out@example.com"))
    assert got["object"] == "audience_contact" and got["id"] == outside["id"]
    updated = _body(await call(api, key, resend.Contacts.update, {"audience_id": audience_id,
                                                                  "id": outside["id"], "first_name": "Out"}))
    assert updated == {"object": "audience_contact", "id": outside["id"]}
    removed = _body(await call(api, key, resend.Contacts.remove, audience_id, outside["id"]))
    assert removed["deleted"] is True and removed["contact"] == outside["id"]
    # An unknown audience is 404 on every path.
    unknown = str(uuid.uuid4())
    for method, path in (("GET", f"/audiences/{unknown}"), ("GET", f"/audiences/{unknown}/contacts"),
                         ("POST", f"/audiences/{unknown}/contacts"),
                         ("GET", f"/audiences/{unknown}/contacts/ann@example.com")):
        code, reply, _ = await api.json(method, path, key, json={"email": "x@example.com"})
        assert (code, reply["name"], reply["message"]) == (404, "not_found", "Audience not found"), path
    code, gone, _ = await api.json("DELETE", f"/audiences/{audience_id}", key)
    assert gone == {"object": "audience", "id": audience_id, "deleted": True}
    assert (await api.json("GET", f"/segments/{audience_id}", key))[0] == 404


@pt.ensureDeferred
async def test_another_account_sees_nothing(api):
    _, key_a = await api.tenant()
    _, key_b = await api.tenant()
    code, segment, _ = await api.json("POST", "/segments", key_b, json={"name": "B"})
    code, contact, _ = await api.json("POST", "/contacts", key_b, json={"email": "b@example.com",
                                                                         "segments": [segment["id"]]})
    s, c = segment["id"], contact["id"]
    for method, path in (
        ("GET", f"/contacts/{c}"), ("GET", "/contacts/b@example.com"), ("GET", "/contacts/b%40example.com"),
        ("PATCH", f"/contacts/{c}"), ("PATCH", "/contacts/b@example.com"), ("DELETE", "/contacts/b@example.com"),
        ("DELETE", f"/contacts/{c}"), ("GET", f"/contacts/{c}/segments"), ("GET", "/contacts/b@example.com/segments"),
        ("GET", f"/contacts?segment_id={s}"), ("GET", f"/segments/{s}"), ("PATCH", f"/segments/{s}"),
        ("DELETE", f"/segments/{s}"), ("GET", f"/segments/{s}/contacts"), ("GET", f"/audiences/{s}"),
        ("DELETE", f"/audiences/{s}"), ("GET", f"/audiences/{s}/contacts"), ("POST", f"/audiences/{s}/contacts"),
        ("POST", f"/contacts/b@example.com/segments/{s}"), ("DELETE", f"/contacts/b@example.com/segments/{s}"),
        ("GET", f"/v1/contacts/{c}"), ("GET", "/v1/contacts/b@example.com"),
    ):
        code, reply, _ = await api.json(method, path, key_a, json={"name": "x", "email": "b@example.com"})
        assert code == 404, (method, path, reply)
    # A's own contact with B's address is A's alone; A's segment cannot take B's contact.
    code, mine, _ = await api.json("POST", "/contacts", key_a, json={"email": "b@example.com"})
    assert code == 201 and mine["id"] != c
    code, seg_a, _ = await api.json("POST", "/segments", key_a, json={"name": "A"})
    code, _, _ = await api.json("POST", f"/contacts/{c}/segments/{seg_a['id']}", key_a)
    assert code == 404
    code, listed, _ = await api.json("GET", "/contacts", key_a)
    assert [x["id"] for x in listed["data"]] == [mine["id"]]
    code, got, _ = await api.json("GET", "/contacts/b@example.com", key_b)
    assert code == 200 and got["id"] == c


class CountingDatabase(Database):
    """The real database, counting the statements its transactions send."""

    statements = 0

    async def run(self, desc, fn, *args, **kwargs):
        outer = self

        class Counted:
            def __init__(self, txn):
                self._txn = txn

            def __getattr__(self, name):
                return getattr(self._txn, name)

            async def execute(self, *a):
                outer.statements += 1
                return await self._txn.execute(*a)

            async def fetchall(self, *a):
                outer.statements += 1
                return await self._txn.fetchall(*a)

            async def fetchone(self, *a):
                outer.statements += 1
                return await self._txn.fetchone(*a)

            async def fetchrow(self, *a):
                outer.statements += 1
                return await self._txn.fetchrow(*a)

        async def counted(txn, *a, **kw):
            return await fn(Counted(txn), *a, **kw)

        return await super().run(desc, counted, *args, **kwargs)


@pt.ensureDeferred
async def test_the_batch_saves_rows_independently(api):
    tenant, key = await api.tenant()
    code, segment, _ = await api.json("POST", "/segments", key, json={"name": "Imported"})
    code, extra, _ = await api.json("POST", "/segments", key, json={"name": "Extra"})
    await api.json("POST", "/contacts", key, json={"email": "typed@example.com", "properties": {"age": 40}})
    rows = [
        {"email": "ann@example.com", "first_name": "Ann", "properties": {"age": 30}, "segments": [{"id": extra["id"]}]},
        {"email": "bad address"},
        {"email": "bob@example.com", "properties": {f"k{i}": 1 for i in range(101)}},
        {"email": "carl@example.com", "properties": {"1st": "x"}},
        {"email": "dora@example.com", "properties": {"note": "x" * 2001}},
        {"email": "ed@example.com", "properties": {"age": "forty"}},  # the account's type is number
        {"email": "Ann@Example.com", "last_name": "Lee", "properties": {"age": 31}, "unsubscribed": True},
        {"email": "fay@example.com", "topics": [{"id": "t", "subscription": "opt_in"}]},
        {"email": "gus@example.com", "segments": [str(uuid.uuid4())]},
        {"email": "hal@example.com", "properties": {"color": "red"}},
        {"email": "ida@example.com", "properties": {"color": 7}},  # the batch's first row gave the type
    ]
    code, reply, _ = await api.json("POST", "/contacts/batch", key,
                                    json={"contacts": rows, "segment_id": segment["id"]})
    assert code == 200, reply
    saved = {row["index"]: row["id"] for row in reply["data"]}
    refused = {row["index"]: row["message"] for row in reply["errors"]}
    assert sorted(saved) == [0, 6, 9] and sorted(refused) == [1, 2, 3, 4, 5, 7, 8, 10]
    for index, field in ((1, "contacts[1].email"), (2, "contacts[2].properties"),
                         (3, "contacts[3].properties.1st"), (4, "contacts[4].properties.note"),
                         (5, "contacts[5].properties.age"), (7, "contacts[7].topics"),
                         (8, "contacts[8].segments"), (10, "contacts[10].properties.color")):
        assert refused[index].startswith(field), (index, refused[index])
    # The same address twice: both rows saved on one contact, the last one winning field by field.
    assert saved[0] == saved[6]
    ann = await _contact(api, key, "ann@example.com")
    assert (ann["first_name"], ann["last_name"], ann["unsubscribed"]) == ("Ann", "Lee", True)
    assert ann["properties"] == {"age": {"value": 31, "type": "number"}}
    code, members, _ = await api.json("GET", f"/segments/{segment['id']}/contacts", key)
    assert sorted(c["email"] for c in members["data"]) == ["ann@example.com", "hal@example.com"]
    code, members, _ = await api.json("GET", f"/segments/{extra['id']}/contacts", key)
    assert [c["email"] for c in members["data"]] == ["ann@example.com"]
    created = [e["email"] for e in await _events(api, "contact.created")]
    assert sorted(created[1:]) == ["ann@example.com", "hal@example.com"]

    # The batch as a whole: 1 to 1,000 rows, a known segment_id.
    for body, field in (({"contacts": [{"email": f"x{i}@example.com"} for i in range(1001)]}, "contacts"),
                        ({"contacts": []}, "contacts"), ({}, "contacts"),
                        ({"contacts": [{"email": "a@example.com"}], "segment_id": str(uuid.uuid4())}, "segment_id")):
        code, reply, _ = await api.json("POST", "/contacts/batch", key, json=body)
        assert (code, reply["name"]) == (422, "validation_error") and reply["message"].startswith(field)


async def _contact(api, key, key_or_email):
    code, got, _ = await api.json("GET", f"/contacts/{key_or_email}", key)
    assert code == 200, got
    return got


@pt.ensureDeferred
async def test_a_batch_takes_the_same_few_statements_for_1_or_1000_rows(api):
    tenant, key = await api.tenant()
    tenant_id = uuid.UUID(tenant["id"])
    code, segment, _ = await api.json("POST", "/segments", key, json={"name": "All"})
    db = CountingDatabase(reactor, api.parts.db.dsn, 2)
    await db.start()
    try:
        contacts = Contacts(reactor, db)

        async def statements(rows: list[dict]) -> int:
            db.statements = 0
            data, errors = await contacts.batch(tenant_id, {"contacts": rows, "segment_id": segment["id"]})
            assert len(data) == len(rows) and errors == []
            return db.statements

        def rows(n, start):
            return [{"email": f"c{start + i}@example.com", "first_name": f"F{i}", "unsubscribed": i % 2 == 0,
                     "properties": {"n": i, f"k{i % 5}": "v"}, "segments": [segment["id"]]} for i in range(n)]

        one = await statements(rows(1, 0))
        thousand = await statements(rows(1000, 1))
        updated = await statements(rows(1000, 1))  # the same contacts again: all updates
        # lock, types, segments, claim types, upsert, suppressions, memberships, read back, events
        assert 5 <= one == thousand <= 10 and updated <= thousand, (one, thousand, updated)
    finally:
        db.stop()
    code, listed, _ = await api.json("GET", f"/segments/{segment['id']}/contacts?limit=100", key)
    assert listed["has_more"] is True
    assert (await api.parts.db.fetchone("SELECT count(*) AS n FROM contacts"))["n"] == 1001
    assert (await api.parts.db.fetchone("SELECT count(*) AS n FROM suppressions"))["n"] == 501
    assert (await api.parts.db.fetchone(
        "SELECT count(*) AS n FROM events WHERE type = 'contact.created'"))["n"] == 1001


@pt.ensureDeferred
async def test_names_never_set_read_as_empty_strings(api):
    """first_name and last_name are typed string: never null, in responses and in events."""
    _, key = await api.tenant()
    code, created, _ = await api.json("POST", "/contacts", key, json={"email": "ann@example.com"})
    assert code == 201, created
    shown = [(await api.json("GET", f"/contacts/{created['id']}", key))[1],
             (await api.json("GET", f"/v1/contacts/{created['id']}", key))[1],
             *(await api.json("GET", "/contacts", key))[1]["data"],
             *(await api.json("GET", "/v1/contacts", key))[1]["data"],
             *await _events(api, "contact.created")]
    assert len(shown) == 5 and all((c["first_name"], c["last_name"]) == ("", "") for c in shown)
