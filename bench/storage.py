"""
Storage per e-mail: what PostgreSQL keeps and writes for each transactional e-mail
accepted and for each broadcast recipient fanned out, beside the size of the message that
leaves. Database growth is ``pg_database_size`` after a ``CHECKPOINT`` (WAL excluded), before
and after; WAL is the difference of ``pg_current_wal_lsn()`` over the same span; both are
divided by the e-mails (recipients) written. No delivery runs while either is measured, so
the rows are as accepted.

- transactional: N e-mails of bench/delivery.py's 5 KB message (18 rows), ``POST
  /emails/batch`` of 100, 4 clients.
- broadcast: a broadcast of bench/broadcast.py's 2 KB personalised HTML to a segment of C
  contacts (made with generate_series), fanned out by one broadcasts node, timed until every
  recipient is written.
- the messages as they leave: a few of each kind are then delivered by one delivery node to an
  ``smtp-sink -D`` that dumps them; their median size is printed (smtp-sink's own lines taken
  off, CRLF counted).

    bench/delivery.sh --only none    # once: installs postfix (smtp-sink) if missing
    .venv/bin/python -m bench.storage [--emails 20000] [--contacts 100000]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time

from bench import broadcast, common, delivery
from bench.ab import ROWS_5KB
from bench.common import load_average
from bench.delivery import DOMAIN

#: The fields smtp-sink writes before each dumped message (its own Received field follows).
_SINK_FIELDS = re.compile(rb"^(X-Client-Addr|X-Client-Proto|X-Helo-Args|X-Mail-Args|X-Rcpt-Args): .*\n", re.M)


class Bench(broadcast.Bench):
    def __init__(self, args):
        args.per_destination, args.chunk, args.rows = 20, 1000, ROWS_5KB
        delivery.Bench.__init__(self, args, prefix="mailsvc-bench-storage-",
                                env={"MAILSVC_BROADCASTS_CHUNK": "1000"})

    def setup(self) -> None:
        # The delivery benchmark's start-up and the segment, without its delivery node.
        delivery.Bench.setup(self)
        self.make_segment()

    def mark(self) -> tuple[int, str]:
        self.sql("CHECKPOINT")
        size, lsn = self.sql("SELECT pg_database_size(current_database()), pg_current_wal_lsn()")[0]
        return size, lsn

    def growth(self, before: tuple[int, str], count: int) -> dict:
        size, lsn = self.mark()
        wal = self.sql("SELECT pg_wal_lsn_diff(%s, %s)::bigint", (lsn, before[1]))[0][0]
        return {"count": count, "db_bytes_each": round((size - before[0]) / count),
                "wal_bytes_each": round(wal / count), "db_growth_mb": round((size - before[0]) / 2**20, 1),
                "wal_mb": round(wal / 2**20, 1)}

    def transactional(self) -> dict:
        n = self.args.emails
        before = self.mark()
        began = time.monotonic()
        self.accept(n, 0)
        accepted = time.monotonic() - began
        return {**self.growth(before, n), "accepted_s": round(accepted, 1), "accepted_per_s": round(n / accepted)}

    def fanned_out(self) -> dict:
        total = self.args.contacts
        before = self.mark()
        node = self.start("b", "broadcasts")
        began = time.monotonic()
        _, created = common.api(self.url + "/broadcasts", "POST", self.tenant.key, {
            "segment_id": self.segment_id, "from": f"Bench <news@{DOMAIN}>", "subject": "News for {{{FIRST_NAME}}}",
            "html": broadcast.HTML, "send": True, "name": "storage"})
        self.broadcast_id = created["id"]
        while self.count(self.broadcast_id, "written") < total:
            if node.exited():
                raise SystemExit(f"{node.dir.name} exited; see {node.dir}/server.log")
            if time.monotonic() - began > self.args.timeout:
                raise SystemExit(f"not written in {self.args.timeout} s")
            time.sleep(0.2)
        accepted = time.monotonic() - began
        node.stop()
        self.nodes.remove(node)
        return {**self.growth(before, total), "accepted_s": round(accepted, 1),
                "accepted_per_s": round(total / accepted)}

    def leaving_sizes(self, per_kind: int) -> dict:
        """Delivers ``per_kind`` of each kind (the oldest first) to a dumping sink: their sizes."""
        dumps = self.root / "dumps"
        dumps.mkdir()
        dumps.chmod(0o777)  # smtp-sink writes as nobody
        dump = dumps / "sink.dump"
        sink = delivery.Sink(self.root, "-D", str(dump))
        self.sinks.append(sink)
        # Only the first few of each kind are due: the rest wait until after the run.
        self.sql("UPDATE deliveries SET due_at = now() + interval '1 day' WHERE due_at IS NOT NULL")
        self.sql("UPDATE deliveries SET due_at = now() WHERE id IN (SELECT d.id FROM deliveries d"
                 " JOIN emails e ON e.id = d.email_id WHERE e.stream = 'transactional' ORDER BY d.id LIMIT %s)"
                 " OR id IN (SELECT d.id FROM deliveries d JOIN broadcast_recipients r ON r.email_id = d.email_id"
                 " WHERE r.broadcast_id = %s ORDER BY d.id LIMIT %s)", (per_kind, self.broadcast_id, per_kind))
        nodes = self.start_delivery(1, {"MAILSVC_DELIVERY_PORT": str(sink.port)})
        if not common.wait_until(lambda: sink.count() >= 2 * per_kind, 120):
            raise SystemExit(f"only {sink.count()} of {2 * per_kind} messages delivered to the dumping sink")
        for node in nodes:
            node.stop()
        self.nodes = []
        sink.stop()
        text = dump.read_bytes()
        messages = [_SINK_FIELDS.sub(b"", m) for m in re.split(rb"(?m)^(?=X-Client-Addr: )", text) if m.strip()]
        # Each starts with the sink's Received field (three lines); the message follows.
        sizes = []
        for m in messages:
            lines = m.split(b"\n")[3:]
            body = b"\n".join(lines).rstrip(b"\n") + b"\n"
            sizes.append(len(body) + body.count(b"\n"))  # CRLF on the wire
        broadcast_sizes = [s for s, m in zip(sizes, messages, strict=True) if b"List-Unsubscribe:" in m]
        plain = [s for s, m in zip(sizes, messages, strict=True) if b"List-Unsubscribe:" not in m]
        return {"transactional_bytes": statistics.median(plain) if plain else None,
                "broadcast_bytes": statistics.median(broadcast_sizes) if broadcast_sizes else None}

    def run(self) -> None:
        self.setup()
        print(f"load {load_average()}", flush=True)
        result = {"transactional": self.transactional(), "broadcast": self.fanned_out()}
        sizes = self.leaving_sizes(10)
        result["transactional"]["message_bytes"] = sizes["transactional_bytes"]
        result["broadcast"]["message_bytes"] = sizes["broadcast_bytes"]
        for kind in ("transactional", "broadcast"):
            r = result[kind]
            if r["message_bytes"]:
                r["db_per_message"] = round(r["db_bytes_each"] / r["message_bytes"], 2)
        result["load"] = load_average()
        print(json.dumps(result, indent=2), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--emails", type=int, default=20_000)
    parser.add_argument("--contacts", type=int, default=100_000)
    parser.add_argument("--timeout", type=int, default=1800)
    args = parser.parse_args(argv)
    common.require(("smtp-sink",), "bench/delivery.sh")
    common.run_bench(Bench(args))


if __name__ == "__main__":
    main()
