"""
The processes of a node (docs/decisions.md, "Processes of a node"): a parent opens the
listening sockets and keeps N workers serving them; each worker adopts the sockets it was
given, and stops when its parent is gone.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterable

import attrs
from twisted.internet import abstract, defer, endpoints, error, fdesc, protocol, tcp
from twisted.internet.interfaces import IDelayedCall, IProcessTransport
from twisted.logger import Logger

log = Logger()

#: Roles every worker runs (each delivery worker and dispatcher with its share of the node's
#: limits, ``domain.shares``); the others run in the first worker only (``parent.worker_roles``).
EVERY_WORKER = frozenset({"api", "delivery", "webhooks"})
#: The first inherited socket's descriptor in a worker (0-2 are stdin, stdout, stderr).
FIRST_SOCKET_FD = 3
#: Endpoints whose sockets a parent can pass on as they are: an ``ssl:`` HTTP port would lose its
#: TLS, and a worker stopping a ``unix:`` port it adopted removes the socket's path.
SHAREABLE = ("tcp", "tcp6")


@attrs.frozen
class Inherited:
    """The listening sockets a worker was given: listener (see ``listener``) → (descriptor, address family)."""

    slot: int
    sockets: dict[str, tuple[int, int]]

    def to_json(self) -> str:
        return json.dumps({"slot": self.slot, "sockets": self.sockets})

    @classmethod
    def from_json(cls, text: str) -> Inherited:
        spec = json.loads(text)
        return cls(spec["slot"], {desc: (fd, family) for desc, (fd, family) in spec["sockets"].items()})


def listener(kind: str, description: str) -> str:
    """The name of a listening socket: what it serves (http, submission, inbound) and where."""
    return f"{kind} {description}"


def stream_description(kind: str, description: str) -> str:
    """An implicit-TLS submission listener is a TCP socket whose connections the process wraps in TLS."""
    if kind == "submission" and description.startswith("ssl:"):
        return "tcp:" + description[4:]
    return description


async def listen(reactor, kind: str, description: str, factory, inherited: Inherited | None):
    """Listen on ``description``, or adopt the socket a parent opened for it."""
    name = listener(kind, description)
    if inherited is None or name not in inherited.sockets:
        return await endpoints.serverFromString(reactor, stream_description(kind, description)).listen(factory)
    fd, family = inherited.sockets[name]
    port = reactor.adoptStreamPort(fd, family, factory)
    os.close(fd)  # the port works on its own copy
    _take_turns(port)
    return port


def _take_turns(port) -> None:
    """
    One connection accepted per wake-up, where Twisted accepts all that are queued: the workers
    woken by a burst of new connections (a client opening its pool) then share them, instead
    of the first awake taking them all.
    """
    read = port.doRead

    def read_one():
        port.numberAccepts = 1
        return read()

    port.doRead = read_one


async def open_sockets(reactor, listeners: Iterable[tuple[str, str]]) -> dict[str, tcp.Port]:
    """
    The parent's listening ports, one per (kind, description), by name: bound and listening
    (the kernel queues connections until a worker accepts them), never read by the parent.
    """
    ports: dict[str, tcp.Port] = {}
    try:
        for kind, description in listeners:
            stream = stream_description(kind, description)
            if stream.split(":", 1)[0] not in SHAREABLE:
                raise ValueError(f"{kind} listener {description}: with node.processes above 1, "
                                 f"only {', '.join(SHAREABLE)} endpoints (or node.processes = 1)")
            placeholder = protocol.Factory.forProtocol(protocol.Protocol)
            placeholder.noisy = False  # the node's listeners are told once, by name
            port = await endpoints.serverFromString(reactor, stream).listen(placeholder)
            if not isinstance(port, tcp.Port):  # what a tcp or tcp6 endpoint listens with
                raise TypeError(f"{kind} listener {description}: not a TCP port")
            port.stopReading()
            ports[listener(kind, description)] = port
    except BaseException:
        await defer.gatherResults([defer.maybeDeferred(port.stopListening) for port in ports.values()])
        raise
    return ports


def worker_sockets(ports: dict[str, tcp.Port]) -> tuple[dict[str, tuple[int, int]], dict[int, int]]:
    """What a worker is told of its sockets, and the childFDs that put them at those descriptors."""
    sockets: dict[str, tuple[int, int]] = {}
    child_fds: dict[int, int] = {}
    for n, (name, port) in enumerate(ports.items()):
        child_fd = FIRST_SOCKET_FD + n
        sockets[name] = (child_fd, port.socket.family)
        child_fds[child_fd] = port.fileno()
    return sockets, child_fds


class _ParentPipe(abstract.FileDescriptor):
    """The read end of the pipe whose write end only the parent holds: EOF means the parent is gone."""

    def __init__(self, reactor, fd: int, gone: Callable[[], object]):
        super().__init__(reactor)
        self._fd = fd
        self._gone = gone

    def fileno(self) -> int:
        return self._fd

    def doRead(self):  # noqa: N802 (Twisted's name)
        return fdesc.readFromFD(self._fd, lambda _: None)  # at the end, the reactor calls connectionLost

    def readConnectionLost(self, reason):  # noqa: N802
        self.connectionLost(reason)

    def connectionLost(self, reason):  # noqa: N802 (also when the reactor stops: gone is then a no-op)
        super().connectionLost(reason)
        self._gone()


def watch_parent(reactor) -> None:
    """
    In a worker: stop (draining, as on SIGTERM) when the parent exits, even by SIGKILL (its end
    of our stdin closes); the terminal's Ctrl-C is ignored, since the parent stops its workers.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fdesc.setNonBlocking(0)
    _ParentPipe(reactor, 0, lambda: _stop(reactor)).startReading()


def _stop(reactor) -> None:
    try:
        reactor.stop()
    except error.ReactorNotRunning:
        pass  # already stopping: the parent's SIGTERM came first


@attrs.frozen
class Backoff:
    """Restart delays of a worker that keeps dying: ``first`` doubled each time, at most ``most``;
    a worker that lived ``stable`` seconds starts the count again."""

    first: float = 1
    most: float = 30
    stable: float = 60

    def delay(self, quick_deaths: int) -> float:
        return min(self.most, self.first * 2 ** max(0, quick_deaths - 1))


class _Worker(protocol.ProcessProtocol):
    #: Set by spawnProcess, before anything here runs.
    transport: IProcessTransport

    def __init__(self, supervisor: Supervisor, slot: int, started: float):
        self.supervisor, self.slot, self.started = supervisor, slot, started
        self.pid: int | None = None  # kept: the transport forgets it once the process ended
        self.ended: defer.Deferred[None] = defer.Deferred()

    def processEnded(self, reason):  # noqa: N802 (Twisted's name)
        self.supervisor._ended(self, reason.value)
        self.ended.callback(None)


class Supervisor:
    """
    Keeps ``count`` workers running: one that dies is started again after a backoff; ``stop``
    sends SIGTERM to all (they drain) and waits for them, SIGKILL after ``kill_after`` seconds.
    """

    def __init__(self, clock, count: int, spawn: Callable[[protocol.ProcessProtocol, int], object],
                 kill_after: float, backoff: Backoff = Backoff(), on_exit: Callable[[int], object] = lambda pid: None):
        self._clock = clock
        self._count = count
        self._spawn = spawn
        self._kill_after = kill_after
        self._backoff = backoff
        self._on_exit = on_exit
        self._running: dict[int, _Worker] = {}
        self._restarts: dict[int, IDelayedCall] = {}
        self._quick_deaths = [0] * count
        self._stopping = False

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self._running.values() if worker.pid is not None]

    def start(self) -> None:
        for slot in range(self._count):
            self._start(slot)

    def _start(self, slot: int) -> None:
        self._restarts.pop(slot, None)
        worker = _Worker(self, slot, self._clock.seconds())
        self._running[slot] = worker
        # The worker starts with the terminal's Ctrl-C ignored: that survives exec, and then
        # neither Python nor the reactor installs a handler of its own. Ignoring it only once
        # running left a moment in which a Ctrl-C stopped a starting worker by itself.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self._spawn(worker, slot)
        finally:
            signal.signal(signal.SIGINT, previous)
        worker.pid = worker.transport.pid
        log.info("worker {slot} started (pid {pid})", slot=slot, pid=worker.pid)

    def _ended(self, worker: _Worker, why) -> None:
        pid = worker.pid
        if self._running.get(worker.slot) is worker:
            del self._running[worker.slot]
        if pid is not None:
            self._on_exit(pid)
        if self._stopping:
            return
        lived = self._clock.seconds() - worker.started
        self._quick_deaths[worker.slot] = 0 if lived >= self._backoff.stable else self._quick_deaths[worker.slot] + 1
        delay = self._backoff.delay(self._quick_deaths[worker.slot])
        log.error("worker {slot} (pid {pid}) exited ({why}); starting it again in {delay} s",
                  slot=worker.slot, pid=pid, why=why, delay=delay)
        self._restarts[worker.slot] = self._clock.callLater(delay, self._start, worker.slot)

    async def stop(self) -> None:
        self._stopping = True
        for call in self._restarts.values():
            call.cancel()
        self._restarts.clear()
        workers = list(self._running.values())
        for worker in workers:
            worker.transport.signalProcess("TERM")
        killing = self._clock.callLater(self._kill_after, self._kill, workers)
        await defer.gatherResults([worker.ended for worker in workers])
        if killing.active():
            killing.cancel()

    def _kill(self, workers: list[_Worker]) -> None:
        for worker in workers:
            if not worker.ended.called:
                log.warn("worker {slot} did not stop in time: killed", slot=worker.slot)
                worker.transport.signalProcess("KILL")
