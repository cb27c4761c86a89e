"""
The supervisor of a node's workers, on a Clock and fake processes; how listeners are passed
on; workers' logging. The real daemon with two workers: tests/system/test_processes_daemon.py.
"""

import itertools
import os
import signal

import pytest
from twisted.internet import defer
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from mailsvc import parent, processes
from mailsvc.config import ConfigError, load

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
    (1, ("api", "delivery", "webhooks")),
    (3, ("api", "delivery", "webhooks")),
])
def test_the_first_worker_runs_the_once_per_node_roles(slot, roles):
    config = load(None, environ={"MAILSVC_NODE_PROCESSES": "4", "MAILSVC_STATE_DIR": "/nonexistent",
                                 "MAILSVC_NODE_ROLES": "api,delivery,webhooks,scheduler"})
    assert parent.worker_roles(config, slot) == roles


@pytest.mark.parametrize("kind, description, stream", [
    ("submission", "ssl:465", "tcp:465"),
    ("submission", "tcp:587", "tcp:587"),
    ("http", "ssl:8443:privateKey=k.pem", "ssl:8443:privateKey=k.pem"),  # not a submission port
])
def test_only_implicit_tls_submission_becomes_a_tcp_socket(kind, description, stream):
    assert processes.stream_description(kind, description) == stream


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


