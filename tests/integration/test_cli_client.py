"""
The command line's client against loopback HTTP servers that answer what a hostile or broken
server would (mailsvc/cli/client.py): redirects elsewhere, answers that are not JSON or too
large, error bodies that would act on the terminal; and its one-line errors (a token file of
two lines, a token given as an argument). The command is run as ``main`` in this thread, the
servers in their own.
"""

from __future__ import annotations

import http.server
import io
import json
import socket
import threading

import pytest

from mailsvc.cli import main, parser
from mailsvc.cli.client import Client, CliError, operator_token
from mailsvc.config import Config

TOKEN = "op_the_secret_token"
pytestmark = pytest.mark.timeout(30)


class Server:
    """A loopback HTTP/1.0 server: every request is recorded with its headers, then answered
    by ``answer(handler)`` (which writes the whole reply)."""

    def __init__(self, answer, host: str = "127.0.0.1"):
        self.seen: list[tuple[str, str, dict]] = []
        self.sent = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.seen.append((self.command, self.path, dict(self.headers)))
                try:
                    answer(self)
                except OSError:
                    pass  # the client hung up: what these servers are often for

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@pytest.fixture
def serve():
    started = []

    def start(answer, host="127.0.0.1"):
        started.append(Server(answer, host))
        return started[-1]

    yield start
    for server in started:
        server.close()


def reply(status: int, body: bytes = b"", content_type: str = "application/json", **headers):
    def answer(handler):
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)
    return answer


EMPTY_PAGE = json.dumps({"object": "list", "data": [], "has_more": False}).encode()


def run(*argv: str, environ: dict) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err, environ=environ)
    return code, out.getvalue(), err.getvalue()


def at(server: Server, token: str = TOKEN) -> dict:
    return {"MAILSVC_URL": server.url, "MAILSVC_OPERATOR_TOKEN": token}


def one_line_without_the_token(err: str) -> None:
    assert err.count("\n") == 1 and err.startswith("mailsvc: "), err
    assert TOKEN not in err and "the_secret" not in err and "Traceback" not in err, err


# -- redirects -------------------------------------------------------------------------------


@pytest.mark.parametrize("elsewhere", ["127.0.0.2", "127.0.0.1"])
def test_a_redirect_to_another_origin_is_not_followed(serve, elsewhere):
    """Another loopback address, or the same address on another port: another origin, which
    the token must not reach."""
    second = serve(reply(200, EMPTY_PAGE), host=elsewhere)
    first = serve(reply(302, Location=f"{second.url}/admin/v1/tenants"))
    code, out, err = run("tenants", environ=at(first))
    assert (code, out) == (1, "")
    assert "another origin" in err and "not followed" in err
    one_line_without_the_token(err)
    assert len(first.seen) == 1 and first.seen[0][2]["Authorization"] == f"Bearer {TOKEN}"
    assert second.seen == []


def test_a_redirect_to_plain_http_elsewhere_does_not_even_connect(serve, monkeypatch):
    connected = []
    real = socket.create_connection
    monkeypatch.setattr(socket, "create_connection",
                        lambda address, *a, **kw: connected.append(address) or real(address, *a, **kw))
    first = serve(reply(302, Location="http://mail.example.com/admin/v1/tenants"))
    code, _, err = run("tenants", environ=at(first))
    assert code == 1 and "http://mail.example.com/admin/v1/tenants" in err and "not followed" in err
    one_line_without_the_token(err)
    assert [host for host, _ in connected] == ["127.0.0.1"]


def test_a_redirect_within_the_node_is_followed(serve):
    def answer(handler):
        if handler.path.startswith("/admin/v1/tenants"):
            reply(307, Location="/moved/tenants")(handler)
        else:
            reply(200, EMPTY_PAGE)(handler)
    node = serve(answer)
    code, out, err = run("tenants", environ=at(node))
    assert (code, err) == (0, ""), err
    assert [path for _, path, _ in node.seen] == ["/admin/v1/tenants?limit=20", "/moved/tenants"]
    assert node.seen[1][2]["Authorization"] == f"Bearer {TOKEN}"


def test_no_proxy_sees_a_plain_http_request(serve, monkeypatch):
    """An http_proxy of the environment would read the token: plain http goes straight."""
    proxy = serve(reply(200, EMPTY_PAGE))
    node = serve(reply(200, EMPTY_PAGE))
    monkeypatch.setenv("http_proxy", proxy.url)
    monkeypatch.setenv("no_proxy", "")
    code, _, err = run("tenants", environ=at(node))
    assert (code, err) == (0, "")
    assert proxy.seen == [] and len(node.seen) == 1


# -- what the node answers -------------------------------------------------------------------


def test_an_answer_that_is_not_json_is_a_one_line_error(serve):
    node = serve(reply(200, b"<html><body>Welcome to nginx!</body></html>", "text/html"))
    code, _, err = run("tenants", environ=at(node))
    assert code == 1
    assert err == "mailsvc: GET /admin/v1/tenants answered 200 with text/html, not JSON\n"


def test_an_answer_larger_than_the_limit_is_not_read_whole(serve):
    """No Content-Length: the client reads to its limit (16 MB), stops, and says so; the server
    never gets to send the rest."""
    size = 48 * 1024 * 1024
    chunk = b"x" * (256 * 1024)

    def answer(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        handler.wfile.write(b'{"object": "list", "data": [], "has_more": false, "pad": "')
        while node.sent < size:
            handler.wfile.write(chunk)
            node.sent += len(chunk)
        handler.wfile.write(b'"}')

    node = serve(answer)
    code, _, err = run("tenants", environ=at(node))
    assert code == 1 and err == "mailsvc: GET /admin/v1/tenants: the answer is larger than 16 MB; not read further\n"
    assert node.sent < size


def test_a_declared_length_past_the_limit_is_refused_unread(serve):
    node = serve(reply(200, b'{"a": "' + b"x" * 5000 + b'"}'))
    with pytest.raises(CliError, match=r"larger than 4096 bytes"):
        Client(node.url, TOKEN, max_answer=4096).call("GET", "/x")
    assert Client(node.url, TOKEN, max_answer=8192).call("GET", "/x")["a"] == "x" * 5000


def test_an_error_body_is_shown_neutralised(serve):
    node = serve(reply(502, b"\x1b[2J\x1b]0;PWNED\x07 upstream \xe2\x80\xae down", "text/plain"))
    code, _, err = run("tenants", environ=at(node))
    assert code == 1
    assert err == "mailsvc: 502 http_error: \\x1b[2J\\x1b]0;PWNED\\x07 upstream \\u202e down\n"


# -- the token -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [f"{TOKEN}\nop_another\n", f"# the token\n{TOKEN}\n", f"{TOKEN}\n\n\r\nx"])
def test_a_token_file_of_more_than_one_line_is_a_one_line_error(serve, tmp_path, text):
    node = serve(reply(200, EMPTY_PAGE))
    path = tmp_path / "token"
    path.write_text(text)
    code, _, err = run("tenants", "--token-file", str(path), environ={"MAILSVC_URL": node.url})
    assert code == 1 and "non-empty lines" in err and str(path) in err
    one_line_without_the_token(err)
    assert node.seen == []


@pytest.mark.parametrize("token", [f"Bearer {TOKEN}", f"{TOKEN}\x00", f"{TOKEN}é", f"{TOKEN}\u202e"])
def test_a_token_no_header_can_carry_is_a_one_line_error(serve, tmp_path, token):
    node = serve(reply(200, EMPTY_PAGE))
    path = tmp_path / "token"
    path.write_text(token + "\n")
    code, _, err = run("tenants", "--token-file", str(path), environ={"MAILSVC_URL": node.url})
    assert code == 1 and "no HTTP header can carry" in err
    one_line_without_the_token(err)
    code, _, err = run("tenants", environ=at(node, token=f"{token}\nX-Injected: 1"))
    assert code == 1 and "no HTTP header can carry" in err
    one_line_without_the_token(err)
    assert node.seen == []


def test_a_token_file_of_one_line_with_blank_lines_around_it_is_read(tmp_path):
    path = tmp_path / "token"
    path.write_text(f"\n  {TOKEN}  \r\n\n")
    assert operator_token(Config(), {}, str(path)) == TOKEN


@pytest.mark.parametrize("argv", [
    ["tenants", "--token", TOKEN],
    ["tenants", f"--token={TOKEN}"],
    ["--token", TOKEN, "tenants"],
    ["queue", "list", "--operator-token", TOKEN, "--json"],
    ["tenants", "--TOKEN", TOKEN],
])
def test_a_usage_error_does_not_repeat_a_token_given_as_an_argument(capsys, argv):
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "<redacted>" in err and TOKEN not in err and "the_secret" not in err, err


def test_a_usage_error_shows_what_it_echoes_neutralised(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["tenants", "\x1b]0;PWNED\x07"])  # echoed as given, not as a repr
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]0;PWNED\\x07" in err


def test_the_secrets_of_a_command_line():
    from mailsvc.cli.parsing import secrets_in

    assert secrets_in(["tenants", "--token", "a", "--token=b", "--api-token", "c", "--token-file", "f",
                       "--token-file=g", "--token"]) == ["a", "b", "c"]
