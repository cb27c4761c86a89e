"""
The message builder that writes bytes directly (``mime.build``) against the ``email`` package's
(``mime.build_with_email_package``, what it replaced): parsed back, both give the same headers,
tree, parameters and contents for a wide range of submissions; every message parses under the
strict policy, keeps its lines within the limits, never shows Bcc, and verifies with dkimpy.
Also the plain text derived from HTML (``htmltext``).
"""

import base64
import email
import email.policy
import random
from datetime import UTC, datetime
from email.header import decode_header, make_header

import attrs
import pytest

from mailsvc.domain.email import submission_from_json
from mailsvc.domain.errors import Invalid
from mailsvc.domain.htmltext import html_to_text
from mailsvc.mail import dkim, mime
from mailsvc.mail.mime import build, build_with_email_package, text_from_html
from tests.helpers.dkim import in_memory, keys, verify_all

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
BASE = {"from": "Acme <news@acme.example>", "to": "ann@example.com", "subject": "Hi", "html": "<p>Hi</p>"}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def submission(**changes):
    return submission_from_json({**BASE, **changes}, NOW)


def both(s, message_id="<m1@acme.example>"):
    parts = [(a.filename, a.content, a.content_type, a.content_id) for a in s.attachments]
    return (build(s, message_id=message_id, date=NOW, attachments=parts),
            build_with_email_package(s, message_id=message_id, date=NOW, attachments=parts))


def meaning(raw: bytes):
    """What a reader gets from a message: headers decoded, the tree, parameters and contents."""
    message = email.message_from_bytes(raw, policy=email.policy.default)

    def part(p):
        headers = []
        for name, value in p.items():
            lower = name.lower()
            if lower == "content-type":
                params = {k: v for k, v in p["content-type"].params.items() if k != "boundary"}
                headers.append((lower, p.get_content_type(), params))
            elif lower == "content-disposition":
                headers.append((lower, p.get_content_disposition(), p.get_filename()))
            elif lower in ("from", "to", "cc", "reply-to"):
                headers.append((lower, "checked by same()"))
            elif lower == "content-transfer-encoding":
                # Both are exact; the encoders (Python's and binascii's) may judge a borderline
                # text differently.
                encoding = str(value).lower()
                headers.append((lower, "qp/base64" if encoding in ("quoted-printable", "base64") else encoding))
            else:
                # The email package drops white space where it splits a long text into encoded words
                # (``same`` checks the exact text against the submission).
                headers.append((lower, "".join(str(value).split())))
        if p.is_multipart():
            return headers, [part(c) for c in p.iter_parts()]
        return headers, p.get_content()

    return part(message)


def well_formed(raw: bytes) -> email.message.EmailMessage:
    lines = raw.split(b"\r\n")
    assert b"\n" not in raw.replace(b"\r\n", b"") and b"\r" not in raw.replace(b"\r\n", b"")
    assert all(len(line) <= 998 for line in lines)
    head = raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    # Header lines keep to 78 columns but where a single word is longer.
    for line in head:
        word = line.partition(b": ")[2] if line[:1] not in (b" ", b"\t") else line
        assert len(line) <= 78 or b" " not in word.strip(), line
    assert all(line.isascii() for line in head)
    message = email.message_from_bytes(raw, policy=email.policy.strict)
    for p in message.walk():
        if not p.is_multipart():
            p.get_content()
    assert message["Bcc"] is None
    return message


def same(s, **kw):
    fast, reference = both(s, **kw)
    parsed = well_formed(fast)
    assert meaning(fast) == meaning(reference)
    for name, mailboxes in (("From", [s.sender]), ("To", s.to), ("Cc", s.cc), ("Reply-To", s.reply_to)):
        # Python's parser keeps the space between two encoded words of a display name (RFC 2047
        # §6.2 drops it): a long name differs by spaces where the words split. (The email package
        # itself loses an address of a list now and then: compared with the submission.)
        found = [(a.display_name.replace(" ", ""), a.addr_spec) for a in parsed[name].addresses] if mailboxes else []
        assert found == [(m.display_name.replace(" ", ""), str(m).rpartition("<")[2].rstrip(">") if m.display_name
                          else m.address) for m in mailboxes]
    for name, value in (("Subject", s.subject), *s.headers):
        if value.strip() == value and value.isprintable() and "=?" not in value and name.lower()[:8] != "content-":
            assert str(parsed[name]) == value
    return fast


ATTACHMENTS = [
    {"filename": "report.pdf", "content": base64.b64encode(b"%PDF-1.4 " + bytes(range(256)) * 40).decode()},
    {"filename": "rëport – final (2026).pdf", "content": base64.b64encode(b"%PDF").decode()},
    {"filename": "a-very-long-file-name-" + "x" * 90 + ".txt", "content": base64.b64encode(b"x").decode()},
    {"filename": 'quote"and\\slash.txt', "content": base64.b64encode(b"q").decode()},
    {"filename": "Ünïcödé-" + "é" * 60 + ".txt", "content": base64.b64encode(b"u").decode()},
    {"filename": "empty.bin", "content": [], "content_type": "application/octet-stream"},
    {"path": "https://files.example/n", "content": base64.b64encode(b"no name").decode(), "filename": False},
    {"filename": "upper.png", "content": base64.b64encode(PNG).decode(), "content_type": "IMAGE/PNG"},
    {"filename": "params.txt", "content": base64.b64encode(b"p").decode(), "content_type": "text/plain; charset=utf-8"},
]


@pytest.mark.parametrize("changes", [
    {},
    {"text": "Hello"},
    {"html": None, "text": "plain only"},
    {"html": "<p>Only html</p>", "text": ""},
    {"html": "<h1>Title</h1><p>Body</p>"},
    {"subject": "Grüße aus Köln"},
    {"subject": "日本語の件名です。" * 6},
    {"subject": "Emoji 🎉🎉 party " * 5},
    {"subject": "A long ASCII subject that needs folding because it is longer than a line " * 3},
    {"subject": "looks like =?utf-8?q?encoded?= but is not"},
    {"subject": "  spaces   everywhere  "},
    {"subject": "tab\tin a subject"},  # other control characters are refused at the edge
    {"subject": "x" * 200},
    {"subject": "Ünïcödé " + "x" * 150},
    {"from": "José Ñ <jose@exämple.com>"},
    {"from": '"Doe, Jöhn" <john@acme.example>'},
    {"from": '"Quote \\" inside" <q@acme.example>'},
    {"from": "Ällé " + "Namé " * 30 + "<long@acme.example>"},
    {"from": "Plain Name That Is Rather Long Indeed And Goes On And On And On <p@acme.example>"},
    {"from": "news@bücher.example"},
    {"to": [f"Recipient Number {i} <r{i}@example.com>" for i in range(30)]},
    {"to": [f"Émile {i} <e{i}@example.com>" for i in range(12)], "cc": ["Ann <a@example.com>", "b@example.com"]},
    {"to": ['"very.unusual.@.unusual.com"@example.com', "Named <x@example.com>"]},
    {"to": 'Nämed <"quoted local"@example.com>'},
    {"reply_to": ["help@acme.example", "Süpport <s@acme.example>"]},
    {"bcc": ["hidden@example.com", "Hidden Person <hp@example.com>"]},
    {"headers": {"X-Entity-Ref-ID": "42", "X-Long": "word " * 40 + "end", "X-Trailing": "word "}},
    {"headers": {"X-Utf": "Grüße " * 20, "X-Empty": "", "X-Encoded": "=?utf-8?q?x?="}},
    {"headers": {"List-Unsubscribe": "<https://acme.example/unsubscribe/" + "t" * 120 + ">"}},
    {"headers": {"Content-Language": "de", "Orig-Date": "Sun, 22 Nov 2026 10:00:00 +0000"}},
    {"headers": {"X-" + "N" * 70: "value with some words " * 5}},
    {"text": "line\n.dot\nFrom me\n\ntrailing   \n" + "long " * 300},
    {"text": "crlf\r\nand cr\rand lf\n"},
    {"text": "short non-ASCII: é\nzwei\n"},
    {"text": "é" * 200},
    {"text": "mostly ascii " * 20 + "é\n" * 3},
    {"text": "\n\n\n"},
    {"html": "<p>" + "x" * 5000 + "</p>"},
    {"html": "<p>" + "é" * 3000 + "</p>", "text": "t"},
    {"html": "<p>Hi <img src='cid:logo'></p>",
     "attachments": [{"filename": "logo.png", "content": base64.b64encode(PNG).decode(), "content_id": "logo"}]},
    {"html": None, "text": "text with an inline part",
     "attachments": [{"filename": "logo.png", "content": base64.b64encode(PNG).decode(), "content_id": "logo"}]},
    {"text": "", "attachments": [{"content": base64.b64encode(PNG).decode(), "content_id": "nameless",
                                  "content_type": "image/png"}]},
    {"attachments": ATTACHMENTS},
    {"text": "", "attachments": ATTACHMENTS[:2]},
    {"html": "<p><img src='cid:a'><img src='cid:b'></p>", "text": "both",
     "attachments": [*ATTACHMENTS[:3],
                     {"filename": "a.png", "content": base64.b64encode(PNG).decode(), "content_id": "a"},
                     {"filename": "b – ü.png", "content": base64.b64encode(PNG).decode(), "content_id": "b"}]},
])
def test_same_meaning_as_the_email_package(changes):
    same(submission(**changes))


def rfc2047(raw: bytes, name: bytes) -> str:
    """A header field of ``raw`` decoded as RFC 2047 says (space between encoded words dropped)."""
    head = raw.split(b"\r\n\r\n", 1)[0].replace(b"\r\n ", b" ").decode("ascii")
    value = next(line.split(": ", 1)[1] for line in head.split("\r\n") if line.lower().startswith(name + ":"))
    return str(make_header(decode_header(value)))


def test_encoded_words_decode_exactly():
    names = ["Ällé " + "Namé " * 30 + "End", "日本語の名前です" * 8, "Doe, Jöhn", 'Quote " Ünïcode']
    for name in names:
        display = name.replace('"', '\\"')
        s = submission(**{"from": f'"{display}" <news@acme.example>', "subject": name + " – " + name,
                          "headers": {"X-Name": name}})
        assert s.sender.display_name == name
        fast = same(s)
        assert rfc2047(fast, "from") == f"{name} <news@acme.example>"
        assert rfc2047(fast, "subject") == name + " – " + name
        assert rfc2047(fast, "x-name") == name


def test_the_common_message_is_byte_for_byte_the_email_packages_but_for_boundaries():
    s = submission(**{"from": "Acme <news@acme.example>", "reply_to": "help@acme.example",
                      "html": "<p>Thanks for shopping.</p><p>See you soon.</p>", "headers": {"X-Ref": "7"},
                      "attachments": [{"filename": "a.txt", "content": "aGk="}]})
    fast, reference = both(s)

    def boundaries(raw):
        import re

        return re.sub(rb"={15}\d{19}==", b"BOUNDARY", raw)

    assert boundaries(fast) == boundaries(reference)


def test_random_text_means_the_same():
    rng = random.Random(4)
    alphabet = "abc XYZ 019 .,;:!?\"'()<>@[]\\=_-/\t éüß€日本🎉\u200b"
    compared = refused = 0
    for _ in range(150):
        def text(n):
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, n)))

        subject = text(120).replace("\t", " ").strip() or "s"
        name = text(40).replace('"', "").replace("\\", "").replace("\t", " ").strip()
        body = {**BASE, "subject": subject, "text": text(400) + "\n" + text(100),
                "headers": {"X-Random": text(150).strip() or "v"}}
        if name:
            body["from"] = f'"{name}" <news@acme.example>'
        try:
            s = submission_from_json(body, NOW)
        except Invalid:
            refused += 1  # a display name the address rules refuse
            continue
        compared += 1
        fast = same(s)
        parsed = email.message_from_bytes(fast, policy=email.policy.default)
        assert str(parsed["Subject"]) == subject
        assert str(parsed["X-Random"]) == s.headers[0][1]
        if s.sender.display_name and not s.sender.display_name.isascii():
            assert rfc2047(fast, "from") == f"{s.sender.display_name} <news@acme.example>"
    # Most cases must be compared: a change that refused them all would otherwise pass.
    assert compared >= 120 and compared + refused == 150, (compared, refused)


@pytest.mark.parametrize("changes", [
    {"subject": "Grüße", "text": "line\n.dot\n", "from": "Jöhn <news@acme.example>",
     "attachments": [{"filename": "a.bin", "content": base64.b64encode(bytes(range(256))).decode()}]},
    {"html": "<p>" + "x " * 2000 + "</p>", "to": [f"Ré {i} <r{i}@example.com>" for i in range(20)]},
    {"attachments": ATTACHMENTS[:5], "headers": {"X-Utf": "Grüße " * 20}},
])
def test_dkimpy_verifies_what_build_makes(changes):
    signers, records = keys()
    s = submission(**{"from": "Acme <news@signed.example.com>", **changes})
    if "from" in changes:
        s = submission(**{**changes, "from": changes["from"].replace("acme.example", "signed.example.com")})
    fast, _ = both(s)
    signed = dkim.sign(fast, "signed.example.com", signers) + fast
    assert verify_all(signed, in_memory(records)) == [True, True]


def test_unusual_shapes_are_left_to_the_email_package(monkeypatch):
    calls = []
    original = mime.build_with_email_package

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(mime, "build_with_email_package", spy)
    for common in (submission(), submission(subject="Grüße", **{"from": "José <j@acme.example>"}),
                   submission(attachments=ATTACHMENTS[:7])):
        mime.build(common, message_id="<1@x>", date=NOW,
                   attachments=[(a.filename, a.content, a.content_type, a.content_id) for a in common.attachments])
    assert calls == []
    multipart = {"filename": "x.bin", "content": "bQ==", "content_type": "multipart/mixed"}
    for unusual in (submission(headers={"Content-Language": "de"}), submission(attachments=ATTACHMENTS[8:]),
                    submission(attachments=[multipart])):
        mime.build(unusual, message_id="<1@x>", date=NOW,
                   attachments=[(a.filename, a.content, a.content_type, a.content_id) for a in unusual.attachments])
    assert calls == [1, 1, 1]


def test_surrogates_fail_as_before():
    # A parsed submission cannot hold one (mailsvc.domain.text): built around the parse.
    s = attrs.evolve(submission(), text="bad \ud800 text")
    with pytest.raises(UnicodeError):
        build_with_email_package(s, message_id="<1@x>", date=NOW)
    with pytest.raises(UnicodeError):
        build(s, message_id="<1@x>", date=NOW)


def test_text_from_html():
    html = """<html><head><title>Newsletter</title><style>p{color:red}</style>
    <script>alert("no")</script></head><body>
    <div style="display: none; max-height:0">Preheader &zwnj;&nbsp;&zwnj;</div>
    <h1>Hello&nbsp;<b>Ann</b></h1><p>See <a href="https://x.example/a?b=1&amp;c=2">our site</a>.</p>
    <!-- <p>comment</p> -->
    <ul><li>One</li><li>Two<ol><li>A</li><li>B</li></ol></li></ul>
    <p>Line one<br>Line two<br/><br>After a blank</p>
    <pre>  code
    indented</pre>
    <table><tr><td>Apple</td><td>1&nbsp;&euro;</td></tr><tr><td>Pear</td><td>2 &euro;</td></tr></table>
    <a href="https://x.example/banner"><img src="b.png" alt="Shop now"></a>
    <p><a href="mailto:help@x.example">help@x.example</a> <a href="https://x.example">https://x.example</a>
    <a href="#top">Top</a></p>
    <p>Unsubscribe: <a href="{{{SVC_UNSUBSCRIBE_URL}}}">here</a></p></body></html>"""
    assert html_to_text(html) == (
        "Hello Ann\n\n"
        "See our site (https://x.example/a?b=1&c=2).\n\n"
        "* One\n* Two\n  1. A\n  2. B\n\n"
        "Line one\nLine two\n\nAfter a blank\n\n"
        "  code\n    indented\n\n"
        "Apple 1 €\nPear 2 €\n\n"
        "Shop now (https://x.example/banner)\n\n"
        "help@x.example https://x.example Top\n\n"
        "Unsubscribe: here ({{{SVC_UNSUBSCRIBE_URL}}})"
    )
    assert text_from_html("<h1>Title</h1><p>Body</p>") == "Title\n\nBody\n"
    assert text_from_html("plain & simple < 5") == "plain & simple < 5\n"
    assert text_from_html("<p>unclosed <b>bold <i>italic") == "unclosed bold italic\n"
    assert text_from_html("<img src=x>") == "\n"
    assert text_from_html("<script>never closed") == "\n"
    assert text_from_html('<p title="a > b">kept</p><a href=bare.html>bare</a>') == "kept\n\nbare (bare.html)\n"
    # As a browser reads them: a tag cut off by the end is dropped, a link inside a link ends it.
    assert text_from_html('text <a href="x" title="never closed>more') == "text\n"
    assert text_from_html('<a href="u1">one <a href="u2">two</a>') == "one (u1) two (u2)\n"
    # A hidden element hides all it holds, elements of its own name too (the preheader's nesting).
    assert text_from_html('<div style="display:none">pre<div>in</div>still hidden</div><p>shown</p>') == "shown\n"
    deep = "<ul><li>" * 50 + "deep" + "</li></ul>" * 50
    assert html_to_text("<p>x</p>" + deep) == "x\n\n" + " " * 16 + "* deep"  # indented 8 levels at most
