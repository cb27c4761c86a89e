"""
Rows of templates (each holding its draft) and of their published versions. A template is
named by its id or by its alias, always within one account. ``jsonb`` columns (variables,
builder) are written as JSON and read back as Python values.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg2 import errors as pgerrors
from psycopg2.extras import Json

from mailsvc.domain.errors import Taken
from mailsvc.domain.paging import Page
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause

COLUMNS = (
    "id, tenant_id, alias, name, sender, subject, reply_to, html, text, builder, variables,"
    " current_version_id, published_at, created_at, updated_at, builder_rendered"
)
VERSION_COLUMNS = "id, template_id, sender, subject, reply_to, html, text, builder, variables, created_at"
#: Columns a write may set, and how each is sent.
_JSON = frozenset({"builder", "variables"})
WRITABLE = frozenset({"alias", "name", "sender", "subject", "reply_to", "html", "text", "builder", "variables",
                      "builder_rendered"})


def _value(column: str, value: Any) -> Any:
    if column in _JSON:
        return Json(value) if value is not None else None
    if column == "reply_to":
        return list(value or ())
    return value


def _where(key: uuid.UUID | str) -> str:
    return "id = %s" if isinstance(key, uuid.UUID) else "alias = %s"


async def insert(txn: Transaction, template_id: uuid.UUID, tenant_id: uuid.UUID, fields: dict[str, Any],
                 now: datetime) -> dict:
    columns = [c for c in fields if c in WRITABLE]
    names = "".join(f", {c}" for c in columns)
    marks = "".join(", %s" for _ in columns)
    try:
        return await txn.fetchrow(
            f"INSERT INTO templates (id, tenant_id, created_at, updated_at{names})"
            f" VALUES (%s, %s, %s, %s{marks}) RETURNING {COLUMNS}",
            [template_id, tenant_id, now, now, *(_value(c, fields[c]) for c in columns)],
        )
    except pgerrors.UniqueViolation:  # the alias index: another template took it
        raise Taken("alias") from None


async def get(db: Database | Transaction, tenant_id: uuid.UUID, key: uuid.UUID | str,
              lock: bool = False) -> dict | None:
    """The template with this id or alias in the account (its row locked with ``lock``)."""
    return await db.fetchone(
        f"SELECT {COLUMNS} FROM templates WHERE tenant_id = %s AND {_where(key)}"
        + (" FOR UPDATE" if lock else ""),
        (tenant_id, key),
    )


async def version(db: Database | Transaction, version_id: uuid.UUID) -> dict | None:
    return await db.fetchone(f"SELECT {VERSION_COLUMNS} FROM template_versions WHERE id = %s", (version_id,))


async def published(db: Database | Transaction, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict | None:
    """
    What a send with this template uses: the template's id and its published version's
    content (``version_id`` None when it was never published), in one statement.
    """
    return await db.fetchone(
        "SELECT t.id AS template_id, v.id AS version_id, v.sender, v.subject, v.reply_to, v.html, v.text,"
        " v.variables"
        " FROM templates t LEFT JOIN template_versions v ON v.id = t.current_version_id"
        f" WHERE t.tenant_id = %s AND t.{_where(key)}",
        (tenant_id, key),
    )


async def page(db: Database, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
    where, order, params = clause(page)
    rows = await db.fetchall(
        "SELECT id, alias, name, current_version_id, published_at, created_at, updated_at FROM templates"
        f" WHERE tenant_id = %s AND {where} {order}",
        [tenant_id, *params],
    )
    return page.finish(rows)


async def update(txn: Transaction, template_id: uuid.UUID, fields: dict[str, Any], now: datetime) -> dict:
    columns = [c for c in fields if c in WRITABLE]
    assignments = "".join(f"{c} = %s, " for c in columns)
    try:
        return await txn.fetchrow(
            f"UPDATE templates SET {assignments}updated_at = %s WHERE id = %s RETURNING {COLUMNS}",
            [*(_value(c, fields[c]) for c in columns), now, template_id],
        )
    except pgerrors.UniqueViolation:  # the alias index: another template took it
        raise Taken("alias") from None


async def publish(txn: Transaction, template: dict, version_id: uuid.UUID, now: datetime) -> dict:
    """Copy the draft of ``template`` (a row read locked) into a new version and point at it."""
    await txn.execute(
        "INSERT INTO template_versions"
        " (id, template_id, tenant_id, sender, subject, reply_to, html, text, builder, variables, created_at)"
        " SELECT %s, id, tenant_id, sender, subject, reply_to, html, text, builder, variables, %s"
        " FROM templates WHERE id = %s",
        (version_id, now, template["id"]),
    )
    return await txn.fetchrow(
        "UPDATE templates SET current_version_id = %s, published_at = %s, updated_at = %s WHERE id = %s"
        f" RETURNING {COLUMNS}",
        (version_id, now, now, template["id"]),
    )


async def delete(db: Database | Transaction, tenant_id: uuid.UUID, key: uuid.UUID | str) -> dict | None:
    """Remove the template and (by cascade) its versions; the row removed, or None."""
    return await db.fetchone(
        f"DELETE FROM templates WHERE tenant_id = %s AND {_where(key)} RETURNING id",
        (tenant_id, key),
    )
