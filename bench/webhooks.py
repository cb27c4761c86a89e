"""
Signed webhook deliveries per second to a local HTTPS receiver.

The dispatcher runs in this process on the real reactor, against an embedded PostgreSQL
cluster with its default durable settings in a throw-away directory, with the service's own
outbound client (address check with a stub resolver answering 127.0.0.1, pinned connections,
certificate verification against a throw-away CA). Each run inserts a batch of events into the
outbox, starts a dispatcher and times it until every delivery was received and its outcome
written. The rows of earlier runs stay (delivered rows stay for days in service) and the
tables are analyzed once after a warm-up run, as autovacuum keeps them. The receiver is a
separate process (a Twisted HTTPS server) that checks every request with the
``standardwebhooks`` library and that both header families agree, and counts duplicates.

    .venv/bin/python -m bench.webhooks [--runs 3] [--events 3000] [--webhooks 8] [--concurrency 8]
        [--host-concurrency 64] [--host-rate 10000]
    .venv/bin/python -m bench.webhooks --webhooks 1 --latency 500 [--seconds 10] [--writer-in-process]
    .venv/bin/python -m bench.webhooks --statements 20000

``--latency`` writes events at that rate (a NOTIFYing transaction every 10 ms, from a process of
its own as the service's API and SMTP processes do; ``--writer-in-process``: from the
dispatcher's, the form of the runs before 2026-12-03 09:30 UTC) to a dispatcher woken by the
NOTIFYs and prints the time from each event to its request (p50, p99);
``--statements`` times the statements that write events and fan them out, without requests.

Every webhook is aimed at the one receiver, so the per-host limits apply to all of them:
``--host-concurrency`` is the service's default (64, the 8 webhooks' 8 slots each), and
``--host-rate`` is set above what the machine reaches, because the benchmark measures the
dispatcher, not the per-host rate policy (the default 500/s would cap it at that).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import cpu_seconds, free_port, postgres_pids, react_in_scratch

ROOT = Path(__file__).resolve().parent.parent
HOST = "hooks.bench.example"

#: An ``email.delivered`` event as the MTA records it.
DATA = {
    "email_id": "01970000-0000-7000-8000-000000000001", "delivery_id": "01970000-0000-7000-8000-000000000002",
    "created_at": "2026-01-01T00:00:00.000000Z", "to": ["someone@example.net"],
    "recipient": "someone@example.net", "transport": "smtp", "remote_host": "mx.example.net",
    "response": "250 2.0.0 Ok: queued as 4F3A21C0",
}


def receive(port: int, pem_file: str, secrets_file: str) -> None:
    """The receiver process: verify, count, answer 204; GET /stats reports the counts."""
    import standardwebhooks
    from twisted.internet import reactor, ssl
    from twisted.web import resource, server

    hooks = {path.encode(): standardwebhooks.Webhook(secret)
             for path, secret in json.loads(Path(secrets_file).read_text()).items()}

    class Verify(resource.Resource):
        isLeaf = True

        def __init__(self):
            super().__init__()
            self.stats = {"verified": 0, "failed": 0, "duplicates": 0}
            self.seen: set[tuple[bytes, str]] = set()
            #: Seconds from each event to its first request, for GET /latencies.
            self.latencies: list[float] = []

        def render_POST(self, request):  # noqa: N802
            body = request.content.read()
            headers = {name.decode().lower(): values[0].decode()
                       for name, values in request.requestHeaders.getAllRawHeaders()}
            standard = {k: v for k, v in headers.items() if k.startswith("webhook-")}
            same = all(headers.get("svix-" + k[8:]) == v for k, v in standard.items()) and len(standard) == 3
            try:
                hooks[request.path].verify(body, standard, json_parse=False)
                verified = same
            except Exception:
                verified = False
            self.stats["verified" if verified else "failed"] += 1
            key = (request.path, headers.get("webhook-id", ""))
            if key in self.seen:
                self.stats["duplicates"] += 1
            else:
                happened = datetime.fromisoformat(json.loads(body)["created_at"].replace("Z", "+00:00"))
                self.latencies.append(time.time() - happened.timestamp())
            self.seen.add(key)
            request.setResponseCode(204)
            return b""

        def render_GET(self, request):  # noqa: N802
            request.setHeader(b"Content-Type", b"application/json")
            if request.path == b"/latencies":
                latencies, self.latencies = self.latencies, []
                return json.dumps(latencies).encode()
            return json.dumps(self.stats).encode()

    site = server.Site(Verify())
    site.noisy = False
    options = ssl.PrivateCertificate.loadPEM(Path(pem_file).read_bytes()).options()
    reactor.listenSSL(port, site, options, interface="127.0.0.1", backlog=1024)
    reactor.run()


async def run(reactor, args, root: Path) -> None:
    from twisted.internet import defer, task
    from twisted.names import common, dns

    from mailsvc.app.accounts import Accounts
    from mailsvc.app.apikeys import KeyRing
    from mailsvc.app.throttle import Throttle
    from mailsvc.app.webhooks import WebhookRegistry
    from mailsvc.crypto.keyvault import KeyVault
    from mailsvc.domain.webhooks import new_webhook
    from mailsvc.outside.addresses import PublicAddresses
    from mailsvc.outside.fetch import Fetcher
    from mailsvc.store.database import Database
    from mailsvc.store.embedded import EmbeddedCluster, find_bindir
    from mailsvc.store.migrate import migrate
    from mailsvc.webhooks.dispatcher import Dispatcher
    from tests.helpers.outside import ThrowawayCA

    class Loopback(common.ResolverBase):
        """Every name is 127.0.0.1 (answers are kept 30 s by the address check anyway)."""

        def _lookup(self, name, cls, type, timeout):
            answers = []
            if type == dns.A:
                answers = [dns.RRHeader(name, dns.A, dns.IN, 60, dns.Record_A("127.0.0.1", 60))]
            return defer.succeed((answers, [], []))

    ca = ThrowawayCA()
    ca_file = ca.write(root / "ca.pem")
    pem_file = root / "receiver.pem"
    pem_file.write_bytes(ca.server_pem(HOST))
    port = free_port()

    cluster = EmbeddedCluster(reactor, root / "pg", find_bindir())
    dsn = await cluster.start()
    db = Database(reactor, dsn, 8)
    receiver = None
    try:
        await db.start()
        await migrate(db)
        keyring = KeyRing(reactor, db, secrets.token_bytes(32), "re", 10)
        tenant, _, _ = await Accounts(reactor, db, keyring, 10, Throttle(reactor, db)).create_tenant({"name": "bench"})
        addresses = PublicAddresses(reactor, Loopback(), allow_private=True)
        fetcher = Fetcher(reactor, addresses, ca_file, args.max_in_flight)
        registry = WebhookRegistry(reactor, db, addresses, KeyVault(secrets.token_bytes(32)))
        hooks = {}
        for i in range(args.webhooks):
            body = {"endpoint": f"https://{HOST}:{port}/w{i}", "events": ["email.delivered"]}
            _, secret = await registry.create(tenant.id, new_webhook(body))
            hooks[f"/w{i}"] = secret
        (root / "secrets.json").write_text(json.dumps(hooks))
        receiver = subprocess.Popen(
            [sys.executable, "-m", "bench.webhooks", "--receive", str(port), str(pem_file),
             str(root / "secrets.json")],
            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )

        async def stats() -> dict:
            fetched = await fetcher.get(f"https://{HOST}:{port}/stats", 10_000, 5)
            return json.loads(fetched.body)

        for _ in range(100):
            try:
                await stats()
                break
            except Exception:
                await task.deferLater(reactor, 0.1, lambda: None)

        def cpu_now() -> tuple[float, float, float]:
            """CPU seconds so far of this (the dispatcher's) process, PostgreSQL's and the receiver's."""
            pg = postgres_pids(root / "pg" / "data")
            return cpu_seconds([os.getpid()]), cpu_seconds(pg), cpu_seconds([receiver.pid])

        async def one_run(events: int) -> dict:
            run_started = datetime.fromtimestamp(reactor.seconds(), UTC)
            await db.execute(
                "INSERT INTO events (id, tenant_id, type, data, created_at)"
                " SELECT gen_random_uuid(), %s, 'email.delivered', %s::jsonb, now()"
                " FROM generate_series(1, %s)",
                (tenant.id, json.dumps(DATA), events),
            )
            target = events * args.webhooks
            before_stats = await stats()
            cpu = cpu_now()
            dispatcher = Dispatcher(reactor, db, fetcher, registry, args.concurrency, args.max_in_flight,
                                    args.host_concurrency, args.host_rate)
            started = time.monotonic()
            dispatcher.start()
            while True:
                await task.deferLater(reactor, 0.05, lambda: None)
                now = await stats()
                if now["verified"] + now["failed"] - before_stats["verified"] - before_stats["failed"] >= target:
                    break
            await dispatcher.stop()  # every outcome written
            elapsed = time.monotonic() - started
            after = await stats()
            written = await db.fetchone(
                "SELECT count(*) FILTER (WHERE state = 'delivered') AS delivered, count(*) AS total"
                " FROM webhook_deliveries WHERE created_at >= %s", (run_started,)
            )
            return {
                "deliveries": target,
                "seconds": elapsed,
                "rate": target / elapsed,
                **{f"{name}_cpu": (spent - before) / elapsed
                   for name, spent, before in zip(("dispatcher", "pg", "receiver"), cpu_now(), cpu, strict=True)},
                "verified": after["verified"] - before_stats["verified"],
                "failed": after["failed"] - before_stats["failed"],
                "duplicates": after["duplicates"] - before_stats["duplicates"],
                "recorded": written["delivered"] == written["total"] == target,
            }

        await one_run(args.warmup)
        # Statistics as autovacuum keeps them on a running system (the tables were empty).
        await db.execute("ANALYZE")
        if args.latency or args.statements:
            def dispatcher():
                return Dispatcher(reactor, db, fetcher, registry, args.concurrency, args.max_in_flight,
                                  args.host_concurrency, args.host_rate)

            async def latencies() -> list[float]:
                fetched = await fetcher.get(f"https://{HOST}:{port}/latencies", 10_000_000, 5)
                return json.loads(fetched.body)

            if args.latency:
                await latency(reactor, db, dsn, tenant.id, dispatcher, stats, latencies, cpu_now, args)
            else:
                await statement_times(reactor, db, tenant.id, args)
            await fetcher.close()
            return
        print(f"{os.cpu_count()} cores; {args.webhooks} webhooks x {args.events} events per run; "
              f"{args.concurrency} requests in flight per webhook; embedded PostgreSQL (durable defaults)")
        print(f"{'run':>3} {'deliveries':>10} {'seconds':>8} {'deliv/s':>8} {'dispatcher CPU':>14} "
              f"{'pg CPU':>7} {'receiver CPU':>12} {'verified':>9} {'dup':>4}")
        results = []
        for number in range(1, args.runs + 1):
            r = await one_run(args.events)
            results.append(r)
            print(f"{number:>3} {r['deliveries']:>10} {r['seconds']:>8.2f} {r['rate']:>8.0f} "
                  f"{r['dispatcher_cpu']:>14.0%} {r['pg_cpu']:>7.0%} {r['receiver_cpu']:>12.0%} "
                  f"{r['verified']:>9} {r['duplicates']:>4}", flush=True)
        rates = [r["rate"] for r in results]
        print(f"\nbest {max(rates):.0f} signed deliveries/s; spread {min(rates):.0f}-{max(rates):.0f} "
              f"over {len(results)} runs")
        if any(r["failed"] or r["duplicates"] or r["verified"] != r["deliveries"] or not r["recorded"]
               for r in results):
            raise SystemExit("some deliveries failed verification, were duplicated or not recorded")
        await fetcher.close()
    finally:
        if receiver is not None:
            receiver.send_signal(signal.SIGTERM)
            receiver.wait(30)
        db.stop()
        await cluster.stop()


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def write_on_the_clock(reactor, db, tenant_id, per_tick: int, ticks: int) -> float:
    """``per_tick`` events a transaction every 10 ms (each NOTIFYing as the service's writers
    do), on the clock, not after the previous write: several may be under way. The seconds it took."""
    from twisted.internet import defer, task

    from mailsvc.store import events

    started = time.monotonic()
    writes = []
    for tick in range(ticks):
        writes.append(defer.ensureDeferred(db.run("bench events", events.record_many, reactor,
                                                  [(tenant_id, "email.delivered", DATA)] * per_tick)))
        await task.deferLater(reactor, max(0.0, started + (tick + 1) / 100 - time.monotonic()), lambda: None)
    await defer.gatherResults(writes)
    return time.monotonic() - started


def write_events(dsn: str, tenant_id: str, per_tick: int, ticks: int) -> None:
    """The writer process of ``--latency``: as the API and SMTP processes of a node write
    events, outside the dispatcher's; prints the seconds it took."""
    import uuid

    from twisted.internet import defer, task

    from mailsvc.store.database import Database

    async def run(reactor):
        db = Database(reactor, dsn, 4)
        await db.start()
        try:
            print(await write_on_the_clock(reactor, db, uuid.UUID(tenant_id), per_tick, ticks), flush=True)
        finally:
            db.stop()

    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))


async def latency(reactor, db, dsn, tenant_id, dispatcher, stats, latencies, cpu_now, args) -> None:
    """
    Events written at ``args.latency`` a second for ``args.seconds`` (``write_on_the_clock``, in
    a process of its own unless ``--writer-in-process``), a dispatcher woken by the NOTIFYs; the
    time from each event's ``created_at`` to its first request at the receiver, and the CPU time
    per request of the dispatcher's process, PostgreSQL's and the receiver's while it ran.
    """
    from twisted.internet import task, utils

    from mailsvc.store.notify import Notifications

    await latencies()  # the warm-up's
    engine = dispatcher()
    notifications = Notifications(db)
    await notifications.listen(engine.channel, engine.notified)
    engine.start()
    before = await stats()
    cpu = cpu_now()
    per_tick = max(1, round(args.latency / 100))
    ticks = int(args.seconds * 100)
    if args.writer_in_process:
        written = await write_on_the_clock(reactor, db, tenant_id, per_tick, ticks)
    else:
        out = await utils.getProcessOutput(
            sys.executable, ["-m", "bench.webhooks", "--write", dsn, str(tenant_id), str(per_tick), str(ticks)],
            env=dict(os.environ, PYTHONPATH=str(ROOT)), path=str(ROOT), reactor=reactor, errortoo=True,
        )
        written = float(out.decode().strip().splitlines()[-1])
    target = ticks * per_tick * args.webhooks
    while True:
        now = await stats()
        if now["verified"] + now["failed"] - before["verified"] - before["failed"] >= target:
            break
        await task.deferLater(reactor, 0.05, lambda: None)
    await engine.stop()
    notifications.stop()
    spent = [(now - then) * 1e6 / target for now, then in zip(cpu_now(), cpu, strict=True)]
    seen = await latencies()
    where = "in the dispatcher's process" if args.writer_in_process else "by a process of their own"
    print(f"{os.cpu_count()} cores; {ticks * per_tick} events at {ticks * per_tick / written:.0f}/s over "
          f"{written:.1f} s, written {where}; {args.webhooks} webhooks; embedded PostgreSQL (durable defaults)")
    print(f"event -> endpoint over {len(seen)} requests: p50 {_percentile(seen, 0.5) * 1000:.0f} ms, "
          f"p99 {_percentile(seen, 0.99) * 1000:.0f} ms, max {max(seen) * 1000:.0f} ms")
    print("CPU per request: dispatcher's process {:.0f} us, PostgreSQL {:.0f} us, receiver {:.0f} us".format(*spent))
    if len(seen) != target:
        raise SystemExit(f"{len(seen)} requests received, {target} expected")


async def statement_times(reactor, db, tenant_id, args) -> None:
    """
    The statements of the hand-over alone (no dispatcher): ``args.statements`` events written 50
    to a statement, as a delivery step writes its outcomes' events (in one transaction, so no
    commit's flush is counted), then fanned out 500 at a time (a transaction each, as a step),
    once of a type the ``args.webhooks`` webhooks take and once of one they do not (the
    hand-over without deliveries); milliseconds per statement, best of three rounds each.
    """
    from mailsvc.store import events
    from mailsvc.store import webhooks as rows

    async def write(txn, type: str) -> float:
        entries = [(tenant_id, type, DATA)] * 50
        started = time.monotonic()
        for _ in range(args.statements // 50):
            await events.record_many(txn, reactor, entries)
        return (time.monotonic() - started) * 1000 / (args.statements // 50)

    async def timed(type: str) -> tuple[float, float]:
        written = await db.run("bench writes", write, type)
        steps, started = 0, time.monotonic()
        while await db.run("bench fan-out", rows.fan_out, datetime.now(UTC), 500):
            steps += 1
        return written, (time.monotonic() - started) * 1000 / steps

    for type, what in (("email.delivered", f"{500 * args.webhooks} deliveries"), ("email.sent", "no delivery")):
        rounds = [await timed(type) for _ in range(3)]
        await db.execute("DELETE FROM webhook_deliveries")
        print(f"{args.statements} events ({type}), {args.webhooks} webhooks: a statement writing 50 events "
              f"{min(r[0] for r in rounds):.2f} ms; fanning out 500 events ({what}) "
              f"{min(r[1] for r in rounds):.1f} ms", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=int, default=3000, help="events per run (each to every webhook)")
    parser.add_argument("--webhooks", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight per webhook")
    parser.add_argument("--max-in-flight", type=int, default=256)
    parser.add_argument("--host-concurrency", type=int, default=64, help="requests in flight to the one host")
    parser.add_argument("--host-rate", type=int, default=10_000, help="requests a second to the one host")
    parser.add_argument("--warmup", type=int, default=500, help="events of the warm-up run")
    parser.add_argument("--latency", type=int, default=0, metavar="EVENTS_PER_SEC",
                        help="instead of the runs: events written at this rate, and event -> endpoint p50/p99")
    parser.add_argument("--seconds", type=float, default=10, help="how long --latency writes events")
    parser.add_argument("--statements", type=int, default=0, metavar="EVENTS",
                        help="instead of the runs: the time of the statements that write and fan out events")
    parser.add_argument("--writer-in-process", action="store_true",
                        help="--latency: write the events from the dispatcher's process (the earlier runs' form)")
    parser.add_argument("--receive", nargs=3, metavar=("PORT", "PEM", "SECRETS"), help=argparse.SUPPRESS)
    parser.add_argument("--write", nargs=4, metavar=("DSN", "TENANT", "PER_TICK", "TICKS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.receive:
        receive(int(args.receive[0]), args.receive[1], args.receive[2])
        return
    if args.write:
        write_events(args.write[0], args.write[1], int(args.write[2]), int(args.write[3]))
        return

    react_in_scratch("mailsvc-bench-webhooks-", lambda reactor, root: run(reactor, args, root))


if __name__ == "__main__":
    main()
