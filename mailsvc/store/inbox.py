"""The development inbox (migration 0020): messages kept at the door, newest first per account."""

from __future__ import annotations

import uuid
from datetime import datetime

from mailsvc.domain.paging import Page
from mailsvc.store.database import Database
from mailsvc.store.paging import clause

_LISTED = "id, email_id, recipients, outcome, sender, subject, domain, simulated, created_at"


async def keep(db: Database, entries: list[tuple], most: int) -> None:
    """
    Keep ``entries`` ((id, tenant_id, email_id, recipients, outcome, sender, subject, domain,
    return_path, simulated, message, created_at)), and drop each of their accounts' oldest beyond
    its ``most`` newest, in one transaction.
    """
    await db.run("keep inbox messages", _keep, entries, most)


async def _keep(txn, entries: list[tuple], most: int) -> None:
    for entry in entries:
        await txn.execute(
            "INSERT INTO inbox (id, tenant_id, email_id, recipients, outcome, sender, subject, domain, return_path,"
            " simulated, message, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", entry)
    for tenant_id in sorted({entry[1] for entry in entries}):
        await txn.execute(
            "DELETE FROM inbox WHERE id IN (SELECT id FROM inbox WHERE tenant_id = %s ORDER BY id DESC OFFSET %s)",
            (tenant_id, most))


async def page(db: Database, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, parameters = clause(page)
    rows = await db.fetchall(
        f"SELECT {_LISTED} FROM inbox WHERE tenant_id = %s AND {where} {order}",
        (tenant_id, *parameters), desc="list inbox",
    )
    return page.finish(rows)


async def get(db: Database, tenant_id: uuid.UUID, inbox_id: uuid.UUID) -> dict | None:
    return await db.fetchone(
        f"SELECT {_LISTED}, return_path, message FROM inbox WHERE tenant_id = %s AND id = %s",
        (tenant_id, inbox_id), desc="inbox message",
    )


def entry(inbox_id: uuid.UUID, tenant_id: uuid.UUID, email_id: uuid.UUID, recipients: list[str], outcome: str,
          sender: str, subject: str, domain: str, return_path: str, simulated: bool, message: bytes,
          at: datetime) -> tuple:
    return (inbox_id, tenant_id, email_id, recipients, outcome, sender, subject, domain, return_path, simulated,
            message, at)
