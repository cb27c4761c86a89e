"""
The performance A/B (docs/benchmarks.md, "Performance A/B"): a base commit (A) against another
commit or the working tree (B).

Both sides in one run on one box, with two Postfix baselines in the same run: a plain one, and
one that DKIM-signs every message (RSA-2048) through an OpenDKIM milter, as mailsvc signs.

Each side is exported into a throw-away directory (``git archive``, or the working tree's
tracked and untracked files) and run with this checkout's venv, or with a venv of its own
when its ``pyproject.toml`` differs. The measuring code (this driver, bench/sending.py and
bench/delivery.py) is this checkout's for both sides, so the measure is the same; the server
processes are each side's own (``python -m bench.<module> --serve ...`` from its tree, or
``twistd mailsvc`` for a side whose configuration has ``node.processes``).

Rounds alternate the sides (A B, then B A, ...) so that both share the machine's drift; each
side's servers run only during its own measurements, and Postfix runs alone.

- e2e: ``POST /emails/batch`` (100 per request, 4 clients) of N × 5 KB e-mails → the
  delivery node → MX (loopback DNS) → ``smtp-sink``, timed from the first POST to all N
  delivered (bench/delivery.py "overlap"); the API node runs with the side's default
  processes (all cores where it knows ``node.processes``), and so does the delivery node
  (roles ``api,delivery``, its API unused: a node of several processes needs ``api``), which
  delivers in as many of them as the side's ``processes.worker_roles`` gives ``delivery``.
- Postfix: ``smtp-source -s 20`` (one 5 KB message per session) → a throw-away Postfix
  (``in_flow_delay = 0``, destination concurrency 20) → ``smtp-sink``, nothing else running;
  then the same through a second instance whose smtpd has each message signed by a throw-away
  OpenDKIM (``Mode s``, RSA-2048 key of its own, milter on a Unix socket, ``milter_default_action
  = tempfail``), after checking with dkimpy that a message it relayed verifies against that key.
- http, batch, smtp: bench/sending.py's ``POST /emails`` (wrk c=64), ``POST /emails/batch``
  (100 e-mails, wrk c=8) and direct SMTP submission (32 connections) on all cores: one node
  with ``MAILSVC_NODE_PROCESSES`` = cores where the side knows the key, else that many
  single-process nodes on one database (bench/sending.py's ``--processes``).
- delivery CPU: CPU of the delivery node (and any children) per message in the e2e run.

    bench/ab.sh BASE [HEAD] [--quick] [--rounds 3]   # HEAD: the working tree by default
    bench/ab.sh --baselines [--rounds 3] [--messages 20000]   # the two Postfix baselines alone
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from bench import common, delivery, sending
from bench.common import ROOT, Checkout, load_average

CORES = os.cpu_count() or 1
#: Rows of the HTML of bench/delivery.py's e-mail that make a 5 KB message (DKIM-signed).
ROWS_5KB = 18


# ---------------------------------------------------------------------------------------------
# The two sides


@dataclass
class Side:
    label: str  # "A" or "B"
    rev: str  # what was asked: a commit, or "" for the working tree
    commit: str  # what ran: a short hash, "+ changes" for a working tree that differs from it
    checkout: Checkout
    processes_key: bool  # the side's configuration knows node.processes


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def export(rev: str, into: Path) -> str:
    """The tree of ``rev`` (or of the working tree, for "") in ``into``; its description."""
    into.mkdir(parents=True)
    if rev:
        archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", rev], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
        if archive.wait():
            raise SystemExit(f"git archive {rev} failed")
        return git("rev-parse", "--short", rev)
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True).stdout
    present = b"\0".join(f for f in files.split(b"\0") if f and (ROOT / f.decode()).exists())
    packing = subprocess.Popen(["tar", "-c", "-C", str(ROOT), "--null", "-T", "-"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
    unpacking = subprocess.Popen(["tar", "-x", "-C", str(into)], stdin=packing.stdout)
    packing.stdin.write(present)
    packing.stdin.close()
    if packing.wait() or unpacking.wait():
        raise SystemExit("copying the working tree failed")
    changed = git("status", "--porcelain")
    return git("rev-parse", "--short", "HEAD") + (" + working-tree changes" if changed else "")


def python_for(tree: Path, venv: Path) -> str:
    """This checkout's Python when the tree wants the same packages; else a venv of its own."""
    if (tree / "pyproject.toml").read_bytes() == (ROOT / "pyproject.toml").read_bytes():
        return sys.executable
    print(f"{tree.name}: pyproject.toml differs from this checkout's; installing it in {venv}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "-e", str(tree)], check=True)
    return str(venv / "bin" / "python")


def knows_processes(checkout: Checkout) -> bool:
    probe = "import attrs; from mailsvc.config import NodeConfig; print('processes' in attrs.fields_dict(NodeConfig))"
    out = subprocess.run([checkout.python, "-c", probe], cwd=checkout.root, check=True, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(checkout.root))).stdout
    return out.strip() == "True"


def prepare(label: str, rev: str, scratch: Path) -> Side:
    tree = scratch / f"tree-{label.lower()}"
    commit = export(rev, tree)
    checkout = Checkout(tree, python_for(tree, scratch / f"venv-{label.lower()}"))
    return Side(label, rev, commit, checkout, knows_processes(checkout))


# ---------------------------------------------------------------------------------------------
# Nodes of several processes: twistd, as scripts/serve starts them


class TwistdNode(common.Node):
    """
    ``twistd mailsvc`` from the side's tree with ``node.processes`` = cores (its workers are
    its children), settings in the environment, its log in ``server.log``; ready when
    ``/healthz`` answers.
    """

    def __init__(self, root: Path, name: str, env: dict, url: str):
        self.dir = root / name
        self.state = self.dir / "state"
        self.data_dir = self.state / "postgresql" / "data"
        self.url = url
        self.dir.mkdir(parents=True)
        self.dir.chmod(0o755)
        checkout = common.SERVERS
        with open(self.dir / "server.log", "ab") as log:
            self.process = subprocess.Popen(
                [checkout.python, "-c", "from twisted.scripts.twistd import run; run()", "--nodaemon",
                 "--pidfile=", "mailsvc"],
                cwd=checkout.root, stdout=log, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONPATH=str(checkout.root), MAILSVC_STATE_DIR=str(self.state),
                         MAILSVC_NODE_PROCESSES=str(CORES), **env),
            )

    def wait_ready(self, seconds: float = 120) -> None:
        common.wait_for(self.url + "/healthz", self.process, seconds=seconds)


def server_processes(nodes: list[common.Node]) -> int:
    """The nodes' processes, their workers included, PostgreSQL's not."""
    postgres = set(common.postgres_pids(nodes[0].data_dir))
    return sum(1 for n in nodes for pid in common.process_tree(n.pid) if pid not in postgres)


# ---------------------------------------------------------------------------------------------
# One side's measurements


def end_to_end(side: Side, args) -> dict:
    """bench/delivery.py's "overlap" run (one delivery node), after a 1,000-message warm-up."""
    options = SimpleNamespace(messages=args.messages, rows=ROWS_5KB, per_destination=20)

    def start_api(root: Path, name: str, env: dict) -> common.Node:
        if not side.processes_key:
            return delivery.start_node(root, name, env)
        port = env["MAILSVC_HTTP_LISTEN"].split(":")[1]
        return TwistdNode(root, name, env, f"http://127.0.0.1:{port}")

    def start_deliverer(root: Path, name: str, env: dict) -> common.Node:
        if not side.processes_key:
            return delivery.start_node(root, name, env)
        port = common.free_port()
        return TwistdNode(root, name, {**env, "MAILSVC_NODE_ROLES": "api,delivery",
                                       "MAILSVC_HTTP_LISTEN": f"tcp:{port}:interface=127.0.0.1"},
                          f"http://127.0.0.1:{port}")

    bench = delivery.Bench(options, start_api, start_deliverer=start_deliverer)
    try:
        bench.setup()
        bench.accept(1000, 10_000_000)
        for node in bench.start_delivery(1):
            bench.wait_delivered(1000)
            node.stop()
        bench.nodes = []
        bench.sql("ANALYZE")
        r = bench.measure("overlap", 1, 0)
        if r["sink"] < args.messages:
            raise SystemExit(f"{side.label}: the sink counted {r['sink']} of {args.messages}")
        return {"e2e": r["rate"], "delivery_cpu_us": r["delivery_cpu_us"], "box_cpu_us": r["box_cpu_us"],
                "api_cpu_us": r["api_cpu_us"], "rest_cpu_us": r["rest_cpu_us"],

                "api_processes": server_processes([bench.api])}
    finally:
        bench.close()


def accepting(side: Side, args) -> dict:
    """bench/sending.py's POST /emails, POST /emails/batch and direct SMTP rounds, on all cores."""
    root = common.scratch_dir("mailsvc-ab-sending-")
    nodes: list[common.Node] = []
    db = None
    try:
        roles = {"MAILSVC_NODE_ROLES": "api,webhooks,scheduler"}
        if side.processes_key:
            http, smtp = common.free_port(), common.free_port()
            node = TwistdNode(root, "n1", {
                **roles, "MAILSVC_HTTP_LISTEN": f"tcp:{http}:interface=127.0.0.1",
                "MAILSVC_SMTP_SUBMISSION": f"tcp:{smtp}:interface=127.0.0.1", "MAILSVC_DNS_SERVERS": sending.DNS,
                "MAILSVC_MAIL_HOSTNAME": "mailsvc.bench.test"}, f"http://127.0.0.1:{http}")
            node.smtp = smtp
            nodes.append(node)
            node.wait_ready()
        else:
            nodes.append(sending.Node(root, "n1", roles))
        tenant = common.tenant_with_domain(nodes[0].url, nodes[0].state, sending.DOMAIN, {
            "api_rate_per_sec": 1_000_000, "daily_quota": 1_000_000_000, "monthly_quota": 1_000_000_000})
        db = tenant.db
        while not side.processes_key and len(nodes) < CORES:
            nodes.append(sending.Node(root, f"n{len(nodes) + 1}", {**tenant.shared_env, "MAILSVC_NODE_ROLES": "api"}))
        data_dir = nodes[0].data_dir
        one = sending.write_lua(root, "one", sending.email_json(), tenant.key)
        batch = sending.write_lua(root, "batch", [sending.email_json(n) for n in range(100)], tenant.key)
        urls = [n.url for n in nodes]
        found = {"processes": server_processes(nodes)}

        sending.wrk_all([u + "/emails" for u in urls], one, 64, 3)  # warm-up
        common.settle()
        r = sending.http_round(nodes, data_dir, one, "/emails", 64, args.duration, 1)
        found.update(http=r["rps"], http_p99=r["p99"], failed=r["non_2xx"] or bool(r["errors"]))

        sending.wrk_all([u + "/emails/batch" for u in urls], batch, 8, 3)
        common.settle()
        r = sending.http_round(nodes, data_dir, batch, "/emails/batch", 8, args.duration, 100)
        found.update(batch=r["emails_s"], failed=found["failed"] or r["non_2xx"] or bool(r["errors"]))

        sending.smtp_round(nodes, data_dir, tenant.key, 300, 32, db)  # warm-up
        common.settle()
        r = sending.smtp_round(nodes, data_dir, tenant.key, args.smtp_messages, 32, db)
        found.update(smtp=r["rate"], failed=found["failed"] or not r["complete"])
        return found
    finally:
        if db is not None:
            db.close()
        for node in reversed(nodes):
            node.stop(owner=node is nodes[0])
        shutil.rmtree(root, ignore_errors=True)


def signing_cost_us(side: Side) -> float | None:
    """The side's accept-side DKIM signing (RSA + ed25519) per message, from its ``bench.sending --micro``."""
    out = subprocess.run([side.checkout.python, "-m", "bench.sending", "--micro"], cwd=side.checkout.root,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(side.checkout.root)))
    found = re.search(r"mail\.dkim\.sign \(rsa-sha256 \+ ed25519-sha256\)\s+([\d.]+) µs", out.stdout)
    return float(found.group(1)) if found else None


# ---------------------------------------------------------------------------------------------
# The Postfix baseline, alone


class Baseline:
    """
    A throw-away Postfix and its sink, kept across rounds, idle while the sides run; with
    ``signing``, an OpenDKIM milter signs every message (RSA-2048), checked on one message
    after the warm-up. Its figures are keyed ``postfix`` or ``postfix_dkim``.
    """

    def __init__(self, signing: bool = False):
        self.key = "postfix_dkim" if signing else "postfix"
        self.root = common.scratch_dir(f"mailsvc-ab-{self.key}-")
        self.sink: delivery.Sink | None = None
        self.milter: delivery.OpenDKIM | None = None
        self.postfix: delivery.Postfix | None = None
        try:
            self.sink = delivery.Sink(self.root)
            self.milter = delivery.OpenDKIM(self.root) if signing else None
            self.postfix = delivery.Postfix(self.root, self.sink.port, 20, self.milter)
            self.postfix.start()
            delivery.relay_through_postfix(self.postfix, self.sink, 1000, delivery.SIZE_5KB)  # warm-up
            if signing:
                proof = delivery.check_signing(self.postfix, self.sink)
                print(f"Postfix + OpenDKIM: a message at the sink is signed ({proof})", flush=True)
        except BaseException:
            self.close()
            raise

    def measure(self, messages: int) -> dict:
        r = delivery.relay_through_postfix(self.postfix, self.sink, messages, delivery.SIZE_5KB)
        return {self.key: r["rate"], f"{self.key}_cpu": r["cpu"], f"{self.key}_cpu_us": r["cpu"] / r["rate"] * 1e6,
                f"{self.key}_box_cpu_us": r["box_cpu_us"]}

    def close(self) -> None:
        for part in (self.postfix, self.milter, self.sink):  # the milter outlives the Postfix that uses it
            if part is not None:
                part.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def measure_baselines(baselines: list[Baseline], messages: int, run: int) -> dict:
    """One round of each baseline, one after the other, nothing else of ours running."""
    found: dict = {}
    for baseline in baselines:
        found.update(baseline.measure(messages))
        print(f"round {run + 1} {'Postfix + OpenDKIM' if baseline.milter else 'Postfix'} (load {load_average()}): "
              f"{found[baseline.key]:,.0f} msg/s, Postfix CPU {found[baseline.key + '_cpu']:.2f} "
              f"({found[baseline.key + '_cpu_us']:,.0f} µs/msg), whole box {found[baseline.key + '_box_cpu_us']:,.0f} "
              "µs/msg", flush=True)
    return found


# ---------------------------------------------------------------------------------------------
# The table


def median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def spread(runs: list[dict], key: str, fmt: str) -> str:
    values = [r[key] for r in runs if r.get(key) is not None]
    return f"{min(values):{fmt}}–{max(values):{fmt}}" if len(values) > 1 and min(values) != max(values) else ""


def table(a: list[dict], b: list[dict], pf: list[dict], signing: float | None) -> list[str]:
    """Medians over the rounds (spread in brackets), ratio B/A, target; one line per measure."""
    pf_rate = median(pf, "postfix")
    rows = []

    def row(name: str, key: str, fmt: str, target: str) -> None:
        va, vb = median(a, key), median(b, key)
        ratio = f"{vb / va:.2f}×" if va and vb else "—"
        cells = [f"{v:{fmt}} ({spread(runs, key, fmt)})" if v is not None and spread(runs, key, fmt)
                 else (f"{v:{fmt}}" if v is not None else "—") for v, runs in ((va, a), (vb, b))]
        rows.append(f"| {name} | {cells[0]} | {cells[1]} | {ratio} | {target} |")

    dkim_rate = median(pf, "postfix_dkim")

    def over(key: str, baseline: float | None, into: str) -> None:
        for runs in (a, b):
            for r in runs:
                r[into] = r[key] / baseline if baseline else None

    row("end to end, 5 KB, POST /emails/batch → sink (msg/s)", "e2e", ",.0f", "—")
    over("e2e", pf_rate, "e2e_vs_postfix")
    row("  ÷ Postfix in the same run (median " + (f"{pf_rate:,.0f} msg/s" if pf_rate else "—") + ")",
        "e2e_vs_postfix", ".2f", "B ≥ 2.0×")
    over("e2e", dkim_rate, "e2e_vs_postfix_dkim")
    row("  ÷ Postfix signing (OpenDKIM, RSA-2048) in the same run (median "
        + (f"{dkim_rate:,.0f} msg/s" if dkim_rate else "—") + ")", "e2e_vs_postfix_dkim", ".2f", "report")
    pf_box, dkim_box = median(pf, "postfix_box_cpu_us"), median(pf, "postfix_dkim_box_cpu_us")
    row("whole-box CPU per message end to end (µs; every process, load generator and sink included)",
        "box_cpu_us", ",.0f", "Postfix in the same run: " + (f"{pf_box:,.0f} µs" if pf_box else "—")
        + "; signing: " + (f"{dkim_box:,.0f} µs" if dkim_box else "—"))
    over("box_cpu_us", pf_box, "box_vs_postfix")
    row("  ÷ Postfix's", "box_vs_postfix", ".2f", "report")
    over("box_cpu_us", dkim_box, "box_vs_postfix_dkim")
    row("  ÷ signing Postfix's", "box_vs_postfix_dkim", ".2f", "report")
    row("  of it the API node's (µs)", "api_cpu_us", ",.0f", "—")
    row("  of it neither node's: PostgreSQL, load generator, sink (µs)", "rest_cpu_us", ",.0f", "—")
    row(f"POST /emails, c=64, all {CORES} cores (req/s)", "http", ",.0f", "≥ 2×")
    row("  p99 (ms)", "http_p99", ",.0f", "B < 50 ms")
    row("POST /emails/batch of 100 (e-mails/s)", "batch", ",.0f", "≥ 2×")
    row("SMTP submission, direct client, 32 connections (msg/s)", "smtp", ",.0f", "≥ 1.5×")
    va, vb = median(a, "delivery_cpu_us"), median(b, "delivery_cpu_us")
    target = "B − A ≤ 1.1 × A's signing" + (f" ({signing:,.0f} µs): {'met' if vb - va <= 1.1 * signing else 'missed'}"
                                           if signing and va and vb else "")
    row("delivery node CPU per message (µs)", "delivery_cpu_us", ",.0f", target)
    row("  (API node processes, end to end)", "api_processes", ".0f", "—")
    row("  (server processes, POST /emails)", "processes", ".0f", "—")
    return rows


def baselines_table(pf: list[dict]) -> list[str]:
    """The two Postfix baselines alone (``--baselines``): medians (spread) over the rounds."""
    rows = []
    for name, key in (("Postfix", "postfix"), ("Postfix + OpenDKIM (RSA-2048)", "postfix_dkim")):
        for what, suffix, fmt in (("msg/s", "", ",.0f"), ("Postfix CPU (cores; the milter's included)", "_cpu", ".2f"),
                                  ("  per message (µs)", "_cpu_us", ",.0f"),
                                  ("whole-box CPU per message (µs)", "_box_cpu_us", ",.0f")):
            values = spread(pf, key + suffix, fmt)
            rows.append(f"| {name}: {what} | {median(pf, key + suffix):{fmt}}{f' ({values})' if values else ''} |")
    for what, suffix in (("Postfix CPU", "_cpu_us"), ("whole-box CPU", "_box_cpu_us")):
        signing = median(pf, "postfix_dkim" + suffix) - median(pf, "postfix" + suffix)
        rows.append(f"| what signing adds: {what} per message (µs) | {signing:,.0f} |")
    return rows


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("base", nargs="?", help="commit A (e.g. the commit before a change)")
    parser.add_argument("head", nargs="?", default="", help="commit B (default: the working tree)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=20_000, help="e-mails per end-to-end and Postfix run")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk round")
    parser.add_argument("--smtp-messages", type=int, default=3000)
    parser.add_argument("--quick", action="store_true",
                        help="a trial: 1 round, 3,000 messages, 5 s wrk rounds, 1,000 SMTP messages")
    parser.add_argument("--baselines", action="store_true",
                        help="measure only the two Postfix baselines (plain, and signing with OpenDKIM); no commits")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.messages, args.duration, args.smtp_messages = 1, 3000, 5, 1000
    if not args.base and not args.baselines:
        parser.error("BASE is needed, unless --baselines")
    common.require(("wrk", "smtp-sink", "smtp-source", "postfix", "opendkim", "opendkim-genkey"), "bench/ab.sh")
    baselines: list[Baseline] = []
    try:
        baselines.append(Baseline())
        baselines.append(Baseline(signing=True))
        if args.baselines:
            postfix = [measure_baselines(baselines, args.messages, run) for run in range(args.rounds)]
            print(f"\n{args.rounds} round(s), {args.messages:,} messages of {delivery.SIZE_5KB:,} bytes, "
                  f"{CORES} cores; medians (spread)\n\n| measure | value |\n|---|---|")
            print("\n".join(baselines_table(postfix)))
        else:
            compare(args, baselines)
    finally:
        for baseline in baselines:
            baseline.close()


def compare(args, baselines: list[Baseline]) -> None:
    """The A/B's rounds and its table."""
    scratch = common.scratch_dir("mailsvc-ab-")
    started = time.monotonic()
    try:
        sides = [prepare("A", args.base, scratch), prepare("B", args.head, scratch)]
        for side in sides:
            print(f"{side.label}: {side.commit} in {side.checkout.root} "
                  f"({'node.processes' if side.processes_key else f'{CORES} single-process nodes'})", flush=True)
        signing = signing_cost_us(sides[0])
        print(f"A's accept-side signing: {signing} µs per message", flush=True)
        results: dict[str, list[dict]] = {"A": [], "B": []}
        postfix: list[dict] = []
        for run in range(args.rounds):
            for side in sides if run % 2 == 0 else sides[::-1]:
                common.SERVERS = side.checkout
                r = {**end_to_end(side, args), **accepting(side, args)}
                results[side.label].append(r)
                print(f"round {run + 1} {side.label} (load {load_average()}): " +
                      ", ".join(f"{k} {v:,.0f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()),
                      flush=True)
            postfix.append(measure_baselines(baselines, args.messages, run))
        print(f"\nA = {sides[0].commit}, B = {sides[1].commit}; {args.rounds} round(s), {args.messages:,} messages, "
              f"{CORES} cores, {(time.monotonic() - started) / 60:.0f} min; medians (spread)\n")
        print("| measure | A | B | B/A | target |\n|---|---|---|---|---|")
        print("\n".join(table(results["A"], results["B"], postfix, signing)))
        if any(r["failed"] for runs in results.values() for r in runs):
            raise SystemExit("some requests failed or messages were not stored; the figures are not valid")
    finally:
        common.SERVERS = Checkout(ROOT, sys.executable)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
