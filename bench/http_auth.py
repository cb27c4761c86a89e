"""
Authenticated HTTP requests per second (issue 2, item 10).

Starts a node the way the daemon does (``compose.build``: embedded PostgreSQL with its default
durable settings in a throw-away state directory, migrations, loops, HTTP listener) in a
process of its own, creates a tenant with an unlimited API rate through the operator API, and
drives ``GET /api-keys`` and an authenticated no-op route (registered only in this benchmark's
server) with wrk at a fixed concurrency, several rounds. Prints requests/s, p50 and p99.

    bench/run.sh                                  # installs wrk if missing, then runs this
    .venv/bin/python -m bench.http_auth [--runs 3] [--duration 10] [--connections 32]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.common import cpu_seconds, free_port, postgres_pids

ROOT = Path(__file__).resolve().parent.parent
NOOP = "/bench/noop"
ROUTES = ("/api-keys", NOOP)


def serve(state_dir: str, port: int) -> None:
    """The server process: a node as ``twistd mailsvc`` builds it, plus the no-op route."""
    from twisted.internet import reactor
    from twisted.logger import globalLogBeginner, jsonFileLogObserver

    from mailsvc import compose
    from mailsvc.config import load
    from mailsvc.http.router import SENDING

    config = load(None, environ={
        "MAILSVC_STATE_DIR": state_dir,
        "MAILSVC_HTTP_LISTEN": f"tcp:{port}:interface=127.0.0.1",
    })
    log_file = open(Path(state_dir).parent / "server.log", "a", encoding="utf-8")
    globalLogBeginner.beginLoggingTo([jsonFileLogObserver(log_file)], redirectStandardIO=False)
    node = compose.build(config)

    def add_noop_route(node):
        @node.parts["assembled"].router.route(NOOP, "GET", access=SENDING)
        async def noop(request, caller):
            return {}

    node.ready.addCallback(add_noop_route)
    reactor.callWhenRunning(node.startService)
    reactor.addSystemEventTrigger("before", "shutdown", node.stopService)
    reactor.run()  # SIGTERM stops the reactor, which stops the node (and its cluster)


def call(url: str, method: str = "GET", token: str | None = None, body: dict | None = None):
    request = urllib.request.Request(
        url, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read() or b"null")


def wait_for(url: str, server: subprocess.Popen, token: str | None = None, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}; see its log")
        try:
            call(url, token=token)
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {seconds} s")


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


def stop(server: subprocess.Popen, data_dir: Path) -> None:
    """SIGTERM the server (it stops its cluster); if that fails, stop the cluster ourselves."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    leftover = postgres_pids(data_dir)
    if leftover:
        os.kill(leftover[0], signal.SIGQUIT)  # immediate shutdown of the cluster we started
        deadline = time.monotonic() + 30
        while (data_dir / "postmaster.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.2)


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
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: run bench/run.sh, which installs it")

    root = Path(tempfile.mkdtemp(prefix="mailsvc-bench-"))
    root.chmod(0o755)  # the embedded cluster's unprivileged owner must reach its directory
    state, port = root / "state", free_port()
    data_dir = state / "postgresql" / "data"
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.http_auth", "--serve", str(state), str(port)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        wait_for(url + "/healthz", server)
        operator = (state / "operator-token").read_text().strip()
        _, tenant = call(url + "/admin/v1/tenants", "POST", operator, {"name": "bench"})
        call(url + f"/admin/v1/tenants/{tenant['id']}", "PATCH", operator, {"api_rate_per_sec": 1_000_000})
        key = tenant["api_key"]["token"]
        wait_for(url + NOOP, server, key)
        for route in ROUTES:
            wrk(url + route, key, args.connections, args.warmup)

        print(f"{os.cpu_count()} cores, wrk -t1 -c{args.connections} -d{args.duration}s on the same machine; "
              f"embedded PostgreSQL (durable defaults)")
        print(f"{'run':>3} {'route':<12} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'server CPU':>10} "
              f"{'CPU µs/req':>10} {'pg CPU':>7} {'load':>5}")
        results: dict[str, list[dict]] = {route: [] for route in ROUTES}
        for run in range(1, args.runs + 1):
            for route in ROUTES:
                load = float(Path("/proc/loadavg").read_text().split()[0])
                pg = postgres_pids(data_dir)
                before = (cpu_seconds([server.pid]), cpu_seconds(pg), time.monotonic())
                figures = parse_wrk(wrk(url + route, key, args.connections, args.duration))
                elapsed = time.monotonic() - before[2]
                figures["server_cpu"] = (cpu_seconds([server.pid]) - before[0]) / elapsed
                figures["pg_cpu"] = (cpu_seconds(pg) - before[1]) / elapsed
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
        stop(server, data_dir)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
