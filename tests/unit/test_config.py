"""The configuration loader and the twistd options."""

import argon2
import pytest
from argon2.exceptions import VerifyMismatchError
from twisted.python import usage

from mailsvc.compose_shared import password_hasher
from mailsvc.config import ConfigError, load
from mailsvc.tap import Options, makeService


def write(tmp_path, text):
    path = tmp_path / "mailsvc.conf"
    path.write_text(text)
    return path


def test_defaults_match_the_design(tmp_path):
    config = load(None, environ={})
    assert config.http.listen == "tcp:8080"
    assert config.smtp.submission == ("ssl:465", "tcp:587", "ssl:2465", "tcp:2587")
    assert config.smtp.inbound == "tcp:25"
    assert config.delivery.port == 25
    assert config.database.dsn == ""
    assert config.state.dir == "/var/lib/mailsvc"
    assert config.security.allow_private_targets is False
    assert config.api.key_tag == "re"


def test_file_then_environment(tmp_path):
    path = write(tmp_path, "[http]\nlisten = tcp:9000\n[dns]\nservers = 127.0.0.1:5353\n")
    config = load(path, environ={"MAILSVC_HTTP_LISTEN": "tcp:9100", "MAILSVC_DNS_SERVERS": "a:1, b:2"})
    assert config.http.listen == "tcp:9100"
    assert config.dns.servers == ("a:1", "b:2")
    assert load(path, environ={}).dns.servers == ("127.0.0.1:5353",)


def test_environment_names_section_and_key():
    config = load(None, environ={
        "MAILSVC_DATABASE_DSN": "host=/tmp dbname=x",
        "MAILSVC_SECURITY_ALLOW_PRIVATE_TARGETS": "true",
        "MAILSVC_DELIVERY_PORT": "2525",
        "MAILSVC_TEST_DSN": "ignored: not a section",
    })
    assert config.database.dsn == "host=/tmp dbname=x"
    assert config.security.allow_private_targets is True
    assert config.delivery.port == 2525


@pytest.mark.parametrize(
    "text, path",
    [
        ("[http]\nlisen = tcp:1\n", "http.lisen"),
        ("[htp]\nlisten = tcp:1\n", "htp"),
        ("[delivery]\nport = twenty-five\n", "delivery.port"),
        ("[security]\nallow_private_targets = maybe\n", "security.allow_private_targets"),
        ("[node]\nroles = api, mixer\n", "node.roles"),
        ("[mail]\nmax_mime_parts = 0\n", "mail.max_mime_parts"),
        ("[mail]\nmax_header_bytes = -1\n", "mail.max_header_bytes"),
    ],
)
def test_errors_name_the_key(tmp_path, text, path):
    with pytest.raises(ConfigError) as e:
        load(write(tmp_path, text), environ={})
    assert str(e.value).startswith(path)


def test_unknown_key_in_environment():
    with pytest.raises(ConfigError, match=r"^http\.lisen: unknown key"):
        load(None, environ={"MAILSVC_HTTP_LISEN": "tcp:1"})


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "absent.conf", environ={})


def test_shipped_annotated_defaults_are_the_defaults():
    from pathlib import Path

    shipped = Path(__file__).parent.parent.parent / "etc" / "mailsvc.conf"
    assert load(shipped, environ={}) == load(None, environ={})


def test_options():
    options = Options()
    options.parseOptions(["--config", "/etc/mailsvc/mailsvc.conf"])
    assert options["config"] == "/etc/mailsvc/mailsvc.conf"
    with pytest.raises(usage.UsageError):
        Options().parseOptions(["--bogus"])


def test_make_service_reports_a_bad_config_in_one_line(tmp_path):
    options = Options()
    options.parseOptions(["--config", str(write(tmp_path, "[http]\nlisen = x\n"))])
    with pytest.raises(SystemExit) as e:
        makeService(options)
    assert str(e.value) == "mailsvc: configuration error: http.lisen: unknown key"


def test_the_mail_hostname_defaults_to_the_machines_fully_qualified_name():
    import socket

    assert load(None, environ={}).hostname == socket.getfqdn()
    assert load(None, environ={"MAILSVC_MAIL_HOSTNAME": "mail.example.net"}).hostname == "mail.example.net"


def test_only_a_development_start_asks_for_the_first_accounts_key_file():
    from mailsvc.first_account import keeps_first_key

    assert not keeps_first_key(load(None, environ={"MAILSVC_DASHBOARD_FIRST_USER": "a@example.com"}))
    development = {"MAILSVC_DASHBOARD_FIRST_USER": "a@example.com", "MAILSVC_DASHBOARD_FIRST_KEY_FILE": "true"}
    assert keeps_first_key(load(None, environ=development))
    assert not keeps_first_key(load(None, environ={**development, "MAILSVC_DATABASE_DSN": "dbname=mailsvc"}))


def test_the_mime_limits_are_settings():
    from mailsvc.mail.limits import MimeLimits

    assert MimeLimits.of(load(None, environ={}).mail) == MimeLimits(500, 50, 1000, 1024 * 1024)
    config = load(None, environ={"MAILSVC_MAIL_MAX_MIME_PARTS": "20", "MAILSVC_MAIL_MAX_MIME_DEPTH": "5",
                                 "MAILSVC_MAIL_MAX_HEADER_FIELDS": "30", "MAILSVC_MAIL_MAX_HEADER_BYTES": "4096"})
    assert MimeLimits.of(config.mail) == MimeLimits(20, 5, 30, 4096)


def test_every_key_is_declared_once_with_its_type_and_doc():
    import re
    from pathlib import Path

    import attrs

    from mailsvc.config import KEY_TYPES, SECTIONS

    shipped = (Path(__file__).parent.parent.parent / "etc" / "mailsvc.conf").read_text()
    for name, cls in SECTIONS.items():
        section = shipped.split(f"[{name}]\n", 1)[1].split("\n[", 1)[0]
        for field in attrs.fields(cls):
            assert field.type in KEY_TYPES, (name, field.name)
            assert field.metadata["doc"], (name, field.name)
            assert re.search(rf"^{field.name} =", section, re.M), f"etc/mailsvc.conf lacks {name}.{field.name}"


def test_a_float_setting_is_read_once_into_a_number():
    assert load(None, environ={}).spam.broadcast_threshold == 0.0
    assert load(None, environ={"MAILSVC_SPAM_BROADCAST_THRESHOLD": "5.5"}).spam.broadcast_threshold == 5.5
    assert load(None, environ={"MAILSVC_SPAM_BROADCAST_THRESHOLD": ""}).spam.broadcast_threshold == 0.0
    for bad in ("-1", "lots"):
        with pytest.raises(ConfigError) as e:
            load(None, environ={"MAILSVC_SPAM_BROADCAST_THRESHOLD": bad})
        assert str(e.value) == "spam.broadcast_threshold: a score of 0 (never refuse) or more"


@pytest.mark.parametrize(("environ", "message"), [
    ({"MAILSVC_DATABASE_POOL_SIZE": "0"}, "database.pool_size: must be at least 1"),
    ({"MAILSVC_DATABASE_STATEMENT_TIMEOUT": "-1"}, "database.statement_timeout: must be 0 (none) or more seconds"),
    ({"MAILSVC_DATABASE_POOL_SIZE": "x"}, "database.pool_size: expected an integer, got 'x'"),
    ({"MAILSVC_DELIVERY_DANE": "maybe"}, "delivery.dane: expected true or false, got 'maybe'"),
    ({"MAILSVC_API_BURST_FACTOR": "0"}, "api.burst_factor: must be at least 1"),
    ({"MAILSVC_API_RATE_PER_SEC": "0"}, "api.rate_per_sec: must be at least 1"),
    ({"MAILSVC_API_AUTH_CACHE_SECONDS": "31"},
     "api.auth_cache_seconds: at most 30 (revocation must apply within 30 s)"),
    ({"MAILSVC_DELIVERY_RELAY_TLS": "tls"}, "delivery.relay_tls: must be starttls, implicit or none"),
    ({"MAILSVC_NODE_ROLES": "api, mixer"}, "node.roles: unknown role 'mixer'"),
    ({"MAILSVC_NODE_PROCESSES": "-1"}, "node.processes: must be 0 (one per core) or more"),
    ({"MAILSVC_DASHBOARD_SESSION_IDLE": "59"}, "dashboard.session_idle: must be at least 60 seconds"),
    ({"MAILSVC_AI_MONTHLY_QUOTA": "-1"}, "ai.monthly_quota: must be 0 or more"),
    ({"MAILSVC_AI_TIMEOUT": "60"}, "ai.timeout: must be below http.request_timeout"),
    ({"MAILSVC_AI_PROVIDER": "openai"}, "ai.base_url: required when ai.provider is set"),
    ({"MAILSVC_BRAND_TIMEOUT": "60"}, "brand.timeout: must be at least 1 and below http.request_timeout"),
    ({"MAILSVC_BRAND_MAX_FETCHES": "1"}, "brand.max_fetches: must be between 2 and 100"),
    ({"MAILSVC_SECURITY_TEST_EXTRA_PORTS": "8080, 0"}, "security.test_extra_ports: '0' is not a port"),
    ({"MAILSVC_MAIL_TEST_DOMAIN": "Resend.dev"}, "mail.test_domain: a domain name in lower case, such as resend.dev"),
    ({"MAILSVC_TLSRPT_ACCOUNT": "acme"}, "tlsrpt.account: an account id (UUID)"),
    ({"MAILSVC_TLSRPT_SENDER": "tls@example.com"}, "tlsrpt.account and tlsrpt.sender: both or neither"),
    ({"MAILSVC_TOR_PORT": "0"}, "tor.port: must be a port number (1-65535)"),
])
def test_a_bad_value_is_told_what_its_key_wants(environ, message):
    with pytest.raises(ConfigError) as e:
        load(None, environ=environ)
    assert str(e.value) == message


def test_the_engines_defaults_are_the_settings_defaults():
    from mailsvc.broadcasting import fanout
    from mailsvc.delivery.worker import Settings

    config = load(None, environ={})
    assert (fanout.CHUNK, fanout.LEASE_SECONDS) == (config.broadcasts.chunk, config.broadcasts.lease_seconds)
    settings = Settings("node", 25, b"key")
    assert (settings.lease_seconds, settings.batch, settings.max_in_flight) == (
        config.delivery.lease_seconds, config.delivery.batch, config.delivery.max_in_flight)


def test_the_first_retry_is_a_test_knob_off_by_default():
    from mailsvc.delivery.worker import Settings

    assert load(None, environ={}).delivery.test_first_retry_seconds == 0
    assert Settings("node", 25, b"key").first_retry == 0


def test_cheap_password_hashes_are_a_test_knob_off_by_default():
    assert load(None, environ={}).security.test_cheap_password_hashes is False
    default = password_hasher(load(None, environ={}))
    cheap = password_hasher(load(None, environ={"MAILSVC_SECURITY_TEST_CHEAP_PASSWORD_HASHES": "true"}))
    # Off, the hasher is argon2-cffi's own default.
    assert default.hash("x").split("$")[3] == argon2.PasswordHasher().hash("x").split("$")[3] == "m=65536,t=3,p=4"
    hashed = cheap.hash("correct horse battery")
    assert hashed.startswith("$argon2id$v=19$m=8,t=1,p=1$")
    # A cheap hash still verifies, and refuses any other password, with either hasher.
    for hasher in (cheap, default):
        assert hasher.verify(hashed, "correct horse battery")
        with pytest.raises(VerifyMismatchError):
            hasher.verify(hashed, "correct horse batterY")
    # A node with the knob off hashes such a password again at its next sign-in.
    assert default.check_needs_rehash(hashed) and not cheap.check_needs_rehash(hashed)
