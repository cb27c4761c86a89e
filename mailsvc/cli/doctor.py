"""
``mailsvc doctor``: what a receiving MTA and the operator's own set-up need of a sending node,
checked one by one, each finding with why it matters and what to fix. It reads the node's
configuration and asks DNS, the certificate file, the node's own API and (only when the
operator names a host) a remote port 25; it changes nothing.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import re
import smtplib
import socket
import urllib.error
import urllib.request
from pathlib import Path

import attrs
import dns.exception
import dns.resolver
import dns.reversename
from cryptography import x509

from mailsvc.cli.client import ApiError, CliError, connect, read_config
from mailsvc.config import Config
from mailsvc.domain.display import shown

#: A certificate expiring within this many days is reported (renewal normally happens at 30).
EXPIRY_DAYS = 21
TIMEOUT = 5.0


@attrs.frozen
class Finding:
    status: str  # ok | FAIL | skip
    subject: str
    said: str
    why: str

    def line(self) -> str:
        return f"{self.status:<5} {shown(self.subject)}: {shown(self.said)}\n      why: {shown(self.why)}"


def ok(subject: str, said: str, why: str) -> Finding:
    return Finding("ok", subject, said, why)


def fail(subject: str, said: str, why: str) -> Finding:
    return Finding("FAIL", subject, said, why)


def skip(subject: str, said: str, why: str) -> Finding:
    return Finding("skip", subject, said, why)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dns-server", action="append", metavar="HOST[:PORT]",
                        help="ask this resolver (repeatable; default: dns.servers, else the system's)")
    parser.add_argument("--smtp-probe", metavar="HOST[:PORT]",
                        help="check that outbound port 25 reaches this host (never checked otherwise)")
    parser.add_argument("--json", action="store_true", help="the findings as JSON")


def resolver(servers: list[str]) -> dns.resolver.Resolver:
    """The system's resolver, or these servers (``host:port``, port 53 by default)."""
    if not servers:
        found = dns.resolver.Resolver()
    else:
        found = dns.resolver.Resolver(configure=False)
        found.nameservers, found.nameserver_ports = [], {}
        for server in servers:
            host, _, port = server.rpartition(":") if server.count(":") == 1 else (server, "", "53")
            found.nameservers.append(host.strip("[]"))
            found.nameserver_ports[host.strip("[]")] = int(port or 53)
    found.lifetime = TIMEOUT
    return found


def _answers(dns_resolver: dns.resolver.Resolver, name: str, kind: str) -> list[str]:
    """The answers' text, none for a name or type that does not exist."""
    try:
        return [rdata.to_text() for rdata in dns_resolver.resolve(name, kind)]
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return []


def _name(text: str) -> str:
    return text.lower().rstrip(".")


def is_fully_qualified(name: str) -> bool:
    labels = name.rstrip(".").split(".")
    if len(labels) < 2 or labels[-1].lower() in ("local", "localdomain", "lan", "internal", "localhost"):
        return False
    if labels[-1].isdigit():
        return False
    return all(re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label) for label in labels)


def is_local(address: str) -> bool:
    """Whether ``address`` is one of this machine's own (a socket can be bound to it)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


# -- the checks --------------------------------------------------------------------------------


def check_name(config: Config) -> list[Finding]:
    """The EHLO name is set, and fully qualified."""
    hostname = config.hostname
    findings = []
    if not config.mail.hostname:
        findings.append(fail("mail.hostname", f"not set; the machine's name {hostname!r} is used: set "
                             "mail.hostname", "it is the EHLO name and the return paths' MX target that domains "
                             "publish; it must not change with the machine"))
    if not is_fully_qualified(hostname):
        findings.append(fail("mail.hostname", f"{hostname!r} is not a fully qualified public name: set "
                             "mail.hostname to one (mail.example.com)",
                             "receivers refuse or score down an EHLO name that is not a fully qualified domain"))
    return findings


def check_hostname(config: Config, dns_resolver) -> tuple[list[Finding], list[str]]:
    """The EHLO name resolves to this node, whose addresses name it back."""
    hostname = config.hostname
    subject = "mail.hostname"
    findings = []
    addresses = _answers(dns_resolver, hostname, "A") + _answers(dns_resolver, hostname, "AAAA")
    if not addresses:
        findings.append(fail(subject, f"{hostname} has no A or AAAA record: publish this node's address",
                             "receivers check that the EHLO name resolves, and domains' return-path MX "
                             "points at it (bounces come back there)"))
        return findings, []
    local = [a for a in addresses if is_local(a)]
    if not local:
        findings.append(fail(subject, f"{hostname} resolves to {', '.join(addresses)}, none of them an address "
                             "of this node: point it here (behind NAT, at the public address of this node)",
                             "mail from this node under another host's name fails receivers' checks"))
        return findings, []
    findings.append(ok(subject, f"{hostname} resolves to {', '.join(local)} (this node)",
                       "receivers check that the EHLO name resolves to the connecting address"))
    for address in local:
        reverse = dns.reversename.from_address(address).to_text()
        names = [_name(n) for n in _answers(dns_resolver, reverse, "PTR")]
        if _name(hostname) in names:
            findings.append(ok("reverse DNS", f"{address} names {hostname} back (forward-confirmed)",
                               "many receivers (Gmail, Outlook) refuse or junk mail from an address without "
                               "forward-confirmed reverse DNS"))
        else:
            found = ", ".join(names) if names else "no PTR record"
            findings.append(fail("reverse DNS", f"{address} has {found}: ask whoever owns the address (the "
                                 f"hosting provider) to set its PTR to {hostname}",
                                 "many receivers (Gmail, Outlook) refuse or junk mail from an address "
                                 "without forward-confirmed reverse DNS"))
    return findings, local


def _matches(pattern: str, hostname: str) -> bool:
    pattern, hostname = _name(pattern), _name(hostname)
    if pattern.startswith("*."):
        return hostname.count(".") == pattern.count(".") and hostname.endswith(pattern[1:])
    return pattern == hostname


def check_certificate(config: Config, now: datetime.datetime) -> list[Finding]:
    path = Path(config.tls.cert or config.state_dir / "tls-cert.pem")
    subject = "TLS certificate"
    why = ("SMTP clients (submission) verify it, and receivers that enforce MTA-STS or DANE check "
           "the return path's")
    try:
        certificate = x509.load_pem_x509_certificate(path.read_bytes())
    except OSError as e:
        return [fail(subject, f"cannot read {path}: {e.strerror}; set tls.cert and tls.key", why)]
    except ValueError:
        return [fail(subject, f"{path} is not a PEM certificate", why)]
    findings = []
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value \
            .get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    if any(_matches(name, config.hostname) for name in names):
        findings.append(ok(subject, f"{path} names {config.hostname}", why))
    else:
        findings.append(fail(subject, f"{path} names {', '.join(names) or 'no host'}, not {config.hostname}: "
                             "get a certificate for mail.hostname (ACME, e.g. certbot)", why))
    if certificate.issuer == certificate.subject:
        findings.append(fail(subject, f"{path} is self-signed (the node made it): get one from a CA", why))
    left = certificate.not_valid_after_utc - now
    if left < datetime.timedelta(days=EXPIRY_DAYS):
        said = "expired" if left.total_seconds() <= 0 else f"expires in {left.days} days"
        findings.append(fail(subject, f"{said} ({certificate.not_valid_after_utc:%Y-%m-%d}): renew it, then "
                             "restart the node", "an expired certificate fails every verifying client"))
    else:
        findings.append(ok(subject, f"valid until {certificate.not_valid_after_utc:%Y-%m-%d}",
                           "an expired certificate fails every verifying client"))
    return findings


def _spf_covers(record: str, addresses: list[str], hostname: str) -> bool:
    terms = record.split()[1:]
    for address in addresses:
        ip = ipaddress.ip_address(address)
        covered = False
        for term in terms:
            mechanism = term.lstrip("+")
            kind, _, value = mechanism.partition(":")
            if kind in ("ip4", "ip6") and value:
                try:
                    covered = covered or ip in ipaddress.ip_network(value, strict=False)
                except ValueError:
                    continue
            elif mechanism == "a" or (kind == "a" and _name(value) == _name(hostname)):
                covered = True
        if not covered:
            return False
    return True


def check_published(config: Config, dns_resolver, addresses: list[str]) -> list[Finding]:
    """What every sending domain is told to publish: an MX to mail.hostname and an SPF include."""
    findings = []
    if addresses:
        findings.append(ok("return-path MX", f"domains publish MX {config.hostname}, which resolves here",
                           "bounces and feedback reports reach this node through it"))
    else:
        findings.append(fail("return-path MX", f"domains publish MX {config.hostname}, which does not resolve "
                             "to this node (see mail.hostname)", "bounces and feedback reports would be lost"))
    include = config.spf_include
    why = ("every domain's SPF record includes it: receivers check the sending address against it, and a "
           "failing SPF fails DMARC's SPF half")
    records = [t.replace('" "', "").strip('"') for t in _answers(dns_resolver, include, "TXT")]
    spf = [r for r in records if r.lower().startswith("v=spf1")]
    if len(spf) != 1:
        said = "no SPF record" if not spf else f"{len(spf)} SPF records (at most one is allowed)"
        return [*findings, fail("SPF include", f"{include} has {said}: publish one TXT record "
                               f"\"v=spf1 ip4:<this node's address> -all\" there", why)]
    if addresses and not _spf_covers(spf[0], addresses, config.hostname):
        return [*findings, fail("SPF include", f"{include} ({spf[0]}) does not name {', '.join(addresses)}: add "
                                "ip4:/ip6: mechanisms for them", why)]
    return [*findings, ok("SPF include", f"{include}: {spf[0]}", why)]


def check_node(args, environ: dict[str, str]) -> list[Finding]:
    """
    The database through the node itself: ``/healthz`` says whether the node reaches it, and an
    answering ``/admin/v1`` that the node started, which it does only after migrating. (A
    direct connection would need the database's credentials, which the embedded cluster keeps
    to the service user, and the command line talks to nodes, never to the store.)
    """
    why = "a node that cannot reach a migrated database accepts no mail and delivers none"
    try:
        api = connect(args.config, args.token_file, environ)
        health = api.call("GET", "/healthz")
        node = api.call("GET", "/admin/v1")
    except ApiError as e:
        if e.status == 503:
            return [fail("database", "the node does not reach its database (GET /healthz: 503): see its log "
                         "and database.dsn", why)]
        return [fail("node", f"the operator API answered {e}", why)]
    except CliError as e:
        return [fail("node", f"{e}: start the node (systemctl start mailsvc)", why)]
    return [ok("database", f"reachable and migrated (node {node.get('version')} at {api.url} answers, "
               f"/healthz {health.get('status')})", why)]


def check_spamd(config: Config) -> list[Finding]:
    why = "previews and broadcasts are scored by it; without it the score is missing"
    if not config.spam.spamd:
        return [skip("spamd", "not configured (spam.spamd)", why)]
    host, _, port = config.spam.spamd.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=TIMEOUT) as conn:
            conn.sendall(b"PING SPAMC/1.5\r\n\r\n")
            answer = conn.recv(200)
    except (OSError, ValueError) as e:
        return [fail("spamd", f"{config.spam.spamd} does not answer ({e}): start spamd or fix spam.spamd", why)]
    if b"PONG" not in answer:
        return [fail("spamd", f"{config.spam.spamd} answered {answer[:60]!r}, not spamd's PONG", why)]
    return [ok("spamd", f"{config.spam.spamd} answers", why)]


def check_ai(config: Config) -> list[Finding]:
    why = "template generation and brand import call it; a dead provider fails them with 502"
    if not config.ai.provider:
        return [skip("AI provider", "not configured (ai.provider)", why)]
    url = config.ai.base_url.rstrip("/") + "/models"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {config.ai.api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            status = response.status
    except urllib.error.HTTPError as e:
        status = e.code
    except (urllib.error.URLError, OSError) as e:
        return [fail("AI provider", f"{url} does not answer ({getattr(e, 'reason', e)}): fix ai.base_url", why)]
    if status in (401, 403):
        return [fail("AI provider", f"{url} refused ai.api_key ({status})", why)]
    if status >= 400:
        return [fail("AI provider", f"GET {url} answered {status}", why)]
    return [ok("AI provider", f"{url} answers ({status})", why)]


def check_port_25(config: Config, target: str | None) -> list[Finding]:
    why = "many hosting providers block outbound port 25; then nothing is delivered except through a relay"
    if not target:
        return [skip("outbound port 25", "not checked (name a host with --smtp-probe)", why)]
    host, _, port = target.rpartition(":") if target.count(":") == 1 else (target, "", "")
    try:
        with smtplib.SMTP(host, int(port or 25), local_hostname=config.hostname, timeout=TIMEOUT * 2) as smtp:
            code, banner = smtp.ehlo()
    except (OSError, smtplib.SMTPException) as e:
        return [fail("outbound port 25", f"{target} not reached ({e}): ask the provider to open port 25, "
                     "or relay (delivery.relay_host)", why)]
    return [ok("outbound port 25", f"{target} answered EHLO with {code}", why)]


def run(io, args) -> int:
    try:
        config = read_config(args.config, io.environ)
    except CliError as e:
        io.note(f"mailsvc: {shown(e)}")
        return 1
    dns_resolver = resolver(args.dns_server or list(config.dns.servers))
    findings = check_name(config)
    try:
        named, addresses = check_hostname(config, dns_resolver) if is_fully_qualified(config.hostname) \
            else ([], [])
        findings += named + check_published(config, dns_resolver, addresses)
    except dns.exception.DNSException as e:
        findings.append(fail("DNS", f"the resolver did not answer ({e.__class__.__name__}): check dns.servers "
                             "or --dns-server", "the name, reverse DNS and SPF checks need DNS"))
    findings += check_certificate(config, datetime.datetime.now(datetime.UTC))
    findings += check_node(args, io.environ)
    findings += check_spamd(config)
    findings += check_ai(config)
    findings += check_port_25(config, args.smtp_probe)
    if args.json:
        io.out(json.dumps([attrs.asdict(f) for f in findings], indent=2))
    else:
        for finding in findings:
            io.out(finding.line())
    failed = sum(f.status == "FAIL" for f in findings)
    io.note(f"{failed} to fix." if failed else "All checks passed.")
    return 1 if failed else 0
