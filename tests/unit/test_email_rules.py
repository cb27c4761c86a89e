"""The send body's rules and the MIME message built from it (pure, no I/O)."""

import base64
import email
import email.policy
from datetime import UTC, datetime, timedelta

import pytest

from mailsvc.domain.email import (
    MAX_PATH_ATTACHMENTS,
    MAX_TAGS,
    SchedulePhrase,
    read_phrase,
    schedule_within,
    submission_from_json,
)
from mailsvc.domain.errors import Invalid, InvalidAttachment
from mailsvc.domain.headers import MAX_HEADERS, MAX_RECIPIENTS, parse_mailbox
from mailsvc.domain.text import MultiLine, check_texts
from mailsvc.mail.mime import build, new_message_id, resubmitted

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
BASE = {"from": "Acme <news@acme.example>", "to": "ann@example.com", "subject": "Hi", "html": "<p>Hi</p>"}


def submission(**changes):
    return submission_from_json({**BASE, **changes}, NOW)


def invalid(field, **changes):
    with pytest.raises(Invalid) as e:
        submission(**changes)
    assert e.value.message.startswith(field), e.value.message
    return e.value


@pytest.mark.parametrize("text, name, address", [
    ("ann@example.com", "", "ann@example.com"),
    ("Ann <ann@example.com>", "Ann", "ann@example.com"),
    ('"Doe, John" <john@example.com>', "Doe, John", "john@example.com"),
    ("José <jose@bücher.example>", "José", "jose@xn--bcher-kva.example"),
    ('"very.unusual.@.unusual.com"@example.com', "", '"very.unusual.@.unusual.com"@example.com'),
])
def test_addresses(text, name, address):
    mailbox = parse_mailbox("to", text)
    assert (mailbox.display_name, mailbox.address) == (name, address)


@pytest.mark.parametrize("text", [
    "", "not an address", "a@b", "a@", "@b.com", "Doe, J <j@c.com>", "a@b.com\r\nBcc: x@y.com",
    "a b@c.com", "x@[127.0.0.1]", "a@-b.com"])
def test_bad_addresses(text):
    with pytest.raises(Invalid):
        parse_mailbox("to", text)


@pytest.mark.parametrize("text, name, address", [
    ("a@b.example", "", "a@b.example"),
    ('"Name, Inc" <a@b.example>', "Name, Inc", "a@b.example"),
    ("Name <a@b.example>", "Name", "a@b.example"),
    ("<a@b.example>", "", "a@b.example"),
    ("=?utf-8?q?J=C3=B6rg?= <a@b.example>", "Jörg", "a@b.example"),
    ("=?utf-8?b?zrHOss6z?= <a@b.example>", "αβγ", "a@b.example"),
    ("a@b.example (a comment)", "", "a@b.example"),
    ("John Q. Public <john@b.example>", "John Q. Public", "john@b.example"),  # RFC 5322's obs-phrase
])
def test_one_mailbox(text, name, address):
    for field in ("from", "sender"):
        mailbox = parse_mailbox(field, text)
        assert (mailbox.display_name, mailbox.address) == (name, address)


@pytest.mark.parametrize("text", [
    '"PayPal Security" <me@own.example> <service@paypal.com>',
    "me@own.example onboarding@resend.dev",
    "me@own.example; x",
    "me@own.example <onboarding@resend.dev>x",
    "<me@own.example> <service@paypal.com>",
    "x: a@b.example;",
    "undisclosed-recipients:;",
    "a@b.example, c@d.example",
    "a@b.example,",
    "Name <a@b.example> trailing",
    "Name <a@b.example>>",
])
def test_anything_but_one_mailbox_is_refused(text):
    with pytest.raises(Invalid) as e:
        parse_mailbox("from", text)
    assert e.value.field == "from" and e.value.message.startswith("from must be exactly one email address")
    assert submission_error("from", text).startswith("from must be exactly one email address")


def submission_error(field, value) -> str:
    with pytest.raises(Invalid) as e:
        submission(**{field: value})
    return e.value.message


def test_required_fields_name_themselves():
    invalid("from", **{"from": None})
    invalid("to", to=[])
    invalid("subject", subject="")
    invalid("html", html=None)
    invalid("to", to=5)


def test_recipient_limit_counts_unique_addresses():
    many = [f"r{i}@example.com" for i in range(50)]
    assert len(submission(to=many, cc=many[:10], bcc=["R1@example.com"]).recipients) == 50
    invalid("to", to=many, cc=["extra@example.com"])


def test_an_address_repeated_is_one_recipient_with_one_copy():
    repeated = submission(to=["ann@example.com"] * 51, cc=["Ann@Example.com", "bob@example.com"] * 60,
                          bcc=[" ANN@example.com "] * 200, reply_to=["help@acme.example"] * 51)
    assert repeated.recipients == ("ann@example.com", "bob@example.com")
    assert [str(m) for m in repeated.to] == ["ann@example.com"]
    assert [m.address for m in repeated.cc] == ["Ann@example.com", "bob@example.com"]
    assert [m.address for m in repeated.bcc] == ["ANN@example.com"]
    assert [str(m) for m in repeated.reply_to] == ["help@acme.example"]
    # The first spelling of an address is kept, with its name.
    named = submission(to=["Ann <ann@example.com>", "ann@example.com", "Other Ann <ANN@example.com>"])
    assert [str(m) for m in named.to] == ["Ann <ann@example.com>"]
    many = [f"r{i}@example.com" for i in range(50)]
    assert len(submission(to=many * 3, cc=many[::-1]).recipients) == 50
    invalid("to", to=[*many, "extra@example.com", *many])


def test_subject_limit_is_in_bytes():
    assert submission(subject="é" * 499)
    invalid("subject", subject="é" * 500)
    invalid("subject", subject="a\r\nBcc: x@y.com")


def test_headers():
    assert submission(headers={"X-Entity-Ref-ID": "123", "List-Unsubscribe": "<https://x.example/u>"}).headers
    for name in ("From", "message-id", "DKIM-Signature", "Return-Path", "Reply-To", "bcc"):
        invalid("headers", headers={name: "x"})
    invalid("headers", headers={"X-Evil": "a\r\nBcc: x@y.com"})
    invalid("headers", headers={"Bad Name": "x"})
    # What SMTP submission refuses in a message's header section (tests/integration/test_hostile_smtp.py).
    for name in ("From ", "Sender\t", "X-Junk ", "X\x7fA", "Sender", "Resent-From", "resent-reply-to", "Resent-X"):
        invalid("headers", headers={name: "ceo@bank.example"})
    invalid("headers", headers={"X-Num": 5})


def test_tags():
    assert submission(tags=[{"name": "category", "value": "confirm_email"}]).tags == (("category", "confirm_email"),)
    invalid("tags", tags=[{"name": "bad name", "value": "x"}])
    invalid("tags", tags=[{"name": "x"}])
    invalid("tags", tags=[{"name": "x" * 257, "value": "y"}])


def scheduled(text):
    """``scheduled_at`` read as the accept path reads it: ISO 8601 at once, a phrase in English."""
    when = submission(scheduled_at=text).scheduled_at
    if isinstance(when, SchedulePhrase):
        return schedule_within(when.field, read_phrase(when, NOW, ("en",)), NOW)
    return when


@pytest.mark.parametrize("text, when", [
    ("in 1 hour", NOW + timedelta(hours=1)),
    ("tomorrow at 9am", datetime(2026, 11, 23, 9, tzinfo=UTC)),
    ("2026-11-30T08:00:00Z", datetime(2026, 11, 30, 8, tzinfo=UTC)),
    ("2026-11-30T09:00:00+01:00", datetime(2026, 11, 30, 8, tzinfo=UTC)),
    ("2026-11-30T08:00:00", datetime(2026, 11, 30, 8, tzinfo=UTC)),  # no offset: UTC
])
def test_scheduled_at(text, when):
    assert scheduled(text) == when


def test_iso_dates_are_read_at_once_and_phrases_later():
    assert isinstance(submission(scheduled_at="2026-11-30T08:00:00Z").scheduled_at, datetime)
    assert submission(scheduled_at="in 1 hour").scheduled_at == SchedulePhrase("scheduled_at", "in 1 hour")


@pytest.mark.parametrize("text", [
    "in 31 days", "whenever you like", "2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z",
    "in 1 hour " * 25 + "x" * 7,  # 257 characters
    "in 1 hour\x00", "in 1\nhour", "dans une heure",  # English only
    "year 99999", "9" * 256,
])
def test_bad_scheduled_at(text):
    with pytest.raises(Invalid) as e:
        scheduled(text)
    assert e.value.field == "scheduled_at" and e.value.message.startswith("scheduled_at")


def test_schedule_phrases_in_other_languages_when_configured():
    phrase = SchedulePhrase("scheduled_at", "dans une heure")
    assert read_phrase(phrase, NOW, ("en", "fr")) == NOW + timedelta(hours=1)


CONTROL = "\x00"


@pytest.mark.parametrize("field, changes", [
    ("subject", {"subject": f"Hi{CONTROL}"}),
    ("subject", {"subject": "Hi\x1b[31m"}),
    ("subject", {"subject": "Hi\x85"}),  # C1 next line
    ("subject", {"subject": "Hi\u2028Bcc: x@y.com"}),  # a line separator: str.splitlines breaks there
    ("subject", {"subject": "Hi\u2029"}),
    ("from", {"from": "Acme\u2028 <news@acme.example>"}),
    ("from", {"from": "=?utf-8?q?Acme=E2=80=A8?= <news@acme.example>"}),  # decoded from an encoded word
    ("reply_to", {"reply_to": "Help\u2029 <help@acme.example>"}),
    ("to", {"to": ["Ann\x85 <ann@example.com>"]}),
    ("headers", {"headers": {"X-Ref": "1\u20282"}}),
    ("text", {"text": f"a{CONTROL}b"}),
    ("text", {"text": "bell\x07"}),
    ("html", {"html": "<p>\x7f</p>"}),
    ("from", {"from": f"Acme{CONTROL} <news@acme.example>"}),
    ("to", {"to": ["Ann\x0b <ann@example.com>"]}),
    ("reply_to", {"reply_to": "Help\x1f <help@acme.example>"}),
    ("headers", {"headers": {"X-Ref": f"1{CONTROL}"}}),
    ("headers", {"headers": {"X-Ref": "1\x0c2"}}),
    ("attachments[0].filename", {"attachments": [{"filename": f"a{CONTROL}.txt", "content": "aGk="}]}),
    ("attachments[0].filename", {"attachments": [{"filename": "a\x1b.txt", "content": "aGk="}]}),
    ("attachments[0].content_type", {"attachments": [{"filename": "a", "content": "aGk=",
                                                      "content_type": "text/plain\x00"}]}),
    ("attachments", {"attachments": [{"filename": "a", "content": "aGk=", "content_id": "c\x00"}]}),
    ("attachments[0].path", {"attachments": [{"path": f"https://x.example/a{CONTROL}"}]}),
    ("scheduled_at", {"scheduled_at": f"in 1 hour{CONTROL}"}),
])
def test_control_characters_are_refused(field, changes):
    assert invalid(field, **changes).field == field


def test_letters_holding_the_byte_0x85_pass():
    letters = "х Å"  # D1 85 and C3 85 in UTF-8
    body = submission(subject=letters, **{"from": f"{letters} <news@acme.example>"}, headers={"X-Ref": letters},
                      text="a\u2028b")  # a text of lines may hold a line separator
    assert (body.subject, body.sender.display_name, body.headers) == (letters, letters, (("X-Ref", letters),))
    assert "U+2028" in invalid("subject", subject="a\u2028b").message


def test_tab_and_line_breaks_stay_where_they_belong():
    body = submission(subject="a\tb", text="a\tb\r\nc\n", html="<p>\t</p>\r\n", headers={"X-Ref": "a\tb"},
                      attachments=[{"filename": "a\tb.txt", "content": "aGk="}])
    assert (body.subject, body.text, body.headers) == ("a\tb", "a\tb\r\nc\n", (("X-Ref", "a\tb"),))


@pytest.mark.parametrize("field, limit, changes", [
    ("headers", MAX_HEADERS, lambda n: {"headers": {f"X-H{i}": "v" for i in range(n)}}),
    ("tags", MAX_TAGS, lambda n: {"tags": [{"name": f"t{i}", "value": "v"} for i in range(n)]}),
    ("attachments", MAX_PATH_ATTACHMENTS, lambda n: {"attachments": [{"path": f"https://x.example/{i}"}
                                                                     for i in range(n)]}),
    ("to", MAX_RECIPIENTS, lambda n: {"to": [f"r{i}@example.com" for i in range(n)]}),
    ("cc", MAX_RECIPIENTS, lambda n: {"to": "r0@example.com", "cc": [f"r{i}@example.com" for i in range(n)]}),
    ("bcc", MAX_RECIPIENTS, lambda n: {"to": "r0@example.com", "bcc": [f"r{i}@example.com" for i in range(n)]}),
    ("reply_to", MAX_RECIPIENTS, lambda n: {"reply_to": [f"help{i}@acme.example" for i in range(n)]}),
])
def test_counts_are_capped(field, limit, changes):
    assert submission(**changes(limit))
    assert invalid(field, **changes(limit + 1)).field == field


def test_arrays_are_refused_by_length_before_their_items_are_read():
    # An entry repeated is skipped unread; past 50 different entries the rest are not read.
    assert invalid("to", to=["r@example.com"] * 5000 + [None]).message.startswith("to must be")
    assert invalid("to", to=[f"r{i}@example.com" for i in range(50)] + [None] * 5000).message == (
        f"to: at most {MAX_RECIPIENTS} different addresses")
    assert "at most" in invalid("tags", tags=[None] * 5000).message


def test_unsupported_features():
    invalid("topic_id", topic_id="t1")
    assert submission(topic_id="")
    invalid("template", template={"id": "welcome"})
    invalid("stream", stream="marketing")


def test_attachment_encodings():
    data = b"hello, world"
    forms = [base64.b64encode(data).decode(), {"type": "Buffer", "data": list(data)}, list(data)]
    for form in forms:
        [a] = submission(attachments=[{"filename": "a.txt", "content": form}]).attachments
        assert a.content == data and a.content_type == "text/plain"
    inline = {"filename": "logo.png", "content": forms[0], "inline_content_id": "logo"}
    [a] = submission(attachments=[inline]).attachments
    assert a.inline and a.content_id == "logo" and a.content_type == "image/png"
    with pytest.raises(InvalidAttachment):
        submission(attachments=[{"filename": "x.txt"}])
    [a] = submission(attachments=[{"path": "https://files.example/report.pdf?sig=1"}]).attachments
    assert a.filename == "report.pdf" and a.content is None and a.content_type == "application/pdf"


def test_executables_are_refused_by_name_and_by_content():
    invalid("attachments", attachments=[{"filename": "setup.exe", "content": "aGk="}])
    invalid("attachments", attachments=[{"filename": "run.JS", "content": "aGk="}])
    elf = base64.b64encode(b"\x7fELF\x02\x01\x01" + b"\0" * 60).decode()
    invalid("attachments", attachments=[{"filename": "innocent.txt", "content": elf}])
    pe = base64.b64encode(b"MZ\x90\x00" + b"\0" * 60).decode()
    invalid("attachments", attachments=[{"filename": "invoice.pdf", "content": pe}])


def test_no_attachments_in_batches():
    with pytest.raises(Invalid):
        submission_from_json({**BASE, "attachments": [{"filename": "a.txt", "content": "aGk="}]}, NOW,
                             allow_attachments=False)


def parse(raw: bytes):
    return email.message_from_bytes(raw, policy=email.policy.strict)


def test_mime_structure_and_encodings():
    s = submission(
        **{"from": "José Ñ <jose@exämple.com>"},
        to=["a@example.com", '"Doe, J" <j@example.com>'], bcc="hidden@example.com",
        subject="Héllo " + "x" * 120, html="<p>Hi <img src='cid:logo'></p>",
        attachments=[{"filename": "logo.png", "content": "iVBORw0KGgo=", "content_id": "logo"},
                     {"filename": "rëport.pdf", "content": [37, 80, 68, 70]}],
        headers={"X-Entity-Ref-ID": "42"},
    )
    raw = build(s, message_id=new_message_id("xn--exmple-cua.com"), date=NOW,
                attachments=[(a.filename, a.content, a.content_type, a.content_id) for a in s.attachments])
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    assert b"\n" not in raw.replace(b"\r\n", b"")
    message = parse(raw)
    assert [p.get_content_type() for p in message.walk()] == [
        "multipart/mixed", "multipart/alternative", "text/plain", "multipart/related", "text/html", "image/png",
        "application/pdf"]
    assert message["Bcc"] is None and b"hidden@example.com" not in raw
    assert str(message["From"]) == "José Ñ <jose@xn--exmple-cua.com>"
    assert str(message["Subject"]).startswith("Héllo x")
    assert message["Message-ID"].endswith("@xn--exmple-cua.com>")
    assert message["X-Entity-Ref-ID"] == "42"
    pdf = list(message.iter_attachments())[0]
    assert pdf.get_filename() == "rëport.pdf" and pdf.get_content() == b"%PDF"
    plain = message.get_body(("plain",))
    assert plain.get_content().strip() == "Hi"


def test_text_is_generated_unless_empty():
    raw = build(submission(html="<h1>Title</h1><p>Body</p>"), message_id="<1@x>", date=NOW)
    assert parse(raw).get_body(("plain",)).get_content().split() == ["Title", "Body"]
    raw = build(submission(html="<p>Only html</p>", text=""), message_id="<1@x>", date=NOW)
    message = parse(raw)
    assert message.get_content_type() == "text/html"
    raw = build(submission(html=None, text="plain only"), message_id="<1@x>", date=NOW)
    assert parse(raw).get_content_type() == "text/plain"


def test_resubmitted_message_keeps_its_headers_but_managed_ones():
    raw = (b"From: a@acme.example\r\nTo: b@example.com\r\nBcc: secret@example.com\r\nMessage-ID: <client@x>\r\n"
           b"X-Custom: keep\r\n folded\r\nDKIM-Signature: v=1; forged\r\nResend-Idempotency-Key: k1\r\n"
           b"Subject: Hi\r\n\r\nbody\r\n.line\r\n")
    out = resubmitted(raw, "<ours@acme.example>", NOW)
    message = parse(out)
    assert message["Message-ID"] == "<ours@acme.example>" and message["Bcc"] is None
    assert message["DKIM-Signature"] is None and message["Resend-Idempotency-Key"] is None
    assert b"X-Custom: keep\r\n folded\r\n" in out
    assert out.endswith(b"\r\n\r\nbody\r\n.line\r\n")


def test_common_addresses_are_read_as_the_email_packages_parser_reads_them(monkeypatch):
    """``parse_mailbox`` reads ``a@b`` and ``Name <a@b>`` itself: the same outcome as the parser's."""
    import random

    from mailsvc.domain import headers as rules

    def outcome(text):
        try:
            return rules.parse_mailbox("to", text)
        except Invalid as e:
            return e.message

    rng = random.Random(7)
    pieces = ["a", "Z", "0", ".", "-", "--", "_", "+", "'", "!", "=?", "?", " ", "  ", "@", "<", ">", "\"", ",",
              "é", "日", "\u00a0", "\u200b", "\x7f", "\t", "xn--", "example", ".com", ".c0m", ".123", "(", ")"]
    texts = ["ann@example.com", "Ann <ann@Example.COM>", "José Ñ <jose@example.com>", "a@b", "x@exa--mple.com",
             "A  B <a@b.co>", "<a@b.co>", "J. Doe <j@x.com>", "x@" + "a" * 64 + ".com", "l" * 65 + "@x.com",
             "a@" + ".".join(["b" * 60] * 5) + ".com", "=?utf-8?q?x?= <a@b.com>", "a@xn--bcher-kva.example"]
    for _ in range(3000):
        local = "".join(rng.choice(pieces[:12]) for _ in range(rng.randint(1, 4)))
        domain = "".join(rng.choice(pieces[:5] + pieces[25:31]) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.6:
            local, domain = local.strip(".@ ") or "x", domain.strip(".-") + ".example.com"
        name = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
        texts.append(f"{name} <{local}@{domain}>" if name else f"{local}@{domain}")
    fast = [outcome(t) for t in texts]
    assert sum(rules.simple_mailbox(t.strip()) is not None for t in texts) > 200  # read without the parser
    monkeypatch.setattr(rules, "simple_mailbox", lambda text: None)
    assert fast == [outcome(t) for t in texts]
    assert sum(isinstance(m, rules.Mailbox) for m in fast) > 300


def test_mailboxes_are_written_as_the_email_packages_address_writes_them():
    import random
    from email.headerregistry import Address

    from mailsvc.domain.headers import Mailbox

    rng = random.Random(3)
    for _ in range(5000):
        name = "".join(rng.choice('ab ()<>@,:;.\\"[]\téü') for _ in range(rng.randint(1, 6)))
        local = rng.choice(["a", "a.b", '"q uoted"', "x+y"])
        mailbox = Mailbox(name, f"{local}@example.com")
        assert str(mailbox) == str(Address(display_name=name, username=local, domain="example.com"))


@pytest.mark.parametrize("body, where", [
    ({"subject": "a\nb"}, "subject"),
    ({"html": "a\x00b"}, "html"),
    ({"html": "a\ud800b"}, "html"),
    ({"html": "a\x0bb"}, "html"),
    ([{"text": "ok\r\n"}, {"subject": "a\rb"}], "[1].subject"),
    ({"properties": {"city": "a\nb", "nested": {"deeper": "a\nb"}}}, "properties.nested.deeper"),
    ({"document": {"blocks": [{"text": "a\x85b"}]}}, "document.blocks[0].text"),
    ({"headers": {"X-A\nB": "v"}}, "headers"),
    ("a\x1bb", "body"),
])
def test_the_one_check_of_stored_text_names_where(body, where):
    lines = MultiLine(("html", "[].text", "properties.*", "document.**"))
    with pytest.raises(Invalid) as e:
        check_texts(body, lines)
    assert e.value.field == where and e.value.message.startswith(where)


def test_multi_line_fields_keep_tab_cr_and_lf():
    lines = MultiLine(("html", "[].text", "properties.*", "document.**"))
    check_texts([{"html": "<p>\t</p>\r\n", "text": "a\nb", "subject": "a\tb"}], MultiLine(("[].html", "[].text")))
    check_texts({"properties": {"city": "Port\nTown"}, "document": {"blocks": [{"text": "a\r\nb"}]}}, lines)


def test_test_addresses_and_reserved_names():
    from mailsvc.domain.testaddresses import TestAddresses, check_reserved, reserved

    tests = TestAddresses()
    assert [tests.outcome(a) for a in (
        "delivered@resend.dev", "Delivered+Signup@RESEND.DEV", "bounced+a+b@resend.dev", "complained@resend.dev.",
        "suppressed+x@resend.dev", "hello@resend.dev", "delivered@mail.resend.dev", "delivered@example.com",
    )] == ["delivered", "delivered", "bounced", "complained", "suppressed", None, None, None]
    assert [reserved(d) for d in (
        "example.com", "Mail.Example.ORG", "test.com", "box.test", "a.example", "x.invalid", "app.localhost",
        "localhost", "testing.com", "example.co", "examples.com", "resend.dev",
    )] == [True] * 8 + [False] * 4
    # A node whose test domain is a reserved name (its tests') keeps its test addresses.
    local = TestAddresses("mailsvc.test")
    check_reserved(submission_from_json({"from": "a@acme.dev", "to": "delivered@mailsvc.test", "text": "x",
                                         "subject": "s"}, NOW), local)
    with pytest.raises(Invalid) as refused:
        check_reserved(submission_from_json({"from": "a@acme.dev", "to": "delivered@mailsvc.test", "text": "x",
                                             "subject": "s", "bcc": "ann@other.test"}, NOW), local)
    assert refused.value.field == "bcc" and str(refused.value).startswith("bcc: ann@other.test is on a reserved")
