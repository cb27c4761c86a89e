"""
The GCRA row of each account's API rate (``mailsvc.app.ratelimit`` decides how it is used): the
rule of ``mailsvc.domain.gcra.Gcra`` in one statement, given its interval and window.
"""

from __future__ import annotations

import uuid

from mailsvc.domain.gcra import Gcra
from mailsvc.store.database import Database

# One token; admitted when the tenant's row stays within ``window`` seconds of now.
_TAKE = """
INSERT INTO api_rate (tenant_id, tat) VALUES (%(tenant)s, %(now)s + %(interval)s)
ON CONFLICT (tenant_id) DO UPDATE
   SET tat = GREATEST(api_rate.tat, %(now)s) + %(interval)s
 WHERE GREATEST(api_rate.tat, %(now)s) + %(interval)s - %(now)s <= %(window)s
RETURNING tat
"""

# ``count`` tokens at once, only while the row stays within ``window`` seconds of now.
_LEASE = """
INSERT INTO api_rate (tenant_id, tat) VALUES (%(tenant)s, %(now)s + %(count)s * %(interval)s)
ON CONFLICT (tenant_id) DO UPDATE
   SET tat = GREATEST(api_rate.tat, %(now)s) + %(count)s * %(interval)s
 WHERE GREATEST(api_rate.tat, %(now)s) + %(count)s * %(interval)s - %(now)s <= %(window)s
RETURNING tat
"""


async def take(db: Database, tenant_id: uuid.UUID, now: float, rate: Gcra) -> bool:
    """One token, if ``rate`` admits it (``Gcra.conforms`` on the tenant's row)."""
    params = {"tenant": tenant_id, "now": now, "interval": rate.interval, "window": rate.window}
    return await db.fetchone(_TAKE, params, desc="api_rate") is not None


async def lease(db: Database, tenant_id: uuid.UUID, now: float, count: int, rate: Gcra) -> bool:
    """``count`` tokens at once, if ``rate`` admits them all."""
    params = {"tenant": tenant_id, "now": now, "count": count, "interval": rate.interval, "window": rate.window}
    return await db.fetchone(_LEASE, params, desc="api_rate_lease") is not None


async def theoretical_arrival(db: Database, tenant_id: uuid.UUID) -> float | None:
    """The row's theoretical arrival time (seconds), or None when the tenant has none."""
    row = await db.fetchone("SELECT tat FROM api_rate WHERE tenant_id = %s", (tenant_id,))
    return row["tat"] if row is not None else None
