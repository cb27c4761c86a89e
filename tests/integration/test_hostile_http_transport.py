"""
The HTTP listener as a hostile or broken client meets it: raw sockets on loopback, bytes in
and bytes out, against the service as compose assembles it. Each case checks the status, the
error name and whether the connection was closed. The sockets run in a thread (the reactor
serving them runs here); the deadlines are set to 1 s so that the slow clients finish soon.
"""

import json
import select
import socket
import time

import pytest
import pytest_twisted as pt
from twisted.internet import threads

from mailsvc.config import load
from tests.helpers.http import Responses

MIB = 1024 * 1024


def _deadlines_of_a_second():
    return load(None, environ={"MAILSVC_HTTP_HEADER_TIMEOUT": "1", "MAILSVC_HTTP_BODY_TIMEOUT": "1",
                               "MAILSVC_MAIL_REFUSE_RESERVED_RECIPIENTS": "false"})


@pytest.fixture
def config():
    """The assembled app (the ``api`` fixture) with 1 s header and body deadlines."""
    return _deadlines_of_a_second()


@pytest.fixture(scope="module")
def shared_config():
    """The same for ``shared_api``: the tests refused before their request reaches a route, or
    that only read ``/healthz``, share one app."""
    return _deadlines_of_a_second()


def _talk(port: int, parts: list, want: int | None) -> tuple[bytes, bool]:
    """
    Send ``parts`` (bytes, or a float: seconds to wait), stopping early once the server
    answers; then read until the connection closes, or until ``want`` responses are in.
    Returns what was read and whether the server closed the connection.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        for part in parts:
            if select.select([sock], [], [], 0)[0]:
                break  # answered: a client would stop sending
            if isinstance(part, float):
                time.sleep(part)
                continue
            try:
                sock.sendall(part)
            except OSError:
                break
        data = b""
        while want is None or len(_responses(data)) < want:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return data, True
            if not chunk:
                return data, True
            data += chunk
        return data, False


def _responses(data: bytes) -> list:
    parser = Responses()
    try:
        parser.feed(data)
    except (ValueError, IndexError):
        pass  # a response still coming in
    return parser.responses


async def talk(api, parts: list, want: int | None = None) -> tuple[list, bool]:
    """[(status, headers, body)] and whether the server closed the connection."""
    data, closed = await threads.deferToThread(_talk, api.port.getHost().port, parts, want)
    return _responses(data), closed


def error_of(response) -> tuple[int, str]:
    import json

    status, _, body = response
    payload = json.loads(body)
    return status, payload["name"] if "name" in payload else payload["error"]["code"]


def post(path: str, length: int, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: mail.test", "Content-Type: application/json",
             f"Content-Length: {length}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pt.ensureDeferred
async def test_headers_sent_slowly_get_408_and_a_close(shared_api):
    parts = [b"GET /healthz HTTP/1.1\r\nHost: mail.test\r\n"]
    for i in range(40):  # one header every 0.1 s would take 4 s
        parts += [0.1, b"X-Slow-%d: 1\r\n" % i]
    [answer], closed = await talk(shared_api, parts)
    assert error_of(answer) == (408, "request_timeout") and closed


@pt.ensureDeferred
async def test_a_body_sent_slowly_gets_408_and_a_close(shared_api):
    parts = [b"POST /public/waitlist HTTP/1.1\r\nHost: mail.test\r\nContent-Length: 100\r\n\r\n"]
    parts += [0.1, b"{"] * 40
    [answer], closed = await talk(shared_api, parts)
    assert error_of(answer) == (408, "request_timeout") and closed


@pt.ensureDeferred
async def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(api):
    _, key = await api.tenant()
    [answer], closed = await talk(api, [post("/api-keys", MIB + 1, f"Authorization: Bearer {key}")])
    assert error_of(answer) == (422, "validation_error") and closed
    [answer], closed = await talk(api, [post("/v1/emails", 50 * MIB + 1, f"Authorization: Bearer {key}")])
    assert error_of(answer) == (422, "validation_error") and closed


@pt.ensureDeferred
async def test_each_route_has_its_own_limit_in_its_own_envelope(api):
    # A reschedule takes 1 MiB although a send takes 50: refused on its headers, the body unsent.
    _, key = await api.tenant()
    auth = f"Authorization: Bearer {key}"
    some_id = "0190f5a4-0000-7000-8000-000000000000"
    for method, path, length, name in [
        ("PATCH", f"/emails/{some_id}", 2 * MIB, "validation_error"),
        ("POST", f"/v1/emails/{some_id}/cancel", MIB + 1, "validation_error"),
        ("POST", "/v1/templates", 5 * MIB + 1, "validation_error"),
    ]:
        head = post(path, length, auth).replace(b"POST", method.encode(), 1)
        [answer], closed = await talk(api, [head])
        status, _, body = answer
        assert (status, closed) == (422, True), (path, body)
        if path.startswith("/v1/"):
            assert json.loads(body)["error"]["message"] == "request body too large"
        else:
            assert json.loads(body) == {"statusCode": 422, "name": name, "message": "request body too large"}
    # Within its limit, a template write of 2 MiB is read and judged on what it holds.
    body = json.dumps({"name": "big", "html": "<p>" + "a" * 2 * MIB + "</p>"}).encode()
    [answer], closed = await talk(api, [post("/templates", len(body), auth), body], want=1)
    assert answer[0] == 201 and not closed, answer


@pt.ensureDeferred
async def test_a_chunked_body_over_the_limit_is_refused_as_it_passes(api):
    _, key = await api.tenant()
    head = (f"POST /api-keys HTTP/1.1\r\nHost: mail.test\r\nAuthorization: Bearer {key}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()
    chunk = b"%x\r\n%s\r\n" % (256 * 1024, b"a" * 256 * 1024)
    [answer], closed = await talk(api, [head] + [chunk] * 200)  # 50 MiB if all were read
    assert error_of(answer) == (422, "validation_error") and closed


@pt.ensureDeferred
async def test_no_key_and_a_huge_body_is_refused_before_the_body(shared_api):
    parts = [post("/emails", 50 * MIB), b"a" * 65536]
    [answer], closed = await talk(shared_api, parts)
    assert error_of(answer) == (401, "missing_api_key") and closed
    [answer], closed = await talk(shared_api, [post("/v1/emails", 50 * MIB)])
    assert error_of(answer) == (401, "missing_api_key") and closed


@pt.ensureDeferred
async def test_an_unknown_or_revoked_key_and_a_huge_body_is_refused_before_the_body(api):
    _, key = await api.tenant()
    _, second, _ = await api.json("POST", "/api-keys", key, json={"name": "to revoke"})
    code, _, _ = await api.json("DELETE", f"/api-keys/{second['id']}", key)
    assert code == 200
    for presented in (second["token"], "re_unknown_" + "x" * 32):
        [answer], closed = await talk(api, [post("/emails", 50 * MIB, f"Authorization: Bearer {presented}"),
                                            b"a" * 65536])
        assert error_of(answer) == (403, "invalid_api_key") and closed
    # The operator API answers its own envelope before the body too.
    [answer], closed = await talk(api, [post("/admin/v1/tenants", 10 * MIB, "Authorization: Bearer op_wrong")])
    assert error_of(answer) == (403, "forbidden") and closed


@pt.ensureDeferred
async def test_a_bad_content_length_is_400(shared_api):
    for length in ("abc", "-1", "1e3", "5, 6"):
        request = f"POST /public/waitlist HTTP/1.1\r\nHost: mail.test\r\nContent-Length: {length}\r\n\r\n"
        [answer], closed = await talk(shared_api, [request.encode()])
        assert error_of(answer) == (400, "bad_request") and closed, length


@pt.ensureDeferred
async def test_request_smuggling_is_refused(shared_api):
    smuggled = b"GET /admin/v1/waitlist HTTP/1.1\r\nHost: mail.test\r\n\r\n"
    for framing in (
        f"Content-Length: {len(smuggled) + 5}\r\nTransfer-Encoding: chunked",
        f"Transfer-Encoding: chunked\r\nContent-Length: {len(smuggled) + 5}",
        "Content-Length: 5\r\nContent-Length: 60",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: xchunked",
        "Transfer-Encoding: gzip, chunked",
        "Transfer-Encoding : chunked",
    ):
        request = f"POST /public/waitlist HTTP/1.1\r\nHost: mail.test\r\n{framing}\r\n\r\n".encode()
        answers, closed = await talk(shared_api, [request + b"0\r\n\r\n" + smuggled])
        assert [error_of(a) for a in answers] == [(400, "bad_request")] and closed, framing


@pt.ensureDeferred
async def test_many_pipelined_requests_are_answered_in_order(shared_api):
    one = b"GET /healthz HTTP/1.1\r\nHost: mail.test\r\nX-Request-Id: r%d\r\n\r\n"
    last = b"GET /healthz HTTP/1.1\r\nHost: mail.test\r\nConnection: close\r\n\r\n"
    answers, closed = await talk(shared_api, [b"".join(one % i for i in range(100)) + last])
    assert [a[0] for a in answers] == [200] * 101 and closed
    assert [a[1]["x-request-id"] for a in answers[:100]] == [f"r{i}" for i in range(100)]


@pt.ensureDeferred
async def test_a_known_key_keeps_the_connection(api):
    _, key = await api.tenant()
    body = b'{"name": "kept"}'
    first = post("/api-keys", len(body), f"Authorization: Bearer {key}") + body
    [answer], closed = await talk(api, [first], want=1)
    assert answer[0] == 200 and not closed
    # Two on one connection: the second is read after the first was answered.
    answers, closed = await talk(api, [first + first.replace(b"Host:", b"Connection: close\r\nHost:")])
    assert [a[0] for a in answers] == [200, 200] and closed


@pt.ensureDeferred
async def test_a_header_of_1_mib_is_431(shared_api):
    request = b"GET /healthz HTTP/1.1\r\nHost: mail.test\r\nX-Big: " + b"a" * MIB + b"\r\n\r\n"
    [answer], closed = await talk(shared_api, [request])
    assert error_of(answer) == (431, "request_header_fields_too_large") and closed


@pt.ensureDeferred
async def test_ten_thousand_headers_is_431(shared_api):
    headers = b"".join(b"X-%d: 1\r\n" % i for i in range(10_000))
    [answer], closed = await talk(shared_api, [b"GET /healthz HTTP/1.1\r\nHost: mail.test\r\n" + headers + b"\r\n"])
    assert error_of(answer) == (431, "request_header_fields_too_large") and closed
    short = b"".join(b"a%d:\r\n" % i for i in range(150))  # small, but too many
    [answer], closed = await talk(shared_api, [b"GET /healthz HTTP/1.1\r\n" + short + b"\r\n"])
    assert error_of(answer) == (431, "request_header_fields_too_large") and closed


@pt.ensureDeferred
async def test_control_characters_and_garbage_are_400(shared_api):
    for request in (
        b"GET /healthz HTTP/1.1\r\nHost: mail.test\r\nX-Nul: a\x00b\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: mail.test\r\nNo colon here\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",  # TLS to the plain port
        b"GET\r\n\r\n",
    ):
        [answer], closed = await talk(shared_api, [request])
        assert error_of(answer) == (400, "bad_request") and closed, request


@pt.ensureDeferred
async def test_a_connection_that_sends_nothing_is_not_answered(shared_api):
    # No request began: the idle timeout, not a 408, applies; the listener still serves others.
    with socket.create_connection(("127.0.0.1", shared_api.port.getHost().port)):
        code, body, _ = await shared_api.json("GET", "/healthz")
    assert (code, body) == (200, {"status": "ok"})


@pt.ensureDeferred
async def test_a_connection_that_sends_nothing_is_closed_at_the_header_deadline(shared_api):
    started = time.monotonic()
    answers, closed = await talk(shared_api, [])  # the header deadline is 1 s here, the idle timeout 75 s
    assert answers == [] and closed and time.monotonic() - started < 5
    # A first byte in time starts the header deadline: that request is answered.
    parts = [0.5, b"G", 0.7, b"ET /healthz HTTP/1.1\r\nHost: mail.test\r\nConnection: close\r\n\r\n"]
    [(status, _, _)], closed = await talk(shared_api, parts)
    assert status == 200 and closed
