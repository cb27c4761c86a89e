"""
Configuration: one ini file plus ``MAILSVC_<SECTION>_<KEY>`` environment overrides, read once
into frozen attrs sections that are handed down explicitly (there is no global config).
"""

from __future__ import annotations

import configparser
import os
import socket
import uuid
from pathlib import Path
from typing import Any

import attrs


class ConfigError(Exception):
    """A configuration value is unknown or invalid; the message names its key path."""


def _section(cls):
    return attrs.frozen(kw_only=True)(cls)


@_section
class DatabaseConfig:
    dsn: str = ""
    pool_size: int = 8
    pg_bin: str = ""
    statement_timeout: int = 15


@_section
class StateConfig:
    dir: str = "/var/lib/mailsvc"


@_section
class HttpConfig:
    listen: str = "tcp:8080"
    request_timeout: int = 60
    drain_timeout: int = 30
    header_timeout: int = 10
    body_timeout: int = 60
    public_url: str = ""


@_section
class SmtpConfig:
    submission: tuple[str, ...] = ("ssl:465", "tcp:587", "ssl:2465", "tcp:2587")
    inbound: str = "tcp:25"
    #: Submission connections open at once on a node (its workers share them out), and from one
    #: client address (IPv6: one /64); seconds one command line may take from its first byte;
    #: seconds a session may last. Past any of them: 421 4.7.0 and the connection is closed.
    submission_max_connections: int = 1000
    submission_max_connections_per_client: int = 50
    submission_command_timeout: int = 60
    submission_session_timeout: int = 1800


@_section
class DnsConfig:
    servers: tuple[str, ...] = ()


@_section
class DeliveryConfig:
    port: int = 25
    per_destination: int = 10
    max_in_flight: int = 500
    batch: int = 200
    lease_seconds: int = 600
    relay_host: str = ""
    relay_port: int = 587
    relay_tls: str = "starttls"
    relay_username: str = ""
    relay_password: str = ""
    #: Honour recipients' MTA-STS policies (RFC 8461) and DANE TLSA records (RFC 7672; needs a
    #: validating resolver in dns.servers that sets the AD bit).
    mta_sts: bool = True
    dane: bool = True
    #: The sending IP/host class adaptive shaping keys its limits on (one per IP pool).
    source: str = "default"
    #: Limits of a destination nobody configured, before any throttling (rate 0: none until
    #: the destination throttles; then it starts from 50 a second).
    default_concurrency: int = 10
    default_rate_per_sec: int = 0


@_section
class SecurityConfig:
    allow_private_targets: bool = False
    master_key: str = ""
    old_master_keys: tuple[str, ...] = ()
    ca_file: str = ""
    #: Tests only: addresses (or networks) the address check treats as public, so that a
    #: "public" name of the tests' DNS server can point at a second loopback address.
    test_public_addresses: tuple[str, ...] = ()
    #: Tests only: ports brand import fetches beside 80 and 443 (loopback test servers).
    test_extra_ports: tuple[str, ...] = ()
    #: Tests only: the port MTA-STS policies are fetched from (0: 443, as RFC 8461 requires).
    test_mta_sts_port: int = 0


@_section
class OperatorConfig:
    token: str = ""


@_section
class TlsConfig:
    cert: str = ""
    key: str = ""


@_section
class MailConfig:
    hostname: str = ""
    spf_include: str = ""
    #: The domain of the test addresses (delivered@, bounced@, complained@, suppressed@), whose
    #: sender may send to them without a verified domain (issue 30).
    test_domain: str = "resend.dev"
    #: Refuse recipients on reserved names (example.com, .test, .invalid, ...) with 422.
    refuse_reserved_recipients: bool = True
    #: What a message may hold, all its parts together (``mail/limits.py``): more is refused at
    #: submission and shown as its source, unparsed, in the development inbox.
    max_mime_parts: int = 500
    max_mime_depth: int = 50
    max_header_fields: int = 1000
    max_header_bytes: int = 1024 * 1024


@_section
class AiConfig:
    provider: str = ""
    base_url: str = ""
    api_key: str = ""
    model: str = ""
    #: Seconds both provider round trips (the answer and its one repair) have in all.
    timeout: int = 50
    #: Provider calls in flight on one node; more answer 502 ai_busy.
    concurrency: int = 4
    #: Generations a month on the top plan (other plans have none), and per minute.
    monthly_quota: int = 500
    per_minute: int = 10
    #: Tokens the model may answer with.
    max_tokens: int = 8000


@_section
class BrandConfig:
    #: Seconds one import may spend fetching, and how many fetches it may make.
    timeout: int = 20
    max_fetches: int = 20


@_section
class ApiConfig:
    key_tag: str = "re"
    rate_per_sec: int = 10
    burst_factor: int = 2
    auth_cache_seconds: int = 10
    date_languages: tuple[str, ...] = ("en",)


@_section
class DomainsConfig:
    region: str = "local"
    verification_window: int = 259200
    recheck_interval: int = 86400
    check_interval: int = 15
    cloudflare_base_url: str = "https://api.cloudflare.com/client/v4"


@_section
class WebhooksConfig:
    concurrency_per_endpoint: int = 8
    max_in_flight: int = 256
    host_concurrency: int = 64
    host_rate_per_sec: int = 500


@_section
class SpamConfig:
    #: spamd's address (host:port) for the spam score; empty: scoring is off.
    spamd: str = ""
    timeout: int = 15
    #: Broadcasts at send: a score at or over this refuses the send (0: never refused).
    broadcast_threshold: str = "0"


@_section
class TlsrptConfig:
    #: TLS reports to mailto: rua addresses are sent as this account's mail (its id; the
    #: operator's own account), from ``sender`` at one of its verified domains (which signs them).
    #: Either empty: mailto: reports are not sent (https: ones still are).
    account: str = ""
    sender: str = ""


@_section
class DmarcConfig:
    #: The largest decompressed XML document of an aggregate report taken (the message itself
    #: is bounded by the inbound listener's 10 MiB).
    max_xml_bytes: int = 20 * 1024 * 1024


@_section
class NodeConfig:
    roles: tuple[str, ...] = ("api", "delivery", "webhooks", "scheduler", "broadcasts")
    #: Worker processes serving the node's sockets; 0: one per core.
    processes: int = 0

    @property
    def process_count(self) -> int:
        return self.processes or os.cpu_count() or 1


@_section
class BroadcastsConfig:
    #: Recipients one chunk of the fan-out takes (one accept statement).
    chunk: int = 1000
    #: Seconds a chunk is held by the node that claimed it before another may take it over.
    lease_seconds: int = 60


@_section
class ManholeConfig:
    listen: str = ""


@_section
class PublicConfig:
    cors_origins: tuple[str, ...] = ()


@_section
class DashboardConfig:
    #: Origins (scheme://host[:port]) of dashboards served elsewhere, answered CORS with credentials.
    origins: tuple[str, ...] = ()
    session_idle: int = 7200
    session_lifetime: int = 604800
    link_lifetime: int = 259200
    #: Set-password links an owner may ask for in an hour, for one user and for the account.
    links_per_user_hour: int = 5
    links_per_tenant_hour: int = 20
    #: An address: at start, if the database has no user yet, an account with this owner is
    #: made and its set-password link logged (scripts/serve sets it).
    first_user: str = ""
    #: A development start (scripts/serve sets it): on the embedded store, the first account's
    #: first key is written to <state dir>/api-key (0600). A packaged install leaves it off.
    first_key_file: bool = False


@_section
class TorConfig:
    onion: bool = False
    control: str = "unix:/run/tor/control"
    control_password: str = ""
    port: int = 80


SECTIONS: dict[str, type] = {
    "database": DatabaseConfig,
    "state": StateConfig,
    "http": HttpConfig,
    "smtp": SmtpConfig,
    "dns": DnsConfig,
    "delivery": DeliveryConfig,
    "security": SecurityConfig,
    "operator": OperatorConfig,
    "tls": TlsConfig,
    "mail": MailConfig,
    "ai": AiConfig,
    "brand": BrandConfig,
    "api": ApiConfig,
    "domains": DomainsConfig,
    "webhooks": WebhooksConfig,
    "node": NodeConfig,
    "broadcasts": BroadcastsConfig,
    "spam": SpamConfig,
    "dmarc": DmarcConfig,
    "tlsrpt": TlsrptConfig,
    "manhole": ManholeConfig,
    "public": PublicConfig,
    "dashboard": DashboardConfig,
    "tor": TorConfig,
}

KNOWN_ROLES = frozenset({"api", "delivery", "webhooks", "scheduler", "broadcasts"})


@attrs.frozen(kw_only=True)
class Config:
    database: DatabaseConfig = DatabaseConfig()
    state: StateConfig = StateConfig()
    http: HttpConfig = HttpConfig()
    smtp: SmtpConfig = SmtpConfig()
    dns: DnsConfig = DnsConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    security: SecurityConfig = SecurityConfig()
    operator: OperatorConfig = OperatorConfig()
    tls: TlsConfig = TlsConfig()
    mail: MailConfig = MailConfig()
    ai: AiConfig = AiConfig()
    brand: BrandConfig = BrandConfig()
    api: ApiConfig = ApiConfig()
    domains: DomainsConfig = DomainsConfig()
    webhooks: WebhooksConfig = WebhooksConfig()
    node: NodeConfig = NodeConfig()
    broadcasts: BroadcastsConfig = BroadcastsConfig()
    spam: SpamConfig = SpamConfig()
    dmarc: DmarcConfig = DmarcConfig()
    tlsrpt: TlsrptConfig = TlsrptConfig()
    manhole: ManholeConfig = ManholeConfig()
    public: PublicConfig = PublicConfig()
    dashboard: DashboardConfig = DashboardConfig()
    tor: TorConfig = TorConfig()

    @property
    def hostname(self) -> str:
        return self.mail.hostname or socket.getfqdn()

    @property
    def spf_include(self) -> str:
        return self.mail.spf_include or f"spf.{self.hostname}"

    @property
    def state_dir(self) -> Path:
        return Path(self.state.dir)


def _parse_value(path: str, kind: Any, raw: str) -> Any:
    raw = raw.strip()
    if kind in (str, "str"):
        return raw
    if kind in (int, "int"):
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{path}: expected an integer, got {raw!r}") from None
    if kind in (bool, "bool"):
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{path}: expected true or false, got {raw!r}")
    # tuple[str, ...]: a comma-separated list
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _check(config: Config) -> Config:
    unknown = set(config.node.roles) - KNOWN_ROLES
    if unknown:
        raise ConfigError(f"node.roles: unknown role {sorted(unknown)[0]!r}")
    try:
        if float(config.spam.broadcast_threshold or 0) < 0:
            raise ValueError
    except ValueError:
        raise ConfigError("spam.broadcast_threshold: a score of 0 (never refuse) or more") from None
    if config.tlsrpt.account and not _is_uuid(config.tlsrpt.account):
        raise ConfigError("tlsrpt.account: an account id (UUID)")
    if bool(config.tlsrpt.account) != bool(config.tlsrpt.sender):
        raise ConfigError("tlsrpt.account and tlsrpt.sender: both or neither")
    if config.node.processes < 0:
        raise ConfigError("node.processes: must be 0 (one per core) or more")
    for name in ("pool_size",):
        if getattr(config.database, name) < 1:
            raise ConfigError(f"database.{name}: must be at least 1")
    if config.database.statement_timeout < 0:
        raise ConfigError("database.statement_timeout: must be 0 (none) or more seconds")
    if config.api.rate_per_sec < 1 or config.api.burst_factor < 1:
        raise ConfigError("api.rate_per_sec: must be at least 1")
    for name in ("submission_max_connections", "submission_max_connections_per_client",
                 "submission_command_timeout", "submission_session_timeout"):
        if getattr(config.smtp, name) < 1:
            raise ConfigError(f"smtp.{name}: must be at least 1")
    for name in ("header_timeout", "body_timeout"):
        if getattr(config.http, name) < 1:
            raise ConfigError(f"http.{name}: must be at least 1")
    if config.api.auth_cache_seconds > 30:
        raise ConfigError("api.auth_cache_seconds: at most 30 (revocation must apply within 30 s)")
    for name in ("per_destination", "max_in_flight", "batch", "lease_seconds"):
        if getattr(config.delivery, name) < 1:
            raise ConfigError(f"delivery.{name}: must be at least 1")
    if config.delivery.relay_tls not in ("starttls", "implicit", "none"):
        raise ConfigError("delivery.relay_tls: must be starttls, implicit or none")
    for name in ("chunk", "lease_seconds"):
        if getattr(config.broadcasts, name) < 1:
            raise ConfigError(f"broadcasts.{name}: must be at least 1")
    for name in ("concurrency_per_endpoint", "max_in_flight", "host_concurrency", "host_rate_per_sec"):
        if getattr(config.webhooks, name) < 1:
            raise ConfigError(f"webhooks.{name}: must be at least 1")
    for name in ("session_idle", "session_lifetime", "link_lifetime"):
        if getattr(config.dashboard, name) < 60:
            raise ConfigError(f"dashboard.{name}: must be at least 60 seconds")
    for name in ("links_per_user_hour", "links_per_tenant_hour"):
        if getattr(config.dashboard, name) < 1:
            raise ConfigError(f"dashboard.{name}: must be at least 1")
    for name in ("timeout", "concurrency", "per_minute", "max_tokens"):
        if getattr(config.ai, name) < 1:
            raise ConfigError(f"ai.{name}: must be at least 1")
    if config.ai.timeout >= config.http.request_timeout:
        raise ConfigError("ai.timeout: must be below http.request_timeout")
    if config.ai.monthly_quota < 0:
        raise ConfigError("ai.monthly_quota: must be 0 or more")
    if config.ai.provider and not config.ai.base_url:
        raise ConfigError("ai.base_url: required when ai.provider is set")
    if not 1 <= config.brand.timeout < config.http.request_timeout:
        raise ConfigError("brand.timeout: must be at least 1 and below http.request_timeout")
    if not 2 <= config.brand.max_fetches <= 100:
        raise ConfigError("brand.max_fetches: must be between 2 and 100")
    for port in config.security.test_extra_ports:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"security.test_extra_ports: {port!r} is not a port")
    test_domain = config.mail.test_domain.rstrip(".")
    if "." not in test_domain or test_domain != test_domain.lower() or "@" in test_domain:
        raise ConfigError("mail.test_domain: a domain name in lower case, such as resend.dev")
    for name in ("max_mime_parts", "max_mime_depth", "max_header_fields", "max_header_bytes"):
        if getattr(config.mail, name) < 1:
            raise ConfigError(f"mail.{name}: must be at least 1")
    if not 1 <= config.tor.port <= 65535:
        raise ConfigError("tor.port: must be a port number (1-65535)")
    return config


def load(path: str | os.PathLike | None, environ: dict[str, str] | None = None) -> Config:
    """
    Read ``path`` (if given) then apply ``MAILSVC_<SECTION>_<KEY>`` variables from ``environ``.

    Unknown sections or keys in the file, or an unknown key of a known section in the
    environment, raise ConfigError naming the key path: a typo must not silently fall back
    to a default.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, dict[str, str]] = {name: {} for name in SECTIONS}
    if path is not None:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            with open(path, encoding="utf-8") as f:
                parser.read_file(f)
        except OSError as e:
            raise ConfigError(f"{path}: cannot read configuration: {e.strerror}") from None
        except configparser.Error as e:
            raise ConfigError(f"{path}: {e.message.splitlines()[0]}") from None
        for section in parser.sections():
            if section not in SECTIONS:
                raise ConfigError(f"{section}: unknown section")
            for key, raw in parser.items(section):
                values[section][key] = raw
    for var, raw in environ.items():
        if not var.startswith("MAILSVC_"):
            continue
        rest = var[len("MAILSVC_") :].lower()
        section, _, key = rest.partition("_")
        if section in SECTIONS:
            values[section][key] = raw
    sections = {}
    for name, cls in SECTIONS.items():
        fields = {f.name: f for f in attrs.fields(cls)}
        kwargs = {}
        for key, raw in values[name].items():
            if key not in fields:
                raise ConfigError(f"{name}.{key}: unknown key")
            kwargs[key] = _parse_value(f"{name}.{key}", fields[key].type, raw)
        sections[name] = cls(**kwargs)
    return _check(Config(**sections))
