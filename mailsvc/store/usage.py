"""What an account has sent today and this month (the ``usage`` counters and the ``emails`` rows)."""

from __future__ import annotations

import uuid
from datetime import datetime

from mailsvc.ids import first_id_at
from mailsvc.store.database import Database


async def counts(db: Database, tenant_id: uuid.UUID, day: datetime, month: datetime) -> dict:
    """
    Accepted recipients (the quota counters) and accepted e-mails since ``day`` and ``month``
    (midnights UTC). E-mails are counted by id: UUIDv7 ids sort by time of acceptance, so the
    ``emails_tenant`` index bounds the scan to the period.
    """
    row = await db.fetchrow(
        "SELECT"
        " (SELECT coalesce(max(count), 0) FROM usage WHERE tenant_id = %(t)s AND period = %(dp)s) AS day_recipients,"
        " (SELECT coalesce(max(count), 0) FROM usage WHERE tenant_id = %(t)s AND period = %(mp)s) AS month_recipients,"
        " (SELECT count(*) FROM emails WHERE tenant_id = %(t)s AND id >= %(d)s) AS day_emails,"
        " (SELECT count(*) FROM emails WHERE tenant_id = %(t)s AND id >= %(m)s) AS month_emails",
        {"t": tenant_id, "dp": f"day:{day:%Y-%m-%d}", "mp": f"month:{month:%Y-%m}",
         "d": first_id_at(day), "m": first_id_at(month)},
        desc="usage",
    )
    return dict(row)
