"""
What the benchmarks share: a node process with its embedded PostgreSQL (started, waited for,
stopped), a tenant with a verified sending domain, a throw-away Postfix instance, the CPU time
and RSS of the processes they measure, free ports and waiting.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The benches send to reserved names (*.example, *.test) routed to loopback sinks: nodes they
# start as processes (which inherit the environment) do not refuse them.
os.environ.setdefault("MAILSVC_MAIL_REFUSE_RESERVED_RECIPIENTS", "false")

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------
# Small things


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def react_in_scratch(prefix: str, run: Callable) -> None:
    """``run(reactor, root)`` on the reactor, ``root`` a throw-away directory (removed after) that
    the embedded cluster's unprivileged owner can reach."""
    from twisted.internet import defer, task

    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    try:
        task.react(lambda reactor: defer.ensureDeferred(run(reactor, root)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def load_average() -> str:
    """The 1-minute load average, as /proc/loadavg writes it."""
    return Path("/proc/loadavg").read_text().split()[0]


def scratch_dir(prefix: str) -> Path:
    """A throw-away directory the embedded cluster's unprivileged owner can reach."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    return root


def wait_until(condition: Callable[[], object], seconds: float, interval: float = 0.05) -> bool:
    """Poll ``condition`` until it is true (True) or ``seconds`` have passed (False)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def settle(seconds: float = 3) -> None:
    """
    Dirty pages written out and a short pause before a measurement, so that it does not pay
    for the run before it (Postfix measured right after its own previous run went 25 % slower).
    """
    os.sync()
    time.sleep(seconds)


def require(tools: tuple[str, ...], script: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed: run {script}, which installs it")


def run_bench(bench) -> None:
    """``bench.run()``, then ``bench.close()`` (which stops what it started) however the run ends."""
    try:
        bench.run()
    finally:
        bench.close()


# ---------------------------------------------------------------------------------------------
# Processes: CPU and RSS


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by ``pids`` (from /proc)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def box_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every process, the kernel's too) since boot:
    /proc/stat's first line, all but idle and iowait."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def with_children(pid_file: Path) -> list[int]:
    """The process whose pid ``pid_file`` starts with, and its children ([] if there is none)."""
    try:
        parent = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    pids = [parent]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                pids.append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return pids


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (a node's worker processes, for one)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            children.setdefault(int(stat.read_text().rsplit(")", 1)[1].split()[1]), []).append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def postgres_pids(data_dir: Path) -> list[int]:
    """The postmaster and its children (the backends serving the node's pool)."""
    return with_children(data_dir / "postmaster.pid")


class Meter:
    """
    CPU used between start() and done(), per second of wall time: by ``pids``, by PostgreSQL
    (the backends found at start()) and by ``others()`` (pids found again at the end, since
    some start later).
    """

    def __init__(self, pids: list[int], data_dir: Path | None = None, others: Callable[[], list[int]] = list):
        self.pids, self.data_dir, self.others = pids, data_dir, others

    def start(self) -> None:
        self.pg = postgres_pids(self.data_dir) if self.data_dir is not None else []
        self.others_before = {pid: cpu_seconds([pid]) for pid in self.others()}
        self.before = (cpu_seconds(self.pids), cpu_seconds(self.pg), box_cpu_seconds())
        self.started = time.monotonic()

    def done(self, since: float | None = None) -> dict:
        """``elapsed`` from start() (or from ``since``), ``cpu_s`` of the pids and ``box_cpu_s`` of the
        whole machine (load generators and sinks included) from start(), rates of the rest."""
        elapsed = time.monotonic() - (self.started if since is None else since)
        others = sum(cpu_seconds([pid]) - self.others_before.get(pid, 0.0) for pid in self.others())
        return {
            "elapsed": elapsed,
            "cpu_s": cpu_seconds(self.pids) - self.before[0],
            "pg_cpu": (cpu_seconds(self.pg) - self.before[1]) / elapsed,
            "other_cpu": others / elapsed,
            "box_cpu_s": box_cpu_seconds() - self.before[2],
        }


def terminate(process: subprocess.Popen, seconds: float = 60) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``seconds``."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop(server: subprocess.Popen, data_dir: Path) -> None:
    """SIGTERM the server (it stops its cluster); if that fails, stop the cluster ourselves."""
    terminate(server)
    leftover = postgres_pids(data_dir)
    if leftover:
        os.kill(leftover[0], signal.SIGQUIT)  # immediate shutdown of the cluster we started
        wait_until(lambda: not (data_dir / "postmaster.pid").exists(), 30, 0.2)


# ---------------------------------------------------------------------------------------------
# The HTTP API


def call(url: str, method: str = "GET", token: str | None = None, body: dict | None = None):
    request = urllib.request.Request(
        url, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read() or b"null")


def api(url: str, method: str = "GET", token: str | None = None, body: dict | None = None):
    """call(), an HTTP error ending the benchmark with the server's answer."""
    try:
        return call(url, method, token, body)
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{method} {url}: HTTP {e.code} {e.read().decode(errors='replace')}") from None


def wait_for(url: str, server: subprocess.Popen, token: str | None = None, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}; see its log")
        try:
            call(url, token=token)
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):  # a node's workers may still be starting
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {seconds} s")


# ---------------------------------------------------------------------------------------------
# A node


@dataclass(frozen=True)
class Checkout:
    """A tree of the project and the Python that runs it: where server processes come from."""

    root: Path
    python: str


#: Where Node starts its server processes: this checkout, unless an A/B run (bench/ab.py)
#: points it at the tree of the commit it measures.
SERVERS = Checkout(ROOT, sys.executable)


def serve(state_dir: str, settings: dict, inherit: bool = True, on_ready: Callable | None = None) -> None:
    """
    The server process: a node as ``twistd mailsvc`` builds it from ``settings`` (and, with
    ``inherit``, the MAILSVC_* variables of the environment under them), logging to
    ``server.log`` beside the state directory; when it is ready, ``ready`` is written there and
    ``on_ready(node)`` called. SIGTERM stops the reactor, which stops the node (and its cluster).
    """
    from twisted.internet import reactor
    from twisted.logger import globalLogBeginner, jsonFileLogObserver

    from mailsvc import root
    from mailsvc.config import load

    inherited = {k: v for k, v in os.environ.items() if k.startswith("MAILSVC_")} if inherit else {}
    config = load(None, environ={"MAILSVC_MAIL_REFUSE_RESERVED_RECIPIENTS": "false", **inherited, **settings,
                                 "MAILSVC_STATE_DIR": state_dir})
    log_file = open(Path(state_dir).parent / "server.log", "a", encoding="utf-8")
    globalLogBeginner.beginLoggingTo([jsonFileLogObserver(log_file)], redirectStandardIO=False)
    node = root.build(config)
    if on_ready is not None:
        node.ready.addCallback(on_ready)
    node.ready.addCallback(lambda _: (Path(state_dir).parent / "ready").write_text("ok"))
    reactor.callWhenRunning(node.startService)
    reactor.addSystemEventTrigger("before", "shutdown", node.stopService)
    reactor.run()


class Node:
    """
    A server process, ``python -m MODULE --serve STATE_DIR ARGS...`` (the module's --serve
    calls serve() above), in ``root/name``; the first node of a benchmark owns the embedded
    cluster in its state directory, the others share it through ``env``.
    """

    def __init__(self, root: Path, name: str, module: str, args: tuple[str, ...] = (), env: dict | None = None):
        self.dir = root / name
        self.state = self.dir / "state"
        self.data_dir = self.state / "postgresql" / "data"
        self.dir.mkdir(parents=True)
        self.dir.chmod(0o755)
        self.process = subprocess.Popen(
            [SERVERS.python, "-m", module, "--serve", str(self.state), *args],
            cwd=SERVERS.root, env=dict(os.environ, PYTHONPATH=str(SERVERS.root), **(env or {})),
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while not (self.dir / "ready").exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{self.dir.name} did not start; see {self.dir}/server.log")
            time.sleep(0.05)

    def exited(self) -> bool:
        return self.process.poll() is not None

    def rss_kib(self) -> int:
        return rss_kib(self.process.pid)

    def stop(self, owner: bool = False) -> None:
        """The owner of the cluster makes sure it is stopped too; the others only stop themselves."""
        if owner:
            stop(self.process, self.data_dir)
        else:
            terminate(self.process)


@dataclass
class Tenant:
    id: str
    key: str
    domain_id: str
    dsn: str
    db: object  # a psycopg2 connection in autocommit mode
    shared_env: dict  # what another node needs to share the first node's database and secrets

    def sql(self, statement: str, args=()) -> list[tuple]:
        with self.db.cursor() as cur:
            cur.execute(statement, args)
            return cur.fetchall() if cur.description else []


def tenant_with_domain(url: str, state: Path, domain: str, limits: dict) -> Tenant:
    """
    Through the operator API: a tenant, its ``limits`` (PATCH), its sending domain. The domain
    is then marked verified directly in the database, standing in for DNS verification (which
    needs public DNS).
    """
    import psycopg2

    operator = (state / "operator-token").read_text().strip()
    _, tenant = api(url + "/admin/v1/tenants", "POST", operator, {"name": "bench"})
    api(url + f"/admin/v1/tenants/{tenant['id']}", "PATCH", operator, limits)
    key = tenant["api_key"]["token"]
    _, created = api(url + "/domains", "POST", key, {"name": domain})
    dsn = f"host={state / 'postgresql' / 'run'} dbname=mailsvc user=mailsvc"
    db = psycopg2.connect(dsn)
    db.autocommit = True
    shared = {
        "MAILSVC_DATABASE_DSN": dsn, "MAILSVC_OPERATOR_TOKEN": operator,
        "MAILSVC_SECURITY_MASTER_KEY": (state / "master-key").read_text().strip(),
    }
    found = Tenant(tenant["id"], key, created["id"], dsn, db, shared)
    found.sql("UPDATE domains SET status = 'verified', next_check_at = now() + interval '1 day' WHERE id = %s",
              (created["id"],))
    return found


# ---------------------------------------------------------------------------------------------
# A throw-away Postfix instance


class Postfix:
    """
    A Postfix instance of our own (``postfix -c DIR``, own config and queue directories, no
    chroot): smtpd on a loopback port, relaying only for loopback clients; ``routing`` (lines
    of main.cf) says where its smtp client sends.
    """

    def __init__(self, root: Path, routing: str, concurrency: int):
        self.dir = root / "postfix"
        self.conf, self.spool, self.data = self.dir / "etc", self.dir / "spool", self.dir / "data"
        for d in (self.conf, self.spool, self.data):
            d.mkdir(parents=True)
        shutil.chown(self.data, "postfix", "postfix")  # Postfix's own writable state
        self.port = free_port()
        self.log = self.dir / "maillog"
        (self.conf / "main.cf").write_text(f"""
compatibility_level = 3.6
queue_directory = {self.spool}
data_directory = {self.data}
mail_owner = postfix
setgid_group = postdrop
myhostname = relay.bench.test
mydestination =
local_transport = error:local delivery is off
alias_maps =
alias_database =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
{routing.strip()}
smtp_host_lookup = native
default_process_limit = 200
default_destination_concurrency_limit = {concurrency}
initial_destination_concurrency = {concurrency}
in_flow_delay = 0
smtp_connection_cache_on_demand = yes
maillog_file = {self.log}
maillog_file_prefixes = {self.dir}
biff = no
""")
        lines = []
        for line in Path("/etc/postfix/master.cf").read_text().splitlines():
            if line.startswith("#tlsproxy"):  # for smtp_tls_connection_reuse (off in Debian's file)
                line = line[1:]
            fields = line.split()
            if fields and not line[0].isspace() and not line.startswith("#") and len(fields) >= 8:
                if fields[0] == "smtp" and fields[1] == "inet":
                    fields[0] = f"127.0.0.1:{self.port}"
                fields[4] = "n"  # no chroot: the instance lives in a throw-away directory
                line = "  ".join(fields)
            lines.append(line)
        (self.conf / "master.cf").write_text("\n".join(lines) + "\n")

    def run(self, *args: str) -> str:
        """A Postfix command (postfix, postconf, postqueue, ...) on this instance."""
        return subprocess.run([*args[:1], "-c", str(self.conf), *args[1:]], check=True, capture_output=True,
                              text=True).stdout

    def start(self) -> None:
        try:
            self.run("postfix", "start")
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"postfix did not start: {e.stdout}{e.stderr}") from None

        def listening() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 1):
                    return True
            except OSError:
                return False

        if not wait_until(listening, 20, 0.1):
            raise SystemExit("postfix did not listen")

    def pids(self) -> list[int]:
        """The master and its children."""
        return with_children(self.spool / "pid" / "master.pid")

    def stop(self) -> None:
        pids = self.pids()
        try:  # a stale pid file must not make us signal someone else's process
            if not pids or Path(f"/proc/{pids[0]}/comm").read_text().strip() != "master":
                return
            os.kill(pids[0], signal.SIGTERM)  # the master stops its children
        except (OSError, ProcessLookupError):
            return
        wait_until(lambda: not Path(f"/proc/{pids[0]}").exists(), 30, 0.1)


def serve_api(state_dir: str, http_port: int) -> None:
    """A node serving the HTTP API on ``http_port`` and nothing else of note (nothing is delivered)."""
    serve(state_dir, {
        "MAILSVC_HTTP_LISTEN": f"tcp:{http_port}:interface=127.0.0.1",
        "MAILSVC_DNS_SERVERS": "127.0.0.1:9",
        "MAILSVC_MAIL_HOSTNAME": "mailsvc.bench.test",
        "MAILSVC_NODE_ROLES": "api,webhooks,scheduler",
    })


class ApiNode(Node):
    """The node of ``serve_api``, started by ``module``'s --serve, ready once /healthz answers."""

    module = ""

    def __init__(self, root: Path):
        self.http = free_port()
        self.url = f"http://127.0.0.1:{self.http}"
        super().__init__(root, "n1", self.module, (str(self.http),))
        wait_for(self.url + "/healthz", self.process)
        self.operator = (self.state / "operator-token").read_text().strip()
