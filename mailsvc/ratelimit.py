"""
The API request rate of an account, shared by all its keys and by every node on the database.

A generic cell rate algorithm (GCRA) kept in one unlogged row per tenant: one statement per
request decides and records, so nodes need no coordination beyond PostgreSQL.
"""

from __future__ import annotations

import math
import uuid

from mailsvc.store.database import Database

_TAKE = """
INSERT INTO api_rate (tenant_id, tat) VALUES (%(tenant)s, %(now)s + %(interval)s)
ON CONFLICT (tenant_id) DO UPDATE
   SET tat = GREATEST(api_rate.tat, %(now)s) + %(interval)s
 WHERE GREATEST(api_rate.tat, %(now)s) + %(interval)s - %(now)s <= %(window)s
RETURNING tat
"""


class RateLimiter:
    def __init__(self, clock, db: Database, burst_factor: int):
        self._clock = clock
        self._db = db
        self._burst_factor = burst_factor

    async def take(self, tenant_id: uuid.UUID, rate_per_sec: int) -> int | None:
        """None if this request may go ahead; else the seconds to wait (Retry-After)."""
        now = self._clock.seconds()
        interval = 1.0 / rate_per_sec
        window = rate_per_sec * self._burst_factor * interval
        params = {"tenant": tenant_id, "now": now, "interval": interval, "window": window}
        if await self._db.fetchone(_TAKE, params, desc="api_rate"):
            return None
        row = await self._db.fetchone("SELECT tat FROM api_rate WHERE tenant_id = %s", (tenant_id,))
        wait = (row["tat"] + interval - window - now) if row else interval
        return max(1, math.ceil(wait))
