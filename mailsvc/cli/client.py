"""
Where the command line finds a node's operator API and its token, and a small synchronous
client of it (urllib: one request at a time, nothing to schedule).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from mailsvc.config import Config, ConfigError, load

DEFAULT_CONFIG = "/etc/mailsvc/mailsvc.conf"
TOKEN_FILE = "operator-token"
#: The most of an answer the command line reads (a clear error past it, never the whole answer
#: held in memory).
MAX_ANSWER = 16 * 1024 * 1024
#: Of an error's body, only its start is read (its message is cut to 200 characters anyway).
MAX_ERROR_BODY = 64 * 1024
#: What an operator token may hold to go in an ``Authorization`` header: visible ASCII.
TOKEN_CHARACTERS = re.compile(r"[\x21-\x7e]+")


class CliError(Exception):
    """Something the operator must fix, said in one line (exit status 1)."""


class ApiError(CliError):
    """The node answered with an error (the native shape: ``{error: {code, message}}``)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code


def read_config(path: str | None, environ: Mapping[str, str]) -> Config:
    """The node's configuration: ``--config``, else /etc/mailsvc/mailsvc.conf if there is one,
    with the daemon's own ``MAILSVC_<SECTION>_<KEY>`` overrides."""
    if path is None and Path(DEFAULT_CONFIG).exists():
        path = DEFAULT_CONFIG
    try:
        return load(path, dict(environ))
    except ConfigError as e:
        raise CliError(f"{e} (run as root or a member of the mailsvc group, or set MAILSVC_URL and "
                       "MAILSVC_OPERATOR_TOKEN)") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_of_listener(config: Config) -> str:
    """The node's own HTTP listener (``http.listen``, a Twisted endpoint) as a URL on this host."""
    kind, *args = config.http.listen.split(":")
    options = dict(arg.split("=", 1) for arg in args if "=" in arg)
    port = options.get("port") or next((arg for arg in args if "=" not in arg), "")
    if kind not in ("tcp", "tcp6", "ssl") or not port.isdigit():
        raise CliError(f"http.listen {config.http.listen!r} is not a TCP port: set MAILSVC_URL")
    interface = options.get("interface", "")
    if kind == "ssl":
        return f"https://{config.hostname}:{port}"
    if interface in ("", "0.0.0.0"):
        interface = "127.0.0.1"
    elif interface == "::":
        interface = "::1"
    host = f"[{interface}]" if ":" in interface else interface
    return f"http://{host}:{port}"


def operator_token(config: Config, environ: Mapping[str, str], token_file: str | None) -> str:
    """``--token-file``, else ``MAILSVC_OPERATOR_TOKEN`` or ``operator.token`` (the daemon's own
    setting and override), else ``<state dir>/operator-token``; never an argument, which ``ps``
    and the shell's history would keep."""
    if token_file is None:
        if config.operator.token:
            return config.operator.token
        token_file = str(config.state_dir / TOKEN_FILE)
    try:
        text = Path(token_file).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read the operator token in {token_file}: {e.strerror} "
                       "(run as root, or set MAILSVC_OPERATOR_TOKEN or --token-file)") from None
    except UnicodeDecodeError:
        raise CliError(f"{token_file} is not UTF-8 text: it must hold the operator token alone") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise CliError(f"{token_file} is empty")
    if len(lines) > 1:
        raise CliError(f"{token_file} has {len(lines)} non-empty lines: it must hold the operator token alone, "
                       "on one line")
    return checked_token(lines[0], token_file)


def checked_token(token: str, where: str) -> str:
    """``token`` if an HTTP header can carry it; else a one-line error that does not show it."""
    if not TOKEN_CHARACTERS.fullmatch(token):
        raise CliError(f"the operator token in {where} holds spaces, control or non-ASCII characters, "
                       "which no HTTP header can carry: give the token alone")
    return token


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin (RFC 6454): scheme, host and port, the scheme's default port filled in."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def refuse_clear_text(url: str) -> None:
    """The operator token goes over plain http only to a loopback address."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise CliError(f"{url!r} is not an http(s) URL")
    if parsed.scheme == "http" and not is_loopback(parsed.hostname):
        raise CliError(f"{url}: plain http would send the operator token in the clear; use https "
                       "(plain http is allowed only to a loopback address)")


class _Guard(urllib.request.HTTPRedirectHandler):
    """Every request the opener makes, the first or a redirect's, goes to the node's own origin,
    over https or to a loopback address: a redirect elsewhere is not followed, since the request
    it would repeat carries the operator token."""

    def __init__(self, url: str):
        self._origin = origin(url)

    def _check(self, request):
        url = request.full_url
        if origin(url) != self._origin:
            raise CliError(f"the node redirected to {url}, another origin than the node's: not followed "
                           "(the request carries the operator token); set MAILSVC_URL to the node's own URL")
        refuse_clear_text(url)
        return request

    http_request = https_request = _check

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if origin(newurl) != self._origin:
            fp.close()
            self._check(urllib.request.Request(newurl))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def read_bounded(response, limit: int) -> bytes | None:
    """At most ``limit`` bytes of ``response``'s body, read in chunks; None if it holds more
    (past the limit nothing more is read)."""
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > limit:
        return None
    chunks, total = [], 0
    while chunk := response.read(min(64 * 1024, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            return None
    return b"".join(chunks)


class Client:
    """The operator API of one node: JSON in, JSON out, errors raised as ApiError."""

    def __init__(self, url: str, token: str, ca_file: str | None = None, timeout: float = 30,
                 max_answer: int = MAX_ANSWER):
        refuse_clear_text(url)
        self.url = url.rstrip("/")
        self._token = checked_token(token.strip(), "MAILSVC_OPERATOR_TOKEN or operator.token")
        self._timeout = timeout
        self._max_answer = max_answer
        context = ssl.create_default_context()
        if ca_file:
            context.load_verify_locations(ca_file)
        # A proxy only for https (a tunnel: the token stays encrypted to the node); plain http
        # goes to loopback only, straight.
        proxies = {k: v for k, v in urllib.request.getproxies().items() if k == "https"}
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler(proxies), urllib.request.HTTPSHandler(context=context), _Guard(self.url))

    def call(self, method: str, path: str, query: dict | None = None, body: dict | None = None) -> dict:
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                status, kind = response.status, response.headers.get("Content-Type", "no content type")
                raw = read_bounded(response, self._max_answer)
        except urllib.error.HTTPError as e:
            raise _api_error(e.code, e.read(MAX_ERROR_BODY) if e.fp else b"") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            raise CliError(f"cannot reach {self.url}: {reason}") from None
        if raw is None:
            raise CliError(f"{method} {path}: the answer is larger than {_size(self._max_answer)}; "
                           "not read further")
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise CliError(f"{method} {path} answered {status} with {kind}, not JSON") from None


def _size(count: int) -> str:
    return f"{count / (1024 * 1024):g} MB" if count >= 1024 * 1024 else f"{count} bytes"


def _api_error(status: int, raw: bytes) -> ApiError:
    try:
        error = json.loads(raw)["error"]
        return ApiError(status, str(error.get("code")), str(error.get("message")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ApiError(status, "http_error", raw[:200].decode("utf-8", "replace"))


def connect(config_path: str | None, token_file: str | None, environ: Mapping[str, str] | None = None) -> Client:
    """The client the operator's settings name: ``MAILSVC_URL`` or the node's listener."""
    environ = os.environ if environ is None else environ
    url = environ.get("MAILSVC_URL")
    given = environ.get("MAILSVC_OPERATOR_TOKEN")
    if url and (given or token_file):
        # Everything is given: the configuration (perhaps unreadable here) is not needed.
        token = operator_token(Config(), environ, token_file) if token_file else given
        assert token is not None  # given, as the condition says
        return Client(url, token, environ.get("MAILSVC_CA_FILE"))
    config = read_config(config_path, environ)
    token = operator_token(config, environ, token_file)
    ca_file = environ.get("MAILSVC_CA_FILE") or _node_certificate(config)
    return Client(url or url_of_listener(config), token, ca_file)


def _node_certificate(config: Config) -> str | None:
    """The node's own certificate, trusted as well when its listener is https (self-signed)."""
    if not config.http.listen.startswith("ssl:"):
        return None
    path = Path(config.tls.cert or config.state_dir / "tls-cert.pem")
    return str(path) if path.exists() else None
