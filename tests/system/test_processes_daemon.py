"""
The daemon with two workers for real (one port, one metrics, stopping with the parent, no
worker outliving it, Ctrl-C stopping it once). The supervisor on a Clock:
tests/unit/test_processes.py. It runs beside the system tier's other tests: each wait is a
limit, and the restart's delay it reads in the log is the backoff's first, whatever the load.
"""

import http.client
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.helpers.daemon import free_port, serving_pid, twistd, wait_until_listening
from tests.helpers.polling import until


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

        # Connections, each answered, until both workers have served some (a worker still
        # starting on a loaded machine serves none yet: the look goes on for a minute).
        served: list[int | None] = []  # the worker that answered each connection
        deadline = time.monotonic() + 60
        while set(served) != pids and time.monotonic() < deadline:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/healthz")
            assert connection.getresponse().read() == b'{"status": "ok"}'
            served.append(serving_pid(port, connection.sock.getsockname()[1], pids))
            connection.close()
            time.sleep(0.01)
        assert set(served) == pids, served
        # One /metrics counts the requests of both workers.
        assert healthz_count(url, token) - before == len(served)

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
