"""
LISTEN/NOTIFY wake-ups on one dedicated connection per node (``Database.listener()``).

Parts register a callback per channel; the connection reconnects by itself (after an error,
or after a LISTEN the server did not answer within the deadline), and after it does, every
channel is LISTENed to again and every callback is called once, because notifications sent
while the connection was down are lost.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from twisted.internet import defer
from twisted.logger import Logger

from mailsvc.store.connection import Connection
from mailsvc.store.database import Database

log = Logger()

_CHANNEL = re.compile(r"^[a-z_][a-z0-9_]*$")

Callback = Callable[[str], object]


class Notifications:
    def __init__(self, db: Database):
        self._db = db
        self._callbacks: dict[str, list[Callback]] = {}
        self._connection: Connection | None = None
        self._lock = defer.DeferredLock()

    async def listen(self, channel: str, callback: Callback) -> None:
        """Call ``callback(payload)`` on every NOTIFY on ``channel`` (connecting if needed)."""
        if not _CHANNEL.match(channel):
            raise ValueError(f"not a channel name: {channel!r}")
        await self._lock.acquire()
        try:
            if self._connection is None:
                connection = self._db.listener()
                await connection.connect(self._db.dsn)
                connection.addNotifyObserver(self._notified)
                connection.detector.addRecoveryHandler(self._recovered)
                self._connection = connection
            first = channel not in self._callbacks
            self._callbacks.setdefault(channel, []).append(callback)
            if first:
                await self._connection.runOperation(f"LISTEN {channel}")
        finally:
            self._lock.release()

    def _notified(self, notify) -> None:
        for callback in self._callbacks.get(notify.channel, ()):
            try:
                callback(notify.payload)
            except Exception:
                log.failure("NOTIFY callback on {channel} failed", channel=notify.channel)

    async def _recovered(self) -> None:
        if self._connection is None:  # the recovery handler is added with the connection
            return
        for channel in self._callbacks:
            await self._connection.runOperation(f"LISTEN {channel}")
        log.info("LISTEN connection is back; waking every listener")
        for channel, callbacks in self._callbacks.items():
            for callback in callbacks:
                try:
                    callback("")
                except Exception:
                    log.failure("NOTIFY callback on {channel} failed", channel=channel)

    def stop(self) -> None:
        connection, self._connection = self._connection, None
        self._callbacks = {}
        if connection is not None:
            connection.detector.removeRecoveryHandler(self._recovered)
            connection.removeNotifyObserver(self._notified)
            connection.close_for_good()
