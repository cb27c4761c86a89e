"""
Authenticated HTTP requests per second.

Starts a node the way the daemon does (``root.build``: embedded PostgreSQL with its default
durable settings in a throw-away state directory, migrations, loops, HTTP listener) in a
process of its own, creates a tenant with an unlimited API rate through the operator API, and
drives ``GET /api-keys`` and an authenticated no-op route (registered only in this benchmark's
server) with wrk at a fixed concurrency, several rounds. Prints requests/s, p50 and p99.

    bench/run.sh                                  # installs wrk if missing, then runs this
    .venv/bin/python -m bench.http_auth [--runs 3] [--duration 10] [--connections 32]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess

from bench import common
from bench.common import Meter, free_port, wait_for

NOOP = "/bench/noop"
ROUTES = ("/api-keys", NOOP)


def serve(state_dir: str, port: int) -> None:
    """The server process: a node as ``twistd mailsvc`` builds it, plus the no-op route."""
    def add_noop_route(node):
        from mailsvc.http.router import SENDING, route

        class Noop:
            @route("GET", NOOP, access=SENDING)
            async def noop(self, request, caller):
                return {}

        node.parts.assembled.router.mount(Noop())

    common.serve(state_dir, {"MAILSVC_HTTP_LISTEN": f"tcp:{port}:interface=127.0.0.1"}, inherit=False,
                 on_ready=add_noop_route)


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _milliseconds(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(number) * _UNITS_MS[unit]


def parse_wrk(output: str) -> dict:
    """Requests/s, p50/p99 (ms), and the failures wrk counted."""
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", output, re.MULTILINE))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)$", output, re.MULTILINE)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": _milliseconds(latency["50"]),
        "p99": _milliseconds(latency["99"]),
        "requests": int(re.search(r"(\d+) requests in", output).group(1)),
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": errors.group(1).strip() if errors else "",
    }


def wrk(url: str, token: str, connections: int, duration: int) -> str:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency",
               "-H", f"Authorization: Bearer {token}", url]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def row(run: int, route: str, f: dict, load: float) -> str:
    failed = f"  FAILED: {f['non_2xx']} non-2xx {f['socket_errors']}" if f["non_2xx"] or f["socket_errors"] else ""
    return (f"{run:>3} {route:<12} {f['rps']:>8.0f} {f['p50']:>7.2f} {f['p99']:>7.2f} {f['server_cpu']:>10.0%} "
            f"{f['cpu_us']:>10.0f} {f['pg_cpu']:>7.0%} {load:>5.2f}{failed}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10, help="seconds per route per run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds per route before the runs")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--serve", nargs=2, metavar=("STATE_DIR", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    common.require(("wrk",), "bench/run.sh")

    root = common.scratch_dir("mailsvc-bench-")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = common.Node(root, "node", "bench.http_auth", (str(port),))
    try:
        wait_for(url + "/healthz", server.process)
        operator = (server.state / "operator-token").read_text().strip()
        _, tenant = common.call(url + "/admin/v1/tenants", "POST", operator, {"name": "bench"})
        common.call(url + f"/admin/v1/tenants/{tenant['id']}", "PATCH", operator, {"api_rate_per_sec": 1_000_000})
        key = tenant["api_key"]["token"]
        wait_for(url + NOOP, server.process, key)
        for route in ROUTES:
            wrk(url + route, key, args.connections, args.warmup)

        print(f"{os.cpu_count()} cores, wrk -t1 -c{args.connections} -d{args.duration}s on the same machine; "
              f"embedded PostgreSQL (durable defaults)")
        print(f"{'run':>3} {'route':<12} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'server CPU':>10} "
              f"{'CPU µs/req':>10} {'pg CPU':>7} {'load':>5}")
        results: dict[str, list[dict]] = {route: [] for route in ROUTES}
        for run in range(1, args.runs + 1):
            for route in ROUTES:
                load = float(common.load_average())
                meter = Meter([server.pid], server.data_dir)
                meter.start()
                figures = parse_wrk(wrk(url + route, key, args.connections, args.duration))
                m = meter.done()
                figures["server_cpu"] = m["cpu_s"] / m["elapsed"]
                figures["pg_cpu"] = m["pg_cpu"]
                figures["cpu_us"] = figures["server_cpu"] / figures["rps"] * 1e6
                results[route].append(figures)
                print(row(run, route, figures, load), flush=True)
        print()
        for route, runs in results.items():
            best = max(runs, key=lambda r: r["rps"])
            rates = [r["rps"] for r in runs]
            print(f"{route:<12} best {best['rps']:.0f} req/s (p50 {best['p50']:.2f} ms, p99 {best['p99']:.2f} ms); "
                  f"spread {min(rates):.0f}-{max(rates):.0f} req/s over {len(runs)} runs")
        if any(r["non_2xx"] or r["socket_errors"] for runs in results.values() for r in runs):
            raise SystemExit("some requests failed; the figures are not valid")
    finally:
        server.stop(owner=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
