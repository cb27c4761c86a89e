"""
``POST /emails`` against the daemon as operators run it: ``twistd -n mailsvc``
with ``node.processes`` = 1, 2, ... on one HTTP port, the workers taking connections from the
one socket their parent opened (docs/decisions.md, "Processes of a node"). Unlike
``bench/sending.py --processes``, which runs separate nodes on separate ports and splits wrk's
connections between them evenly, the kernel's accept queue decides here which worker serves a
connection. Prints requests/s, latency, and the CPU of each process (how evenly the workers share).

    .venv/bin/python -m bench.node_processes [--processes 1,2] [--runs 3] [--duration 10] [--connections 64]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench import common
from bench.common import Meter, cpu_seconds, free_port, load_average, wait_for
from bench.sending import DNS, DOMAIN, email_json, write_lua, wrk_all


def measure(processes: int, runs: int, duration: int, connections: int) -> list[dict]:
    root = common.scratch_dir("mailsvc-bench-processes-")
    state, port = root / "state", free_port()
    url = f"http://127.0.0.1:{port}"
    data_dir = state / "postgresql" / "data"
    environ = dict(
        os.environ, PYTHONPATH=str(common.ROOT), MAILSVC_STATE_DIR=str(state),
        MAILSVC_HTTP_LISTEN=f"tcp:{port}:interface=127.0.0.1", MAILSVC_SMTP_SUBMISSION="", MAILSVC_SMTP_INBOUND="",
        # No delivery role: what is measured is accepting; nothing leaves the machine.
        MAILSVC_NODE_ROLES="api,webhooks,scheduler", MAILSVC_DNS_SERVERS=DNS,
        MAILSVC_MAIL_HOSTNAME="mailsvc.bench.test", MAILSVC_NODE_PROCESSES=str(processes),
    )
    with open(root / "server.log", "w") as log:
        server = subprocess.Popen([str(Path(sys.executable).parent / "twistd"), "-n", "--pidfile=", "mailsvc"],
                                  env=environ, cwd=common.ROOT, stdout=log, stderr=log)
    results = []
    try:
        wait_for(url + "/healthz", server)
        tenant = common.tenant_with_domain(url, state, DOMAIN, {
            "api_rate_per_sec": 1_000_000, "daily_quota": 1_000_000_000, "monthly_quota": 1_000_000_000})
        script = write_lua(root, "one", email_json(), tenant.key)
        postgres = set(common.postgres_pids(data_dir))
        (root / "server.pid").write_text(str(server.pid))
        pids = [pid for pid in common.with_children(root / "server.pid") if pid not in postgres]
        wrk_all([url + "/emails"], script, connections, 3)  # warm-up
        for run in range(1, runs + 1):
            before = {pid: cpu_seconds([pid]) for pid in pids}
            meter = Meter(pids, data_dir)
            meter.start()
            (wrk,) = wrk_all([url + "/emails"], script, connections, duration)
            m = meter.done()
            shares = " ".join(f"{(cpu_seconds([pid]) - before[pid]) / m['elapsed']:.0%}" for pid in pids)
            results.append(wrk)
            print(f"{processes} process(es), run {run}: {wrk['rps']:>6.0f} req/s  p50 {wrk['p50']:6.1f} ms  "
                  f"p99 {wrk['p99']:6.1f} ms  non-2xx {wrk['non_2xx']}  server CPU {m['cpu_s'] / m['elapsed']:.0%} "
                  f"(parent, workers: {shares})  pg CPU {m['pg_cpu']:.0%}  load {load_average()}", flush=True)
        tenant.db.close()
    finally:
        common.stop(server, data_dir)
        shutil.rmtree(root, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--processes", default="1,2", help="node.processes values to measure, e.g. 1,2")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk round")
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args(argv)
    common.require(("wrk",), "bench/sending.sh")
    print(f"{os.cpu_count()} cores; server, PostgreSQL and wrk share them; load {load_average()}", flush=True)
    best = {n: max(r["rps"] for r in measure(n, args.runs, args.duration, args.connections))
            for n in (int(c) for c in args.processes.split(","))}
    print("\n" + "; ".join(f"node.processes={n}: best {rps:,.0f} req/s" for n, rps in best.items()))


if __name__ == "__main__":
    main()
