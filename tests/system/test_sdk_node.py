"""
Sending with the official Node SDK (the `resend` npm package pinned in tests/node/package.json),
run by node against the assembled application on loopback (``RESEND_BASE_URL``, which the SDK
reads itself). What the SDK sent is recorded as the site received it; what was accepted is read
back from the stored rows and messages.
"""

from __future__ import annotations

import base64
import email
import email.policy
import json

import pytest
import pytest_twisted as pt

from tests.helpers.node_sdk import NODE_DIR, run_node
from tests.helpers.sending import BODY, message_of, sending_tenant

#: Runs the Node SDK in node processes.
pytestmark = pytest.mark.slow

PINNED = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]["resend"]

PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")
LEGACY = bytes(range(256))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def seen(api):
    """Every request the site receives: method, path, lower-case headers and body."""
    received = []
    started = api.parts.site.started

    def record(request):
        body = request.content.read()
        request.content.seek(0)
        headers = {k.decode().lower(): b", ".join(v).decode() for k, v in request.requestHeaders.getAllRawHeaders()}
        received.append({"method": request.method.decode(), "path": request.path.decode(),
                         "headers": headers, "body": body})
        started(request)

    api.parts.site.started = record
    yield received
    del api.parts.site.started


def node_body(**extra) -> dict:
    """BODY with the SDK's own (camelCase) option names."""
    return {"from": BODY["from"], "to": BODY["to"], "subject": BODY["subject"], "html": BODY["html"], **extra}


@pt.ensureDeferred
async def test_send_with_buffer_attachments(api, seen):
    _, key, _ = await sending_tenant(api)
    payload = node_body(
        cc="Bob <bob@example.com>", bcc=["hidden@example.com"], replyTo="help@acme.example.com",
        text="Hi Ann", tags=[{"name": "kind", "value": "welcome"}], headers={"X-Entity-Ref-ID": "node-7"},
        attachments=[
            {"filename": "report.pdf", "content": {"$buffer": b64(PDF)}},
            # What SDKs before the base64 change sent for a Buffer: its JSON form.
            {"filename": "legacy.bin", "content": {"type": "Buffer", "data": list(LEGACY)}},
            {"filename": "logo.png", "content": {"$buffer": b64(PNG)}, "contentId": "logo"},
        ],
    )
    results = await run_node(api, key, [
        {"op": "send", "payload": payload, "options": {"idempotencyKey": "node-1"}},
        {"op": "send", "payload": payload, "options": {"idempotencyKey": "node-1"}},
        {"op": "send", "payload": node_body(**{"from": "x@unverified.example.com"})},
    ])
    first, replayed, refused = results
    assert first["error"] is None and replayed == first  # the replay names the same email
    assert refused["data"] is None
    assert refused["error"]["statusCode"] == 403 and refused["error"]["name"] == "validation_error"
    assert "unverified.example.com" in refused["error"]["message"]

    # What the SDK sent: a Buffer as base64, the legacy shape untouched, its own User-Agent.
    posts = [r for r in seen if r["path"] == "/emails"]
    assert len(posts) == 3
    assert posts[0]["headers"]["user-agent"] == f"resend-node:{PINNED}"
    assert posts[0]["headers"]["idempotency-key"] == "node-1"
    sent = json.loads(posts[0]["body"])
    assert sent["attachments"][0]["content"] == b64(PDF)
    assert sent["attachments"][1]["content"] == {"type": "Buffer", "data": list(LEGACY)}
    assert sent["attachments"][2]["content_id"] == "logo" and sent["reply_to"] == "help@acme.example.com"

    email_id = first["data"]["id"]
    rows = await api.parts.db.fetchall("SELECT id, sender, recipients, subject, html, text, tags, source"
                                       " FROM emails")
    assert [str(r["id"]) for r in rows] == [email_id]
    row = rows[0]
    assert row["sender"] == BODY["from"] and row["subject"] == "Hello" and row["source"] == "api"
    assert row["recipients"] == {"to": ["ann@example.com"], "cc": ["Bob <bob@example.com>"],
                                 "bcc": ["hidden@example.com"], "reply_to": ["help@acme.example.com"]}
    assert (row["html"], row["text"]) == ("<p>Hi Ann</p>", "Hi Ann")
    assert row["tags"] == [{"name": "kind", "value": "welcome"}]
    stored = await api.parts.db.fetchall(
        "SELECT filename, content_type, content_disposition, content_id, size, content FROM attachments"
        " WHERE email_id = %s ORDER BY filename", (rows[0]["id"],))
    assert [(a["filename"], a["content_type"], a["content_disposition"], a["content_id"], a["size"],
             bytes(a["content"])) for a in stored] == [
        ("legacy.bin", "application/octet-stream", "attachment", None, 256, LEGACY),
        ("logo.png", "image/png", "inline", "logo", len(PNG), PNG),
        ("report.pdf", "application/pdf", "attachment", None, len(PDF), PDF),
    ]
    message = email.message_from_bytes(await message_of(api.parts.db, row["id"]), policy=email.policy.default)
    assert message["X-Entity-Ref-ID"] == "node-7" and message["Bcc"] is None
    parts = {p.get_filename(): p for p in message.walk() if p.get_filename()}
    assert parts["report.pdf"].get_content() == PDF and parts["legacy.bin"].get_content() == LEGACY
    assert parts["logo.png"].get_content() == PNG and parts["logo.png"]["Content-ID"] == "<logo>"
    deliveries = await api.parts.db.fetchall("SELECT recipient FROM deliveries ORDER BY recipient")
    assert [d["recipient"] for d in deliveries] == ["ann@example.com", "bob@example.com", "hidden@example.com"]


@pt.ensureDeferred
async def test_batch_always_sends_x_batch_validation(api, seen):
    _, key, _ = await sending_tenant(api)
    good = [node_body(to=f"r{i}@example.com", subject=f"Item {i}") for i in range(3)]
    bad = [good[0], node_body(to="broken"), good[2]]
    default, strict_refusal, permissive = await run_node(api, key, [
        {"op": "batch", "payload": good},
        {"op": "batch", "payload": bad},
        {"op": "batch", "payload": bad, "options": {"batchValidation": "permissive"}},
    ])
    batches = [r for r in seen if r["path"] == "/emails/batch"]
    assert [r["headers"].get("x-batch-validation") for r in batches] == ["strict", "strict", "permissive"]

    assert default["error"] is None and "errors" not in default["data"]
    ids = [item["id"] for item in default["data"]["data"]]
    assert len(ids) == 3
    for i, email_id in enumerate(ids):  # data[i] is request item i
        row = await api.parts.db.fetchone("SELECT recipients, subject FROM emails WHERE id = %s", (email_id,))
        assert row["recipients"]["to"] == [f"r{i}@example.com"] and row["subject"] == f"Item {i}"

    assert strict_refusal["data"] is None
    assert strict_refusal["error"]["statusCode"] == 422 and strict_refusal["error"]["name"] == "validation_error"
    assert strict_refusal["error"]["message"].startswith("[1] to")

    assert permissive["error"] is None and len(permissive["data"]["data"]) == 2
    assert [e["index"] for e in permissive["data"]["errors"]] == [1]
    kept = [item["id"] for item in permissive["data"]["data"]]
    rows = await api.parts.db.fetchall(
        "SELECT recipients->'to'->>0 AS rcpt FROM emails WHERE id = ANY(%s::uuid[]) ORDER BY id", (kept,))
    assert [r["rcpt"] for r in rows] == ["r0@example.com", "r2@example.com"]
    total = await api.parts.db.fetchone("SELECT count(*) AS n FROM emails")
    assert total["n"] == 5  # nothing of the refused strict batch was stored


@pt.ensureDeferred
async def test_templates_and_a_templated_send(api, seen):
    """resend.templates.* of the pinned SDK, and emails.send with a template by alias."""
    _, key, _ = await sending_tenant(api)
    template = {
        "name": "Welcome", "alias": "welcome", "from": BODY["from"], "subject": "Hi {{{NAME}}}",
        "replyTo": ["help@acme.example.com"], "html": "<p>Hi {{{NAME}}}, {{{COUNT}}} new</p>",
        "variables": [{"key": "NAME", "type": "string"}, {"key": "COUNT", "type": "number", "fallbackValue": 0}],
    }
    created, = await run_node(api, key, [{"op": "templates.create", "args": [template]}])
    assert created["error"] is None and created["data"]["object"] == "template"
    template_id = created["data"]["id"]
    results = await run_node(api, key, [
        {"op": "templates.get", "args": ["welcome"]},
        {"op": "templates.update", "args": ["welcome", {"subject": "Hello {{{NAME}}}"}]},
        {"op": "templates.publish", "args": [template_id]},
        {"op": "templates.list", "args": [{"limit": 10}]},
        {"op": "templates.duplicate", "args": ["welcome"]},
        {"op": "send", "payload": {"to": "ann@example.com",
                                   "template": {"id": "welcome", "variables": {"NAME": "Ann", "COUNT": 3}}}},
        {"op": "templates.remove", "args": [template_id]},
        {"op": "templates.get", "args": [template_id]},
    ])
    got, updated, published, listed, duplicated, sent, removed, gone = results
    assert got["error"] is None and got["data"]["id"] == template_id and got["data"]["status"] == "draft"
    assert got["data"]["reply_to"] == ["help@acme.example.com"]
    assert [(v["key"], v["fallback_value"]) for v in got["data"]["variables"]] == [("NAME", None), ("COUNT", 0)]
    assert updated["data"] == {"id": template_id, "object": "template"}
    assert published["data"] == {"id": template_id, "object": "template"}
    assert listed["data"]["object"] == "list" and [t["id"] for t in listed["data"]["data"]] == [template_id]
    assert duplicated["error"] is None and duplicated["data"]["id"] != template_id
    assert sent["error"] is None
    assert removed["data"] == {"object": "template", "id": template_id, "deleted": True}
    assert gone["data"] is None and gone["error"]["statusCode"] == 404 and gone["error"]["name"] == "not_found"

    posts = [r for r in seen if r["method"] == "POST" and r["path"] == "/templates"]
    assert json.loads(posts[0]["body"])["reply_to"] == ["help@acme.example.com"]
    row = await api.parts.db.fetchone("SELECT subject, html, recipients FROM emails WHERE id = %s",
                                      (sent["data"]["id"],))
    assert row["subject"] == "Hello Ann" and row["html"] == "<p>Hi Ann, 3 new</p>"
    assert row["recipients"]["reply_to"] == ["help@acme.example.com"]


@pt.ensureDeferred
async def test_contacts_segments_and_audiences(api, seen):
    """resend.contacts.*, resend.contacts.segments.*, resend.segments.* and resend.audiences.*
    of the pinned SDK (which sends an address raw in the path)."""
    _, key = await api.tenant()
    (segment,) = await run_node(api, key, [{"op": "segments.create", "args": [{"name": "News"}]}])
    assert segment["error"] is None and segment["data"]["object"] == "segment"
    segment_id = segment["data"]["id"]
    results = await run_node(api, key, [
        {"op": "contacts.create", "args": [{"email": "ann@example.com", "firstName": "Ann", "unsubscribed": False,
                                            "properties": {"plan": "pro", "seats": 2},
                                            "segments": [{"id": segment_id}]}]},
        {"op": "contacts.get", "args": [{"email": "ann@example.com"}]},
        {"op": "contacts.update", "args": [{"email": "ann@example.com", "lastName": "Lee", "unsubscribed": True}]},
        {"op": "contacts.list", "args": [{"segmentId": segment_id}]},
        {"op": "contacts.create", "args": [{"email": "bob@example.com"}]},
        {"op": "contacts.segments.add", "args": [{"email": "bob@example.com", "segmentId": segment_id}]},
        {"op": "contacts.segments.list", "args": [{"email": "bob@example.com"}]},
        {"op": "contacts.segments.remove", "args": [{"email": "bob@example.com", "segmentId": segment_id}]},
        {"op": "segments.get", "args": [segment_id]},
        {"op": "segments.update", "args": [segment_id, {"name": "Weekly"}]},
        {"op": "audiences.list", "args": []},
        {"op": "contacts.list", "args": []},
        {"op": "contacts.remove", "args": [{"email": "bob@example.com"}]},
        {"op": "segments.remove", "args": [segment_id]},
        {"op": "contacts.get", "args": ["bob@example.com"]},
    ])
    (created, got, updated, members, bob, added, of_bob, removed, seg, renamed, audiences, listed, deleted,
     seg_gone, gone) = results
    assert created["error"] is None and created["data"]["object"] == "contact"
    ann_id = created["data"]["id"]
    assert got["data"]["id"] == ann_id and got["data"]["first_name"] == "Ann"
    assert got["data"]["properties"] == {"plan": {"value": "pro", "type": "string"},
                                         "seats": {"value": 2, "type": "number"}}
    assert updated["data"] == {"object": "contact", "id": ann_id}
    assert [c["id"] for c in members["data"]["data"]] == [ann_id]
    assert members["data"]["data"][0]["unsubscribed"] is True
    assert added["error"] is None and added["data"]["id"] == segment_id
    assert [s["id"] for s in of_bob["data"]["data"]] == [segment_id]
    assert removed["data"]["id"] == bob["data"]["id"] and removed["data"]["deleted"] is True
    assert seg["data"]["name"] == "News" and renamed["data"] == {"object": "segment", "id": segment_id}
    assert [a["name"] for a in audiences["data"]["data"]] == ["Weekly"]
    assert [c["email"] for c in listed["data"]["data"]] == ["bob@example.com", "ann@example.com"]
    assert deleted["data"]["contact"] == bob["data"]["id"] and deleted["data"]["deleted"] is True
    assert seg_gone["data"]["deleted"] is True
    assert gone["data"] is None and (gone["error"]["statusCode"], gone["error"]["name"]) == (404, "not_found")
    record = await api.parts.db.fetchone("SELECT origin FROM suppressions WHERE email = 'ann@example.com'")
    assert record["origin"] == "unsubscribe"
    # The SDK put the address in the path raw.
    assert any(r["path"] == "/contacts/ann@example.com" and r["method"] == "PATCH" for r in seen)
