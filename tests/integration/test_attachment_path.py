"""
Attachment ``path`` end to end: POST /emails names a URL, the service fetches it at send time
from a loopback HTTP server (allowed here by ``security.allow_private_targets``) and attaches
what came back; redirects, HTTP errors, oversized and executable bodies are refused, and
without the test knob a loopback URL is refused before anything is requested.
"""

from __future__ import annotations

import email
import email.policy

import pytest
import pytest_twisted as pt
from twisted.internet import protocol, reactor

from mailsvc.config import load
from mailsvc.domain.email import MAX_ATTACHMENT_BYTES
from tests.helpers.httpfiles import file_server  # noqa: F401 (a fixture)
from tests.helpers.sending import BODY, message_of, sending_tenant

PDF = b"%PDF-1.4\n" + b"0123456789" * 500 + b"\n%%EOF\n"
CSV = b"name,amount\nann,12\n"
EXE = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00" + b"\x00" * 200
ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 200


@pytest.fixture
def config(request):
    """The application's configuration; private targets allowed unless parametrised False."""
    allow = getattr(request, "param", True)
    return load(None, environ={"MAILSVC_SECURITY_ALLOW_PRIVATE_TARGETS": "true" if allow else "false",
                               "MAILSVC_MAIL_REFUSE_RESERVED_RECIPIENTS": "false"})


@pt.async_yield_fixture(autouse=True)
async def close_fetcher(api):
    """Pooled connections to the file server are closed with the test, not left behind."""
    yield
    await api.parts.fetcher.close()


async def send_with(api, key, *attachments):
    return await api.json("POST", "/emails", key, json={**BODY, "attachments": list(attachments)})


async def assert_refused(api, key, attachment, *words):
    code, body, _ = await send_with(api, key, attachment)
    assert (code, body["name"]) == (422, "validation_error"), body
    assert body["message"].startswith("attachments"), body
    for word in words:
        assert word in body["message"], body
    stored = await api.parts.db.fetchone("SELECT count(*) AS n FROM emails")
    assert stored["n"] == 0


@pt.ensureDeferred
async def test_a_fetched_file_is_attached(api, file_server):  # noqa: F811
    _, key, _ = await sending_tenant(api)
    report = file_server.serve("/files/q3-report.pdf", PDF)
    data = file_server.serve("/export/data.csv", CSV)
    named = file_server.serve("/blob", b"plain words\n")
    code, sent, _ = await send_with(
        api, key,
        {"path": report},
        {"path": data + "?token=abc#frag"},
        {"path": named, "filename": "notes.txt", "content_type": "text/plain"},
    )
    assert code == 200, sent
    # Each URL fetched once, without the fragment; the query string reached the server.
    assert file_server.files.requested == ["/files/q3-report.pdf", "/export/data.csv", "/blob"]

    code, listed, _ = await api.json("GET", f"/emails/{sent['id']}/attachments", key)
    assert code == 200
    got = {a["filename"]: (a["content_type"], a["size"], a["content_disposition"]) for a in listed["data"]}
    assert got == {
        "q3-report.pdf": ("application/pdf", len(PDF), "attachment"),  # name from the last segment
        "data.csv": ("text/csv", len(CSV), "attachment"),  # query string left out of the name
        "notes.txt": ("text/plain", 12, "attachment"),
    }
    message = email.message_from_bytes(await message_of(api.parts.db, sent["id"]), policy=email.policy.default)
    parts = {p.get_filename(): p for p in message.iter_attachments()}
    assert parts["q3-report.pdf"].get_content() == PDF
    assert parts["q3-report.pdf"].get_content_type() == "application/pdf"
    assert parts["data.csv"].get_content().encode() == CSV
    pdf = next(a for a in listed["data"] if a["filename"] == "q3-report.pdf")
    response, content = await api.request("GET", pdf["download_url"].split(api.url.split("//")[1], 1)[1])
    assert response.code == 200 and content == PDF


@pt.ensureDeferred
async def test_a_redirect_is_not_followed(api, file_server):  # noqa: F811
    _, key, _ = await sending_tenant(api)
    target = file_server.serve("/files/q3-report.pdf", PDF)
    moved = file_server.serve("/old/report.pdf", code=302, Location=target)
    await assert_refused(api, key, {"path": moved}, "redirect")
    assert file_server.files.requested == ["/old/report.pdf"]


@pt.ensureDeferred
async def test_an_http_error_is_refused(api, file_server):  # noqa: F811
    _, key, _ = await sending_tenant(api)
    await assert_refused(api, key, {"path": file_server.base + "/missing.pdf"}, "404")
    broken = file_server.serve("/broken.pdf", b"oops", code=500)
    await assert_refused(api, key, {"path": broken}, "500")


@pt.ensureDeferred
async def test_a_body_over_the_budget_is_refused(api, file_server):  # noqa: F811
    _, key, _ = await sending_tenant(api)
    over = file_server.serve("/huge.bin", b"\0" * (MAX_ATTACHMENT_BYTES + 1))
    await assert_refused(api, key, {"path": over}, f"exceeds {MAX_ATTACHMENT_BYTES} bytes")
    # The 40 MiB budget is shared with the inline contents: 4 bytes of them leave that much less.
    big = file_server.serve("/big.bin", b"\0" * (MAX_ATTACHMENT_BYTES - 3))
    code, body, _ = await send_with(api, key, {"filename": "a.txt", "content": "YWJjZA=="}, {"path": big})
    assert (code, body["name"]) == (422, "validation_error"), body
    assert body["message"].startswith("attachments") and f"exceeds {MAX_ATTACHMENT_BYTES - 4} bytes" in body["message"]
    assert file_server.files.requested == ["/huge.bin", "/big.bin"]


@pt.ensureDeferred
async def test_an_executable_under_an_innocent_name_is_refused(api, file_server):  # noqa: F811
    _, key, _ = await sending_tenant(api)
    await assert_refused(api, key, {"path": file_server.serve("/files/invoice.pdf", EXE)}, "executable")
    await assert_refused(api, key, {"path": file_server.serve("/files/photo.jpg", ELF)}, "executable")
    await assert_refused(api, key, {"path": file_server.serve("/files/tool.exe", b"just text")}, "executable")


@pytest.mark.parametrize("config", [False], indirect=True)
@pt.ensureDeferred
async def test_a_loopback_path_is_refused_without_the_test_knob(api, file_server):  # noqa: F811
    _, key, _ = await sending_tenant(api)
    report = file_server.serve("/files/q3-report.pdf", PDF)
    await assert_refused(api, key, {"path": report}, "loopback")
    await assert_refused(api, key, {"path": report.replace("127.0.0.1", "[::1]")}, "loopback")
    await assert_refused(api, key, {"path": report.replace("127.0.0.1", "127.0.0.2")}, "loopback")
    assert file_server.files.requested == []


class _SmtpBanner(protocol.Protocol):
    """A host that speaks SMTP, not HTTP: its banner, then whatever the client says is ignored."""

    def connectionMade(self):  # noqa: N802
        self.transport.write(b"220 sink.example ESMTP secret-build-4711\r\n")


@pt.ensureDeferred
async def test_a_host_that_does_not_speak_http_is_refused_without_its_bytes(api):
    _, key, _ = await sending_tenant(api)
    factory = protocol.Factory.forProtocol(_SmtpBanner)
    factory.noisy = False
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{port.getHost().port}/report.pdf"
        code, body, _ = await send_with(api, key, {"path": url})
    finally:
        await port.stopListening()
    assert (code, body["name"]) == (422, "validation_error"), body
    assert body["message"] == f"attachments: fetching {url} failed: the URL did not answer with HTTP"
    assert "220" not in body["message"].replace(url, "") and "sink" not in body["message"]
