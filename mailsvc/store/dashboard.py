"""Rows of the dashboard: users, sessions, and the reads only the dashboard makes."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time

from mailsvc.domain.paging import Page
from mailsvc.ids import first_id_at
from mailsvc.store.database import Database, Transaction
from mailsvc.store.paging import clause

_USER_COLUMNS = ("id, tenant_id, email, role, password_hash, password_version, created_at, updated_at,"
                 " totp_enabled_at IS NOT NULL AS two_factor")


# Users


async def insert_user(txn: Transaction | Database, user_id: uuid.UUID, tenant_id: uuid.UUID, email: str,
                      role: str, now: datetime) -> dict | None:
    """The new user, or None when the address already has one."""
    return await txn.fetchone(
        "INSERT INTO users (id, tenant_id, email, role, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s)"
        f" ON CONFLICT (email) DO NOTHING RETURNING {_USER_COLUMNS}",
        (user_id, tenant_id, email, role, now, now),
    )


async def user_by_email(db: Database | Transaction, email: str) -> dict | None:
    return await db.fetchone(f"SELECT {_USER_COLUMNS} FROM users WHERE email = %s", (email,))


async def user_by_id(db: Database | Transaction, user_id: uuid.UUID) -> dict | None:
    return await db.fetchone(f"SELECT {_USER_COLUMNS} FROM users WHERE id = %s", (user_id,))


async def tenant_user(db: Database | Transaction, tenant_id: uuid.UUID, user_id: uuid.UUID) -> dict | None:
    return await db.fetchone(
        f"SELECT {_USER_COLUMNS} FROM users WHERE tenant_id = %s AND id = %s", (tenant_id, user_id)
    )


async def users_of(db: Database, tenant_id: uuid.UUID) -> list[dict]:
    return await db.fetchall(f"SELECT {_USER_COLUMNS} FROM users WHERE tenant_id = %s ORDER BY id", (tenant_id,))


async def first_user(db: Database) -> dict | None:
    return await db.fetchone(f"SELECT {_USER_COLUMNS} FROM users ORDER BY id LIMIT 1")


async def set_password(txn: Transaction, user_id: uuid.UUID, version: int, password_hash: str,
                       now: datetime) -> dict | None:
    """Set the password if it is still at ``version`` (a link is used once); None otherwise."""
    return await txn.fetchone(
        "UPDATE users SET password_hash = %s, password_version = password_version + 1, updated_at = %s"
        f" WHERE id = %s AND password_version = %s RETURNING {_USER_COLUMNS}",
        (password_hash, now, user_id, version),
    )


async def rehash(db: Database, user_id: uuid.UUID, old_hash: str, new_hash: str) -> None:
    await db.execute("UPDATE users SET password_hash = %s WHERE id = %s AND password_hash = %s",
                     (new_hash, user_id, old_hash))


async def delete_user(txn: Transaction | Database, tenant_id: uuid.UUID, user_id: uuid.UUID) -> dict | None:
    return await txn.fetchone(
        f"DELETE FROM users WHERE tenant_id = %s AND id = %s RETURNING {_USER_COLUMNS}", (tenant_id, user_id)
    )


async def owners_left(txn: Transaction | Database, tenant_id: uuid.UUID) -> int:
    row = await txn.fetchrow(
        "SELECT count(*) AS n FROM users WHERE tenant_id = %s AND role = 'owner' AND password_hash IS NOT NULL",
        (tenant_id,),
    )
    return int(row["n"])


# Sessions


async def insert_session(db: Database | Transaction, session_id: uuid.UUID, token_hash: bytes, user: dict,
                         now: datetime, expires_at: datetime, user_agent: str | None = None,
                         client: str | None = None) -> None:
    await db.execute(
        "INSERT INTO sessions (id, token_hash, user_id, tenant_id, created_at, last_seen_at, expires_at, user_agent,"
        " client) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (session_id, token_hash, user["id"], user["tenant_id"], now, now, expires_at, user_agent, client),
    )


async def live_session(db: Database, token_hash: bytes, now: datetime, idle_since: datetime) -> dict | None:
    """
    The session of a token that is neither revoked, past its expiry nor idle since before
    ``idle_since``; whether its user has a second factor, and whether the account requires one.
    """
    return await db.fetchone(
        "SELECT s.id, s.user_id, s.tenant_id, s.last_seen_at, s.expires_at, u.email, u.role,"
        " u.totp_enabled_at IS NOT NULL AS two_factor, t.require_two_factor"
        " FROM sessions s JOIN users u ON u.id = s.user_id JOIN tenants t ON t.id = s.tenant_id"
        " WHERE s.token_hash = %s AND s.revoked_at IS NULL AND s.expires_at > %s AND s.last_seen_at > %s",
        (token_hash, now, idle_since),
    )


async def touch_session(db: Database, session_id: uuid.UUID, now: datetime) -> None:
    await db.execute("UPDATE sessions SET last_seen_at = %s WHERE id = %s AND revoked_at IS NULL",
                     (now, session_id))


async def revoke_session(db: Database, token_hash: bytes, now: datetime) -> None:
    await db.execute("UPDATE sessions SET revoked_at = %s WHERE token_hash = %s AND revoked_at IS NULL",
                     (now, token_hash))


async def revoke_sessions_of(txn: Transaction | Database, user_id: uuid.UUID, now: datetime) -> None:
    await txn.execute("UPDATE sessions SET revoked_at = %s WHERE user_id = %s AND revoked_at IS NULL",
                      (now, user_id))


# Reads of the dashboard


async def email_timeline(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID) -> list[dict] | None:
    """The events of one e-mail of the account, oldest first; None when it has no such e-mail."""
    found = await db.fetchone("SELECT 1 FROM emails WHERE tenant_id = %s AND id = %s", (tenant_id, email_id))
    if found is None:
        return None
    return await db.fetchall(
        "SELECT id, type, data, created_at FROM events"
        " WHERE data ? 'email_id' AND (data ->> 'email_id') = %s AND tenant_id = %s ORDER BY id LIMIT 500",
        (str(email_id), tenant_id),
    )


async def email_deliveries(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID) -> list[dict]:
    return await db.fetchall(
        "SELECT recipient, status, attempts, last_response, updated_at FROM deliveries"
        " WHERE tenant_id = %s AND email_id = %s ORDER BY recipient",
        (tenant_id, email_id),
    )


async def search_emails(db: Database, tenant_id: uuid.UUID, text: str, status: str | None, page: Page,
                        window: tuple[datetime | None, datetime | None] = (None, None),
                        domain: str | None = None) -> tuple[list[dict], bool]:
    """A page of the e-mails, newest first, whose subject, sender or recipients hold ``text``
    (case-insensitive) or whose id it is, whose last event is ``status`` (None: any), made within
    ``window`` (from its first instant, before its second; None: open) and sent from an address
    of ``domain`` (lower case; None: any)."""
    where, order, params = clause(page)
    # Each condition with its parameters; the page's last parameter is its LIMIT.
    conditions = [("tenant_id = %s", [tenant_id]), (where, params[:-1])]
    if text:
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        conditions.append(("(subject ILIKE %s OR sender ILIKE %s OR recipients::text ILIKE %s OR id::text = lower(%s))",
                           [pattern, pattern, pattern, text]))
    if status:
        conditions.append(("last_event = %s", [status]))
    since, until = window
    if since is not None:
        conditions.append(("created_at >= %s", [since]))
    if until is not None:
        conditions.append(("created_at < %s", [until]))
    if domain:
        # The sender is an address, or a name with its address in angle brackets.
        conditions.append(("lower(substring(sender from '@([^@<>[:space:]]+)>?[[:space:]]*$')) = %s", [domain]))
    rows = await db.fetchall(
        "SELECT id, sender, recipients, subject, last_event, status, created_at, scheduled_at FROM emails"
        f" WHERE {' AND '.join(c for c, _ in conditions)} {order}",
        [*(v for _, values in conditions for v in values), params[-1]])
    return page.finish(rows)


async def daily_stats(db: Database, tenant_id: uuid.UUID, since: date) -> dict[date, dict]:
    """Per day from ``since``: recipients accepted (``sent``) and the delivery outcomes."""
    days: dict[date, dict] = {}
    rows = await db.fetchall(
        "SELECT to_date(substr(period, 5), 'YYYY-MM-DD') AS day, count FROM usage"
        " WHERE tenant_id = %s AND period LIKE 'day:%%' AND period >= %s",
        (tenant_id, f"day:{since:%Y-%m-%d}"),
    )
    for row in rows:
        days.setdefault(row["day"], {})["sent"] = int(row["count"])
    rows = await db.fetchall(
        "SELECT day, delivered + test_delivered AS delivered, bounced + test_bounced AS bounced,"
        " complained + test_complained AS complained FROM delivery_stats WHERE tenant_id = %s AND day >= %s",
        (tenant_id, since),
    )
    for row in rows:
        days.setdefault(row["day"], {}).update(
            delivered=int(row["delivered"]), bounced=int(row["bounced"]), complained=int(row["complained"]))
    return days


async def daily_stats_from(db: Database, tenant_id: uuid.UUID, since: date, domain: str) -> dict[date, dict]:
    """Per day (UTC) from ``since``, of the e-mails sent from an address of ``domain`` (lower
    case): recipients accepted (``sent``) and where their deliveries stand now (a complaint's
    delivery counts as delivered too, as the account's figures count it). The e-mails are bounded
    by id too: UUIDv7 ids sort by time of acceptance, so the ``emails_tenant`` index reads only
    the period's, however long the account's history."""
    rows = await db.fetchall(
        "SELECT (e.created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS sent,"
        " count(*) FILTER (WHERE d.status IN ('delivered', 'complained')) AS delivered,"
        " count(*) FILTER (WHERE d.status = 'bounced') AS bounced,"
        " count(*) FILTER (WHERE d.status = 'complained') AS complained"
        " FROM emails e JOIN deliveries d ON d.email_id = e.id"
        " WHERE e.tenant_id = %s AND e.id >= %s AND e.created_at >= %s"
        # The sender is an address, or a name with its address in angle brackets.
        "   AND lower(substring(e.sender from '@([^@<>[:space:]]+)>?[[:space:]]*$')) = %s"
        " GROUP BY 1",
        (tenant_id, first_id_at(datetime.combine(since, time(), UTC)), since, domain),
    )
    return {row["day"]: {k: int(row[k]) for k in ("sent", "delivered", "bounced", "complained")} for row in rows}


async def usage_counts(db: Database, tenant_id: uuid.UUID, day: str, month: str) -> dict[str, int]:
    rows = await db.fetchall("SELECT period, count FROM usage WHERE tenant_id = %s AND period IN (%s, %s)",
                             (tenant_id, day, month))
    return {row["period"]: int(row["count"]) for row in rows}


async def webhook_deliveries(db: Database, tenant_id: uuid.UUID, webhook_id: uuid.UUID,
                             page: Page) -> tuple[list[dict], bool]:
    """A page of the webhook's deliveries, newest event first (the event's id is the cursor), each
    with its event (type, time, data) and the webhook's naming, from which its payload is built
    again as it was sent, and its attempts, first first (``attempts_made``: a list of rows)."""
    where, order, params = clause(page, "w.event_id")
    rows = await db.fetchall(
        "SELECT w.event_id, e.type, w.state, w.attempts, w.last_attempt_at, w.last_status, w.last_response,"
        " w.due_at, w.claimed_until, w.created_at, e.created_at AS event_created_at, e.data, h.naming,"
        " coalesce(a.made, '[]') AS attempts_made"
        " FROM webhook_deliveries w JOIN events e ON e.id = w.event_id JOIN webhooks h ON h.id = w.webhook_id"
        " LEFT JOIN LATERAL (SELECT json_agg(json_build_object("
        "   'attempt', t.attempt, 'at', t.at, 'status', t.status, 'duration_ms', t.duration_ms, 'error', t.error,"
        "   'detail', t.detail, 'response', t.response) ORDER BY t.attempt) AS made"
        "   FROM webhook_attempts t WHERE t.webhook_id = w.webhook_id AND t.event_id = w.event_id) a ON true"
        f" WHERE w.tenant_id = %s AND w.webhook_id = %s AND {where} {order}",
        [tenant_id, webhook_id, *params],
    )
    return page.finish(rows)


async def webhook_outcomes(db: Database, tenant_id: uuid.UUID, webhook_id: uuid.UUID, since: datetime) -> dict:
    """Of the webhook's deliveries last attempted at ``since`` or later: how many were delivered,
    and how many were attempted at all; and of its attempts made since, how many succeeded (a
    2xx answer) and how many were made."""
    return await db.fetchrow(
        "SELECT count(*) FILTER (WHERE state = 'delivered') AS delivered, count(*) AS attempted,"
        " (SELECT count(*) FILTER (WHERE error IS NULL) FROM webhook_attempts"
        "  WHERE webhook_id = %(webhook)s AND tenant_id = %(tenant)s AND at >= %(since)s) AS succeeded,"
        " (SELECT count(*) FROM webhook_attempts"
        "  WHERE webhook_id = %(webhook)s AND tenant_id = %(tenant)s AND at >= %(since)s) AS made"
        " FROM webhook_deliveries WHERE tenant_id = %(tenant)s AND webhook_id = %(webhook)s"
        " AND last_attempt_at >= %(since)s",
        {"tenant": tenant_id, "webhook": webhook_id, "since": since}, desc="webhook outcomes",
    )


async def email_html(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID) -> dict | None:
    """The ``html`` of one e-mail of the account and its ``broadcast_id`` (a broadcast's e-mail
    has the broadcast's); None when there is no such e-mail."""
    return await db.fetchone("SELECT html, broadcast_id FROM emails WHERE tenant_id = %s AND id = %s",
                             (tenant_id, email_id))


async def email_particulars(db: Database, tenant_id: uuid.UUID, email_id: uuid.UUID) -> dict | None:
    """
    What an e-mail's page shows beside the API's resource: its Message-ID, the message kept as it
    came (one submitted over SMTP; else NULL), the idempotency key it was accepted under while
    that key lives (found in the stored answers, which name the id), and its first Inbox copy
    (id and source as signed) when it went to a test address. None when there is no such e-mail.
    """
    return await db.fetchone(
        "SELECT e.message_id, e.message,"
        " (SELECT k.key FROM idempotency_keys k WHERE k.tenant_id = e.tenant_id AND k.state = 'done'"
        "   AND position(convert_to(e.id::text, 'UTF8') IN k.response) > 0 LIMIT 1) AS idempotency_key,"
        " i.id AS inbox_id, i.message AS inbox_message"
        " FROM emails e LEFT JOIN LATERAL (SELECT id, message FROM inbox WHERE tenant_id = e.tenant_id"
        "   AND email_id = e.id ORDER BY id LIMIT 1) i ON true"
        " WHERE e.tenant_id = %s AND e.id = %s",
        (tenant_id, email_id), desc="email particulars",
    )
