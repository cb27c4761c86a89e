"""
The node's service tree. twistd starts services without waiting for them, so a ``Group``
starts its children one after the other, each awaited (a LISTEN, a port, a pool), and stops
them one by one in reverse order: what started last stops first. The root, ``Node``, runs
its own start as one awaited sequence (store → migrations → the parts' tree → listeners),
adding each part to the tree once it started.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import attrs
from twisted.application import service
from twisted.internet import defer
from twisted.logger import Logger

from mailsvc.deferreds import when_done

log = Logger()

Stopper = Callable[[], object]


async def start(child: service.IService) -> None:
    """Start ``child`` and wait for its start (a ``Group``'s or ``Part``'s is a Deferred)."""
    await defer.maybeDeferred(child.startService)


class Group(service.MultiService):
    """Children started in order, each awaited; stopped in reverse order, each awaited."""

    def __init__(self, name: str, children: Sequence[service.IService] = ()):
        super().__init__()
        self.setName(name)
        for child in children:
            self.addService(child)

    def addService(self, child):  # noqa: N802 (Twisted's name)
        """Added without being started, even to a running group: the tree's starts are awaited."""
        running, self.running = self.running, 0
        try:
            super().addService(child)
        finally:
            self.running = running

    def startService(self):  # noqa: N802
        service.Service.startService(self)
        return defer.ensureDeferred(self._start_children())

    async def _start_children(self) -> None:
        for child in self:
            await start(child)

    def stopService(self):  # noqa: N802
        service.Service.stopService(self)
        return defer.ensureDeferred(self._stop_children())

    async def _stop_children(self) -> None:
        for child in reversed(list(self)):
            # A group is gone through even when not started as a whole: a loop or engine in it
            # may run on its own (started by a test).
            if child.running or isinstance(child, service.MultiService):
                try:
                    await defer.maybeDeferred(child.stopService)
                except Exception:
                    log.failure("stopping {name} failed", name=child.name)


class Part(service.Service):
    """A small service made of what starts it and what stops it (either may wait, either may be none)."""

    def __init__(self, name: str, start: Callable[[], object] | None = None, stop: Stopper | None = None):
        self.setName(name)
        self._start = start
        self._stop = stop

    def startService(self):  # noqa: N802
        super().startService()
        if self._start is None:
            return None
        starting = defer.maybeDeferred(self._start)
        starting.addErrback(self._not_started)
        return starting

    def _not_started(self, failure):
        self.running = 0  # nothing to undo
        return failure

    def stopService(self):  # noqa: N802
        super().stopService()
        return defer.maybeDeferred(self._stop) if self._stop is not None else None


@attrs.define
class Running:
    """What a started node tells of itself (its ports once listening, the parts it runs)."""

    http_port: int | None = None
    smtp_ports: list[int] = attrs.Factory(list)
    inbound_port: int | None = None
    #: The SSH manhole's address (an ``IAddress``), when ``manhole.listen`` is set.
    manhole_address: object = None
    #: The parts' tree and what it holds (``compose.Parts``); a parent of workers has none.
    assembled: object = None
    #: The onion service (``mailsvc.onion.OnionService``) of the process that publishes it.
    onion: object = None
    #: A parent's ``processes.Supervisor`` of its workers.
    supervisor: object = None


class Node(Group):
    """The root of the tree: ``start(node)`` builds and adds the parts, in the order their stops need."""

    def __init__(
        self,
        start: Callable[[Node], Coroutine[Any, Any, None]],
        on_failure: Callable[[str], None],
        expected_failures: tuple[type[BaseException], ...] = (OSError, ValueError),
    ):
        super().__init__("mailsvc")
        self._start = start
        self._on_failure = on_failure
        #: Start failures that explain themselves in one line; anything else also logs its traceback.
        self.expected_failures = expected_failures
        self._starting: defer.Deferred | None = None
        self.parts = Running()
        self.ready: defer.Deferred[Node] = defer.Deferred()

    async def add(self, child: service.IService) -> None:
        """``child`` started, then kept in the tree (undone in reverse order of addition)."""
        await start(child)
        self.addService(child)

    def on_stop(self, desc: str, stopper: Stopper) -> None:
        """A part that just started, kept as the service that undoes it."""
        part = Part(desc, stop=stopper)
        part.running = 1
        self.addService(part)

    def startService(self):  # noqa: N802 (Twisted's name)
        service.Service.startService(self)
        self._starting = defer.ensureDeferred(self._start(self))
        self._starting.addCallbacks(self._started, self._failed)

    def _started(self, _):
        self.ready.callback(self)

    def _failed(self, failure):
        lines = str(failure.value).strip().splitlines()
        reason = lines[0] if lines else failure.type.__name__
        if not failure.check(*self.expected_failures):
            log.failure("start failed", failure)
        self.ready.errback(failure)
        self.ready.addErrback(lambda _: None)
        self._on_failure(reason)

    def stopService(self):  # noqa: N802
        service.Service.stopService(self)
        return defer.ensureDeferred(self._stop())

    async def _stop(self) -> None:
        if self._starting is not None and not self._starting.called:
            # Let a start under way reach a step boundary before undoing it.
            await when_done(self._starting)
        await self._stop_children()
