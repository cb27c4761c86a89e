"""
Sending throughput: ``POST /emails``, ``POST /emails/batch`` and SMTP submission.

Starts a node the way the daemon does (``root.build``: embedded PostgreSQL with its default
durable settings in a throw-away state directory, migrations, loops, the HTTP listener and a
STARTTLS submission listener on 127.0.0.1) in a process of its own; with ``--processes 1,2``
the measurements are repeated with a second API-only process on the same database (same master
key and operator token, its own ports). Set-up goes through the APIs: a tenant (operator API),
quotas and API rate raised (``PATCH /admin/v1/tenants/{id}``), a sending domain
(``POST /domains``); only the domain's status is set to ``verified`` directly in the database,
since verification needs public DNS. Every lookup the node makes goes to a closed loopback port.

- http: ``wrk -t1 -c64`` posting one realistic e-mail (2 KB html, 1 recipient) to ``/emails``.
- template: the same wrk, alternating in one run between a plain ``POST /emails`` with about
  10 KB of html and a templated one (``template: {id, variables}``: a published 10 KB template
  with 10 variables) that renders to the same size (the templated send may cost at
  most 10 % more server CPU per request).
- batch: ``wrk -t1 -c8`` posting 100 such e-mails (distinct recipients) to ``/emails/batch``.
- relay: Postfix's ``smtp-source`` into a throw-away Postfix instance (own config and queue
  directories) that relays over STARTTLS with SASL AUTH PLAIN to our submission port, as an
  application's local MTA does. Timed from the first message injected to the last one stored
  by mailsvc (counted in the database).
- smtp: a Python asyncio client, 32 connections, each STARTTLS + AUTH once, then messages
  (MAIL/RCPT/DATA pipelined) on the reused connection: the server without Postfix's CPU.

    bench/sending.sh                             # installs wrk and postfix if missing, then runs this
    .venv/bin/python -m bench.sending [--only http,batch,relay,smtp] [--processes 1,2] [--runs 3]
    .venv/bin/python -m bench.sending --micro   # the accept path's functions alone (timeit)
    .venv/bin/python -m bench.sending --only smtp --stages   # where each message's time goes in the servers
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

from bench import common, smtp_stages
from bench.common import Meter, Postfix, cpu_seconds, free_port, load_average, wait_for, wait_until
from bench.http_auth import parse_wrk

DOMAIN = "bench.example.com"
SENDER = f"news@{DOMAIN}"
#: A closed port on loopback: every DNS lookup of the node fails fast and stays local.
DNS = "127.0.0.1:9"
#: Set (by ``--stages``) for the server processes to time the submission's stages.
STAGES_ENV = "BENCH_SMTP_STAGES"


def html_body(n: int = 0) -> str:
    """About 2 KB of newsletter-like HTML."""
    rows = "".join(
        f'<tr><td style="padding:8px;font-family:Arial,sans-serif;font-size:14px;color:#333">'
        f"Item {i}: your order #{40000 + n * 7 + i} has shipped and will arrive soon.</td></tr>"
        for i in range(8)
    )
    return (
        '<!doctype html><html><body style="margin:0;background:#f4f4f4">'
        '<table width="100%" cellpadding="0" cellspacing="0"><tr><td align="center">'
        '<table width="600" style="background:#ffffff"><tr><td><h1 style="font-family:Arial">Hello Ann</h1>'
        f"<p>Thanks for shopping with Acme. Here is what happened to your orders this week.</p>{rows}"
        '<p><a href="https://acme.example.com/account?utm_source=mail">Your account</a></p>'
        "</td></tr></table></td></tr></table></body></html>"
    )


def email_json(n: int = 0) -> dict:
    return {
        "from": f"Acme <{SENDER}>",
        "to": [f"customer{n}@example.net"],
        "subject": f"Your orders this week ({n})",
        "html": html_body(n),
        "reply_to": f"help@{DOMAIN}",
        "tags": [{"name": "category", "value": "orders"}],
    }


# ---------------------------------------------------------------------------------------------
# The server process


def serve(state_dir: str, http_port: int, smtp_port: int) -> None:
    """A node as ``twistd mailsvc`` builds it; extra MAILSVC_* settings come from the environment."""
    if os.environ.get(STAGES_ENV):
        smtp_stages.install(Path(state_dir).parent / "stages.json")
    common.serve(state_dir, {
        "MAILSVC_HTTP_LISTEN": f"tcp:{http_port}:interface=127.0.0.1",
        "MAILSVC_SMTP_SUBMISSION": f"tcp:{smtp_port}:interface=127.0.0.1",
        "MAILSVC_DNS_SERVERS": DNS,
        "MAILSVC_MAIL_HOSTNAME": "mailsvc.bench.test",
    })


class Node(common.Node):
    """One server process, with an HTTP and a submission port; started when it answers."""

    def __init__(self, root: Path, name: str, env: dict):
        self.http, self.smtp = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.http}"
        super().__init__(root, name, "bench.sending", (str(self.http), str(self.smtp)), env)
        wait_for(self.url + "/healthz", self.process)


# ---------------------------------------------------------------------------------------------
# Measuring


def write_lua(root: Path, name: str, body: object, token: str, batch_validation: bool = False) -> Path:
    body_file = root / f"{name}.json"
    body_file.write_text(json.dumps(body))
    script = root / f"{name}.lua"
    script.write_text(
        f'local f = io.open("{body_file}", "rb")\n'
        "wrk.body = f:read(\"*a\")\nf:close()\n"
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'wrk.headers["Authorization"] = "Bearer {token}"\n'
    )
    return script


def wrk_all(urls: list[str], script: Path, connections: int, duration: int) -> list[dict]:
    """One wrk per server process, at the same time, the connections split between them."""
    share = connections // len(urls)
    procs = [
        subprocess.Popen(["wrk", "-t1", f"-c{share}", f"-d{duration}s", "--timeout", "60s", "--latency",
                          "-s", str(script), url],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for url in urls
    ]
    outputs = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"wrk failed: {err}")
        try:  # wrk pads some latency lines with a trailing space
            outputs.append(parse_wrk("\n".join(line.rstrip() for line in out.splitlines())))
        except (KeyError, AttributeError):
            raise SystemExit(f"cannot read wrk's output:\n{out}") from None
    return outputs


def http_round(nodes: list[Node], data_dir: Path, script: Path, path: str, connections: int,
               duration: int, per_request: int) -> dict:
    meter = Meter([n.pid for n in nodes], data_dir)
    meter.start()
    parts = wrk_all([n.url + path for n in nodes], script, connections, duration)
    m = meter.done()
    rps = sum(p["rps"] for p in parts)
    requests = sum(p["requests"] for p in parts)
    return {
        "rps": rps, "emails_s": rps * per_request,
        "p50": max(p["p50"] for p in parts), "p99": max(p["p99"] for p in parts),
        "non_2xx": sum(p["non_2xx"] for p in parts),
        "errors": "; ".join(p["socket_errors"] for p in parts if p["socket_errors"]),
        "server_cpu": m["cpu_s"] / m["elapsed"],
        "cpu_us": m["cpu_s"] / (requests * per_request) * 1e6,
        "pg_cpu": m["pg_cpu"],
    }


def count_smtp(db) -> int:
    with db.cursor() as cur:
        cur.execute("SELECT count(*) FROM emails WHERE source = 'smtp'")
        return cur.fetchone()[0]


# ---------------------------------------------------------------------------------------------
# SMTP: the throw-away Postfix relay


class Relay(Postfix):
    """
    The throw-away Postfix instance: smtpd on a loopback port for smtp-source, and an smtp
    client that relays every message to mailsvc's submission port(s) with STARTTLS required and
    SASL AUTH PLAIN (the tenant's API key), ``connections`` of them in all. TLS connections
    are reused (``smtp_tls_connection_reuse``, through Postfix's tlsproxy), as a relay to one
    smarthost is configured: without it Postfix opens a new TLS session, EHLO and AUTH for
    every message (189 msg/s here, against 391 with it).
    """

    def __init__(self, root: Path, smtp_ports: list[int], token: str, connections: int):
        if len(smtp_ports) == 1:
            routing = f"relayhost = [127.0.0.1]:{smtp_ports[0]}"
        else:  # one recipient domain per mailsvc process
            pairs = ", ".join(f"r{i}.example.net=smtp:[127.0.0.1]:{p}" for i, p in enumerate(smtp_ports))
            routing = f"transport_maps = inline:{{{pairs}}}"
        data = root / "postfix" / "data"
        super().__init__(root, f"""
{routing}
smtp_sasl_auth_enable = yes
smtp_sasl_password_maps = static:mailsvc:{token}
smtp_sasl_security_options = noanonymous
smtp_sasl_tls_security_options = noanonymous
smtp_sasl_mechanism_filter = plain
smtp_tls_security_level = encrypt
smtp_tls_session_cache_database = btree:{data}/smtp_scache
smtp_tls_connection_reuse = yes
default_destination_recipient_limit = 50
""", connections // len(smtp_ports))

    def statuses(self) -> dict[str, int]:
        text = self.log.read_text() if self.log.exists() else ""
        counts: dict[str, int] = {}
        for status in re.findall(r"relay=\S+, .*? status=(\w+)", text):
            counts[status] = counts.get(status, 0) + 1
        return counts


def smtp_source(port: int, count: int, sessions: int, size: int, recipient: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["smtp-source", "-s", str(sessions), "-m", str(count), "-l", str(size), "-f", SENDER,
         "-t", recipient, "-S", "Your orders this week", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


def relay_round(nodes, data_dir, relay: Relay, db, count: int, sessions: int, size: int) -> dict:
    recipients = ["customer@example.net"] if len(nodes) == 1 else [f"customer@r{i}.example.net"
                                                                    for i in range(len(nodes))]
    start_count = count_smtp(db)
    meter = Meter([n.pid for n in nodes], data_dir, others=relay.pids)
    meter.start()
    share = count // len(recipients)
    procs = [smtp_source(relay.port, share, sessions // len(recipients), size, r) for r in recipients]
    for p in procs:
        _, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"smtp-source failed: {err}")
    injected = time.monotonic() - meter.started
    total = share * len(recipients)
    complete = wait_until(lambda: count_smtp(db) >= start_count + total, 120)
    m = meter.done()
    stored = count_smtp(db) - start_count
    return {
        "messages": stored, "complete": complete, "injected_s": injected, "seconds": m["elapsed"],
        "rate": stored / m["elapsed"], "server_cpu": m["cpu_s"] / m["elapsed"],
        "cpu_us": m["cpu_s"] / max(stored, 1) * 1e6, "pg_cpu": m["pg_cpu"], "postfix_cpu": m["other_cpu"],
    }


# ---------------------------------------------------------------------------------------------
# SMTP: a direct client (STARTTLS + AUTH once per connection, pipelined MAIL/RCPT/DATA)


def rfc5322(n: int) -> bytes:
    html = html_body(n)
    head = (f"From: Acme <{SENDER}>\r\nTo: <customer{n}@example.net>\r\nSubject: Your orders this week\r\n"
            "MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n")
    lines = [html[i:i + 76] for i in range(0, len(html), 76)]
    body = "\r\n".join("." + line if line.startswith(".") else line for line in lines)
    return (head + body + "\r\n.\r\n").encode()


async def _reply(reader) -> tuple[int, str]:
    lines = []
    while True:
        line = await reader.readline()
        if not line:
            raise ConnectionError("connection closed")
        lines.append(line.decode())
        if line[3:4] != b"-":
            return int(line[:3]), "".join(lines)


async def _expect(reader, code: int) -> None:
    got, text = await _reply(reader)
    if got != code:
        raise RuntimeError(f"expected {code}, got {text.strip()}")


async def _session(port: int, token: str, jobs: asyncio.Queue, done: list[int], waited: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await _expect(reader, 220)
    writer.write(b"EHLO client.bench.test\r\n")
    await _expect(reader, 250)
    writer.write(b"STARTTLS\r\n")
    await _expect(reader, 220)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    await writer.start_tls(context)
    writer.write(b"EHLO client.bench.test\r\n")
    await _expect(reader, 250)
    writer.write(b"AUTH PLAIN " + base64.b64encode(b"\0mailsvc\0" + token.encode()) + b"\r\n")
    await _expect(reader, 235)
    while True:
        try:
            n = jobs.get_nowait()
        except asyncio.QueueEmpty:
            break
        writer.write(f"MAIL FROM:<{SENDER}>\r\nRCPT TO:<customer{n}@example.net>\r\nDATA\r\n".encode())
        await _expect(reader, 250)
        await _expect(reader, 250)
        await _expect(reader, 354)
        writer.write(rfc5322(n))
        sent = time.perf_counter()
        await _expect(reader, 250)
        waited[0] += time.perf_counter() - sent
        done[0] += 1
    writer.write(b"QUIT\r\n")
    await _reply(reader)
    writer.close()


async def direct_smtp(ports: list[int], token: str, count: int, connections: int) -> float:
    """Mean seconds from a message's end written to its 250 read, as the client sees them."""
    jobs: asyncio.Queue = asyncio.Queue()
    for n in range(count):
        jobs.put_nowait(n)
    done, waited = [0], [0.0]
    await asyncio.gather(*(_session(ports[i % len(ports)], token, jobs, done, waited) for i in range(connections)))
    return waited[0] / max(done[0], 1)


def stages_of(nodes: list[Node]) -> dict | None:
    """The servers' stage means since the last call (``--stages``), weighted by their messages; else None."""
    if not os.environ.get(STAGES_ENV):
        return None
    files = [n.dir / "stages.json" for n in nodes]
    for node, file in zip(nodes, files, strict=True):
        file.unlink(missing_ok=True)
        node.process.send_signal(signal.SIGUSR1)
    wait_until(lambda: all(f.exists() for f in files), 10)
    parts = [json.loads(f.read_text()) for f in files]
    messages = sum(p["messages"] for p in parts)
    means = {name: sum(p["means_us"][name] * p["messages"] for p in parts) / max(messages, 1)
             for name, _ in smtp_stages.STAGES}
    groups = sum(p["groups"] for p in parts)
    statements = sum(p["limit_statements"] for p in parts)
    return {"means_us": means, "group_mean": sum(p["group_mean"] * p["groups"] for p in parts) / max(groups, 1),
            "limit_per_message": statements / max(messages, 1),
            "limit_waits": sum(p["limit_waits"] for p in parts) / max(messages, 1),
            "limit_statement_us": sum(p["limit_statement_us"] * p["limit_statements"] for p in parts)
            / max(statements, 1)}


def smtp_round(nodes, data_dir, token: str, count: int, connections: int, db) -> dict:
    start_count = count_smtp(db)
    stages_of(nodes)  # from here
    meter = Meter([n.pid for n in nodes], data_dir)
    meter.start()
    client_before = cpu_seconds([os.getpid()])
    client_wait = asyncio.run(direct_smtp([n.smtp for n in nodes], token, count, connections))
    m = meter.done()
    stored = count_smtp(db) - start_count
    return {
        "messages": stored, "complete": stored == count, "seconds": m["elapsed"], "rate": stored / m["elapsed"],
        "server_cpu": m["cpu_s"] / m["elapsed"], "cpu_us": m["cpu_s"] / max(stored, 1) * 1e6,
        "pg_cpu": m["pg_cpu"], "client_cpu": (cpu_seconds([os.getpid()]) - client_before) / m["elapsed"],
        "client_wait_us": client_wait * 1e6, "stages": stages_of(nodes),
    }


def stage_lines(r: dict) -> str:
    """The run's stages (``--stages``), µs a message, under its row."""
    lines = [f"      '.' written to 250 read, as the client sees it: {r['client_wait_us']:,.0f} µs"]
    stages = r["stages"]
    if stages is not None:
        lines.append(f"      server, µs a message (wall; {stages['group_mean']:.1f} messages a group commit):")
        lines += [f"        {name:17} {stages['means_us'][name]:>9,.0f}  {what}" for name, what in smtp_stages.STAGES]
        lines.append(f"      rate limit statements: {stages['limit_per_message']:.2f} a message, "
                     f"{stages['limit_statement_us']:,.0f} µs each (sent to answered); "
                     f"{stages['limit_waits']:.0%} of the messages waited over 1 ms on the rate limit")
    return "\n" + "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Micro-benchmarks: the accept path's functions alone, on the message of the HTTP benchmark


def micro() -> None:
    """Each function of the accept path alone, one core, best of 5 repeats (``--micro``)."""
    import timeit
    from datetime import UTC, datetime

    from mailsvc.domain.email import submission_from_json
    from mailsvc.mail import dkim, mime
    from mailsvc.smtp import message as intake

    now = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    body = email_json(3)
    submission = submission_from_json(body, now)
    pairs = [dkim.generate("rsa1", dkim.RSA), dkim.generate("ed1", dkim.ED25519)]
    signers = [dkim.Signer(p.selector, p.algorithm, dkim.load_private_key(p.private_der)) for p in pairs]
    message = mime.build(submission, message_id=f"<m1@{DOMAIN}>", date=now)
    raw = rfc5322(3)[:-3]  # without the SMTP end of data
    cases = {
        "domain.email.submission_from_json": lambda: submission_from_json(body, now),
        "mail.mime.text_from_html": lambda: mime.text_from_html(submission.html),
        "mail.mime.build": lambda: mime.build(submission, message_id=f"<m1@{DOMAIN}>", date=now),
        "mail.mime.build_with_email_package (the former build)":
            lambda: mime.build_with_email_package(submission, message_id=f"<m1@{DOMAIN}>", date=now),
        "mail.dkim.sign (rsa-sha256 + ed25519-sha256)": lambda: dkim.sign(message, DOMAIN, signers),
        "mail.dkim.sign, rsa-sha256 only": lambda: dkim.sign(message, DOMAIN, signers[:1]),
        "smtp.message.submission_from_message": lambda: intake.submission_from_message(raw, ["customer3@example.net"]),
    }
    print(f"load {load_average()}; best of 5 repeats, one core")
    for name, function in cases.items():
        timer = timeit.Timer(function)
        number, _ = timer.autorange()
        print(f"{name:55s} {min(timer.repeat(5, number)) / number * 1e6:9.1f} µs", flush=True)


# ---------------------------------------------------------------------------------------------
# Templates

TEMPLATE_VARIABLES = [f"V{i}" for i in range(10)]


def template_html(values: dict[str, str] | None = None) -> str:
    """About 10 KB of html with 10 placeholders (each used twice), or the same filled in."""
    def v(i: int) -> str:
        return values[f"V{i}"] if values is not None else "{{{V" + str(i) + "}}}"

    rows = "".join(
        f'<tr><td style="padding:8px;font-family:Arial,sans-serif;font-size:14px;color:#333">'
        f"Line {i} for {v(i % 10)}: your order #{40000 + i} has shipped and will arrive on {v((i + 3) % 10)}.</td></tr>"
        for i in range(58)
    )
    return ('<!doctype html><html><body style="margin:0;background:#f4f4f4"><table width="600"><tr><td>'
            f"<h1>Hello {v(0)}</h1>{rows}</td></tr></table></body></html>")


TEMPLATE_VALUES = {name: f"value {i} for this customer" for i, name in enumerate(TEMPLATE_VARIABLES)}


def templated_json() -> dict:
    return {"to": ["customer@example.net"], "template": {"id": "bench-receipt", "variables": TEMPLATE_VALUES}}


def plain_like_templated_json() -> dict:
    return {"from": f"Acme <{SENDER}>", "to": ["customer@example.net"], "subject": "Your receipt",
            "html": template_html(TEMPLATE_VALUES)}


def publish_template(url: str, key: str) -> None:
    common.api(f"{url}/templates", "POST", key, {
        "name": "Bench receipt", "alias": "bench-receipt", "from": f"Acme <{SENDER}>", "subject": "Your receipt",
        "html": template_html(), "variables": [{"key": k, "type": "string"} for k in TEMPLATE_VARIABLES]})
    common.api(f"{url}/templates/bench-receipt/publish", "POST", key, {})


# ---------------------------------------------------------------------------------------------


def rounds(runs: list[dict], count: int, row, measure, *args) -> None:
    """``count`` measurements (``measure(*args)``), each kept in ``runs`` and printed as a numbered ``row``."""
    for run in range(1, count + 1):
        r = measure(*args)
        runs.append(r)
        print(f"{run:>3} {row(r)}", flush=True)


def incomplete(r: dict) -> str:
    return "" if r["complete"] else "  INCOMPLETE"


def summary(name: str, unit: str, key: str, runs: list[dict], extra=lambda r: "") -> str:
    best = max(runs, key=lambda r: r[key])
    values = [r[key] for r in runs]
    return (f"{name}: best {best[key]:,.0f} {unit}{extra(best)}; spread {min(values):,.0f}-{max(values):,.0f} "
            f"over {len(runs)} runs")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--only", default="http,template,batch,relay,smtp")
    parser.add_argument("--processes", default="1,2", help="server process counts to measure, e.g. 1 or 1,2")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk round")
    parser.add_argument("--connections", type=int, default=64, help="wrk connections for POST /emails")
    parser.add_argument("--batch-connections", type=int, default=8)
    parser.add_argument("--batch-duration", type=int, default=30, help="seconds per batch round")
    parser.add_argument("--messages", type=int, default=3000, help="messages per SMTP round")
    parser.add_argument("--sessions", type=int, default=64, help="smtp-source sessions")
    parser.add_argument("--smtp-connections", type=int, default=32, help="direct client connections")
    parser.add_argument("--relay-connections", type=int, default=64, help="the Postfix relay's connections to mailsvc")
    parser.add_argument("--keep", action="store_true", help="leave the servers up (for profiling); Enter stops")
    parser.add_argument("--micro", action="store_true", help="time the accept path's functions alone, then stop")
    parser.add_argument("--stages", action="store_true", help="time the SMTP submission's stages in the servers")
    parser.add_argument("--serve", nargs=3, metavar=("STATE_DIR", "HTTP", "SMTP"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), int(args.serve[2]))
        return
    if args.micro:
        micro()
        return
    if args.stages:
        os.environ[STAGES_ENV] = "1"  # the server processes inherit it
    only = set(args.only.split(","))
    counts = [int(c) for c in args.processes.split(",")]
    common.require(tuple(tool for tool, needed in (("wrk", {"http", "batch"}), ("smtp-source", {"relay"}),
                                                   ("postfix", {"relay"})) if only & needed), "bench/sending.sh")

    root = common.scratch_dir("mailsvc-bench-sending-")
    nodes: list[Node] = []
    relay: Relay | None = None
    db = None
    data_dir = root / "n1" / "state" / "postgresql" / "data"
    try:
        # No delivery role: what is measured is accepting; nothing leaves the machine.
        nodes.append(Node(root, "n1", {"MAILSVC_NODE_ROLES": "api,webhooks,scheduler"}))
        tenant = common.tenant_with_domain(nodes[0].url, nodes[0].state, DOMAIN, {
            "api_rate_per_sec": 1_000_000, "daily_quota": 1_000_000_000, "monthly_quota": 1_000_000_000})
        key, db = tenant.key, tenant.db
        second_env = {**tenant.shared_env, "MAILSVC_NODE_ROLES": "api"}
        one = write_lua(root, "one", email_json(), key)
        batch = write_lua(root, "batch", [email_json(n) for n in range(100)], key)
        publish_template(nodes[0].url, key)
        plain10 = write_lua(root, "plain10k", plain_like_templated_json(), key)
        templated = write_lua(root, "templated10k", templated_json(), key)
        print(f"{os.cpu_count()} cores; server, PostgreSQL (durable defaults) and load generators share them; "
              f"load {load_average()}", flush=True)
        results: dict[str, list[dict]] = {}

        for procs in counts:
            while len(nodes) < procs:
                nodes.append(Node(root, f"n{len(nodes) + 1}", second_env))
            active = nodes[:procs]
            label = f"{procs} process{'es' if procs > 1 else ''}"
            if "http" in only:
                wrk_all([n.url + "/emails" for n in active], one, args.connections, 3)  # warm-up
                print(f"\nPOST /emails, wrk -t1 -c{args.connections} -d{args.duration}s, {label}")
                print(f"{'run':>3} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'non-2xx':>8} {'srv CPU':>8} "
                      f"{'CPU µs/req':>10} {'pg CPU':>7}")
                rounds(results.setdefault(f"POST /emails ({label})", []), args.runs,
                       lambda r: f"{r['rps']:>8.0f} {r['p50']:>7.2f} {r['p99']:>7.2f} {r['non_2xx']:>8} "
                                 f"{r['server_cpu']:>8.0%} {r['cpu_us']:>10.0f} {r['pg_cpu']:>7.0%} {r['errors']}",
                       http_round, active, data_dir, one, "/emails", args.connections, args.duration, 1)
            if "template" in only:
                print(f"\nPOST /emails with 10 KB html, plain then templated (10 variables), alternating, "
                      f"wrk -t1 -c{args.connections} -d{args.duration}s, {label}")
                print(f"{'run':>3} {'kind':>9} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'non-2xx':>8} "
                      f"{'srv CPU':>8} {'CPU µs/req':>10} {'pg CPU':>7}")
                for script in (plain10, templated):
                    wrk_all([n.url + "/emails" for n in active], script, args.connections, 3)  # warm-up
                for run in range(1, args.runs + 1):
                    for kind, script in (("plain", plain10), ("templated", templated)):
                        r = http_round(active, data_dir, script, "/emails", args.connections, args.duration, 1)
                        results.setdefault(f"POST /emails 10 KB {kind} ({label})", []).append(r)
                        print(f"{run:>3} {kind:>9} {r['rps']:>8.0f} {r['p50']:>7.2f} {r['p99']:>7.2f} "
                              f"{r['non_2xx']:>8} {r['server_cpu']:>8.0%} {r['cpu_us']:>10.0f} "
                              f"{r['pg_cpu']:>7.0%} {r['errors']}", flush=True)
                plain_cpu = min(r["cpu_us"] for r in results[f"POST /emails 10 KB plain ({label})"])
                templated_cpu = min(r["cpu_us"] for r in results[f"POST /emails 10 KB templated ({label})"])
                print(f"templated / plain server CPU per request (best runs): {templated_cpu / plain_cpu:.2f}"
                      " (target: at most 1.10)", flush=True)
            if "batch" in only:
                wrk_all([n.url + "/emails/batch" for n in active], batch, args.batch_connections, 5)
                print(f"\nPOST /emails/batch (100 emails), wrk -t1 -c{args.batch_connections} "
                      f"-d{args.batch_duration}s, {label}")
                print(f"{'run':>3} {'req/s':>8} {'emails/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'non-2xx':>8} "
                      f"{'srv CPU':>8} {'CPU µs/email':>12} {'pg CPU':>7}")
                rounds(results.setdefault(f"POST /emails/batch ({label})", []), args.runs,
                       lambda r: f"{r['rps']:>8.1f} {r['emails_s']:>9.0f} {r['p50']:>7.1f} {r['p99']:>7.1f} "
                                 f"{r['non_2xx']:>8} {r['server_cpu']:>8.0%} {r['cpu_us']:>12.0f} "
                                 f"{r['pg_cpu']:>7.0%} {r['errors']}",
                       http_round, active, data_dir, batch, "/emails/batch", args.batch_connections,
                       args.batch_duration, 100)
            if "relay" in only:
                if relay is not None:
                    relay.stop()
                    shutil.rmtree(relay.dir, ignore_errors=True)
                relay = Relay(root, [n.smtp for n in active], key, args.relay_connections)
                relay.start()
                relay_round(active, data_dir, relay, db, 500, args.sessions, 2000)  # warm-up
                print(f"\nsmtp-source -s {args.sessions} -m {args.messages} -l 2000 -> Postfix relay "
                      f"(STARTTLS + AUTH) -> submission, {label}")
                print(f"{'run':>3} {'stored':>7} {'inject s':>8} {'total s':>8} {'msg/s':>7} {'srv CPU':>8} "
                      f"{'CPU µs/msg':>10} {'pg CPU':>7} {'postfix CPU':>11}")
                rounds(results.setdefault(f"smtp-source via Postfix relay ({label})", []), args.runs,
                       lambda r: f"{r['messages']:>7} {r['injected_s']:>8.2f} {r['seconds']:>8.2f} "
                                 f"{r['rate']:>7.0f} {r['server_cpu']:>8.0%} {r['cpu_us']:>10.0f} "
                                 f"{r['pg_cpu']:>7.0%} {r['postfix_cpu']:>11.0%}{incomplete(r)}",
                       relay_round, active, data_dir, relay, db, args.messages, args.sessions, 2000)
                print(f"    relay outcomes so far: {relay.statuses()}")
            if "smtp" in only:
                smtp_round(active, data_dir, key, 500, args.smtp_connections, db)  # warm-up
                print(f"\ndirect SMTP client, {args.smtp_connections} connections (STARTTLS + AUTH once each), "
                      f"{args.messages} messages, {label}")
                print(f"{'run':>3} {'stored':>7} {'seconds':>8} {'msg/s':>7} {'srv CPU':>8} {'CPU µs/msg':>10} "
                      f"{'pg CPU':>7} {'client CPU':>10}")
                rounds(results.setdefault(f"direct SMTP client ({label})", []), args.runs,
                       lambda r: f"{r['messages']:>7} {r['seconds']:>8.2f} {r['rate']:>7.0f} "
                                 f"{r['server_cpu']:>8.0%} {r['cpu_us']:>10.0f} {r['pg_cpu']:>7.0%} "
                                 f"{r['client_cpu']:>10.0%}{incomplete(r)}{stage_lines(r)}",
                       smtp_round, active, data_dir, key, args.messages, args.smtp_connections, db)

        print()
        failed = False
        for name, runs in results.items():
            if name.startswith("POST /emails/batch"):
                print(summary(name, "emails/s", "emails_s", runs, lambda r: f" (p99 {r['p99']:.0f} ms)"))
            elif name.startswith("POST /emails"):
                print(summary(name, "req/s", "rps", runs,
                              lambda r: f" (p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms)"))
            else:
                print(summary(name, "msg/s", "rate", runs))
            failed |= any(r.get("non_2xx") or r.get("errors") or r.get("complete") is False for r in runs)
        if args.keep:
            print("servers:", {n.process.pid: (n.url, n.smtp) for n in nodes}, "- press Enter to stop")
            sys.stdin.readline()
        if failed:
            raise SystemExit("some requests failed or messages were not stored; the figures are not valid")
    finally:
        if db is not None:
            db.close()
        if relay is not None:
            relay.stop()
        for node in reversed(nodes):
            node.stop(owner=node is nodes[0])
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
