"""The GCRA rows of the failure throttles (``mailsvc.app.throttle`` decides how they are used)."""

from __future__ import annotations

from mailsvc.store.database import Database, Transaction

# One more for ``key``, only while its row stays within ``window`` seconds of now.
_RESERVE = """
INSERT INTO login_throttle (key, tat) VALUES (%(key)s, %(now)s + %(interval)s)
ON CONFLICT (key) DO UPDATE
   SET tat = GREATEST(login_throttle.tat, %(now)s) + %(interval)s
 WHERE GREATEST(login_throttle.tat, %(now)s) + %(interval)s - %(now)s <= %(window)s
RETURNING tat
"""


async def reserve(txn: Transaction | Database, key: str, now: float, interval: float, window: float) -> float | None:
    """
    Count one more for ``key`` if its row stays within ``window`` seconds of ``now``: None then.
    Otherwise the row is left as it was (but locked until ``txn`` ends), and its theoretical
    arrival time is returned.
    """
    params = {"key": key, "now": now, "interval": interval, "window": window}
    if await txn.fetchone(_RESERVE, params) is not None:
        return None
    row = await txn.fetchone("SELECT tat FROM login_throttle WHERE key = %s", (key,))
    return float(row["tat"])


async def give_back(db: Database, key: str, interval: float) -> None:
    """Take back one that ``reserve`` counted (one row per statement: no lock waits on another)."""
    await db.execute("UPDATE login_throttle SET tat = tat - %s WHERE key = %s", (interval, key),
                     desc="throttle_give_back")
