"""
CPU budget per message (docs/benchmarks.md, "CPU budget per message"): the CPU that one
message costs end to end, ``POST /emails/batch`` to ``smtp-sink``, in µs, stage by stage.

bench/delivery.py's set-up: an API node (roles api,webhooks,scheduler: the webhook fan-out
runs, no webhook is subscribed) owning the embedded cluster, one delivery node (role
delivery), the loopback DNS server, ``smtp-sink``; 5 KB messages (18 HTML rows, signed
twice), 100 per request from 4 client threads of this process. After a 1,000-message
warm-up through the whole path and ``ANALYZE``, N messages are posted and timed until all N
are delivered and their events fanned out. Meanwhile:

- /proc: the CPU (user + system) of each process: the two nodes, PostgreSQL's processes
  (those of the start, and those started meanwhile), this process (the load generator; the
  sampler below left out), the sink and the DNS server; py-spy's own CPU is reported apart
  and counts toward none of them. ``/proc/stat`` gives the whole machine's, which includes
  whatever else runs on it.
- py-spy (``record --nonblocking --format raw``, installed with pip if missing) on each
  node: each sample is put in a stage by bench/stages.py; a stage's µs per message is its
  share of the node's samples times the node's CPU per message.
- pg_stat_activity, sampled every 10 ms on a connection of its own (its backend left out of
  PostgreSQL's CPU): the statements active on the CPU (no wait event), sorted into stages by
  bench/stages.py's STATEMENTS; PostgreSQL's CPU is split by those shares.

    .venv/bin/python -m bench.budget --messages 20000             # this checkout's tree
    .venv/bin/python -m bench.budget --before 2226211 --after HEAD  # both, back to back
    bench/budget.sh 2226211 [HEAD]                                # the same, installing what is missing

``--before``/``--after`` export each commit with ``git archive`` into a throw-away directory
(bench/ab.py's ``prepare``) and run its servers from there; the measuring code is this
checkout's for both. ``--json FILE`` keeps the figures; ``--compare A.json B.json`` prints
two kept runs side by side.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from bench import common, delivery, pyspy_shares, stages
from bench.common import ROOT, Checkout, load_average

#: 5 KB messages as they leave (bench/ab.py's end-to-end run).
ROWS_5KB = 18
#: Targets (docs/benchmarks.md): the whole path, and the delivery node, per message.
BOX_TARGET_US = 2_000
DELIVERY_TARGET_US = 900
PG = "PostgreSQL"


# ---------------------------------------------------------------------------------------------
# Tools


def pyspy() -> str:
    """py-spy beside this Python, installed with pip when it is not there."""
    beside = Path(sys.executable).parent / "py-spy"
    found = shutil.which("py-spy") or (str(beside) if beside.exists() else None)
    if found is None:
        print("py-spy is missing: installing it with pip", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=True)
        found = str(beside)
    return found


class Recorder:
    """``py-spy record`` of one process until stop() (SIGINT: it writes its profile then)."""

    def __init__(self, root: Path, name: str, pid: int, rate: int):
        self.out = root / f"pyspy-{name}.txt"
        self.log = open(root / f"pyspy-{name}.log", "wb")
        self.process = subprocess.Popen(
            [pyspy(), "record", "--pid", str(pid), "--nonblocking", "--format", "raw", "--rate", str(rate),
             "-o", str(self.out)], stdout=self.log, stderr=subprocess.STDOUT)

    def cpu(self) -> float:
        return common.cpu_seconds([self.process.pid])

    def stop(self) -> Path:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        if not self.out.exists():
            raise SystemExit(f"py-spy wrote no profile; see {self.log.name}")
        return self.out


class Statements(threading.Thread):
    """pg_stat_activity every 10 ms: the statements on the CPU, by stage; its own backend's pid."""

    def __init__(self, dsn: str, leave_out: list[int]):
        import psycopg2

        super().__init__(daemon=True)
        self.db = psycopg2.connect(dsn)
        self.db.autocommit = True
        with self.db.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            self.backend = cur.fetchone()[0]
        self.leave_out = [self.backend, *leave_out]
        self.counts: collections.Counter = collections.Counter()
        self.texts: collections.Counter = collections.Counter()
        self.samples = 0
        self.cpu = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        start = time.thread_time()
        with self.db.cursor() as cur:
            while not self.done.is_set():
                cur.execute("SELECT query FROM pg_stat_activity WHERE state = 'active' AND wait_event_type IS NULL"
                            " AND pid <> ALL(%s) AND datname = current_database()", (self.leave_out,))
                self.samples += 1
                for (query,) in cur.fetchall():
                    self.counts[stages.statement_stage(query)] += 1
                    self.texts[" ".join(query.split())[:90]] += 1
                self.done.wait(0.01)
        self.cpu = time.thread_time() - start

    def stop(self) -> None:
        self.done.set()
        self.join()
        self.db.close()


# ---------------------------------------------------------------------------------------------
# The stages present in a tree


def defined(tree: Path, module: str, qualname: str) -> bool:
    """Whether ``module`` of ``tree`` (read, not imported) defines ``qualname`` (``*``: exists)."""
    base = tree / module.replace(".", "/")
    path = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
    if not path.exists():
        return base.is_dir()
    if qualname == "*":
        return True
    body = ast.parse(path.read_text()).body
    for part in qualname.split("."):
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == part]
        if not found:
            return False
        body = found[0].body
    return True


def check_tree(tree: Path) -> None:
    """Every stage names a mailsvc function of ``tree`` (or only libraries'): else a stage would
    be empty there without a word."""
    for stage in stages.STAGES:
        ours = [p for p in stage.patterns + stage.earlier if p[0].startswith("mailsvc")]
        if ours and not any(defined(tree, *p) for p in ours):
            raise SystemExit(f"{tree}: no function of the stage {stage.name!r} exists there (bench/stages.py)")


# ---------------------------------------------------------------------------------------------
# One side


def start_api(root: Path, name: str, env: dict) -> common.Node:
    return delivery.start_node(root, name, {**env, "MAILSVC_NODE_ROLES": "api,webhooks,scheduler"})


def fanned_out(bench: delivery.Bench) -> bool:
    """No event waits for the webhook fan-out (the hand-over table, or the events' flag before it)."""
    if bench.sql("SELECT to_regclass('webhook_handover') IS NOT NULL")[0][0]:
        return bench.sql("SELECT NOT EXISTS (SELECT 1 FROM webhook_handover)")[0][0]
    return bench.sql("SELECT NOT EXISTS (SELECT 1 FROM events WHERE NOT fanned_out)")[0][0]


def wait_delivered(bench: delivery.Bench, target: int, seconds: float = 1800) -> None:
    """bench.wait_delivered's, counting twice a second, not twenty times: the count's statement
    is this process's, left out of PostgreSQL's CPU, but it would slow the box."""
    deadline = time.monotonic() + seconds
    while bench.delivered() < target:
        if time.monotonic() > deadline or any(node.exited() for node in bench.nodes):
            raise SystemExit(f"only {bench.delivered()} of {target} delivered; see {bench.root}")
        time.sleep(0.5)


def cpu_of(groups: dict[str, list[int]]) -> dict[str, float]:
    return {name: common.cpu_seconds(pids) for name, pids in groups.items()}


def measure(args, label: str, commit: str) -> dict:
    options = SimpleNamespace(messages=args.messages, rows=ROWS_5KB, per_destination=20)
    bench = delivery.Bench(options, start_api, prefix="mailsvc-bench-budget-")
    recorders: list[Recorder] = []
    try:
        bench.setup()
        bench.accept(1000, 10_000_000)
        (node,) = bench.start_delivery(1)
        bench.wait_delivered(1000)
        common.wait_until(lambda: fanned_out(bench), 120, 0.2)
        bench.sql("ANALYZE")
        common.settle()
        assert bench.api is not None and bench.dns is not None
        pg_at_start = set(common.postgres_pids(bench.api.data_dir))
        polling = bench.sql("SELECT pg_backend_pid()")[0][0]  # this process's own connection
        sampler = Statements(bench.tenant.dsn, [polling])
        recorders = [Recorder(bench.root, "api", bench.api.pid, args.rate),
                     Recorder(bench.root, "delivery", node.pid, args.rate)]
        time.sleep(1)  # py-spy attached
        groups = {"api": common.process_tree(bench.api.pid), "delivery": common.process_tree(node.pid),
                  "sink": [bench.sink.process.pid], "dns": [bench.dns.pid], "load": [os.getpid()]}
        groups["api"] = [p for p in groups["api"] if p not in pg_at_start]
        pg = [p for p in pg_at_start if p not in sampler.leave_out]
        load_start = load_average()
        before = {**cpu_of(groups), PG: common.cpu_seconds(pg), "py-spy": sum(r.cpu() for r in recorders),
                  "box": common.box_cpu_seconds()}
        base_delivered = bench.delivered()
        sampler.start()
        t0 = time.monotonic()
        bench.accept(args.messages, 0)
        wait_delivered(bench, base_delivered + args.messages)
        delivered_at = time.monotonic()
        common.wait_until(lambda: fanned_out(bench), 120, 0.1)
        elapsed = time.monotonic() - t0
        sampler.stop()
        pg_now = set(common.postgres_pids(bench.api.data_dir))
        # Backends started meanwhile (a new pool connection, autovacuum) count whole.
        pg_new = [p for p in pg_now - pg_at_start if p not in sampler.leave_out]
        after = {**cpu_of(groups), PG: common.cpu_seconds(pg) + common.cpu_seconds(pg_new),
                 "py-spy": sum(r.cpu() for r in recorders), "box": common.box_cpu_seconds()}
        load_end = load_average()
        profiles = {name: r.stop() for name, r in zip(("api", "delivery"), recorders, strict=True)}
        recorders = []
        n = args.messages
        cpu_us = {k: (after[k] - before[k]) / n * 1e6 for k in before}
        cpu_us["load"] -= sampler.cpu / n * 1e6
        samples = {}
        for name, path in profiles.items():
            counts: collections.Counter = collections.Counter()
            for frames, count in pyspy_shares.stacks(str(path)):
                counts[stages.stage_of(name, frames)] += count
            samples[name] = dict(counts)
            if args.keep:
                shutil.copy(path, Path(args.keep) / f"{label}-{name}.txt")
        return {
            "label": label, "commit": commit, "messages": n, "elapsed": elapsed,
            "rate": n / (delivered_at - t0), "load": [load_start, load_end],
            "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpu_us": cpu_us, "samples": samples,
            "statements": dict(sampler.counts), "statement_samples": sampler.samples,
            "top_statements": sampler.texts.most_common(12), "sink": bench.sink.count(),
        }
    finally:
        for r in recorders:
            r.stop()
        bench.close()


def same_packages(tree: Path) -> bool:
    """Whether ``tree`` wants the packages this checkout's venv has (its pyproject's project and
    build tables, not the tools' settings)."""
    def wanted(root: Path) -> tuple:
        data = tomllib.loads((root / "pyproject.toml").read_text())
        return data.get("project"), data.get("build-system")

    return wanted(tree) == wanted(ROOT)


def side(args, label: str, rev: str | None) -> dict:
    """One measurement of ``rev``'s servers (None: this checkout's tree)."""
    if rev is None:
        check_tree(ROOT)
        common.SERVERS = Checkout(ROOT, sys.executable)
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        return measure(args, label, commit + (" (working tree)" if commit else ""))
    from bench import ab

    scratch = common.scratch_dir("mailsvc-budget-tree-")
    try:
        tree = scratch / f"tree-{label}"
        commit = ab.export(rev, tree)
        check_tree(tree)
        python = sys.executable if same_packages(tree) else ab.python_for(tree, scratch / f"venv-{label}")
        common.SERVERS = Checkout(tree, python)
        return measure(args, label, commit)
    finally:
        common.SERVERS = Checkout(ROOT, sys.executable)
        shutil.rmtree(scratch, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The table


def rows(run: dict) -> list[tuple[str, str, float | None, float]]:
    """``(stage, where, share of where's samples or None, µs per message)``, in the path's order."""
    cpu, out = run["cpu_us"], []
    for process in ("api", "delivery"):
        counts = run["samples"][process]
        total = sum(counts.values()) or 1
        for name in stages.ORDER:
            if name in counts:
                out.append((name, process, counts[name] / total, counts[name] / total * cpu[process]))
    statements = run["statements"]
    total = sum(statements.values())
    for name in [*stages.ORDER, "other statements"]:
        if name in statements:
            out.append((name, PG, statements[name] / total, statements[name] / total * cpu[PG]))
    if not total:
        out.append(("all statements (none sampled)", PG, None, cpu[PG]))
    return out


WHERE = {"api": "API node", "delivery": "delivery node", PG: PG}
TOTALS = (("API node", "api"), ("delivery node", "delivery"), (PG, PG), ("load generator (this process)", "load"),
          ("smtp-sink", "sink"), ("DNS server", "dns"))


def path_total(run: dict) -> float:
    return sum(run["cpu_us"][k] for _, k in TOTALS)


def conditions(run: dict) -> str:
    return (f"{run['label']}: {run['commit']}, {run['at']}, {run['messages']:,} messages, {run['rate']:,.0f} msg/s"
            f" ({run['elapsed']:.1f} s to all delivered and fanned out), load {run['load'][0]} → {run['load'][1]},"
            f" {sum(run['samples']['api'].values()):,} + {sum(run['samples']['delivery'].values()):,} py-spy samples,"
            f" {run['statement_samples']:,} of pg_stat_activity; sink counted {run['sink']:,}")


def table(runs: list[dict]) -> list[str]:
    """One column of µs per message (and share) per run; the totals and the targets below."""
    keyed = [{(s, w): (share, us) for s, w, share, us in rows(r)} for r in runs]
    order = list(dict.fromkeys(k for run_rows in (rows(r) for r in runs) for k in ((s, w) for s, w, _, _ in run_rows)))
    order.sort(key=lambda k: (list(WHERE).index(k[1]), ([*stages.ORDER, "other statements"].index(k[0])
                                                        if k[0] in stages.ORDER or k[0] == "other statements" else 99)))
    head = "| stage | where | " + " | ".join(f"{r['label']}: µs per message (share of where)" for r in runs) + " |"
    lines = [head, "|---|---|" + "---|" * len(runs)]
    for key in order:
        cells = []
        for k in keyed:
            share, us = k.get(key, (None, None))
            cells.append("—" if us is None else f"{us:,.0f}" + (f" ({share:.1%})" if share is not None else ""))
        lines.append(f"| {key[0]} | {WHERE[key[1]]} | " + " | ".join(cells) + " |")
    for name, k in TOTALS:
        lines.append(f"| **{name}, all** | | " + " | ".join(f"**{r['cpu_us'][k]:,.0f}**" for r in runs) + " |")
    lines.append("| **the path: the processes above** (target ≤ 2,000) | | "
                 + " | ".join(f"**{path_total(r):,.0f}**" for r in runs) + " |")
    lines.append("| delivery node against its target (≤ 900) | | "
                 + " | ".join(f"{r['cpu_us']['delivery'] / DELIVERY_TARGET_US:.2f}×" for r in runs) + " |")
    lines.append("| the machine (/proc/stat; others' work and py-spy included) | | "
                 + " | ".join(f"{r['cpu_us']['box']:,.0f}" for r in runs) + " |")
    lines.append("| py-spy (counted in none of the above) | | "
                 + " | ".join(f"{r['cpu_us']['py-spy']:,.0f}" for r in runs) + " |")
    return lines


def report(runs: list[dict]) -> None:
    print()
    for r in runs:
        print(conditions(r))
    print()
    print("\n".join(table(runs)))
    for r in runs:
        print(f"\n{r['label']}: statements most often on PostgreSQL's CPU"
              f" (share of {r['statement_samples']:,} samples)")
        for text, count in r["top_statements"]:
            print(f"  {count / max(r['statement_samples'], 1):6.1%}  {text}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--before", help="a commit measured first (git archive of it)")
    parser.add_argument("--after", help="a commit measured after --before (default: this checkout's tree)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--keep", help="copy the py-spy profiles into this directory")
    parser.add_argument("--compare", nargs="+", metavar="JSON", help="print kept runs side by side")
    args = parser.parse_args(argv)
    if args.compare:
        report([r for p in args.compare for r in json.loads(Path(p).read_text())])
        return
    common.require(("smtp-sink",), "bench/budget.sh")
    pyspy()
    print(f"{os.cpu_count()} cores; load {load_average()}; {args.messages:,} messages a run", flush=True)
    runs = []
    if args.before:
        runs.append(side(args, "before", args.before))
        print(conditions(runs[-1]), flush=True)
    runs.append(side(args, "after" if args.before else "this tree", args.after))
    print(conditions(runs[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    report(runs)


if __name__ == "__main__":
    main()
