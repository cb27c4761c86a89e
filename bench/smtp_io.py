"""
SMTP I/O per message at delivery: the system calls and the reactor's wake-ups of the delivery
process while it delivers a fixed count of messages to a Postfix ``smtp-sink`` on loopback.

The set-up is bench/delivery.py's (an API node owning an embedded PostgreSQL cluster, the
tests' loopback DNS server, ``smtp-sink -c``, one tenant with a sending domain); then one
delivery node (role delivery, ``node.processes`` 1: the process is the worker) starts, and
once it is ready ``strace -c -f -p <its pid>`` is attached. ``--messages`` e-mails (one
recipient each) are accepted through ``POST /emails/batch`` and the count of system calls is
taken from the moment the first is accepted until the last outcome is written (strace is
stopped with SIGINT, which prints its summary). Wake-ups are the returns of ``epoll_wait``
(each one a turn of the reactor); the SMTP socket's calls are ``sendto``/``sendmsg``/``write``
and ``recvfrom``/``read``. The figures include the database's round trips (claims, renewals,
outcomes), which the batching of the delivery worker shares between messages.

    .venv/bin/python -m bench.smtp_io [--messages 3000] [--runs 3]   # needs strace and smtp-sink
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import time

from bench import common, delivery
from bench.common import load_average

#: The calls shown on their own (the rest are summed as "other").
SHOWN = ("epoll_wait", "epoll_ctl", "sendto", "sendmsg", "write", "recvfrom", "read", "futex")


def parse_strace(text: str) -> dict[str, int]:
    """``strace -c`` summary → {syscall: calls}."""
    calls = {}
    for line in text.splitlines():
        found = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
        if found and found.group(2) != "total":
            calls[found.group(2)] = int(found.group(1))
    return calls


class Bench(delivery.Bench):
    def run_once(self, n: int, first: int) -> dict:
        (node,) = self.start_delivery(1, {"MAILSVC_NODE_PROCESSES": "1"})
        common.settle(1)
        out = self.root / f"strace-{first}.txt"
        base = self.delivered()
        tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(node.pid)],
                                  stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached
        t0 = time.monotonic()
        self.accept(n, first)
        self.wait_delivered(base + n)
        elapsed = time.monotonic() - t0
        tracer.send_signal(signal.SIGINT)
        tracer.wait(60)
        node.stop()
        self.nodes.remove(node)
        calls = parse_strace(out.read_text())
        total = sum(calls.values())
        return {"total": total / n, "wakeups": calls.get("epoll_wait", 0) / n, "elapsed": elapsed,
                "calls": {k: v / n for k, v in calls.items()}}

    def run(self) -> None:
        self.setup()
        n = self.args.messages
        print(f"{os.cpu_count()} cores; load {load_average()}; {n:,} messages per run, one delivery process,"
              f" per_destination {self.args.per_destination}", flush=True)
        self.accept(500, 10_000_000)  # warm-up through the whole path
        warm = self.start_delivery(1)
        self.wait_delivered(500)
        for node in warm:
            node.stop()
        self.nodes = []
        results = []
        for run in range(self.args.runs):
            r = self.run_once(n, run * n)
            results.append(r)
            shown = "  ".join(f"{k} {r['calls'].get(k, 0):.2f}" for k in SHOWN)
            other = r["total"] - sum(r["calls"].get(k, 0) for k in SHOWN)
            print(f"run {run + 1}: {r['total']:.2f} syscalls/msg, {r['wakeups']:.2f} wake-ups/msg"
                  f" ({shown}  other {other:.2f}; {r['elapsed']:.1f} s under strace; load {load_average()})",
                  flush=True)
        print(f"median: {statistics.median(r['total'] for r in results):.2f} syscalls/msg,"
              f" {statistics.median(r['wakeups'] for r in results):.2f} wake-ups/msg")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=8, help="HTML rows per e-mail (8: 3.4 KB signed)")
    parser.add_argument("--per-destination", type=int, default=20, help="mailsvc delivery.per_destination")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return delivery.serve(args.serve)
    common.require(("smtp-sink", "strace"), "bench/delivery.sh (and apt-get install -y strace)")
    common.run_bench(Bench(args))


if __name__ == "__main__":
    main()
