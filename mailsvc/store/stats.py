"""The figures /metrics samples from the database: mail by plan class, the queues' depth and age, broadcasts."""

from __future__ import annotations

from datetime import datetime

import attrs

from mailsvc.ids import first_id_at
from mailsvc.store.database import Database


async def mail_today(db: Database, day: datetime) -> list[dict]:
    """Recipients of the mail accepted since ``day`` (midnight UTC), by plan class and delivery status."""
    return await db.fetchall(
        "SELECT t.plan, d.status, count(*) AS n FROM emails e"
        " JOIN deliveries d ON d.email_id = e.id JOIN tenants t ON t.id = e.tenant_id"
        " WHERE e.id >= %s GROUP BY t.plan, d.status",
        (first_id_at(day),), desc="stats_mail_today",
    )


async def queues(db: Database) -> dict:
    """Deliveries due and not done, webhook requests pending: how many, and the oldest's age in seconds."""
    row = await db.fetchrow(
        "SELECT"
        " (SELECT count(*) FROM deliveries WHERE due_at <= now() AND status IN ('queued', 'deferred'))"
        "   AS queue_depth,"
        " (SELECT coalesce(extract(epoch FROM now() - min(due_at)), 0) FROM deliveries"
        "   WHERE due_at <= now() AND status IN ('queued', 'deferred')) AS queue_age,"
        " (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending') AS webhook_backlog,"
        " (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM webhook_deliveries"
        "   WHERE state = 'pending') AS webhook_age",
        desc="stats_queues",
    )
    return {k: float(v) for k, v in row.items()}


async def broadcast_progress(db: Database) -> dict[str, int]:
    """Recipients of the broadcasts being sent (queued or sending), by fan-out state (pending, written, ...)."""
    rows = await db.fetchall(
        "SELECT r.state, count(*) AS n FROM broadcasts b JOIN broadcast_recipients r ON r.broadcast_id = b.id"
        " WHERE b.status IN ('queued', 'sending') GROUP BY r.state",
        desc="stats_broadcast_progress",
    )
    return {row["state"]: row["n"] for row in rows}


@attrs.frozen
class Figures:
    """These figures of one database (what ``Metrics.sample`` reads)."""

    db: Database

    async def mail_today(self, day: datetime) -> list[dict]:
        return await mail_today(self.db, day)

    async def queues(self) -> dict:
        return await queues(self.db)

    async def broadcast_progress(self) -> dict[str, int]:
        return await broadcast_progress(self.db)
