"""
Where the command line finds a node's operator API and its token, and a small synchronous
client of it (urllib: one request at a time, nothing to schedule).
"""

from __future__ import annotations

import ipaddress
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from mailsvc.config import Config, ConfigError, load

DEFAULT_CONFIG = "/etc/mailsvc/mailsvc.conf"
TOKEN_FILE = "operator-token"


class CliError(Exception):
    """Something the operator must fix, said in one line (exit status 1)."""


class ApiError(CliError):
    """The node answered with an error (the native shape: ``{error: {code, message}}``)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code


def read_config(path: str | None, environ: dict[str, str]) -> Config:
    """The node's configuration: ``--config``, else /etc/mailsvc/mailsvc.conf if there is one,
    with the daemon's own ``MAILSVC_<SECTION>_<KEY>`` overrides."""
    if path is None and Path(DEFAULT_CONFIG).exists():
        path = DEFAULT_CONFIG
    try:
        return load(path, environ)
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


def operator_token(config: Config, environ: dict[str, str], token_file: str | None) -> str:
    """``--token-file``, else ``MAILSVC_OPERATOR_TOKEN`` or ``operator.token`` (the daemon's own
    setting and override), else ``<state dir>/operator-token``; never an argument, which ``ps``
    and the shell's history would keep."""
    if token_file is None:
        if config.operator.token:
            return config.operator.token
        token_file = str(config.state_dir / TOKEN_FILE)
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise CliError(f"cannot read the operator token in {token_file}: {e.strerror} "
                       "(run as root, or set MAILSVC_OPERATOR_TOKEN or --token-file)") from None
    if not token:
        raise CliError(f"{token_file} is empty")
    return token


class Client:
    """The operator API of one node: JSON in, JSON out, errors raised as ApiError."""

    def __init__(self, url: str, token: str, ca_file: str | None = None, timeout: float = 30):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise CliError(f"{url!r} is not an http(s) URL")
        if parsed.scheme == "http" and not is_loopback(parsed.hostname):
            raise CliError(f"{url}: plain http would send the operator token in the clear; use https "
                           "(plain http is allowed only to a loopback address)")
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._context = ssl.create_default_context()
        if ca_file:
            self._context.load_verify_locations(ca_file)

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
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            raise _api_error(e.code, e.read()) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise CliError(f"cannot reach {self.url}: {reason}") from None
        return json.loads(raw) if raw else {}


def _api_error(status: int, raw: bytes) -> ApiError:
    try:
        error = json.loads(raw)["error"]
        return ApiError(status, str(error.get("code")), str(error.get("message")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ApiError(status, "http_error", raw[:200].decode("utf-8", "replace"))


def connect(config_path: str | None, token_file: str | None, environ: dict[str, str] | None = None) -> Client:
    """The client the operator's settings name: ``MAILSVC_URL`` or the node's listener."""
    environ = os.environ if environ is None else environ
    url = environ.get("MAILSVC_URL")
    token = environ.get("MAILSVC_OPERATOR_TOKEN")
    if url and (token or token_file):
        # Everything is given: the configuration (perhaps unreadable here) is not needed.
        if token_file:
            token = operator_token(Config(), environ, token_file)
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
