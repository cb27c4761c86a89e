"""
The GCRA rows of the throttles (``mailsvc.app.throttle`` decides how they are used): the rule of
``mailsvc.domain.gcra.Gcra`` in one statement, given its interval and window.
"""

from __future__ import annotations

from mailsvc.domain.gcra import Gcra
from mailsvc.store.database import Database, Transaction

# One more for ``key``, only while its row stays within ``window`` seconds of now.
_RESERVE = """
INSERT INTO login_throttle (key, tat) VALUES (%(key)s, %(now)s + %(interval)s)
ON CONFLICT (key) DO UPDATE
   SET tat = GREATEST(login_throttle.tat, %(now)s) + %(interval)s
 WHERE GREATEST(login_throttle.tat, %(now)s) + %(interval)s - %(now)s <= %(window)s
RETURNING tat
"""


async def reserve(txn: Transaction | Database, key: str, now: float, rate: Gcra) -> float | None:
    """
    Count one more for ``key`` if ``rate`` admits it: None then. Otherwise the row is left as
    it was (but locked until ``txn`` ends), and its theoretical arrival time is returned.
    """
    params = {"key": key, "now": now, "interval": rate.interval, "window": rate.window}
    if await txn.fetchone(_RESERVE, params) is not None:
        return None
    # Refused by the upsert's WHERE: the row is there (and locked).
    row = await txn.fetchrow("SELECT tat FROM login_throttle WHERE key = %s", (key,))
    return float(row["tat"])


async def give_back(db: Database, key: str, rate: Gcra) -> None:
    """Take back one that ``reserve`` counted (one row per statement: no lock waits on another)."""
    await db.execute("UPDATE login_throttle SET tat = tat - %s WHERE key = %s", (rate.interval, key),
                     desc="throttle_give_back")
