"""Whether this node can serve: its database answers (``GET /healthz``)."""

from __future__ import annotations

from mailsvc.store import health
from mailsvc.store.database import Database


class Health:
    def __init__(self, db: Database):
        self._db = db

    async def database_answers(self) -> bool:
        try:
            await health.ping(self._db)
        except Exception:
            return False
        return True
