"""
Configuration: one ini file plus ``MAILSVC_<SECTION>_<KEY>`` environment overrides, read once
into frozen attrs sections that are handed down explicitly (there is no global config).

Each key is declared once, as a field of its section made by ``setting``: its name, its type
(the annotation: str, int, float, bool, or a comma-separated tuple of str), its default, a line
of doc and the rule its value must keep. Parsing, validation and every default elsewhere
(``BroadcastsConfig().chunk``) come from that declaration; ``Config`` lists the sections.
Rules that tie two keys together are ``_ACROSS``. etc/mailsvc.conf shows every key to operators.
"""

from __future__ import annotations

import configparser
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs


class ConfigError(Exception):
    """A configuration value is unknown or invalid; the message names its key path."""


#: What is wrong with a value (said after its key path), or None when it is right.
Rule = Callable[[Any], str | None]


def setting(default: Any, doc: str, rule: Rule | None = None, unreadable: str | None = None) -> Any:
    """
    One key of a section: ``rule`` checks its value; ``unreadable`` is what a value that is not
    of the key's type is told instead of the type's own message.
    """
    return attrs.field(default=default, metadata={"doc": doc, "rule": rule, "unreadable": unreadable})


def at_least(least: float, text: str | None = None) -> Rule:
    return lambda value: None if value >= least else (text or f"must be at least {least}")


def holds(test: Callable[[Any], bool], text: str) -> Rule:
    return lambda value: None if test(value) else text


def _section(cls):
    return attrs.frozen(kw_only=True)(cls)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _is_test_domain(name: str) -> bool:
    name = name.rstrip(".")
    return "." in name and name == name.lower() and "@" not in name


def _bad_port(ports: tuple[str, ...]) -> str | None:
    bad = [p for p in ports if not p.isdigit() or not 0 < int(p) < 65536]
    return f"{bad[0]!r} is not a port" if bad else None


KNOWN_ROLES = frozenset({"api", "delivery", "webhooks", "scheduler", "broadcasts"})


def _unknown_role(roles: tuple[str, ...]) -> str | None:
    unknown = sorted(set(roles) - KNOWN_ROLES)
    return f"unknown role {unknown[0]!r}" if unknown else None


@_section
class DatabaseConfig:
    dsn: str = setting("", "PostgreSQL DSN; empty: a private embedded cluster in the state directory.")
    pool_size: int = setting(8, "Connections each node keeps open.", at_least(1))
    pg_bin: str = setting("", "Directory of initdb/pg_ctl for the embedded cluster; empty: the newest installed.")
    statement_timeout: int = setting(15, "Seconds a statement may run (0: no limit).",
                                     at_least(0, "must be 0 (none) or more seconds"))


@_section
class StateConfig:
    dir: str = setting("/var/lib/mailsvc", "Keys, generated secrets and the embedded cluster.")


@_section
class HttpConfig:
    listen: str = setting("tcp:8080", "Twisted endpoint of the one HTTP port.")
    request_timeout: int = setting(60, "Seconds a request may take before 500 application_error.")
    drain_timeout: int = setting(30, "Seconds a stop waits for requests in flight.")
    header_timeout: int = setting(10, "Seconds a client has to send a request's headers.", at_least(1))
    body_timeout: int = setting(60, "Seconds a client has to send a request's body.", at_least(1))
    public_url: str = setting("", "Base URL of signed links; empty: the scheme and Host the client used.")


@_section
class SmtpConfig:
    submission: tuple[str, ...] = setting(("ssl:465", "tcp:587", "ssl:2465", "tcp:2587"), "Submission listeners.")
    inbound: str = setting("tcp:25", "Return-path listener (bounces and feedback reports).")
    submission_max_connections: int = setting(1000, "Submission connections open at once on a node.",
                                              at_least(1))
    submission_max_connections_per_client: int = setting(
        50, "Submission connections open at once from one client address (IPv6: one /64), on each worker process.",
        at_least(1))
    submission_command_timeout: int = setting(60, "Seconds one command line may take from its first byte.",
                                              at_least(1))
    submission_session_timeout: int = setting(1800, "Seconds a submission session may last.", at_least(1))


@_section
class DnsConfig:
    servers: tuple[str, ...] = setting((), "Resolvers (host:port) of every lookup; empty: /etc/resolv.conf's.")


@_section
class DeliveryConfig:
    port: int = setting(25, "Port used on the MX host.")
    per_destination: int = setting(10, "SMTP connections open at once to one destination host, per node.",
                                   at_least(1))
    max_in_flight: int = setting(500, "Deliveries a node has claimed and not yet finished, at most.", at_least(1))
    batch: int = setting(200, "Deliveries each worker claims per step.", at_least(1))
    lease_seconds: int = setting(600, "Seconds a claimed delivery stays with its node.", at_least(1))
    relay_host: str = setting("", "The smarthost of tenants in relay mode.")
    relay_port: int = setting(587, "The smarthost's port.")
    relay_tls: str = setting("starttls", "TLS to the smarthost: starttls, implicit or none.",
                             holds(lambda v: v in ("starttls", "implicit", "none"),
                                   "must be starttls, implicit or none"))
    relay_username: str = setting("", "AUTH name at the smarthost.")
    relay_password: str = setting("", "AUTH password at the smarthost.")
    mta_sts: bool = setting(True, "Honour recipients' MTA-STS policies (RFC 8461).")
    dane: bool = setting(True, "Honour DANE TLSA records (RFC 7672; needs a validating resolver in dns.servers).")
    source: str = setting("default", "The sending IP/host class adaptive shaping keys its limits on.")
    default_concurrency: int = setting(10, "Connections at once to a destination nobody configured.")
    default_rate_per_sec: int = setting(0, "Messages a second to a destination nobody configured (0: none"
                                           " until it throttles, then from 50 a second).")
    test_first_retry_seconds: int = setting(0, "Tests only: seconds before a deferred delivery's first retry"
                                               " (0: the retry schedule's minute).", at_least(0))


@_section
class SecurityConfig:
    allow_private_targets: bool = setting(False, "Tests only: outbound HTTPS may reach private addresses.")
    master_key: str = setting("", "Base64 of at least 32 random bytes; empty: generated into the state directory.")
    old_master_keys: tuple[str, ...] = setting((), "Master keys replaced by a rotation, still opened.")
    ca_file: str = setting("", "A PEM bundle of extra authorities trusted by outbound HTTPS.")
    test_public_addresses: tuple[str, ...] = setting(
        (), "Tests only: addresses (or networks) the address check treats as public.")
    test_extra_ports: tuple[str, ...] = setting((), "Tests only: ports brand import fetches beside 80 and 443.",
                                                _bad_port)
    test_mta_sts_port: int = setting(0, "Tests only: the port MTA-STS policies are fetched from (0: 443).")
    test_cheap_password_hashes: bool = setting(
        False, "Tests only: dashboard and console passwords hashed with argon2id's cheapest parameters"
               " (fast to check, weak against a stolen hash).")


@_section
class OperatorConfig:
    token: str = setting("", "Bearer token of the operator API and /metrics; empty: generated.")


@_section
class TlsConfig:
    cert: str = setting("", "Certificate (PEM) for SMTP and HTTPS; empty: a self-signed pair is generated.")
    key: str = setting("", "Its private key (PEM).")


@_section
class MailConfig:
    hostname: str = setting("", "EHLO name and MX target of return paths; empty: the machine's FQDN.")
    spf_include: str = setting("", "SPF include published in domain records; empty: spf.<hostname>.")
    test_domain: str = setting("resend.dev", "The domain of the test addresses (delivered@, bounced@, ...).",
                               holds(_is_test_domain, "a domain name in lower case, such as resend.dev"))
    refuse_reserved_recipients: bool = setting(True, "Refuse recipients on reserved names with 422.")
    max_mime_parts: int = setting(500, "MIME parts a message may hold, all together.", at_least(1))
    max_mime_depth: int = setting(50, "How deep a message's parts may nest.", at_least(1))
    max_header_fields: int = setting(1000, "Header fields a message may hold.", at_least(1))
    max_header_bytes: int = setting(1024 * 1024, "Bytes of header fields a message may hold.", at_least(1))


@_section
class AiConfig:
    provider: str = setting("", "The AI provider (openai, or another compatible API); empty: AI is off.")
    base_url: str = setting("", "The provider's API root.")
    api_key: str = setting("", "The provider's key.")
    model: str = setting("", "The model asked.")
    timeout: int = setting(50, "Seconds both provider round trips (the answer and its one repair) have in all.",
                           at_least(1))
    concurrency: int = setting(4, "Provider calls in flight on one node; more answer 502 ai_busy.", at_least(1))
    monthly_quota: int = setting(500, "Generations a month on the top plan (other plans have none).",
                                 at_least(0, "must be 0 or more"))
    per_minute: int = setting(10, "Generations a minute.", at_least(1))
    max_tokens: int = setting(8000, "Tokens the model may answer with.", at_least(1))


@_section
class BrandConfig:
    timeout: int = setting(20, "Seconds one brand import may spend fetching.")
    max_fetches: int = setting(20, "Fetches one brand import may make.",
                               holds(lambda v: 2 <= v <= 100, "must be between 2 and 100"))


@_section
class ApiConfig:
    key_tag: str = setting("re", "First part of API keys: <key_tag>_<prefix>_<secret>.")
    rate_per_sec: int = setting(10, "Default API request rate of an account per second.")
    burst_factor: int = setting(2, "Bursts reach rate_per_sec times this.")
    auth_cache_seconds: int = setting(10, "Seconds a key check is cached on a node.",
                                      holds(lambda v: v <= 30, "at most 30 (revocation must apply within 30 s)"))
    date_languages: tuple[str, ...] = setting(("en",), "Languages of natural-language scheduled_at phrases.")


@_section
class DomainsConfig:
    region: str = setting("local", "Informative region reported on every domain.")
    verification_window: int = setting(259200, "Seconds a pending domain has to publish its records.")
    recheck_interval: int = setting(86400, "Seconds between re-checks of a verified domain.")
    check_interval: int = setting(15, "Seconds between two looks for domains whose check is due.")
    cloudflare_base_url: str = setting("https://api.cloudflare.com/client/v4", "Cloudflare's v4 API.")


@_section
class WebhooksConfig:
    concurrency_per_endpoint: int = setting(8, "Requests in flight to one webhook, across all nodes.", at_least(1))
    max_in_flight: int = setting(256, "Requests in flight from one node.", at_least(1))
    host_concurrency: int = setting(64, "Requests in flight from one node to one target address.", at_least(1))
    host_rate_per_sec: int = setting(500, "Requests a second from one node to one target address.", at_least(1))
    retries_per_hour: int = setting(20, "The dashboard's \"retry now\"s of webhook deliveries an hour for one"
                                        " account.", at_least(1))


@_section
class SpamConfig:
    spamd: str = setting("", "spamd's address (host:port) for the spam score; empty: scoring is off.")
    timeout: int = setting(15, "Seconds a score may take.")
    broadcast_threshold: float = setting(0.0, "Broadcasts at send: a score at or over this refuses the send"
                                              " (0: never refused).",
                                         holds(lambda v: not v < 0, "a score of 0 (never refuse) or more"),
                                         unreadable="a score of 0 (never refuse) or more")


@_section
class TlsrptConfig:
    account: str = setting("", "The account (its id) whose mail carries TLS reports to mailto: addresses.",
                           holds(lambda v: not v or _is_uuid(v), "an account id (UUID)"))
    sender: str = setting("", "The reports' sender, at one of that account's verified domains.")


@_section
class DmarcConfig:
    max_xml_bytes: int = setting(20 * 1024 * 1024, "The largest decompressed XML of an aggregate report taken.")


@_section
class NodeConfig:
    roles: tuple[str, ...] = setting(("api", "delivery", "webhooks", "scheduler", "broadcasts"),
                                     "Parts this node runs.", _unknown_role)
    processes: int = setting(0, "Worker processes serving the node's sockets; 0: one per core.",
                             at_least(0, "must be 0 (one per core) or more"))

    @property
    def process_count(self) -> int:
        return self.processes or os.cpu_count() or 1


@_section
class BroadcastsConfig:
    chunk: int = setting(1000, "Recipients one chunk of the fan-out takes (one accept statement).", at_least(1))
    lease_seconds: int = setting(60, "Seconds a chunk is held by the node that claimed it.", at_least(1))


@_section
class ManholeConfig:
    listen: str = setting("", "SSH manhole endpoint (loopback or a Unix socket); empty: off.")


@_section
class PublicConfig:
    cors_origins: tuple[str, ...] = setting((), "Origins whose browsers may call /public/*.")


@_section
class DashboardConfig:
    origins: tuple[str, ...] = setting((), "Origins of dashboards served elsewhere, answered CORS with credentials.")
    session_idle: int = setting(7200, "Seconds a session may stay unused.", at_least(60, "must be at least 60 seconds"))
    session_lifetime: int = setting(604800, "Seconds a session lasts at most.",
                                    at_least(60, "must be at least 60 seconds"))
    link_lifetime: int = setting(259200, "Seconds a set-password link stays valid.",
                                 at_least(60, "must be at least 60 seconds"))
    links_per_user_hour: int = setting(5, "Set-password links an hour for one user.", at_least(1))
    links_per_tenant_hour: int = setting(20, "Set-password links an hour for one account.", at_least(1))
    first_user: str = setting("", "At start with no user yet: the owner of a first account (scripts/serve).")
    first_key_file: bool = setting(False, "Development: the first account's first key written to the state"
                                          " directory (embedded store only).")


@_section
class TorConfig:
    onion: bool = setting(False, "Publish the HTTP API as a v3 onion service through a system tor.")
    control: str = setting("unix:/run/tor/control", "tor's control port or socket.")
    control_password: str = setting("", "Only for a ControlPort protected by HashedControlPassword.")
    port: int = setting(80, "The port of the onion address.",
                        holds(lambda v: 1 <= v <= 65535, "must be a port number (1-65535)"))


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


#: Each section's name and class, in the order of ``Config``.
SECTIONS: dict[str, type] = {f.name: type(f.default) for f in attrs.fields(Config)}

#: Rules that tie keys of two sections together: (the key path named, the test, what is wrong).
_ACROSS: tuple[tuple[str, Callable[[Config], bool], str], ...] = (
    ("api.rate_per_sec", lambda c: c.api.rate_per_sec >= 1, "must be at least 1"),
    ("api.burst_factor", lambda c: c.api.burst_factor >= 1, "must be at least 1"),
    ("ai.timeout", lambda c: c.ai.timeout < c.http.request_timeout, "must be below http.request_timeout"),
    ("ai.base_url", lambda c: bool(c.ai.base_url or not c.ai.provider), "required when ai.provider is set"),
    ("brand.timeout", lambda c: 1 <= c.brand.timeout < c.http.request_timeout,
     "must be at least 1 and below http.request_timeout"),
    ("tlsrpt.account and tlsrpt.sender", lambda c: bool(c.tlsrpt.account) == bool(c.tlsrpt.sender),
     "both or neither"),
)


def _flag(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError


#: Each type a key may have (its annotation): how its text is read, and what a text that is
#: not of it is told. An empty number is 0, as an empty flag is false.
KEY_TYPES: dict[str, tuple[Callable[[str], Any], str]] = {
    "str": (str, ""),
    "int": (int, "expected an integer"),
    "float": (lambda raw: float(raw) if raw else 0.0, "expected a number"),
    "bool": (_flag, "expected true or false"),
    "tuple[str, ...]": (lambda raw: tuple(item.strip() for item in raw.split(",") if item.strip()), ""),
}


def _parse_value(path: str, field: attrs.Attribute, raw: str) -> Any:
    # Annotations here are postponed (``from __future__ import annotations``): attrs keeps them as text.
    assert isinstance(field.type, str)
    parse, expected = KEY_TYPES[field.type]
    raw = raw.strip()
    try:
        return parse(raw)
    except ValueError:
        unreadable = field.metadata["unreadable"]
        raise ConfigError(f"{path}: {unreadable}" if unreadable else f"{path}: {expected}, got {raw!r}") from None


def _check(config: Config) -> Config:
    for name in SECTIONS:
        section = getattr(config, name)
        for field in attrs.fields(type(section)):
            rule = field.metadata["rule"]
            wrong = rule(getattr(section, field.name)) if rule is not None else None
            if wrong is not None:
                raise ConfigError(f"{name}.{field.name}: {wrong}")
    for path, test, wrong in _ACROSS:
        if not test(config):
            raise ConfigError(f"{path}: {wrong}")
    return config


def _read_file(path: str | os.PathLike, values: dict[str, dict[str, str]]) -> None:
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


def load(path: str | os.PathLike | None, environ: dict[str, str] | None = None) -> Config:
    """
    Read ``path`` (if given) then apply ``MAILSVC_<SECTION>_<KEY>`` variables from ``environ``.

    Unknown sections or keys in the file, or an unknown key of a known section in the
    environment, raise ConfigError naming the key path: a typo must not silently fall back
    to a default.
    """
    variables: Mapping[str, str] = os.environ if environ is None else environ
    values: dict[str, dict[str, str]] = {name: {} for name in SECTIONS}
    if path is not None:
        _read_file(path, values)
    for var, raw in variables.items():
        if not var.startswith("MAILSVC_"):
            continue
        rest = var[len("MAILSVC_") :].lower()
        section, _, key = rest.partition("_")
        if section in SECTIONS:
            values[section][key] = raw
    sections = {}
    for name, cls in SECTIONS.items():
        fields = attrs.fields_dict(cls)
        kwargs = {}
        for key, raw in values[name].items():
            if key not in fields:
                raise ConfigError(f"{name}.{key}: unknown key")
            kwargs[key] = _parse_value(f"{name}.{key}", fields[key], raw)
        sections[name] = cls(**kwargs)
    return _check(Config(**sections))
