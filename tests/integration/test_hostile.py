"""
Hostile values over HTTP, as an attacker or a careless client sends them: each is
refused with its 4xx and error name, nothing is stored for the sender, and another tenant's
sends made at the same moment all succeed (``tests.helpers.hostile.attack``).
"""

import json

import pytest
import pytest_twisted as pt
from twisted.python import threadable

from mailsvc.app import emails as email_use_case
from tests.helpers.hostile import attack, bystander, victim  # noqa: F401 (fixtures)

NUL = "\u0000"
#: A natural-language date of 256 characters (the most accepted) that dateparser reads.
LONG_PHRASE = ("in 1 hour " * 26)[:256]


def raw(text: str) -> bytes:
    return text.encode()


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


#: (id, path, changes to a valid body or a function of it giving the whole body (a value, or
#: raw bytes), status, error name). Bodies are sent to the main surface.
CASES = [
    # Hostile values in bodies, headers and paths.
    ("nul in text", "/emails", {"text": f"a{NUL}b"}, 422, "validation_error"),
    ("nul in attachment filename", "/emails",
     {"attachments": [{"filename": f"a{NUL}.txt", "content": "aGk="}]}, 422, "validation_error"),
    ("100000 nested brackets", "/emails", lambda body: nested(100_000), 422, "validation_error"),
    ("lone surrogate in subject", "/emails",
     lambda body: raw(json.dumps(body)[:-1] + ', "subject": "\\ud800"}'), 422, "validation_error"),
    ("2000-character scheduled_at", "/emails", {"scheduled_at": "in 1 hour " * 200}, 422, "validation_error"),
    ("5000 headers", "/emails", {"headers": {f"X-H{i}": "v" for i in range(5000)}}, 422, "validation_error"),
    ("5000 tags", "/emails", {"tags": [{"name": f"t{i}", "value": "v"} for i in range(5000)]},
     422, "validation_error"),
    ("escape in subject", "/emails", {"subject": "Hi \x1b[31mred"}, 422, "validation_error"),
    # Control characters and header injection.
    ("nul in subject", "/emails", {"subject": f"Hi{NUL}"}, 422, "validation_error"),
    ("nul in html", "/emails", {"html": f"<p>{NUL}</p>"}, 422, "validation_error"),
    ("bell in text", "/emails", {"text": "ding\x07"}, 422, "validation_error"),
    ("del in html", "/emails", {"html": "<p>\x7f</p>"}, 422, "validation_error"),
    ("c1 control in from name", "/emails", {"from": "Acme\x85 <news@victim.example.com>"}, 422, "validation_error"),
    ("nul in to", "/emails", {"to": [f"ann@example.com{NUL}"]}, 422, "validation_error"),
    ("crlf in subject", "/emails", {"subject": "Hi\r\nBcc: evil@example.net"}, 422, "validation_error"),
    ("crlf in header value", "/emails", {"headers": {"X-Ref": "1\r\nBcc: evil@example.net"}}, 422, "validation_error"),
    ("lf in reply_to", "/emails", {"reply_to": "help@example.com\nBcc: evil@example.net"}, 422, "validation_error"),
    ("crlf in to", "/emails", {"to": "ann@example.com\r\nBcc: evil@example.net"}, 422, "validation_error"),
    # What str.splitlines breaks a line at: NEL (a C1 control, above), U+2028, U+2029.
    ("line separator in subject", "/emails", {"subject": "Hi\u2028Bcc: evil@example.net"}, 422, "validation_error"),
    ("paragraph separator in header value", "/emails", {"headers": {"X-Ref": "1\u2029Bcc: evil@example.net"}},
     422, "validation_error"),
    ("line separator in from name", "/emails", {"from": "Acme\u2028 <news@victim.example.com>"},
     422, "validation_error"),
    # A From of more than one mailbox, as SMTP submission refuses it (tests/integration/test_hostile_smtp.py).
    ("a second address after the from", "/emails",
     {"from": '"PayPal Security" <news@victim.example.com> <service@paypal.com>'}, 422, "validation_error"),
    ("a from group", "/emails", {"from": "staff: news@victim.example.com;"}, 422, "validation_error"),
    ("colon in header name", "/emails", {"headers": {"X-A: b": "c"}}, 422, "validation_error"),
    ("managed header bcc", "/emails", {"headers": {"Bcc": "evil@example.net"}}, 422, "validation_error"),
    # SMTP submission's header rules (tests/integration/test_hostile_smtp.py), over HTTP.
    ("space before the colon of a from header", "/emails", {"headers": {"From ": "ceo@bystander.example.com"}},
     422, "validation_error"),
    ("sender header", "/emails", {"headers": {"Sender": "ceo@bystander.example.com"}}, 422, "validation_error"),
    ("resent-reply-to header", "/emails", {"headers": {"Resent-Reply-To": "ceo@bystander.example.com"}},
     422, "validation_error"),
    ("form feed in header value", "/emails", {"headers": {"X-Ref": "a\x0cb"}}, 422, "validation_error"),
    ("nul in content type", "/emails",
     {"attachments": [{"filename": "a.txt", "content": "aGk=", "content_type": f"text/plain{NUL}"}]},
     422, "validation_error"),
    ("nul in content id", "/emails",
     {"attachments": [{"filename": "a.png", "content": "aGk=", "content_id": f"c{NUL}"}]}, 422, "validation_error"),
    ("control in attachment path", "/emails", {"attachments": [{"path": "https://x.example/a\x01"}]},
     422, "validation_error"),
    # Lone surrogates and extreme JSON.
    ("lone surrogate in a key", "/emails", lambda body: raw(json.dumps(body)[:-1] + ', "\\udfff": 1}'),
     422, "validation_error"),
    ("lone surrogate in a header", "/emails",
     lambda body: raw(json.dumps(body)[:-1] + ', "headers": {"X-A": "\\ud83d"}}'), 422, "validation_error"),
    ("65 nested arrays in a field", "/emails", {"tags": json.loads(nested(65))}, 422, "validation_error"),
    ("NaN", "/emails", lambda body: raw(json.dumps(body)[:-1] + ', "subject": NaN}'), 422, "validation_error"),
    ("Infinity", "/emails", lambda body: raw(json.dumps(body)[:-1] + ', "to": -Infinity}'), 422, "validation_error"),
    ("a 5000-digit number", "/emails", lambda body: raw(json.dumps(body)[:-1] + ', "to": ' + "9" * 5000 + "}"),
     422, "validation_error"),
    ("truncated json", "/emails", lambda body: raw(json.dumps(body)[:-7]), 422, "validation_error"),
    ("invalid utf-8", "/emails", lambda body: raw(json.dumps(body)).replace(b"Hello", b"\xff\xfe"),
     422, "validation_error"),
    ("a form instead of json", "/emails", lambda body: b"from=a%40b.com&to=c%40d.com", 422, "validation_error"),
    ("top-level array", "/emails", lambda body: [body], 422, "validation_error"),
    ("top-level number", "/emails", lambda body: 42, 422, "validation_error"),
    ("top-level string", "/emails", lambda body: "hello", 422, "validation_error"),
    ("duplicate key, the last bad", "/emails",
     lambda body: raw(json.dumps(body)[:-1] + ', "subject": "ok", "subject": "\\u0000"}'), 422, "validation_error"),
    # Wrong types.
    ("subject a number", "/emails", {"subject": 5}, 422, "validation_error"),
    ("subject an object", "/emails", {"subject": {"$gt": ""}}, 422, "validation_error"),
    ("to an object", "/emails", {"to": {"ann@example.com": True}}, 422, "validation_error"),
    ("to a list of numbers", "/emails", {"to": [1, 2, 3]}, 422, "validation_error"),
    ("html a list", "/emails", {"html": ["<p>a</p>"]}, 422, "validation_error"),
    ("headers a list", "/emails", {"headers": [["X-A", "b"]]}, 422, "validation_error"),
    ("header value a number", "/emails", {"headers": {"X-A": 1e308}}, 422, "validation_error"),
    ("scheduled_at a number", "/emails", {"scheduled_at": 1700000000}, 422, "validation_error"),
    ("stream unknown", "/emails", {"stream": "bulk"}, 422, "validation_error"),
    ("tags a string", "/emails", {"tags": "a=b"}, 422, "validation_error"),
    # Empty or odd addresses.
    ("empty from", "/emails", {"from": ""}, 422, "validation_error"),
    ("blank from", "/emails", {"from": "   "}, 422, "validation_error"),
    ("fullwidth at sign", "/emails", {"to": "ann\uff20example.com"}, 422, "validation_error"),
    ("right-to-left override in the local part", "/emails", {"to": "ann\u202e@example.com"}, 422, "validation_error"),
    ("ip literal", "/emails", {"to": "ann@[127.0.0.1]"}, 422, "validation_error"),
    ("from an unverified domain", "/emails", {"from": "ceo@bystander.example.com"}, 403, "validation_error"),
    # Sizes and counts.
    ("100000 to addresses", "/emails", {"to": [f"r{i}@example.com" for i in range(100_000)]}, 422, "validation_error"),
    ("5000 nulls in cc", "/emails", {"cc": [None] * 5000}, 422, "validation_error"),
    ("51 bcc", "/emails", {"bcc": [f"r{i}@example.com" for i in range(51)]}, 422, "validation_error"),
    ("51 headers", "/emails", {"headers": {f"X-H{i}": "v" for i in range(51)}}, 422, "validation_error"),
    ("51 tags", "/emails", {"tags": [{"name": f"t{i}", "value": "v"} for i in range(51)]}, 422, "validation_error"),
    ("11 path attachments", "/emails", {"attachments": [{"path": f"https://x.example/{i}"} for i in range(11)]},
     422, "validation_error"),
    ("257-character scheduled_at", "/emails", {"scheduled_at": LONG_PHRASE + "s"}, 422, "validation_error"),
    ("scheduled in year 99999", "/emails", {"scheduled_at": "year 99999"}, 422, "validation_error"),
    ("scheduled in the past", "/emails", {"scheduled_at": "2001-01-01T00:00:00Z"}, 422, "validation_error"),
    # Attachment content.
    ("bad base64", "/emails", {"attachments": [{"filename": "a.txt", "content": "!!!!"}]}, 422, "validation_error"),
    ("base64 with bad padding", "/emails", {"attachments": [{"filename": "a.txt", "content": "abc"}]},
     422, "validation_error"),
    ("byte values over 255", "/emails", {"attachments": [{"filename": "a.bin", "content": [1, 256]}]},
     422, "validation_error"),
    ("negative byte values", "/emails", {"attachments": [{"filename": "a.bin", "content": [-1]}]},
     422, "validation_error"),
    ("an executable", "/emails", {"attachments": [{"filename": "a.txt", "content": "TVqQAAMAAAAEAAAA"}]},
     422, "validation_error"),
    ("attachment neither content nor path", "/emails", {"attachments": [{"filename": "a.txt"}]},
     422, "invalid_attachment"),
    # Batches.
    ("batch of 101", "/emails/batch", lambda body: [body] * 101, 422, "validation_error"),
    ("batch with one bad item", "/emails/batch", lambda body: [body, {**body, "text": f"a{NUL}"}, body],
     422, "validation_error"),
    ("batch with a number", "/emails/batch", lambda body: [body, 7], 422, "validation_error"),
    ("batch an object", "/emails/batch", lambda body: body, 422, "validation_error"),
    ("empty batch", "/emails/batch", lambda body: [], 422, "validation_error"),
    ("batch with a lone surrogate", "/emails/batch",
     lambda body: raw("[" + json.dumps(body) + ", " + json.dumps(body)[:-1] + ', "text": "\\udead"}]'),
     422, "validation_error"),
    ("batch of 100 nested 1000 deep", "/emails/batch", lambda body: nested(1000), 422, "validation_error"),
    ("batch with attachments", "/emails/batch",
     lambda body: [{**body, "attachments": [{"filename": "a.txt", "content": "aGk="}]}], 422, "validation_error"),
]


def request_body(tenant, changes):
    """The bytes to send: the tenant's valid body changed as the case says."""
    if callable(changes):
        value = changes(tenant.body)
        return value if isinstance(value, bytes) else json.dumps(value).encode()
    return json.dumps({**tenant.body, **changes}).encode()


async def post(api, key: str, path: str, data: bytes):
    response, body = await api.request("POST", path, key, data=data, headers={"Content-Type": ["application/json"]})
    return response.code, json.loads(body)


@pytest.mark.parametrize("path, changes, status, name", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
@pt.ensureDeferred
async def test_a_hostile_value_is_refused(api, victim, bystander, path, changes, status, name):  # noqa: F811
    data = request_body(victim, changes)
    code, body = await attack(api, victim, bystander, lambda: post(api, victim.key, path, data))
    assert (code, body["name"]) == (status, name), body


#: (id, changes, the field the native envelope names).
NATIVE_CASES = [
    ("nul in text", {"text": f"a{NUL}b"}, "text"),
    ("control in attachment filename", {"attachments": [{"filename": "a\x1b.txt", "content": "aGk="}]},
     "attachments[0].filename"),
    ("5000 headers", {"headers": {f"X-H{i}": "v" for i in range(5000)}}, "headers"),
    ("long scheduled_at", {"scheduled_at": "x" * 257}, "scheduled_at"),
    ("line separator in a header value", {"headers": {"X-Ref": "a\u2028b"}}, "headers"),
    ("line separator in reply_to", {"reply_to": "Help\u2028 <help@victim.example.com>"}, "reply_to"),
    ("100000 nested brackets", lambda body: nested(100_000), "body"),
    ("lone surrogate in subject", lambda body: raw(json.dumps(body)[:-1] + ', "subject": "\\ud800"}'), "subject"),
    ("lone surrogate in a tag", lambda body: raw(json.dumps(body)[:-1] + ', "tags": [{"name": "\\udc00"}]}'),
     "tags[0].name"),
]


@pytest.mark.parametrize("changes, field", [case[1:] for case in NATIVE_CASES], ids=[case[0] for case in NATIVE_CASES])
@pt.ensureDeferred
async def test_the_native_surface_names_the_field(api, victim, bystander, changes, field):  # noqa: F811
    data = request_body(victim, changes)
    code, body = await attack(api, victim, bystander, lambda: post(api, victim.key, "/v1/emails", data))
    assert (code, body["error"]["code"], body["error"]["field"]) == (422, "validation_error", field), body


@pt.ensureDeferred
async def test_letters_holding_the_byte_0x85_pass(api, victim):  # noqa: F811
    letters = "х Å"  # D1 85 and C3 85 in UTF-8
    code, sent, _ = await api.json("POST", "/emails", victim.key, json={
        **victim.body, "subject": letters, "from": f"{letters} <news@{victim.domain}>", "headers": {"X-Ref": letters}})
    assert code == 200, sent
    row = await api.parts.db.fetchone("SELECT subject FROM emails WHERE id = %s", (sent["id"],))
    assert row["subject"] == letters


@pt.ensureDeferred
async def test_a_long_scheduled_at_is_refused_when_rescheduling(api, victim, bystander):  # noqa: F811
    code, sent, _ = await api.json("POST", "/emails", victim.key, json={**victim.body, "scheduled_at": "in 1 hour"})
    assert code == 200

    async def reschedule():
        return await api.json("PATCH", f"/emails/{sent['id']}", victim.key, json={"scheduled_at": "in 2 hours " * 30})

    code, body, _ = await attack(api, victim, bystander, reschedule)
    assert (code, body["name"]) == (422, "validation_error") and body["message"].startswith("scheduled_at")


@pt.ensureDeferred
async def test_date_phrases_are_read_off_the_reactor(api, victim, monkeypatch):  # noqa: F811
    read_in = []

    def read_phrase(*args):
        read_in.append(threadable.isInIOThread())
        return reading(*args)

    reading = email_use_case.read_phrase
    monkeypatch.setattr(email_use_case, "read_phrase", read_phrase)
    batch = [{**victim.body, "to": f"r{i}@example.com", "scheduled_at": LONG_PHRASE} for i in range(100)]
    code, body, _ = await api.json("POST", "/emails/batch", victim.key, json=batch)
    assert code == 200 and len(body["data"]) == 100
    assert read_in == [False] * 100
    rows = await api.parts.db.fetchall("SELECT DISTINCT status FROM emails WHERE tenant_id = %s", (victim.id,))
    assert rows == [{"status": "scheduled"}]
