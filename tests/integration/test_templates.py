"""
Templates on the real database through the official Python SDK (``resend.Templates``
and ``resend.Emails``/``resend.Batch`` with ``template``) and plain HTTP: drafts and published
versions, aliases per account, tenant isolation, preview, builder documents, the write limit,
and sending with a template through the one accept path (idempotency, suppressions, batch).
"""

import json
import uuid

import pytest
import pytest_twisted as pt
import resend
import resend.exceptions

from tests.helpers.dashboard import signed_in
from tests.helpers.sdk import call
from tests.helpers.sending import message_of, sending_tenant

FROM = "Acme <news@acme.example.com>"
TEMPLATE = {
    "name": "Welcome",
    "alias": "welcome",
    "from": FROM,
    "subject": "Welcome, {{{NAME}}}",
    "reply_to": ["help@acme.example.com"],
    "html": "<p>Hi {{{NAME}}}, you have {{{COUNT}}} new {{{THING|messages}}}.</p>",
    "variables": [
        {"key": "NAME", "type": "string"},
        {"key": "COUNT", "type": "number", "fallback_value": 0},
        {"key": "THING", "type": "string", "fallback_value": "items"},
    ],
}


def _body(reply: dict) -> dict:
    return {k: v for k, v in reply.items() if k != "http_headers"}


async def _sdk_error(api, key, fn, *args) -> resend.exceptions.ResendError:
    with pytest.raises(resend.exceptions.ResendError) as e:
        await call(api, key, fn, *args)
    return e.value


async def _stored(api, email_id: str) -> dict:
    return await api.parts.db.fetchone(
        "SELECT subject, html, text FROM emails WHERE id = %s", (email_id,))


@pt.ensureDeferred
async def test_create_get_update_publish_duplicate_remove_with_the_sdk(api):
    _, key = await api.tenant()
    created = _body(await call(api, key, resend.Templates.create, TEMPLATE))
    assert set(created) == {"id", "object"} and created["object"] == "template"
    template_id = created["id"]
    assert uuid.UUID(template_id).version == 7

    got = _body(await call(api, key, resend.Templates.get, template_id))
    assert got == _body(await call(api, key, resend.Templates.get, "welcome"))
    assert {k: got[k] for k in ("object", "id", "alias", "name", "status", "published_at", "current_version_id",
                                "from", "subject", "reply_to", "html", "text", "has_unpublished_versions")} == {
        "object": "template", "id": template_id, "alias": "welcome", "name": "Welcome", "status": "draft",
        "published_at": None, "current_version_id": None, "from": FROM, "subject": TEMPLATE["subject"],
        "reply_to": ["help@acme.example.com"], "html": TEMPLATE["html"], "text": "",
        "has_unpublished_versions": True,
    }
    assert got["created_at"].endswith("+00") and len(got["created_at"]) == 29
    assert [(v["key"], v["type"], v["fallback_value"]) for v in got["variables"]] == [
        ("NAME", "string", None), ("COUNT", "number", 0), ("THING", "string", "items")]
    assert all(uuid.UUID(v["id"]) and v["created_at"].endswith("+00") for v in got["variables"])

    published = _body(await call(api, key, resend.Templates.publish, "welcome"))
    assert published == {"id": template_id, "object": "template"}
    got = _body(await call(api, key, resend.Templates.get, template_id))
    assert got["status"] == "published" and got["has_unpublished_versions"] is False
    assert got["published_at"] is not None and uuid.UUID(got["current_version_id"])
    first_version = got["current_version_id"]

    updated = _body(await call(api, key, resend.Templates.update,
                               {"id": template_id, "html": "<p>Hello {{{NAME}}}</p>", "text": ""}))
    assert updated == {"id": template_id, "object": "template"}
    got = _body(await call(api, key, resend.Templates.get, template_id))
    assert got["html"] == "<p>Hello {{{NAME}}}</p>" and got["text"] == ""
    assert got["status"] == "published" and got["has_unpublished_versions"] is True
    assert got["current_version_id"] == first_version
    # Editing back to the published content: nothing unpublished any more.
    await call(api, key, resend.Templates.update, {"id": "welcome", "html": TEMPLATE["html"], "text": None})
    assert _body(await call(api, key, resend.Templates.get, template_id))["has_unpublished_versions"] is False
    await call(api, key, resend.Templates.update, {"id": "welcome", "name": "Welcome 2", "subject": "Hey"})
    await call(api, key, resend.Templates.publish, template_id)
    got = _body(await call(api, key, resend.Templates.get, template_id))
    assert got["current_version_id"] != first_version and got["has_unpublished_versions"] is False
    # Variables kept by key keep their ids.
    ids = {v["key"]: v["id"] for v in got["variables"]}
    await call(api, key, resend.Templates.update, {"id": template_id, "variables": [
        {"key": "NAME", "type": "string", "fallback_value": "friend"}, {"key": "NEW", "type": "number"}]})
    changed = _body(await call(api, key, resend.Templates.get, template_id))["variables"]
    assert changed[0]["id"] == ids["NAME"] and changed[0]["fallback_value"] == "friend"
    assert changed[1]["key"] == "NEW" and changed[1]["id"] not in ids.values()

    copy = _body(await call(api, key, resend.Templates.duplicate, "welcome"))
    assert copy["object"] == "template" and copy["id"] != template_id
    duplicate = _body(await call(api, key, resend.Templates.get, copy["id"]))
    assert duplicate["name"] == "Welcome 2 (copy)" and duplicate["alias"] is None
    assert duplicate["status"] == "draft" and duplicate["html"] == TEMPLATE["html"]
    assert [v["key"] for v in duplicate["variables"]] == ["NAME", "NEW"]

    listed = _body(await call(api, key, resend.Templates.list))
    assert listed["object"] == "list" and listed["has_more"] is False
    assert [t["id"] for t in listed["data"]] == [copy["id"], template_id]
    assert set(listed["data"][0]) == {"id", "name", "status", "published_at", "created_at", "updated_at", "alias"}
    page = _body(await call(api, key, resend.Templates.list, {"limit": 1}))
    assert page["has_more"] is True and [t["id"] for t in page["data"]] == [copy["id"]]
    after = _body(await call(api, key, resend.Templates.list, {"limit": 1, "after": copy["id"]}))
    assert [t["id"] for t in after["data"]] == [template_id] and after["has_more"] is False

    removed = _body(await call(api, key, resend.Templates.remove, "welcome"))
    assert removed == {"object": "template", "id": template_id, "deleted": True}
    error = await _sdk_error(api, key, resend.Templates.get, template_id)
    assert (error.code, error.error_type, error.message) == (404, "not_found", "Template not found")
    assert await api.parts.db.fetchone("SELECT count(*) AS n FROM template_versions WHERE template_id = %s",
                                       (template_id,)) == {"n": 0}


@pt.ensureDeferred
async def test_aliases_are_unique_per_account_and_accounts_are_isolated(api):
    _, key = await api.tenant()
    _, other = await api.tenant()
    mine = (await call(api, key, resend.Templates.create, TEMPLATE))["id"]
    theirs = (await call(api, other, resend.Templates.create, TEMPLATE))["id"]  # the same alias elsewhere
    assert mine != theirs

    error = await _sdk_error(api, key, resend.Templates.create, {**TEMPLATE, "name": "Again"})
    assert (error.code, error.error_type) == (409, "alias_taken")
    second = (await call(api, key, resend.Templates.create, {**TEMPLATE, "alias": "second"}))["id"]
    code, body, _ = await api.json("PATCH", f"/templates/{second}", key, json={"alias": "welcome"})
    assert (code, body["name"]) == (409, "alias_taken")
    code, body, _ = await api.json("PATCH", f"/templates/{second}", key, json={"alias": None})
    assert code == 200
    code, body, _ = await api.json("PATCH", f"/templates/{mine}", key, json={"alias": "second"})
    assert code == 200  # free again

    for path in [f"/templates/{theirs}", "/templates/welcome", "/templates/no-such", f"/templates/{uuid.uuid4()}",
                 "/templates/-not-an-alias"]:
        for method, suffix in [("GET", ""), ("PATCH", ""), ("POST", "/publish"), ("POST", "/duplicate"),
                               ("POST", "/preview"), ("DELETE", "")]:
            code, body, _ = await api.json(method, path + suffix, key, json={})
            assert (code, body) == (404, {"statusCode": 404, "name": "not_found", "message": "Template not found"}), (
                method, path + suffix)
    code, body, _ = await api.json("GET", "/templates/welcome", other)
    assert (code, body["id"]) == (200, theirs)

    code, body, _ = await api.json("POST", "/templates", key, json={"name": "x", "html": "y", "alias": str(mine)})
    assert (code, body["name"]) == (422, "validation_error") and body["message"].startswith("alias")
    restricted = (await api.json("POST", "/api-keys", key, json={"name": "s", "permission": "sending_access"}))[1]
    code, _, _ = await api.json("GET", "/templates", restricted["token"])
    assert code == 401


@pt.ensureDeferred
async def test_status_codes_shapes_preview_and_the_native_surface(api):
    _, key = await api.tenant()
    code, created, response = await api.json("POST", "/templates", key, json=TEMPLATE)
    assert code == 201 and set(created) == {"id", "object"}
    assert response.headers.getRawHeaders("content-type") == ["application/json"]
    template_id = created["id"]

    code, shown, _ = await api.json("POST", "/templates/welcome/preview", key,
                                    json={"variables": {"NAME": "<Ann>", "COUNT": 3}})
    assert (code, shown) == (200, {
        "object": "template_preview", "subject": "Welcome, <Ann>",
        "html": "<p>Hi &lt;Ann&gt;, you have 3 new messages.</p>", "text": "Hi <Ann>, you have 3 new messages.\n"})
    code, shown, _ = await api.json("POST", f"/templates/{template_id}/preview", key)  # no body: fallbacks shown
    assert code == 200 and shown["html"] == "<p>Hi {{{NAME}}}, you have 0 new messages.</p>"
    code, body, _ = await api.json("POST", "/templates/welcome/preview", key, json={"variables": {"OTHER": "x"}})
    assert code == 422 and body["message"].startswith("template.variables: `OTHER`")

    for payload, field in [({"html": "x"}, "name"), ({"name": "x"}, "html"),
                           ({**TEMPLATE, "alias": "a b"}, "alias"),
                           ({**TEMPLATE, "alias": "ok", "variables": [{"key": "EMAIL", "type": "string"}]},
                            "variables[0].key")]:
        code, body, _ = await api.json("POST", "/templates", key, json=payload)
        assert (code, body["name"]) == (422, "validation_error") and body["message"].startswith(field), body

    code, native, _ = await api.json("POST", "/v1/templates", key, json={**TEMPLATE, "alias": "native"})
    assert code == 201 and native["object"] == "template" and native["alias"] == "native"
    code, native, _ = await api.json("POST", "/v1/templates/native/publish", key)
    assert code == 200 and native["status"] == "published"
    code, listed, _ = await api.json("GET", "/v1/templates", key)
    assert code == 200 and len(listed["data"]) == 2
    code, body, _ = await api.json("GET", "/v1/templates/nothing", key)
    assert code == 404 and body["error"]["code"] == "not_found"
    code, body, _ = await api.json("POST", "/v1/templates", key, json={**TEMPLATE, "alias": "native"})
    assert code == 409 and body["error"]["code"] == "alias_taken"
    response, raw = await api.request("DELETE", "/v1/templates/native", key)
    assert response.code == 204 and raw == b""

    # Writes of up to 5 MiB on both surfaces; more is refused.
    big = "x" * (4 * 1024 * 1024)
    for path in ("/templates", "/v1/templates"):
        code, body, _ = await api.json("POST", path, key, json={"name": "big", "html": big})
        assert code == 201, path
        code, body, _ = await api.json("POST", path, key, json={"name": "big", "html": big + "x" * (1024 * 1024)})
        assert code == 422 and "request body too large" in json.dumps(body), path


@pt.ensureDeferred
async def test_builder_documents_need_the_top_plan(api):
    document = {"version": 1, "blocks": [{"type": "heading", "text": "Hi {{{NAME}}}"},
                                         {"type": "button", "label": "Go", "href": "https://acme.example.com/"}]}
    body = {"name": "Built", "builder": document, "variables": [{"key": "NAME", "type": "string"}]}
    _, free = await api.tenant()
    error = await _sdk_error(api, free, resend.Templates.create, body)
    assert (error.code, error.error_type) == (403, "plan_required")
    _, top = await api.tenant(plan="scale")
    created = await call(api, top, resend.Templates.create, body)
    got = _body(await call(api, top, resend.Templates.get, created["id"]))
    assert got["builder"] == document and ">Hi {{{NAME}}}</h1>" in got["html"] and "<mj-" not in got["html"]
    assert got["text"] == "Hi {{{NAME}}}\n\nGo (https://acme.example.com/)\n"
    code, shown, _ = await api.json("POST", f"/templates/{created['id']}/preview", top,
                                    json={"variables": {"NAME": "A"}})
    assert code == 200 and ">Hi A</h1>" in shown["html"] and shown["text"].startswith("Hi A\n")
    document["blocks"][0]["text"] = "Hello"
    await call(api, top, resend.Templates.update, {"id": created["id"], "builder": document})
    assert ">Hello</h1>" in _body(await call(api, top, resend.Templates.get, created["id"]))["html"]
    code, body, _ = await api.json("PATCH", f"/templates/{created['id']}", free, json={"name": "x"})
    assert code == 404
    mine = (await call(api, free, resend.Templates.create, TEMPLATE))["id"]
    code, body, _ = await api.json("PATCH", f"/templates/{mine}", free, json={"builder": document})
    assert (code, body["name"]) == (403, "plan_required")


@pt.ensureDeferred
async def test_sending_with_a_template_with_the_sdk(api):
    _, key, _ = await sending_tenant(api)
    template_id = (await call(api, key, resend.Templates.create, TEMPLATE))["id"]
    send = {"to": "ann@example.com", "template": {"id": "welcome", "variables": {"NAME": "Ann & Co", "COUNT": 2}}}

    error = await _sdk_error(api, key, resend.Emails.send, send)
    assert (error.code, error.error_type) == (422, "validation_error") and error.message.startswith("template")
    assert "not published" in error.message
    await call(api, key, resend.Templates.publish, template_id)
    # A draft edited after publishing is not what is sent.
    await call(api, key, resend.Templates.update, {"id": template_id, "html": "<p>draft {{{NAME}}}</p>"})

    sent = await call(api, key, resend.Emails.send, send)
    got = await call(api, key, resend.Emails.get, sent["id"])
    assert got["from"] == FROM and got["subject"] == "Welcome, Ann & Co"
    assert got["reply_to"] == ["help@acme.example.com"]
    assert got["html"] == "<p>Hi Ann &amp; Co, you have 2 new messages.</p>"
    built = await message_of(api.parts.db, sent["id"])
    assert b"Hi Ann & Co, you have 2 new messages." in built  # text made from the html

    # The send's own from, subject and reply_to win; by id as well as alias.
    own = await call(api, key, resend.Emails.send, {
        **send, "from": "Bob <bob@acme.example.com>", "subject": "Mine", "reply_to": "b@acme.example.com",
        "template": {"id": template_id, "variables": {"NAME": "Bob"}}})
    got = await call(api, key, resend.Emails.get, own["id"])
    assert (got["from"], got["subject"], got["reply_to"]) == ("Bob <bob@acme.example.com>", "Mine",
                                                             ["b@acme.example.com"])
    assert got["html"] == "<p>Hi Bob, you have 0 new messages.</p>"

    for variables, start in [({}, "template.variables: `NAME`"),
                             ({"NAME": "a", "NOPE": "b"}, "template.variables: `NOPE`"),
                             ({"NAME": "x" * 2001}, "template.variables.NAME"),
                             ({"NAME": "a\nb"}, "template.variables: `NAME`")]:
        error = await _sdk_error(api, key, resend.Emails.send, {**send, "template": {"id": "welcome",
                                                                                    "variables": variables}})
        assert (error.code, error.error_type) == (422, "validation_error") and error.message.startswith(start), (
            error.message)
    for extra in ({"html": "<p>x</p>"}, {"text": "x"}):
        error = await _sdk_error(api, key, resend.Emails.send, {**send, **extra})
        assert error.code == 422 and error.message.startswith("template"), error.message
    error = await _sdk_error(api, key, resend.Emails.send, {**send, "template": {"id": "nothing"}})
    assert error.code == 422 and error.message.startswith("template")
    # Another account's template, by id or alias, is no template of this one.
    _, other_key, _ = await sending_tenant(api, domain="beta.example.com")
    error = await _sdk_error(api, other_key, resend.Emails.send, {**send, "from": "b@beta.example.com"})
    assert error.code == 422 and error.message.startswith("template: no template `welcome`")
    error = await _sdk_error(api, other_key, resend.Emails.send, {
        **send, "from": "b@beta.example.com", "template": {"id": template_id, "variables": {"NAME": "x"}}})
    assert error.code == 422 and error.message.startswith("template: no template")

    # The unsubscribe placeholders may always be given.
    await call(api, key, resend.Templates.update,
               {"id": template_id, "html": "{{{NAME}}} {{{RESEND_UNSUBSCRIBE_URL}}}"})
    await call(api, key, resend.Templates.publish, template_id)
    sent = await call(api, key, resend.Emails.send, {**send, "template": {"id": "welcome", "variables": {
        "NAME": "A", "RESEND_UNSUBSCRIBE_URL": "https://acme.example.com/u?a=1&b=2"}}})
    assert (await call(api, key, resend.Emails.get, sent["id"]))["html"] == "A https://acme.example.com/u?a=1&amp;b=2"

    # Deleting the template leaves accepted mail as it was.
    await call(api, key, resend.Templates.remove, template_id)
    assert (await call(api, key, resend.Emails.get, own["id"]))["html"] == "<p>Hi Bob, you have 0 new messages.</p>"
    error = await _sdk_error(api, key, resend.Emails.send, send)
    assert error.code == 422 and error.message.startswith("template")


@pt.ensureDeferred
async def test_templated_sends_go_through_the_one_accept_path(api):
    """Batch (strict and permissive), the native send, idempotency and suppressions, as for any send."""
    _, key, _ = await sending_tenant(api)
    template_id = (await call(api, key, resend.Templates.create, {**TEMPLATE, "text": "Hi {{{NAME}}}"}))["id"]
    await call(api, key, resend.Templates.publish, "welcome")
    one = {"to": "ann@example.com", "template": {"id": "welcome", "variables": {"NAME": "Ann"}}}

    bob = {**one, "to": "bob@example.com", "template": {"id": template_id, "variables": {"NAME": "Bob"}}}
    batch = await call(api, key, resend.Batch.send, [one, bob])
    ids = [item["id"] for item in batch["data"]]
    rows = [await _stored(api, i) for i in ids]
    assert [r["subject"] for r in rows] == ["Welcome, Ann", "Welcome, Bob"]
    assert [r["text"] for r in rows] == ["Hi Ann", "Hi Bob"]
    code, body, _ = await api.json("POST", "/emails/batch", key, json=[one, {**one, "template": {"id": "welcome"}}])
    assert code == 422 and body["message"].startswith("[1] template.variables: `NAME`")
    code, body, _ = await api.json("POST", "/emails/batch", key, headers={"x-batch-validation": "permissive"},
                                   json=[{**one, "template": {"id": "welcome"}}, one])
    assert code == 200 and len(body["data"]) == 1
    assert body["errors"][0]["index"] == 0 and body["errors"][0]["message"].startswith("template.variables")

    code, native, _ = await api.json("POST", "/v1/emails", key, json=one)
    assert code == 200 and native["object"] == "email"
    assert (await _stored(api, native["id"]))["subject"] == "Welcome, Ann"
    code, body, _ = await api.json("POST", "/v1/emails", key, json={**one, "html": "<p>x</p>"})
    assert code == 422 and body["error"]["code"] == "validation_error" and body["error"]["field"] == "template"

    headers = {"Idempotency-Key": "welcome-ann"}
    code, first, _ = await api.json("POST", "/emails", key, json=one, headers=headers)
    code, again, response = await api.json("POST", "/emails", key, json=one, headers=headers)
    assert code == 200 and again == first and response.headers.getRawHeaders("idempotent-replayed") == ["true"]
    code, body, _ = await api.json("POST", "/emails", key, json={**one, "subject": "other"}, headers=headers)
    assert (code, body["name"]) == (409, "invalid_idempotent_request")
    # A refusal of a templated send is kept for its key too.
    bad = {**one, "template": {"id": "welcome"}}
    code, refused, _ = await api.json("POST", "/emails", key, json=bad, headers={"Idempotency-Key": "bad"})
    code2, replayed, response = await api.json("POST", "/emails", key, json=bad, headers={"Idempotency-Key": "bad"})
    assert (code, code2) == (422, 422) and refused == replayed
    assert response.headers.getRawHeaders("idempotent-replayed") == ["true"]

    await api.json("POST", "/suppressions", key, json={"email": "gone@example.com"})
    code, sent, _ = await api.json("POST", "/emails", key, json={**one, "to": ["gone@example.com", "cy@example.com"]})
    assert code == 200
    statuses = await api.parts.db.fetchall(
        "SELECT recipient, status FROM deliveries WHERE email_id = %s ORDER BY recipient", (sent["id"],))
    assert [(r["recipient"], r["status"]) for r in statuses] == [("cy@example.com", "queued"),
                                                                 ("gone@example.com", "suppressed")]


@pt.ensureDeferred
async def test_a_templated_broadcast_stream_send_gets_each_recipients_link(api):
    """The unsubscribe placeholder no variable names is left for the broadcast stream to fill."""
    from tests.helpers.unsubscribe import deliveries, link_of, parse

    _, key, _ = await sending_tenant(api)
    await call(api, key, resend.Templates.create, {
        **TEMPLATE, "alias": "news", "html": "<p>Hi {{{NAME}}}</p><a href=\"{{{RESEND_UNSUBSCRIBE_URL}}}\">x</a>"})
    await call(api, key, resend.Templates.publish, "news")
    code, sent, _ = await api.json("POST", "/emails", key, json={
        "to": ["ann@example.com", "bob@example.com"], "stream": "broadcast",
        "template": {"id": "news", "variables": {"NAME": "you & me"}}})
    assert code == 200, sent
    for recipient, raw in (await deliveries(api, sent["id"])).items():
        message = parse(raw)
        html = message.get_body(("html",)).get_content()
        assert "<p>Hi you &amp; me</p>" in html and f'href="{link_of(message)}"' in html, recipient
        assert "UNSUBSCRIBE_URL" not in raw.decode("ascii", "replace")


@pt.ensureDeferred
async def test_unset_strings_read_as_empty_strings_on_every_surface(api):
    """from, subject, html, text are typed string and reply_to string[]: never null."""
    _, key, session = await signed_in(api)
    code, created, _ = await api.json("POST", "/templates", key, json={"name": "Bare", "html": "<p>Hi</p>"})
    assert code == 201, created
    path = f"/templates/{created['id']}"
    await api.json("POST", f"{path}/publish", key)
    empty = {"from": "", "subject": "", "reply_to": [], "text": "", "alias": None}
    for got in [(await api.json("GET", path, key))[1], (await api.json("GET", f"/v1{path}", key))[1],
                (await session.json("GET", f"/dashboard{path}"))[1]]:
        assert {k: got[k] for k in empty} == empty and got["html"] == "<p>Hi</p>"
    code, published, _ = await session.json("GET", f"/dashboard{path}/published")
    assert (published["from"], published["subject"], published["text"]) == ("", "", "")
    # What was read, written back, is what was there: still nothing unpublished, text still generated.
    code, written, _ = await api.json("PATCH", f"/v1{path}", key, json={k: v for k, v in empty.items() if k != "alias"})
    assert code == 200 and written["text"] == "" and written["has_unpublished_versions"] is False
    row = await api.parts.db.fetchone("SELECT text FROM templates WHERE id = %s", (created["id"],))
    assert row["text"] is None
