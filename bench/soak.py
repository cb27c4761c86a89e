"""
The soak: N e-mails (a million by default) accepted over ``POST /emails/batch`` and delivered
to a loopback sink by one delivery node, none lost and none duplicated, the memory of every
mailsvc process flat throughout.

bench/delivery.py's "overlap" run (its API node owning an embedded PostgreSQL cluster, its
loopback DNS, its tenant and its 4 clients posting batches of 100 while one delivery node
delivers), to bench/idsink.py's sink instead of ``smtp-sink``: that sink logs every message's
Message-ID, and at the end each accepted e-mail's Message-ID (from the database) must have
arrived exactly once. The RSS of each mailsvc process (the nodes and their workers; not
PostgreSQL's) is sampled every ``--every`` seconds; "flat" means the median of the last quarter
of the samples is within 5 % (or 4 MiB) of the second quarter's: no steady growth once warm.

    .venv/bin/python -m bench.soak [--messages 1000000] [--every 2]   # needs nothing but the venv
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from bench import common, delivery, idsink
from bench.common import load_average


def flat(samples: list[int]) -> bool:
    """No steady growth: the last quarter's median within 5 % (or 4 MiB) of the second quarter's."""
    if len(samples) < 8:
        return True
    quarter = len(samples) // 4
    warm, late = statistics.median(samples[quarter:2 * quarter]), statistics.median(samples[-quarter:])
    return late - warm <= max(0.05 * warm, 4 * 1024)


class Memory:
    """The RSS of the nodes' processes (their workers found again at every sample), in a thread."""

    def __init__(self, nodes: dict[str, common.Node], data_dir, every: float):
        self.nodes, self.data_dir, self.every = nodes, data_dir, every
        self.samples: dict[str, list[int]] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.stopping.is_set():
            postgres = set(common.postgres_pids(self.data_dir))
            for name, node in self.nodes.items():
                for pid in common.process_tree(node.pid):
                    if pid not in postgres:
                        try:
                            rss = common.rss_kib(pid)
                        except OSError:
                            continue  # gone between the listing and the read
                        self.samples.setdefault(f"{name} pid {pid}" + ("" if pid == node.pid else " (worker)"),
                                                []).append(rss)
            self.stopping.wait(self.every)

    def __enter__(self) -> Memory:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join()

    def report(self) -> dict:
        return {name: {"start_mib": round(s[0] / 1024, 1), "peak_mib": round(max(s) / 1024, 1),
                       "end_mib": round(s[-1] / 1024, 1), "samples": len(s), "flat": flat(s)}
                for name, s in self.samples.items()}


class Bench(delivery.Bench):
    """The delivery benchmark's set-up and accepting clients, its sink the one that logs Message-IDs."""

    def __init__(self, args):
        super().__init__(args, prefix="mailsvc-bench-soak-", sink=idsink.IdSink)

    def run(self) -> dict:
        self.setup()
        n = self.args.messages
        (node,) = self.start_delivery(1)
        print(f"{n:,} e-mails; load {load_average()}", flush=True)
        with Memory({"api": self.api, "delivery": node}, self.api.data_dir, self.args.every) as memory:
            began, wall = time.monotonic(), time.time()
            self.accept(n, 0)
            accepted_s = time.monotonic() - began
            print(f"accepted in {accepted_s:.1f} s ({n / accepted_s:,.0f}/s); delivering", flush=True)
            finished = self.wait_sink(n, began)
        seen = self.sink.arrivals()
        last = max(t for times in seen.values() for t in times)
        accepted = [m for (m,) in self.sql("SELECT message_id FROM emails WHERE tenant_id = %s", (self.tenant_id,))]
        delivered = self.delivered()
        arrived = sum(len(times) for times in seen.values())
        return {"messages": n, "finished": finished, "accepted_s": round(accepted_s, 1),
                "last_arrival_s": round(last - wall, 1), "msg_per_s": round(arrived / (last - wall)),
                "database_delivered": delivered,
                **idsink.check(accepted, seen), "rss": memory.report(), "load_at_end": load_average()}

    def wait_sink(self, n: int, began: float) -> bool:
        """Until the sink has logged ``n`` (then 3 s more, for any duplicate), progress every 30 s;
        False if ``--timeout`` came first (what arrived is still checked: not yet is "missing")."""
        shown = began
        while self.sink.count() < n:
            if time.monotonic() - began > self.args.timeout:
                print(f"only {self.sink.count():,} of {n:,} at the sink in {self.args.timeout} s", flush=True)
                return False
            for node in self.nodes:
                if node.exited():
                    raise SystemExit(f"{node.dir.name} exited; see {node.dir}/server.log")
            if time.monotonic() - shown >= 30:
                shown = time.monotonic()
                print(f"{shown - began:6.0f} s  {self.sink.count():,} at the sink; load {load_average()}", flush=True)
            time.sleep(0.5)
        time.sleep(3)
        return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--every", type=float, default=2, help="seconds between RSS samples")
    parser.add_argument("--rows", type=int, default=8, help="HTML rows per e-mail (8: 3.4 KB signed)")
    parser.add_argument("--per-destination", type=int, default=20, help="mailsvc delivery.per_destination")
    parser.add_argument("--timeout", type=int, default=0, help="seconds (0: 600 + 50 ms an e-mail)")
    args = parser.parse_args(argv)
    args.timeout = args.timeout or 600 + args.messages // 20
    bench = Bench(args)
    try:
        print(json.dumps(bench.run(), indent=2), flush=True)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
