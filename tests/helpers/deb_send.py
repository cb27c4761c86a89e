"""
The mail half of scripts/deb-install-test: the installed package's daemon sends real e-mail.

Run from the checkout's .venv as a coprocess of the script (``python -m tests.helpers.deb_send``), it
serves the daemon's outside world on loopback: the tests' DNS server (tests/helpers/dnsserver.py) and
SMTP sink (tests/helpers/smtpsink.py). Then, as a user would, it adds a sending domain, publishes the
records the API lists, has the daemon verify them, and sends one e-mail through ``POST /emails``
and one through SMTP submission (STARTTLS against the daemon's certificate, AUTH with the API
key) to a domain whose MX is 127.0.0.1. Each must reach the sink as sent, DKIM-signed for the
domain (dkimpy verifies every signature against the DNS server), and read ``delivered``.

Lines on stdout, the script's side of the conversation:

- first ``<dns host:port> <sink port>``, once both listen (the daemon starts with them);
- then it reads ``<api url> <api key> <submission port> <certificate file>`` from stdin;
- and prints what it measured, ``sent: 2``, and exits 0; a failure exits 1, its reason on stderr.
"""

from __future__ import annotations

import email
import email.policy
import json
import re
import smtplib
import ssl
import sys
import threading
import time
import uuid
from email.message import EmailMessage

import dkim
import dns.resolver
import treq
from twisted.internet import defer, reactor, task, threads

from tests.helpers.dnsserver import DNSServer
from tests.helpers.domainsupport import publish
from tests.helpers.polling import async_until
from tests.helpers.smtpsink import Received, Sink

SENDER_DOMAIN = "deb.example.com"
RECIPIENT_DOMAIN = "sink.example.net"
RECIPIENT = f"ann@{RECIPIENT_DOMAIN}"
SIGNING_DOMAIN = re.compile(r"(?:^|;)\s*d=([^;\s]+)")
#: Seconds for each wait: verification (the scheduler's check), a message to the sink, an outcome.
#: Generous: the machine is shared and the package test runs beside other suites.
PATIENCE = 120


class Failed(Exception):
    """A check of the scenario did not hold; the message says which."""


def check(condition: bool, why: str) -> None:
    if not condition:
        raise Failed(why)


async def api(method: str, url: str, key: str, body: dict | None = None) -> dict:
    """One JSON request; anything but 2xx fails the run with the answer."""
    response = await treq.request(method, url, headers={"Authorization": f"Bearer {key}"},
                                  data=None if body is None else json.dumps(body).encode(),
                                  timeout=30)
    answer = await response.text()
    check(200 <= response.code < 300, f"{method} {url}: {response.code} {answer}")
    return json.loads(answer)


def dkim_verdicts(message: bytes, dns_address: str) -> list[bool]:
    """dkimpy's verdict on each DKIM-Signature, its key looked up on the DNS server (blocking)."""
    host, port = dns_address.rsplit(":", 1)
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers, resolver.port = [host], int(port)

    def lookup(name: bytes, timeout: int = 5) -> bytes:
        answer = resolver.resolve(name.decode().rstrip("."), "TXT", lifetime=timeout)
        return b"".join(b"".join(record.strings) for record in answer)

    checker = dkim.DKIM(message)
    verdicts = []
    for index in range(len(email.message_from_bytes(message).get_all("DKIM-Signature") or [])):
        try:
            verdicts.append(checker.verify(idx=index, dnsfunc=lookup))
        except dkim.DKIMException:
            verdicts.append(False)
    return verdicts


async def check_arrival(received: Received, subject: str, marker: str, dns_address: str) -> None:
    """The message at the sink is the one sent, over TLS, with a VERP return path, signed."""
    message = email.message_from_bytes(received.data, policy=email.policy.default)
    check(received.rcpt_to == [RECIPIENT], f"recipients at the sink: {received.rcpt_to}")
    check(message["Subject"] == subject, f"subject at the sink: {message['Subject']!r}, sent {subject!r}")
    text = message.get_body(("plain",))
    check(text is not None and marker in text.get_content(), f"the marker {marker} is not in the body")
    check(received.tls, "the delivery did not use STARTTLS")
    check(received.mail_from.endswith(f"@bounces.{SENDER_DOMAIN}"), f"return path {received.mail_from}")
    signatures = message.get_all("DKIM-Signature") or []
    check(bool(signatures), "no DKIM-Signature")
    signers = {match.group(1) for match in (SIGNING_DOMAIN.search(str(s)) for s in signatures) if match}
    check(signers == {SENDER_DOMAIN}, f"DKIM d= {signers}, not {SENDER_DOMAIN}")
    verdicts = await threads.deferToThread(dkim_verdicts, received.data, dns_address)
    check(bool(verdicts) and all(verdicts), f"dkimpy's verdicts on the signatures: {verdicts}")
    print(f"DKIM: {len(verdicts)} signatures of d={SENDER_DOMAIN} verified by dkimpy", flush=True)


async def delivered(url: str, key: str, email_id: str) -> None:
    async def last_event():
        return (await api("GET", f"{url}/emails/{email_id}", key))["last_event"] == "delivered"

    await async_until(last_event, PATIENCE, f"email {email_id} delivered", interval=0.5)


def submit(port: int, certificate: str, key: str, subject: str, marker: str) -> str:
    """One message through SMTP submission (blocking); the id of its "queued as" reply."""
    message = EmailMessage()
    message["From"] = f"Deb <submit@{SENDER_DOMAIN}>"
    message["To"] = RECIPIENT
    message["Subject"] = subject
    message.set_content(f"Submitted over SMTP, marker {marker}.\n")
    # The daemon's self-signed certificate names 127.0.0.1: verified, not merely encrypted.
    context = ssl.create_default_context(cafile=certificate)
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
        client.starttls(context=context)
        client.login("resend", key)
        client.mail(f"submit@{SENDER_DOMAIN}")
        code, _ = client.rcpt(RECIPIENT)
        check(code == 250, f"RCPT TO answered {code}")
        code, reply = client.data(message.as_bytes())
    check(code == 250 and b"queued as " in reply, f"end of data answered {code} {reply!r}")
    return reply.decode().rsplit("queued as ", 1)[1].strip()


async def scenario(dns_server: DNSServer, sink: Sink, url: str, key: str, submission_port: int,
                   certificate: str) -> None:
    dns_server.mx(RECIPIENT_DOMAIN, f"mx.{RECIPIENT_DOMAIN}", 10)
    dns_server.a(f"mx.{RECIPIENT_DOMAIN}", "127.0.0.1")
    domain = await api("POST", f"{url}/domains", key, {"name": SENDER_DOMAIN})
    publish(dns_server, domain)
    began = time.monotonic()
    await api("POST", f"{url}/domains/{domain['id']}/verify", key)

    async def verified():
        status = (await api("GET", f"{url}/domains/{domain['id']}", key))["status"]
        check(status != "failed", f"domain verification failed: {status}")
        return status == "verified"

    await async_until(verified, PATIENCE, f"{SENDER_DOMAIN} verified", interval=0.5)
    print(f"domain verified in {time.monotonic() - began:.1f} s", flush=True)

    marker = uuid.uuid4().hex
    subject = f"Package test {marker[:8]}"
    began = time.monotonic()
    sent = await api("POST", f"{url}/emails", key, {
        "from": f"Deb <hello@{SENDER_DOMAIN}>", "to": [RECIPIENT], "subject": subject,
        "text": f"Sent by the installed package, marker {marker}.",
    })
    await sink.wait_for(1, PATIENCE)
    print(f"POST /emails reached the sink in {time.monotonic() - began:.2f} s", flush=True)
    await check_arrival(sink.messages[0], subject, marker, dns_server.address)
    await delivered(url, key, sent["id"])

    marker = uuid.uuid4().hex
    subject = f"Package test submission {marker[:8]}"
    began = time.monotonic()
    submitted = await threads.deferToThread(submit, submission_port, certificate, key, subject, marker)
    await sink.wait_for(2, PATIENCE)
    print(f"SMTP submission reached the sink in {time.monotonic() - began:.2f} s", flush=True)
    await check_arrival(sink.messages[1], subject, marker, dns_server.address)
    await delivered(url, key, submitted)
    check(len(sink.messages) == 2, f"{len(sink.messages)} messages at the sink, 2 sent")
    print("sent: 2", flush=True)


def first_line_of_stdin() -> defer.Deferred:
    """stdin's next line, read by a daemon thread: a SIGTERM while waiting still ends the process
    (a thread of the reactor's pool blocked in a read would hold up its shutdown)."""
    line: defer.Deferred = defer.Deferred()
    threading.Thread(target=lambda: reactor.callFromThread(line.callback, sys.stdin.readline()), daemon=True).start()
    return line


async def main(_reactor) -> None:
    dns_server = DNSServer()
    dns_server.start()
    sink = Sink()
    sink.start()
    try:
        print(dns_server.address, sink.port, flush=True)
        line = await first_line_of_stdin()
        check(bool(line.strip()), "no daemon to talk to (stdin closed)")
        url, key, submission_port, certificate = line.split()
        await scenario(dns_server, sink, url, key, int(submission_port), certificate)
    except (Failed, AssertionError) as failure:  # a check, or a wait that ran out
        print(f"deb_send: {failure}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    finally:
        await sink.stop()
        await dns_server.stop()


if __name__ == "__main__":
    task.react(lambda r: defer.ensureDeferred(main(r)))
