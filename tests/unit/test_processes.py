"""The processes of a node: the supervisor of the workers on a Clock, and the real daemon with two workers."""

import http.client
import itertools
import os
import signal
import subprocess
from pathlib import Path

import pytest
import requests
from twisted.internet import defer
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from mailsvc import processes
from mailsvc.config import ConfigError, load
from tests.helpers.daemon import free_port, twistd, wait_until_listening
from tests.helpers.polling import until

# ---------------------------------------------------------------------------------------------
# The supervisor, on a Clock


class FakeProcess:
    def __init__(self, pid: int):
        self.pid = pid
        self.signals: list[str] = []

    def signalProcess(self, name):  # noqa: N802 (Twisted's name)
        self.signals.append(name)


class Spawner:
    """Starts fake workers: each spawn gets the next pid."""

    def __init__(self):
        self.pids = itertools.count(100)
        self.workers: list = []

    def __call__(self, worker, slot):
        worker.makeConnection(FakeProcess(next(self.pids)))
        self.workers.append((slot, worker))

    def live(self):
        return [w for _, w in self.workers if not w.ended.called]

    def die(self, worker, why=ProcessTerminated(signal=signal.SIGKILL)):
        worker.processEnded(Failure(why))


def supervisor(count=2, on_exit=lambda pid: None):
    clock, spawn = Clock(), Spawner()
    return clock, spawn, processes.Supervisor(clock, count, spawn, kill_after=60, on_exit=on_exit)


@pytest.mark.parametrize("quick_deaths, delay", [(1, 1), (2, 2), (3, 4), (5, 16), (6, 30), (20, 30)])
def test_backoff_doubles_up_to_its_most(quick_deaths, delay):
    assert processes.Backoff(first=1, most=30).delay(quick_deaths) == delay


def test_a_worker_that_dies_is_started_again_after_a_growing_delay():
    gone = []
    clock, spawn, workers = supervisor(on_exit=gone.append)
    workers.start()
    assert [slot for slot, _ in spawn.workers] == [0, 1] and workers.pids == [100, 101]
    for expected_delay in (1, 2, 4):
        dying = spawn.live()[1]
        spawn.die(dying)
        clock.advance(expected_delay - 0.1)
        assert len(spawn.live()) == 1  # not yet
        clock.advance(0.1)
        assert len(spawn.live()) == 2 and spawn.workers[-1][0] == 1  # the same slot again
    assert gone == [101, 102, 103]
    # One that lived long enough starts the count again.
    clock.advance(processes.Backoff().stable)
    spawn.die(spawn.live()[1])
    clock.advance(1)
    assert len(spawn.live()) == 2


def test_stop_sends_sigterm_waits_and_restarts_nothing():
    clock, spawn, workers = supervisor()
    workers.start()
    stopped = defer.ensureDeferred(workers.stop())
    assert [w.transport.signals for w in spawn.live()] == [["TERM"], ["TERM"]]
    first, second = spawn.live()
    spawn.die(first, ProcessDone(0))
    assert not stopped.called
    spawn.die(second, ProcessTerminated(signal=signal.SIGTERM))
    assert stopped.called
    clock.advance(120)
    assert len(spawn.workers) == 2  # none started again
    assert not clock.getDelayedCalls()


def test_a_worker_that_does_not_stop_is_killed():
    clock, spawn, workers = supervisor(count=1)
    workers.start()
    stopped = defer.ensureDeferred(workers.stop())
    clock.advance(60)
    (stuck,) = spawn.live()
    assert stuck.transport.signals == ["TERM", "KILL"]
    spawn.die(stuck)
    assert stopped.called


def test_a_restart_waiting_is_cancelled_by_stop():
    clock, spawn, workers = supervisor(count=1)
    workers.start()
    spawn.die(spawn.live()[0])
    stopped = defer.ensureDeferred(workers.stop())
    assert stopped.called
    clock.advance(60)
    assert spawn.live() == []


@pytest.mark.parametrize("slot, roles", [
    (0, ("api", "delivery", "webhooks", "scheduler")),
    (1, ("api",)),
    (3, ("api",)),
])
def test_the_first_worker_runs_the_once_per_node_roles(slot, roles):
    assert processes.worker_roles(("api", "delivery", "webhooks", "scheduler"), slot) == roles


@pytest.mark.parametrize("kind, description, stream", [
    ("submission", "ssl:465", "tcp:465"),
    ("submission", "tcp:587", "tcp:587"),
    ("http", "ssl:8443:privateKey=k.pem", "ssl:8443:privateKey=k.pem"),  # not a submission port
])
def test_only_implicit_tls_submission_becomes_a_tcp_socket(kind, description, stream):
    assert processes.stream_description(kind, description) == stream


async def test_a_parent_refuses_a_socket_it_cannot_pass_on():
    from twisted.internet import reactor

    with pytest.raises(ValueError, match="http listener ssl:0"):
        await processes.open_sockets(reactor, [("submission", "ssl:0:interface=127.0.0.1"), ("http", "ssl:0")])


#: Events a worker's observer passed on (logs.PARENT_LOGGER names ``collecting``).
COLLECTED: list[dict] = []


def collecting():
    return COLLECTED.append


def test_a_worker_logs_mailsvc_and_warnings_through_its_parents_logger_but_not_twisteds_info(monkeypatch):
    from twisted.logger import LogLevel

    from mailsvc import logs, tap

    options = tap.Options()
    options.parseOptions([])
    options.parent = {"logger": collecting}
    command = tap.worker_command(options)
    assert "--logger=mailsvc.logs.worker_observer" in command
    name = f"{collecting.__module__}.collecting"
    assert command[-1] == f"--parent-logger={name}"
    monkeypatch.setitem(logs.PARENT_LOGGER, "name", name)
    COLLECTED.clear()
    observe = logs.worker_observer()
    for namespace, level in [("twisted.scripts._twistd_unix.UnixAppLogger", LogLevel.info),  # starting up
                             ("log_legacy", LogLevel.info),  # Site starting on, resolv.conf changed
                             ("mailsvc.compose", LogLevel.info), ("twisted.internet.defer", LogLevel.critical),
                             ("log_legacy", LogLevel.warn)]:
        observe({"log_namespace": namespace, "log_level": level, "log_format": "", "log_time": 0})
    assert [(e["log_namespace"], e["log_level"]) for e in COLLECTED] == [
        ("mailsvc.compose", LogLevel.info), ("twisted.internet.defer", LogLevel.critical),
        ("log_legacy", LogLevel.warn)]


def test_processes_default_to_the_cores():
    assert load(None, environ={}).node.process_count == os.cpu_count()
    assert load(None, environ={"MAILSVC_NODE_PROCESSES": "3"}).node.process_count == 3
    with pytest.raises(ConfigError, match="node.processes"):
        load(None, environ={"MAILSVC_NODE_PROCESSES": "-1"})


# ---------------------------------------------------------------------------------------------
# The daemon with two workers


def children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return found


def command_line(pid: int) -> bytes:
    """A process's command line; empty once it is gone (a child can be reaped between two reads)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def workers_of(daemon: subprocess.Popen) -> set[int]:
    """The twistd workers among the daemon's children (not the embedded PostgreSQL)."""
    return {pid for pid in children(daemon.pid) if b"--worker" in command_line(pid)}


def serving_pid(server_port: int, client_port: int, pids: set[int]) -> int | None:
    """The process holding the server side of the loopback connection from ``client_port``."""
    wanted = f":{server_port:04X}", f":{client_port:04X}"
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(wanted[0]) and fields[2].endswith(wanted[1]):
            inode = fields[9]
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def healthz_count(url: str, token: str) -> float:
    text = requests.get(url + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10).text
    for line in text.splitlines():
        if line.startswith("mailsvc_http_requests_total{") and 'route="/healthz"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.slow
def test_two_workers_serve_one_port_count_on_one_metrics_and_stop_with_the_parent(state):  # noqa: F811
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    daemon = twistd(state, port, MAILSVC_NODE_PROCESSES="2")
    try:
        wait_until_listening(url, daemon)
        token = (state / "operator-token").read_text().strip()
        until(lambda: len(workers_of(daemon)) == 2, 60, "two workers")
        pids = workers_of(daemon)
        before = healthz_count(url, token)

        # Connections, each answered, until both workers have served some.
        served, connections = {}, []
        while set(served.values()) != pids and len(connections) < 200:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/healthz")
            assert connection.getresponse().read() == b'{"status": "ok"}'
            connections.append(connection)
            served[connection] = serving_pid(port, connection.sock.getsockname()[1], pids)
        assert set(served.values()) == pids, served
        # One /metrics counts the requests of both workers.
        assert healthz_count(url, token) - before == len(connections)
        for connection in connections:
            connection.close()

        # A worker killed is started again; the node goes on serving meanwhile.
        killed = sorted(pids)[1]
        os.kill(killed, signal.SIGKILL)
        until(lambda: len(workers_of(daemon)) == 2 and killed not in workers_of(daemon), 60,
              "a new worker in place of the killed one")
        assert requests.get(url + "/healthz", timeout=10).json() == {"status": "ok"}
        pids = workers_of(daemon)
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, err = daemon.communicate(timeout=90)
    assert daemon.returncode in (0, -signal.SIGTERM), err
    assert f"worker 1 (pid {killed}) exited" in out and "starting it again in 1 s" in out
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    assert not (state / "postgresql" / "data" / "postmaster.pid").exists()


@pytest.mark.slow
def test_workers_exit_when_their_parent_is_killed(state, pg_dsn):  # noqa: F811
    port = free_port()
    daemon = twistd(state, port, MAILSVC_NODE_PROCESSES="2", MAILSVC_DATABASE_DSN=pg_dsn)
    try:
        wait_until_listening(f"http://127.0.0.1:{port}", daemon)
        until(lambda: len(workers_of(daemon)) == 2, 60, "two workers")
        pids = workers_of(daemon)
    finally:
        daemon.kill()
    try:
        until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids), 60, "every process of the node gone")
    finally:
        for pid in pids:  # left serving by a failure: not beyond this test
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)
        daemon.communicate(timeout=30)


@pytest.mark.slow
def test_ctrl_c_stops_the_node_once(state, pg_dsn):  # noqa: F811
    """The terminal's SIGINT reaches every process of the group: the parent stops the workers,
    which do not stop on their own (nor are started again)."""
    port = free_port()
    daemon = twistd(state, port, MAILSVC_NODE_PROCESSES="2", MAILSVC_DATABASE_DSN=pg_dsn,
                    new_session=True, default_sigint=True)
    try:
        wait_until_listening(f"http://127.0.0.1:{port}", daemon)
        until(lambda: len(workers_of(daemon)) == 2, 60, "two workers")
        pids = workers_of(daemon)
        os.killpg(daemon.pid, signal.SIGINT)
        out, err = daemon.communicate(timeout=90)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode in (0, -signal.SIGINT), err
    # Told once, by the parent: the workers keep Twisted's info lines to themselves.
    assert "exited" not in out and out.count("Server Shut Down") == 1
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
