"""
Delivery throughput: accepted e-mail (``POST /emails/batch``, DKIM-signed at
acceptance) to delivered at a Postfix ``smtp-sink`` on loopback, with every outcome and its
``email.delivered`` event written; beside it, Postfix relaying the same number of messages to
the same sink; and the daemon's RSS with a million deliveries queued.

Processes (each stopped at the end): an API node (roles api,scheduler) that owns an embedded
PostgreSQL cluster with its default durable settings in a throw-away directory; 1 or 2
delivery nodes (role delivery, same database and master key); a loopback DNS server
(tests/helpers/dnsserver.py: MX of example.net → mx.example.net → 127.0.0.1); ``smtp-sink -c``.

- phase: N messages accepted while no delivery node runs, then the delivery nodes start; timed
  from the first message at the sink to the last outcome written (all N ``delivered``).
- overlap: delivery nodes already running; timed from the first POST to all N delivered.
- postfix: a throw-away Postfix instance (own config and queue directories; smtpd on loopback,
  ``relayhost`` the sink). Its "phase" variant injects N with ``defer_transports = smtp`` (all
  queued), then lifts it and flushes: timed until the sink counted N. Its "overlap" variant:
  ``smtp-source`` → smtpd → smtp → sink, timed from the first message injected. bench/ab.py
  also runs it with an ``OpenDKIM`` milter signing every message.
- rss (``--rss 1000000``): deliveries inserted with generate_series for a tenant (1,000 per
  e-mail), one delivery node running against a sink that answers every RCPT with 450: RSS of
  the node sampled while it claims, tries and defers.

    bench/delivery.sh                       # installs postfix if missing, then runs this
    .venv/bin/python -m bench.delivery [--messages 20000] [--runs 3] [--nodes 1,2] [--rss 1000000]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from bench import common
from bench.common import ROOT, Meter, free_port, load_average, wait_until

DOMAIN = "bench.example.com"
RCPT_DOMAIN = "example.net"
BATCH = 100
#: The A/B's message size (5 KB as mailsvc's leave, signed twice): what its Postfix baselines relay.
SIZE_5KB = 5120


# ---------------------------------------------------------------------------------------------
# Child processes


def serve(state_dir: str) -> None:
    """A node as ``twistd mailsvc`` builds it; MAILSVC_* settings come from the environment."""
    common.serve(state_dir, {})


def serve_dns() -> None:
    """The tests' loopback DNS server with the recipients' MX; prints its port."""
    from twisted.internet import reactor

    from tests.helpers.dnsserver import DNSServer

    server = DNSServer()
    server.start()
    server.mx(RCPT_DOMAIN, f"mx.{RCPT_DOMAIN}", 10)
    server.a(f"mx.{RCPT_DOMAIN}", "127.0.0.1")
    print(server.port, flush=True)
    reactor.run()


def start_node(root: Path, name: str, env: dict) -> common.Node:
    return common.Node(root, name, "bench.delivery", env=env)


class Sink:
    """``smtp-sink -c`` on a loopback port; its running counter is read from its output."""

    def __init__(self, root: Path, *options: str):
        self.port = free_port()
        self.out = root / f"sink-{self.port}.out"
        with open(self.out, "wb") as out:
            self.process = subprocess.Popen(
                ["smtp-sink", "-c", "-u", "nobody", *options, f"127.0.0.1:{self.port}", "1024"],
                stdout=out, stderr=subprocess.STDOUT)
        time.sleep(0.3)

    def count(self) -> int:
        with open(self.out, "rb") as f:
            f.seek(max(0, self.out.stat().st_size - 200))
            found = re.findall(rb"mesg=(\d+)", f.read())
        return int(found[-1]) if found else 0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()


class OpenDKIM:
    """
    A throw-away OpenDKIM signer (``Mode s``, in the foreground) for the
    signing Postfix baseline: an RSA-2048 key of its own from ``opendkim-genkey`` for DOMAIN,
    its milter on a Unix socket in ``root`` that Postfix's smtpd (user postfix) can reach.
    ``RequireSafeKeys false``: the scratch directory is under /tmp, which others may write,
    and OpenDKIM refuses a key there otherwise.
    """

    selector = "bench"

    def __init__(self, root: Path):
        self.dir = root / "opendkim"
        self.dir.mkdir()
        subprocess.run(["opendkim-genkey", "-b", "2048", "-d", DOMAIN, "-s", self.selector, "-D", str(self.dir)],
                       check=True)
        key = self.dir / f"{self.selector}.private"
        for path in (self.dir, key):  # its user reads the key (0600)
            shutil.chown(path, "opendkim", "opendkim")
        self.dir.chmod(0o755)
        self.socket = self.dir / "milter.sock"
        conf = self.dir / "opendkim.conf"
        conf.write_text(f"""Mode s
Domain {DOMAIN}
Selector {self.selector}
KeyFile {key}
Canonicalization relaxed/relaxed
Socket local:{self.socket}
UMask 0000
UserID opendkim
Syslog no
RequireSafeKeys false
""")
        with open(self.dir / "opendkim.log", "wb") as log:
            self.process = subprocess.Popen(["opendkim", "-f", "-x", str(conf)], stdout=log, stderr=subprocess.STDOUT)
        if not wait_until(lambda: self.socket.exists() or self.process.poll() is not None, 20, 0.05) \
                or self.process.poll() is not None:
            raise SystemExit(f"opendkim did not start: {(self.dir / 'opendkim.log').read_text()[-500:]}")

    def txt(self) -> bytes:
        """The key's DNS TXT record, as opendkim-genkey wrote it (its quoted strings joined)."""
        zone = (self.dir / f"{self.selector}.txt").read_text()
        return "".join(re.findall(r'"([^"]*)"', zone)).encode()

    def verify(self, message: bytes) -> str:
        """dkimpy's verdict on ``message`` against our key: its signature described, or SystemExit."""
        import dkim
        from dkim.util import parse_tag_value

        head = message.split(b"\n\n", 1)[0]
        found = re.search(rb"^DKIM-Signature:(.*(?:\r?\n[ \t].*)*)", head, re.M | re.I)
        if not found:
            raise SystemExit("the signing Postfix delivered a message without a DKIM-Signature")
        tags = parse_tag_value(found.group(1).strip())
        bits = len(base64.b64decode(re.sub(rb"\s", b"", tags[b"b"]))) * 8
        dns = {f"{self.selector}._domainkey.{DOMAIN}.".encode(): self.txt()}
        if tags[b"a"] != b"rsa-sha256" or bits != 2048 or not dkim.verify(
                message, dnsfunc=lambda name, timeout=5: dns.get(name)):
            raise SystemExit(f"the message's DKIM-Signature does not verify as RSA-2048: {found.group(0)!r}")
        return f"a={tags[b'a'].decode()}, d={tags[b'd'].decode()}, s={tags[b's'].decode()}, {bits}-bit: verified"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        common.terminate(self.process)


class Postfix(common.Postfix):
    """
    The throw-away Postfix instance, relaying everything to the sink; with ``milter``, its smtpd
    has every message signed by it, and refuses (4xx) what it could not have signed.
    """

    def __init__(self, root: Path, sink_port: int, concurrency: int, milter: OpenDKIM | None = None):
        routing = f"relayhost = [127.0.0.1]:{sink_port}"
        if milter is not None:
            routing += f"\nsmtpd_milters = unix:{milter.socket}\nmilter_default_action = tempfail"
        super().__init__(root, routing, concurrency)
        self.milter = milter

    def pids(self) -> list[int]:
        """The master and its children, and the milter."""
        return super().pids() + ([self.milter.pid] if self.milter is not None else [])

    def set(self, setting: str) -> None:
        self.run("postconf", "-e", setting)
        self.run("postfix", "reload")
        time.sleep(0.5)

    def queued(self) -> int:
        return sum(1 for d in ("incoming", "active", "deferred", "maildrop") for p in (self.spool / d).rglob("*")
                   if p.is_file())


def smtp_source(postfix: Postfix, count: int, size: int) -> list[str]:
    """20 sessions, one message of ``size`` bytes per session, a distinct recipient each."""
    return ["smtp-source", "-s", "20", "-m", str(count), "-l", str(size), "-N", "-f", f"news@{DOMAIN}",
            "-t", f"customer@{RCPT_DOMAIN}", f"127.0.0.1:{postfix.port}"]


def check_signing(postfix: Postfix, sink: Sink) -> str:
    """
    One message relayed to a sink that keeps it (``smtp-sink -d``) and checked by the milter's
    verify(); then Postfix relays to ``sink`` again.
    """
    kept = postfix.dir.parent / "kept"
    kept.mkdir()
    kept.chmod(0o777)  # the sink writes as nobody
    keeping = Sink(postfix.dir.parent, "-d", f"{kept}/message.")
    try:
        postfix.set(f"relayhost = [127.0.0.1]:{keeping.port}")
        subprocess.run(smtp_source(postfix, 1, SIZE_5KB), check=True)
        wait_until(lambda: keeping.count() >= 1 and postfix.queued() == 0, 60, 0.05)
        messages = list(kept.iterdir())
        if not messages:
            raise SystemExit("the signing Postfix delivered nothing to the sink that keeps messages")
        return postfix.milter.verify(messages[0].read_bytes())
    finally:
        postfix.set(f"relayhost = [127.0.0.1]:{sink.port}")
        keeping.stop()


def relay_through_postfix(postfix: Postfix, sink: Sink, count: int, size: int) -> dict:
    """
    Postfix end to end (the "overlap" variant): ``smtp-source`` → smtpd → queue → smtp → sink,
    timed from the first message injected until the sink counted ``count``; started once the
    queue is empty and the machine has settled.
    """
    wait_until(lambda: postfix.queued() == 0, 120, 0.1)
    common.settle()
    base = sink.count()
    meter = Meter([], others=postfix.pids)
    meter.start()
    injecting = subprocess.Popen(smtp_source(postfix, count, size))
    wait_until(lambda: sink.count() >= base + count or injecting.poll() not in (None, 0), 1800, 0.02)
    m = meter.done()
    if injecting.wait():  # refused, as when the milter is gone (milter_default_action = tempfail)
        raise SystemExit(f"smtp-source exited with {injecting.returncode}: Postfix refused a message (above)")
    return {"kind": "overlap", "elapsed": m["elapsed"], "rate": (sink.count() - base) / m["elapsed"],
            "cpu": m["other_cpu"], "sink": sink.count() - base, "box_cpu_us": m["box_cpu_s"] / count * 1e6}


# ---------------------------------------------------------------------------------------------
# The benchmark


def email_json(n: int, rows: int = 8) -> dict:
    """
    About 1 KB of HTML plus 100 bytes a row; the message, with its text part and two DKIM
    signatures: 3.4 KB for 8 rows, 5.2 KB for 18.
    """
    items = "".join(f"<tr><td style=\"padding:8px;font-family:Arial\">Item {i}: order #{40000 + n * 7 + i}"
                    " has shipped and will arrive soon.</td></tr>" for i in range(rows))
    return {"from": f"Acme <news@{DOMAIN}>", "to": [f"customer{n}@{RCPT_DOMAIN}"],
            "subject": f"Your orders this week ({n})", "reply_to": f"help@{DOMAIN}",
            "html": f"<html><body><h1>Hello</h1><p>Thanks for shopping with Acme.</p><table>{items}</table>"
                    "<p><a href=\"https://acme.example.com/account\">Your account</a></p></body></html>"}


def signed_size(rows: int) -> int:
    """The size of ``email_json(n, rows)``'s message as it reaches the sink, DKIM-signed twice
    (measured by bench/storage.py: 3.4 KB for 8 rows, 5.1-5.2 KB for 18); messages are no longer
    stored built, so the Postfix baseline's messages are given this size."""
    return 1_960 + 180 * rows


class Bench:
    """
    ``start_api(root, name, env)`` starts the API node and ``start_deliverer`` each delivery
    node (a server process of this module by default; bench/ab.py passes ones that start a
    node of several processes); ``sink(root)`` the sink they deliver to (``smtp-sink -c`` by
    default; bench/soak.py passes one that logs Message-IDs).
    """

    def __init__(self, args, start_api=start_node, prefix: str = "mailsvc-bench-delivery-", env: dict | None = None,
                 start_deliverer=start_node, sink=Sink):
        self.args = args
        self.make_sink = sink
        self.start_api = start_api
        self.start_deliverer = start_deliverer
        self.extra_env = env or {}
        self.root = common.scratch_dir(prefix)
        self.nodes: list[common.Node] = []
        self.api: common.Node | None = None
        self.sinks: list[Sink] = []
        self.dns: subprocess.Popen | None = None
        self.postfix: Postfix | None = None
        self.tenant: common.Tenant | None = None
        self.runs = 0

    def setup(self) -> None:
        self.dns = subprocess.Popen([sys.executable, "-m", "bench.delivery", "--serve-dns"], cwd=ROOT,
                                    env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, text=True)
        dns_port = int(self.dns.stdout.readline())
        self.sink = self.make_sink(self.root)
        self.sinks.append(self.sink)
        self.common = {
            "MAILSVC_DNS_SERVERS": f"127.0.0.1:{dns_port}",
            "MAILSVC_DELIVERY_PORT": str(self.sink.port),
            "MAILSVC_DELIVERY_PER_DESTINATION": str(self.args.per_destination),
            "MAILSVC_SECURITY_ALLOW_PRIVATE_TARGETS": "true",
            "MAILSVC_MAIL_HOSTNAME": "mailsvc.bench.test",
            "MAILSVC_SMTP_SUBMISSION": "",
            "MAILSVC_SMTP_INBOUND": "tcp:0:interface=127.0.0.1",
            **self.extra_env,
        }
        http = free_port()
        self.url = f"http://127.0.0.1:{http}"
        self.api = self.start_api(self.root, "api", {**self.common, "MAILSVC_NODE_ROLES": "api,scheduler",
                                                 "MAILSVC_HTTP_LISTEN": f"tcp:{http}:interface=127.0.0.1"})
        self.api.wait_ready()
        self.tenant = common.tenant_with_domain(self.url, self.api.state, DOMAIN, {
            "api_rate_per_sec": 1_000_000, "send_rate_per_sec": 1_000_000,
            "daily_quota": 1_000_000_000, "monthly_quota": 1_000_000_000})
        self.tenant_id, self.key = self.tenant.id, self.tenant.key
        self.delivery_env = {**self.common, **self.tenant.shared_env, "MAILSVC_NODE_ROLES": "delivery"}

    def sql(self, statement: str, args=()) -> list[tuple]:
        return self.tenant.sql(statement, args)

    def delivered(self) -> int:
        return self.sql("SELECT count(*) FROM deliveries WHERE status = 'delivered' AND tenant_id = %s",
                        (self.tenant_id,))[0][0]

    def start_delivery(self, count: int, env: dict | None = None) -> list[common.Node]:
        nodes = []
        for _ in range(count):
            self.runs += 1
            nodes.append(self.start_deliverer(self.root, f"d{self.runs}", {**self.delivery_env, **(env or {})}))
        self.nodes += nodes
        for node in nodes:
            node.wait_ready()
        return nodes

    def accept(self, count: int, first: int, threads: int = 4) -> None:
        starts = list(range(first, first + count, BATCH))
        lock = threading.Lock()
        failed: list[Exception] = []

        def worker():
            while True:
                with lock:
                    if not starts:
                        return
                    start = starts.pop()
                body = [email_json(n, self.args.rows) for n in range(start, min(start + BATCH, first + count))]
                request = urllib.request.Request(  # a loaded machine may take long: a generous timeout
                    self.url + "/emails/batch", method="POST", data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"})
                try:
                    with urllib.request.urlopen(request, timeout=600) as response:
                        accepted = json.loads(response.read())["data"]
                    assert len(accepted) == len(body)
                except Exception as e:
                    failed.append(e)
                    return

        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        if failed:
            raise SystemExit(f"a batch was not accepted: {failed[0]!r}")

    def wait_delivered(self, target: int, seconds: float = 1800) -> float:
        deadline = time.monotonic() + seconds
        while self.delivered() < target:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {self.delivered()} of {target} delivered in {seconds} s")
            for node in self.nodes:
                if node.exited():
                    raise SystemExit(f"{node.dir.name} exited; see {node.dir}/server.log")
            time.sleep(0.05)
        return time.monotonic()

    def measure(self, kind: str, nodes: int, first: int) -> dict:
        n = self.args.messages
        base_sink, base_done = self.sink.count(), self.delivered()
        common.settle()
        if kind == "phase":
            self.accept(n, first)
        fleet = self.start_delivery(nodes)
        delivering = [pid for x in fleet for pid in common.process_tree(x.pid)]  # with any workers
        delivery_cpu = common.cpu_seconds(delivering)
        accepting = [] if kind == "phase" else common.process_tree(self.api.pid)
        api_cpu = common.cpu_seconds(accepting)
        meter = Meter([x.pid for x in fleet] + ([] if kind == "phase" else [self.api.pid]), self.api.data_dir)
        meter.start()
        if kind == "phase":
            wait_until(lambda: self.sink.count() != base_sink, float("inf"), 0.01)
        t0 = time.monotonic()
        if kind != "phase":
            self.accept(n, first)
        self.wait_delivered(base_done + n)
        m = meter.done(since=t0)
        elapsed = m["elapsed"]
        result = {"kind": kind, "nodes": nodes, "elapsed": elapsed, "rate": n / elapsed,
                  "cpu": m["cpu_s"] / elapsed, "pg_cpu": m["pg_cpu"],
                  "delivery_cpu_us": (common.cpu_seconds(delivering) - delivery_cpu) / n * 1e6,
                  "api_cpu_us": (common.cpu_seconds(accepting) - api_cpu) / n * 1e6,
                  "box_cpu_us": m["box_cpu_s"] / n * 1e6}
        # What neither node spent: PostgreSQL (backends that came and went included), the load
        # generator, the sink.
        result["rest_cpu_us"] = result["box_cpu_us"] - result["delivery_cpu_us"] - result["api_cpu_us"]
        for node in fleet:
            node.stop()
        self.nodes = [x for x in self.nodes if x not in fleet]
        time.sleep(0.5)
        result["sink"] = self.sink.count() - base_sink
        return result

    def postfix_run(self, kind: str) -> dict:
        n = self.args.messages
        if self.postfix is None:
            self.pf_sink = Sink(self.root)
            self.sinks.append(self.pf_sink)
            self.postfix = Postfix(self.root, self.pf_sink.port, self.args.postfix_concurrency)
            self.postfix.start()
            relay_through_postfix(self.postfix, self.pf_sink, 1000, self.message_size)  # warm-up
        if kind != "phase":
            return relay_through_postfix(self.postfix, self.pf_sink, n, self.message_size)
        base = self.pf_sink.count()
        meter = Meter([], others=self.postfix.pids)
        self.postfix.set("defer_transports = smtp")
        subprocess.run(smtp_source(self.postfix, n, self.message_size), check=True)
        wait_until(lambda: self.postfix.queued() >= n, float("inf"), 0.1)
        time.sleep(1)
        self.postfix.set("defer_transports =")
        meter.start()
        self.postfix.run("postqueue", "-f")
        wait_until(lambda: self.pf_sink.count() >= base + n, 1800, 0.02)
        m = meter.done()
        return {"kind": kind, "elapsed": m["elapsed"], "rate": (self.pf_sink.count() - base) / m["elapsed"],
                "cpu": m["other_cpu"], "sink": self.pf_sink.count() - base}

    def rss(self, count: int) -> None:
        print(f"\nRSS with {count:,} deliveries queued (1,000 per e-mail; sink answers 450 to every RCPT)")
        refusing = Sink(self.root, "-r", "RCPT")
        self.sinks.append(refusing)
        per_email = 1000
        template = self.sql("SELECT id FROM emails WHERE tenant_id = %s LIMIT 1", (self.tenant_id,))[0][0]
        t = time.monotonic()
        self.sql(
            "INSERT INTO emails (id, tenant_id, domain_id, message_id, sender, recipients, subject, html, text, tags,"
            " stream, source, status, last_event, message, created_at)"
            " SELECT gen_random_uuid(), tenant_id, domain_id, '<rss' || g || '@bench>', sender, recipients, subject,"
            " html, text, tags, stream, source, status, last_event, message, now()"
            " FROM emails e, generate_series(1, %s) g WHERE e.id = %s",
            (count // per_email, template))
        self.sql(
            "INSERT INTO deliveries (id, email_id, tenant_id, recipient, status, due_at, updated_at, retry_until)"
            " SELECT gen_random_uuid(), e.id, e.tenant_id, 'rss' || g || '@' || %s, 'queued', now(), now(),"
            " now() + interval '72 hours'"
            " FROM emails e, generate_series(1, %s) g WHERE e.message_id LIKE '<rss%%'",
            (RCPT_DOMAIN, per_email))
        self.sql("ANALYZE deliveries")
        queued = self.sql("SELECT count(*) FROM deliveries WHERE status = 'queued'")[0][0]
        print(f"inserted in {time.monotonic() - t:.0f} s; {queued:,} queued")
        (node,) = self.start_delivery(1, {"MAILSVC_DELIVERY_PORT": str(refusing.port)})
        start = time.monotonic()
        samples = []
        while time.monotonic() - start < self.args.rss_seconds:
            time.sleep(5)
            tried = self.sql("SELECT count(*) FROM deliveries WHERE status = 'deferred'")[0][0]
            samples.append((time.monotonic() - start, node.rss_kib(), tried))
            print(f"{samples[-1][0]:5.0f} s  RSS {samples[-1][1] / 1024:6.1f} MiB  deferred so far {tried:,}",
                  flush=True)
        rss = [s[1] / 1024 for s in samples]
        print(f"RSS {min(rss):.1f}–{max(rss):.1f} MiB over {samples[-1][0]:.0f} s; "
              f"{samples[-1][2] / samples[-1][0]:.0f} deliveries tried and deferred per second")
        node.stop()
        self.nodes.remove(node)

    def run(self) -> None:
        self.setup()
        counts = [int(c) for c in self.args.nodes.split(",")]
        print(f"{os.cpu_count()} cores; load {load_average()}; "
              f"{self.args.messages:,} messages per run", flush=True)
        # Warm-up: a small batch through the whole path (and the message size for smtp-source).
        self.accept(1000, 10_000_000)
        warm = self.start_delivery(1)
        self.wait_delivered(1000)
        for node in warm:
            node.stop()
        self.nodes = []
        self.message_size = signed_size(self.args.rows)
        self.sql("ANALYZE")
        print(f"message size about {self.message_size} bytes as it leaves (signed twice)", flush=True)
        first = 0
        results = []
        kinds = self.args.only.split(",")
        for run in range(self.args.runs):
            for nodes in counts:
                for kind in ("phase", "overlap"):
                    if kind not in kinds:
                        continue
                    r = self.measure(kind, nodes, first)
                    first += self.args.messages
                    results.append(r)
                    print(f"run {run + 1} mailsvc {kind:7} {nodes} delivery node(s): {r['rate']:7.0f} msg/s "
                          f"({r['elapsed']:.1f} s; nodes CPU {r['cpu']:.2f}, PostgreSQL CPU {r['pg_cpu']:.2f};"
                          f" delivery CPU {r['delivery_cpu_us']:.0f} µs/msg; sink counted {r['sink']})", flush=True)
            if "postfix" in kinds:
                for kind in ("phase", "overlap"):
                    r = self.postfix_run(kind)
                    results.append({**r, "nodes": "postfix"})
                    print(f"run {run + 1} Postfix {kind:7}: {r['rate']:7.0f} msg/s ({r['elapsed']:.1f} s; "
                          f"Postfix CPU {r['cpu']:.2f}; sink counted {r['sink']})", flush=True)
        print("\nsummary (best, spread)")
        for nodes in [*counts, "postfix"]:
            for kind in ("phase", "overlap"):
                rates = [r["rate"] for r in results if r["nodes"] == nodes and r["kind"] == kind]
                if rates:
                    print(f"  {str(nodes) + ' node(s)' if nodes != 'postfix' else 'Postfix':12} {kind:7} "
                          f"best {max(rates):6.0f}  spread {min(rates):.0f}–{max(rates):.0f}  "
                          f"median {statistics.median(rates):.0f} msg/s")
        if self.args.rss:
            self.rss(self.args.rss)

    def close(self) -> None:
        for node in self.nodes:
            node.stop()
        if self.postfix is not None:
            self.postfix.stop()
        if self.tenant is not None:
            self.tenant.db.close()
        if self.api is not None:
            self.api.stop(owner=True)
        for sink in self.sinks:
            sink.stop()
        if self.dns is not None:
            self.dns.terminate()
            self.dns.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", default="1,2", help="delivery node counts to try")
    parser.add_argument("--only", default="phase,overlap,postfix")
    parser.add_argument("--rows", type=int, default=8, help="HTML rows per e-mail (8: 3.4 KB signed; 18: 5.2 KB)")
    parser.add_argument("--per-destination", type=int, default=20, help="mailsvc delivery.per_destination")
    parser.add_argument("--postfix-concurrency", type=int, default=20, help="Postfix destination concurrency")
    parser.add_argument("--rss", type=int, default=0, help="deliveries to queue for the RSS check (0: skip)")
    parser.add_argument("--rss-seconds", type=int, default=60)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--serve-dns", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve)
    if args.serve_dns:
        return serve_dns()
    common.require(("smtp-sink", "smtp-source", "postfix"), "bench/delivery.sh")
    common.run_bench(Bench(args))


if __name__ == "__main__":
    main()
