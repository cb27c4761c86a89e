"""
Broadcast fan-out: a broadcast to a 100,000-contact segment (contacts made with
generate_series), 2 KB of personalised HTML (first name, a property, the contact's own
unsubscribe link), fanned out by one node with the ``broadcasts`` role, then by two. Timed from
``POST /broadcasts`` (``send: true``) until every e-mail is accepted (every recipient row
written by its accept statement), and separately until every one is delivered to a Postfix
``smtp-sink`` on loopback by one delivery node running meanwhile. The broadcast nodes' RSS is
sampled throughout: it must stay flat (nothing per recipient is kept beyond one chunk).

Processes (each stopped at the end): an API node (roles api,scheduler) that owns an embedded
PostgreSQL cluster in a throw-away directory; 1 or 2 broadcast nodes (role broadcasts) and one
delivery node (roles api,delivery, ``node.processes`` = cores, each delivering), same database
and master key; the tests' loopback DNS server (MX of example.net → 127.0.0.1); ``smtp-sink -c``.

    bench/delivery.sh --only none    # once: installs postfix (smtp-sink) if missing
    .venv/bin/python -m bench.broadcast [--contacts 100000] [--nodes 1,2] [--chunk 1000] [--transactional]
        [--background [--background-contacts 1000000]] [--latency 20]

With ``--accept-only``, each broadcast is timed until accepted only (the delivery node still runs
beside it), as for a million contacts. The database's growth (``pg_database_size`` after a
CHECKPOINT) from the POST to all accepted is given either way. With ``--transactional``, as
many transactional e-mails of about the same size are then sent end to end (``POST
/emails/batch`` → the same delivery node → the sink) and each broadcast's delivery time is
given as a ratio of theirs. With ``--background``, other accounts' data is made first
(bench/background.py): their deferred deliveries sit in the queue the delivery node claims from.
With ``--latency RATE``, transactional e-mails of the same account are sent at that rate while
each broadcast fans out and is delivered, each timed from its POST's answer to its arrival at
the sink (bench/idsink.py's, by Message-ID): p50, p95, p99, max. The subject and the body
carry placeholders as users write them (``{{{FIRST_NAME}}}``,
``{{{contact.plan}}}``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.request

from bench import ab, background, common, delivery, idsink
from bench.common import load_average
from bench.delivery import DOMAIN, RCPT_DOMAIN

#: About 2 KB once filled: a greeting, a property, the unsubscribe link and a body of text.
PARAGRAPH = ("<p style=\"margin:0 0 12px;font:15px/1.5 Helvetica,Arial,sans-serif;color:#333\">Our spring"
             " release brings faster sends, clearer reports and a new editor. Read what changed and"
             " how to get the most out of it in this month's letter.</p>")
HTML = ("<html><body><table width=\"100%\"><tr><td>"
        "<h1 style=\"font:bold 22px Helvetica,Arial,sans-serif\">Hello {{{FIRST_NAME|there}}},</h1>"
        "<p>Your plan: <b>{{{contact.plan|free}}}</b> in {{{contact.city|your city}}}.</p>"
        + PARAGRAPH * 9
        + "<p style=\"font-size:12px;color:#999\"><a href=\"{{{RESEND_UNSUBSCRIBE_URL}}}\">Unsubscribe</a>"
          " from these letters.</p></td></tr></table></body></html>")


class Bench(delivery.Bench):
    """The delivery benchmark's start-up (DNS, sink, API node, tenant), then a segment of contacts."""

    def __init__(self, args):
        super().__init__(args, prefix="mailsvc-bench-broadcast-", env={"MAILSVC_BROADCASTS_CHUNK": str(args.chunk)},
                         sink=idsink.IdSink if args.latency else delivery.Sink)

    def setup(self) -> None:
        super().setup()
        background.fill_from(self.args, self.tenant.db)
        self.make_segment()
        # One delivery node throughout, as a deployment runs it beside the fan-out: a node of as
        # many processes as cores, each delivering (roles api,delivery, as bench/ab.py starts it).
        self.runs += 1
        port = common.free_port()
        self.delivery = ab.TwistdNode(self.root, f"delivery{self.runs}", {
            **self.delivery_env, "MAILSVC_NODE_ROLES": "api,delivery",
            "MAILSVC_HTTP_LISTEN": f"tcp:{port}:interface=127.0.0.1"}, f"http://127.0.0.1:{port}")
        self.nodes.append(self.delivery)
        self.delivery.wait_ready()

    def make_segment(self) -> None:
        """A segment of ``--contacts`` contacts, made in SQL."""
        _, segment = common.api(self.url + "/segments", "POST", self.tenant.key, {"name": "Everyone"})
        self.segment_id = segment["id"]
        began = time.monotonic()
        self.sql(
            "INSERT INTO contacts (id, tenant_id, email, first_name, last_name, properties, created_at, updated_at)"
            " SELECT gen_random_uuid(), %s, 'c' || n || '@' || %s, 'First' || n, 'Last' || n,"
            " jsonb_build_object('plan', CASE WHEN n %% 3 = 0 THEN 'pro' ELSE 'team' END, 'city', 'City ' || n %% 97),"
            " now(), now() FROM generate_series(1, %s) AS n",
            (self.tenant.id, RCPT_DOMAIN, self.args.contacts))
        self.sql("INSERT INTO segment_contacts (segment_id, contact_id, created_at)"
                 " SELECT %s, id, now() FROM contacts WHERE tenant_id = %s", (self.segment_id, self.tenant.id))
        self.sql("ANALYZE")
        print(f"{self.args.contacts} contacts in {time.monotonic() - began:.1f} s", flush=True)

    def start(self, name: str, roles: str) -> common.Node:
        self.runs += 1
        node = delivery.start_node(self.root, f"{name}{self.runs}", {**self.delivery_env, "MAILSVC_NODE_ROLES": roles})
        self.nodes.append(node)
        node.wait_ready()
        return node

    def count(self, broadcast_id: str, what: str) -> int:
        if what == "written":
            return self.sql("SELECT count(*) FROM broadcast_recipients WHERE broadcast_id = %s AND state = 'written'",
                            (broadcast_id,))[0][0]
        return self.sql("SELECT count(*) FROM broadcast_recipients r JOIN deliveries d ON d.email_id = r.email_id"
                        " WHERE r.broadcast_id = %s AND d.status = 'delivered'", (broadcast_id,))[0][0]

    def one(self, nodes: int) -> dict:
        fanout = [self.start("b", "broadcasts") for _ in range(nodes)]
        samples: dict[int, list[int]] = {n.pid: [] for n in fanout}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                for n in fanout:
                    samples[n.pid].append(n.rss_kib())
                stop.wait(0.5)

        sampler = threading.Thread(target=sample)
        sampler.start()
        sink_before = self.sink.count()
        size_before = self.database_size()
        began = time.monotonic()
        _, created = common.api(self.url + "/broadcasts", "POST", self.tenant.key, {
            "segment_id": self.segment_id, "from": f"Bench <news@{DOMAIN}>",
            "subject": "{{{FIRST_NAME}}}, news for {{{contact.plan}}} plans",
            "html": HTML, "send": True, "name": f"bench {nodes} node(s)"})
        broadcast_id = created["id"]
        trickle = Trickle(self, self.args.latency) if self.args.latency else None
        total = self.args.contacts
        accepted_at = delivered_at = None
        progress = []
        while delivered_at is None and not (self.args.accept_only and accepted_at):
            now = time.monotonic()
            if now - began > self.args.timeout:
                raise SystemExit(f"not done in {self.args.timeout} s: {self.count(broadcast_id, 'written')} written,"
                                 f" {self.count(broadcast_id, 'delivered')} delivered")
            if accepted_at is None:
                written = self.count(broadcast_id, "written")
                progress.append((round(now - began, 1), written))
                if written >= total:
                    accepted_at = time.monotonic()
                    growth = self.database_size() - size_before
            elif self.count(broadcast_id, "delivered") >= total:
                delivered_at = time.monotonic()
            for n in self.nodes:
                if n.exited():
                    raise SystemExit(f"{n.dir.name} exited; see {n.dir}/server.log")
            time.sleep(0.2 if total <= 100_000 else 1)  # counting a million rows costs PostgreSQL
        stop.set()
        sampler.join()
        latency = trickle.finish() if trickle else None
        for n in fanout:
            n.stop()
            self.nodes.remove(n)
        rss = {str(pid): {"first_mib": s[0] // 1024, "max_mib": max(s) // 1024, "last_mib": s[-1] // 1024,
                          "median_mib": int(statistics.median(s)) // 1024} for pid, s in samples.items() if s}
        return {
            "broadcast_nodes": nodes, "recipients": total,
            "accepted_s": round(accepted_at - began, 1),
            "delivered_s": round(delivered_at - began, 1) if delivered_at else None,
            "database_growth_mb_at_accepted": round(growth / 2**20),
            "accepted_per_s": round(total / (accepted_at - began)),
            "sink_count": self.sink.count() - sink_before,
            "rss": rss, "progress_every_5s": progress[::25], "load": load_average(),
            **({"transactional_latency": latency} if latency else {}),
        }

    def database_size(self) -> int:
        """``pg_database_size`` after a CHECKPOINT (the WAL is not in it)."""
        self.sql("CHECKPOINT")
        return self.sql("SELECT pg_database_size(current_database())")[0][0]

    def transactional(self) -> dict:
        """As many transactional e-mails of about the broadcast's size (``POST /emails/batch`` of
        100, 4 clients), timed from the first request until all are delivered by the same
        delivery node: what the broadcast's delivery is compared with."""
        total = self.args.contacts
        base = self.delivered()
        began = time.monotonic()
        self.accept(total, 0)
        accepted_at = time.monotonic()
        delivered_at = self.wait_delivered(base + total, self.args.timeout)
        return {"transactional": total, "accepted_s": round(accepted_at - began, 1),
                "delivered_s": round(delivered_at - began, 1), "load": load_average()}

    def run(self) -> None:
        self.setup()
        results = [self.one(int(n)) for n in self.args.nodes.split(",")]
        if self.args.transactional:
            results.append(self.transactional())
            for r in results[:-1]:
                if r["delivered_s"]:
                    r["delivered_vs_transactional"] = round(r["delivered_s"] / results[-1]["delivered_s"], 2)
        print(json.dumps(results, indent=2), flush=True)


class Trickle:
    """
    Transactional e-mails of the broadcast's account at a steady ``rate`` (``POST /emails``, one
    recipient, one at a time) while the broadcast fans out and is delivered; each timed from its
    POST's answer to its arrival at the sink (bench/idsink.py), matched by its Message-ID.
    """

    def __init__(self, bench: Bench, rate: float):
        self.bench, self.rate = bench, rate
        self.answered: dict[str, float] = {}  # e-mail id → when its POST was answered
        self.failed = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._send, daemon=True)  # an interrupted run ends
        self.began = time.monotonic()
        self.thread.start()

    def _send(self) -> None:
        n = 0
        while not self.stopping.wait(max(0.0, self.began + n / self.rate - time.monotonic())):
            body = delivery.email_json(50_000_000 + n, self.bench.args.rows)
            request = urllib.request.Request(
                self.bench.url + "/emails", method="POST", data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.bench.key}"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    self.answered[json.loads(response.read())["id"]] = time.time()
            except OSError:
                self.failed += 1
            n += 1

    def finish(self) -> dict:
        """Stop sending, wait for every one sent at the sink, and the latencies' percentiles."""
        self.stopping.set()
        self.thread.join()
        sent_for = time.monotonic() - self.began
        ids = dict(self.bench.sql("SELECT message_id, id::text FROM emails WHERE id = ANY(%s::uuid[])",
                                  (list(self.answered),)))
        sink = self.bench.sink
        common.wait_until(lambda: set(ids) <= sink.arrivals().keys(), self.bench.args.timeout, 1)
        seen = sink.arrivals()
        latencies = sorted(seen[m][0] - self.answered[i] for m, i in ids.items() if m in seen)
        if not latencies:
            return {"sent": len(self.answered), "failed": self.failed}

        def at(share: float) -> float:
            return round(latencies[min(len(latencies) - 1, int(share * len(latencies)))], 3)

        return {"sent": len(self.answered), "failed": self.failed,
                "rate_per_s": round(len(self.answered) / sent_for, 1),
                "arrived": len(latencies), "p50_s": at(0.50), "p95_s": at(0.95), "p99_s": at(0.99),
                "max_s": round(latencies[-1], 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--contacts", type=int, default=100_000)
    parser.add_argument("--nodes", default="1,2", help="broadcast node counts to try")
    parser.add_argument("--chunk", type=int, default=1000, help="broadcasts.chunk")
    parser.add_argument("--per-destination", type=int, default=20, help="mailsvc delivery.per_destination")
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--accept-only", action="store_true",
                        help="stop each broadcast once every recipient is accepted (delivery still runs beside)")
    parser.add_argument("--transactional", action="store_true",
                        help="then as many transactional e-mails end to end, for comparison")
    parser.add_argument("--latency", type=float, default=0, metavar="RATE",
                        help="transactional e-mails per second during each broadcast, each timed to the sink")
    background.add_arguments(parser)
    parser.add_argument("--rows", type=int, default=10, help="rows of the transactional e-mails' HTML (10: ~2 KB)")
    args = parser.parse_args(argv)
    common.require(("smtp-sink",), "bench/delivery.sh")
    common.run_bench(Bench(args))


if __name__ == "__main__":
    main()
