"""
The accept statement: every email, attachment, delivery and event of one or more requests,
their idempotency outcomes and their quota charges, written by ONE statement that is its own
transaction, then the NOTIFYs. Nothing of it remains when any part is refused.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import attrs
from psycopg2 import errors as pgerrors
from psycopg2.extensions import adapt
from psycopg2.extras import Json

from mailsvc.domain.errors import IdempotencyClaimLost, LeaseLost, QuotaExceeded, SendingDomainGone
from mailsvc.domain.headers import Mailbox
from mailsvc.store import events
from mailsvc.store.database import Database
from mailsvc.store.idempotency import COMPLETE

#: NOTIFY channel that wakes the delivery workers.
DELIVERIES = "deliveries"

#: The columns of each table, in the order ``_email_values`` and its siblings give a row's values.
#: ``signed`` is written false: messages are stored unsigned and signed at delivery (the
#: column's default, true, marks mail stored signed by an older version). ``message`` is only
#: an SMTP submission's; every other message is built from the content (``app/messages``).
EMAIL_COLUMNS = ("id, tenant_id, domain_id, message_id, sender, recipients, subject, html, text, tags, stream,"
                 " source, scheduled_at, status, last_event, message, created_at, signed, headers, links_base,"
                 " broadcast_id")
ATTACHMENT_COLUMNS = "id, email_id, tenant_id, filename, content_type, content_disposition, content_id, size, content"
DELIVERY_COLUMNS = "id, email_id, tenant_id, recipient, status, due_at, updated_at, retry_until, bulk"

#: Starts the text that fails the statement when a quota or an idempotency claim refuses it.
_QUOTA_REFUSED = "mailsvc quota refused: "
_CLAIM_LOST = "mailsvc claim lost: "
_LEASE_LOST = "mailsvc lease lost: "


@attrs.frozen
class Guard:
    """
    A data-modifying statement (``sql`` RETURNING a row per row it changed) written as part of
    an accept statement, which it fails (``LeaseLost``) unless it changed exactly ``expected``
    rows: a broadcast's chunk records its recipients this way, only while it holds their lease.
    """

    sql: str
    parameters: list
    expected: int


# The rows are built per e-mail and per recipient on the accept path: slots and no validators.


@attrs.frozen
class EmailRow:
    """An email as accepted: its content, or the message submitted over SMTP (unsigned)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    domain_id: uuid.UUID | None  # None: the test sender
    message_id: str
    sender: str
    to: Sequence[Mailbox]
    cc: Sequence[Mailbox]
    bcc: Sequence[Mailbox]
    reply_to: Sequence[Mailbox]
    subject: str
    html: str | None
    text: str | None
    #: ``{"name", "value"}`` objects, as the API shows them.
    tags: list[dict]
    stream: str
    source: str
    scheduled_at: datetime | None
    status: str
    last_event: str
    message: bytes | None
    created_at: datetime
    #: Custom header fields as submitted (name, value).
    headers: Sequence[tuple[str, str]]
    #: Broadcast stream: ``scheme://host`` of its unsubscribe links.
    links_base: str | None
    #: A broadcast's recipient: html and text are the broadcast's (None here).
    broadcast_id: uuid.UUID | None = None


@attrs.frozen
class AttachmentRow:
    id: uuid.UUID
    email_id: uuid.UUID
    tenant_id: uuid.UUID
    filename: str | None
    content_type: str | None
    inline: bool
    content_id: str | None
    content: bytes


@attrs.frozen
class DeliveryRow:
    """A recipient of an email."""

    id: uuid.UUID
    email_id: uuid.UUID
    tenant_id: uuid.UUID
    recipient: str
    status: str
    due_at: datetime | None
    updated_at: datetime
    retry_until: datetime | None
    #: The broadcast stream's: the claim takes the account's transactional mail first.
    bulk: bool = False


@attrs.frozen
class EventRow:
    tenant_id: uuid.UUID
    type: str
    data: dict


@attrs.frozen
class Completion:
    """An idempotency key's outcome, written only while the claim ``token`` still holds it."""

    tenant_id: uuid.UUID
    key: str
    token: datetime
    status: int
    response: bytes


@attrs.define
class AcceptRows:
    """What one accept statement writes, table by table."""

    emails: list[EmailRow] = attrs.Factory(list)
    attachments: list[AttachmentRow] = attrs.Factory(list)
    deliveries: list[DeliveryRow] = attrs.Factory(list)
    events: list[EventRow] = attrs.Factory(list)
    #: Recipients to charge per tenant, with the tenant's daily and monthly quotas.
    charges: dict[uuid.UUID, list[int]] = attrs.Factory(dict)
    completions: list[Completion] = attrs.Factory(list)
    #: Guarded writes of the same transaction (``Guard``).
    guards: list[Guard] = attrs.Factory(list)

    def charge(self, tenant_id: uuid.UUID, count: int, daily: int, monthly: int) -> None:
        if count:
            charge = self.charges.setdefault(tenant_id, [0, daily, monthly])
            charge[0] += count
            charge[1], charge[2] = min(charge[1], daily), min(charge[2], monthly)


#: The SQL type of each column, in the order of ``*_COLUMNS``: each column is one parameter of
#: the statement, an array of that type (``unnest``), or one value when every row has the same.
EMAIL_TYPES = ("uuid", "uuid", "uuid", "text", "text", "jsonb", "text", "text", "text", "jsonb", "text", "text",
               "timestamptz", "text", "text", "bytea", "timestamptz", "boolean", "jsonb", "text", "uuid")
ATTACHMENT_TYPES = ("uuid", "uuid", "uuid", "text", "text", "text", "text", "integer", "bytea")
DELIVERY_TYPES = ("uuid", "uuid", "uuid", "text", "text", "timestamptz", "timestamptz", "timestamptz", "boolean")


def _email_values(e: EmailRow) -> tuple:
    recipients = {"to": [str(m) for m in e.to], "cc": [str(m) for m in e.cc],
                  "bcc": [str(m) for m in e.bcc], "reply_to": [str(m) for m in e.reply_to]}
    return (e.id, e.tenant_id, e.domain_id, e.message_id, e.sender, _dumps(recipients), e.subject, e.html, e.text,
            _dumps(e.tags), e.stream, e.source, e.scheduled_at, e.status, e.last_event, e.message, e.created_at,
            False, _dumps([list(h) for h in e.headers]) if e.headers else None, e.links_base, e.broadcast_id)


def _attachment_values(a: AttachmentRow) -> tuple:
    return (a.id, a.email_id, a.tenant_id, a.filename, a.content_type, "inline" if a.inline else "attachment",
            a.content_id, len(a.content), a.content)


def _delivery_values(d: DeliveryRow) -> tuple:
    return (d.id, d.email_id, d.tenant_id, d.recipient, d.status, d.due_at, d.updated_at, d.retry_until, d.bulk)


def _dumps(value) -> str:
    """The JSON text psycopg2's ``Json`` would write (a jsonb column's value, as text)."""
    return Json(value).dumps(value)


#: Arrays of these types go as a JSON array of texts (one text psycopg2 quotes in C); the
#: others (times, bytes) as a list psycopg2 adapts value by value.
_AS_JSON = frozenset({"uuid", "text", "jsonb", "integer", "boolean"})


def json_array(kind: str) -> str:
    """An array of ``kind`` from a parameter that is a JSON array of its elements' texts (or nulls), in order."""
    return (f"ARRAY(SELECT e FROM json_array_elements_text(%s::json) WITH ORDINALITY AS j (e, n) ORDER BY n)"
            f"::{kind}[]")


def columnar(columns: str, types: Sequence[str], rows: Sequence[tuple]) -> tuple[str, list]:
    """
    ``("SELECT … FROM unnest(…) AS v (…)", parameters)``: ``rows`` (tuples of values in the order
    of ``columns``; JSON as its text) as one parameter per column, whatever their number: the
    one value every row has, or else an array of them, sent as ONE JSON text (its elements'
    texts) that PostgreSQL splits (times and bytes: a list psycopg2 adapts). Composing it costs
    about a C call per column and a Python ``str`` per UUID that varies: no placeholder per value
    (each costs psycopg2 a microsecond or more; a broadcast's chunk had 15,000), and the
    statement's text does not grow with the rows. ``INSERT INTO t (columns)`` before it writes
    them, in order.
    """
    if columns.count(",") + 1 != len(types) or any(len(row) != len(types) for row in rows):
        raise ValueError("the columns, their types and the rows' values differ in number")
    selected: list[str] = []
    arrays: list[tuple[str, str, object]] = []
    scalars: list[object] = []
    parameters: list[object] = []
    for n, (kind, values) in enumerate(zip(types, zip(*rows, strict=True), strict=True)):
        first = values[0]
        if all(v is first or (v == first and type(v) is type(first)) for v in values):
            selected.append(f"%s::{kind}")
            scalars.append(first)
            continue
        selected.append(f"v.c{n}")
        if kind in _AS_JSON:
            shown = [None if v is None else str(v) for v in values] if kind == "uuid" else list(values)
            arrays.append((json_array(kind), f"c{n}", json.dumps(shown, ensure_ascii=False)))
        else:
            arrays.append((f"%s::{kind}[]", f"c{n}", list(values)))
    sql = "SELECT " + ", ".join(selected)
    parameters += scalars  # the SELECT list comes before FROM
    if arrays:
        sql += (" FROM unnest(" + ", ".join(a[0] for a in arrays) + ") AS v ("
                + ", ".join(a[1] for a in arrays) + ")")
        parameters += [a[2] for a in arrays]
    else:
        sql += " FROM generate_series(1, %s)"
        parameters.append(len(rows))
    return sql, parameters


#: A table of at most this many rows in a statement is written as a ``VALUES`` list (``rowwise``),
#: more as columns (``columnar``): for one to four rows PostgreSQL plans and runs the list in
#: less time and it is built faster (``python -m bench.accept_forms``; docs/benchmarks.md, "SMTP
#: submission"), and SMTP sessions write one or two e-mails a statement.
VALUES_ROWS = 4


def rowwise(types: Sequence[str], rows: Sequence[tuple]) -> tuple[str, list]:
    """``("VALUES (%s::uuid, …), (…)", parameters)``: ``rows`` with a placeholder per value, for an
    ``INSERT INTO t (columns)`` before it; few rows only (each value is a parameter)."""
    if any(len(row) != len(types) for row in rows):
        raise ValueError("the types and the rows' values differ in number")
    row = "(" + ", ".join(f"%s::{kind}" for kind in types) + ")"
    return "VALUES " + ", ".join([row] * len(rows)), [value for one in rows for value in one]


def rows_form(columns: str, types: Sequence[str], rows: Sequence[tuple]) -> tuple[str, list]:
    """The rows of one table as the statement writes them: ``rowwise`` for few, else ``columnar``."""
    if len(rows) <= VALUES_ROWS:
        return rowwise(types, rows)
    return columnar(columns, types, rows)


def inlined(sql: str, parameters: list) -> tuple[str, list]:
    """
    ``sql`` with its ids, times, NULLs and booleans written in place of their ``%s``, as psycopg2
    would write them (the statement it sends is byte for byte the same), and the parameters
    left for it: each one psycopg2 composes costs about a microsecond (its UUID adapter is
    Python), and a batch of 100 e-mails has over 3,000. A ``Json`` is left as the text it
    quotes (the same literal, without its adapter). Each distinct time is quoted once.
    """
    pieces = sql.split("%s")
    if len(pieces) != len(parameters) + 1:
        raise ValueError("the statement's placeholders and its parameters differ in number")
    out = [pieces[0]]
    kept = []
    times: dict = {}
    for value, piece in zip(parameters, pieces[1:], strict=True):
        kind = type(value)
        if kind is uuid.UUID:
            out.append(f"'{value}'::uuid")  # psycopg2.extras.UUID_adapter's literal
        elif kind is datetime:
            key = (value, value.tzinfo)  # equal instants in other zones are written differently
            literal = times.get(key)
            if literal is None:
                literal = times[key] = adapt(value).getquoted().decode("ascii")
            out.append(literal)
        elif value is None:
            out.append("NULL")
        elif kind is bool:
            out.append("true" if value else "false")
        else:
            out.append("%s")
            kept.append(value.dumps(value.adapted) if kind is Json else value)
        out.append(piece)
    return "".join(out), kept


async def write(db: Database, clock, rows: AcceptRows, now: datetime) -> None:
    """
    The statement of ``rows``. The quota charge is its last part and all of its charges are
    one INSERT, in the order of the tenants: the tenants' ``usage`` rows, which every send of
    the tenant on every node locks, stay locked from there to the end of the COMMIT only, with
    no round trip in between, and always in one order. Atomic across nodes: the row locks
    order concurrent charges, the WHERE refuses, and a refusal fails the statement.

    Raises QuotaExceeded, IdempotencyClaimLost or SendingDomainGone for what refused it.
    """
    parts: list[tuple[str, str, str, Sequence[str], Sequence[Any], Callable[[Any], tuple]]] = [
        ("new_emails", "emails", EMAIL_COLUMNS, EMAIL_TYPES, rows.emails, _email_values),
        ("new_deliveries", "deliveries", DELIVERY_COLUMNS, DELIVERY_TYPES, rows.deliveries, _delivery_values),
        ("new_attachments", "attachments", ATTACHMENT_COLUMNS, ATTACHMENT_TYPES, rows.attachments,
         _attachment_values)]
    ctes: list[str] = []
    parameters: list[object] = []
    inserted: list[str] = []
    for name, table, columns, types, typed, values_of in parts:
        if typed:
            select, values = rows_form(columns, types, [values_of(one) for one in typed])
            ctes.append(f"{name} AS (INSERT INTO {table} ({columns}) {select} RETURNING 1)")
            parameters += values
            inserted.append(name)
    channels = [DELIVERIES]
    if rows.events:
        select, values = rows_form(events.COLUMNS, events.TYPES,
                                   events.values(clock, [(e.tenant_id, e.type, e.data) for e in rows.events]))
        ctes.append(f"new_events AS (INSERT INTO events ({events.COLUMNS}) {select} RETURNING 1)")
        parameters += values
        inserted.append("new_events")
        channels.append(events.CHANNEL)
    verdicts, verdict_parameters = [], []
    for n, guard in enumerate(rows.guards):
        ctes.append(f"guarded_{n} AS ({guard.sql})")
        parameters += guard.parameters
        # A guard that changed fewer rows than it must fails the statement: a text, no integer.
        verdicts.append(f"(CASE WHEN (SELECT count(*) FROM guarded_{n}) = %s THEN '0' ELSE %s END)::int")
        verdict_parameters += [guard.expected, _LEASE_LOST]
    if rows.completions:
        for n, c in enumerate(rows.completions):
            ctes.append(f"completed_{n} AS ({COMPLETE})")
            parameters += (c.status, c.response, c.tenant_id, c.key, c.token)
        # A claim that no longer holds fails the statement: a text that is no integer.
        completed = " + ".join(f"(SELECT count(*) FROM completed_{n})" for n in range(len(rows.completions)))
        verdicts.append(f"(CASE WHEN {completed} = {len(rows.completions)} THEN '0' ELSE %s END)::int")
        verdict_parameters.append(_CLAIM_LOST)
    if rows.charges:
        quotas = []
        for tenant_id, (count, daily, monthly) in sorted(rows.charges.items()):
            quotas += [tenant_id, f"day:{now:%Y-%m-%d}", count, daily, "daily",
                       tenant_id, f"month:{now:%Y-%m}", count, monthly, "monthly"]
        written = " + ".join(f"(SELECT count(*) FROM {name})" for name in inserted)
        ctes += [
            "quotas AS (SELECT * FROM (VALUES "
            + ", ".join(["(%s::uuid, %s, %s::integer, %s::integer, %s)"] * (len(quotas) // 5))
            + ") AS q (tenant_id, period, n, quota, kind))",
            # After every insert (it counts what they wrote), so the rows are locked last.
            "charged AS (INSERT INTO usage AS u (tenant_id, period, count)"
            " SELECT q.tenant_id, q.period, q.n FROM quotas q, (SELECT " + written + " AS n) AS written"
            " WHERE q.n <= q.quota AND written.n > 0 ORDER BY q.tenant_id, q.period"
            " ON CONFLICT (tenant_id, period) DO UPDATE SET count = u.count + excluded.count"
            " WHERE u.count + excluded.count <= (SELECT q.quota FROM quotas q"
            "   WHERE q.tenant_id = u.tenant_id AND q.period = u.period)"
            " RETURNING u.tenant_id, u.period)",
        ]
        parameters += quotas
        # A refused charge fails the statement, naming the period (the daily one first).
        verdicts.append("(SELECT coalesce(min(%s || q.kind), '0') FROM quotas q WHERE NOT EXISTS"
                        " (SELECT 1 FROM charged c WHERE c.tenant_id = q.tenant_id AND c.period = q.period))::int")
        verdict_parameters.append(_QUOTA_REFUSED)
    notify = ", ".join(["pg_notify(%s, '')"] * len(channels))
    try:
        statement, kept = inlined(f"WITH {', '.join(ctes)} SELECT {' + '.join(verdicts) or '0'}, {notify}",
                                  [*parameters, *verdict_parameters, *channels])
        await db.fetchall(statement, kept, desc="accept_email")
    except pgerrors.InvalidTextRepresentation as e:
        refused = str(e).partition(_QUOTA_REFUSED)[2]
        for period in ("daily", "monthly"):
            if refused.startswith(period):
                raise QuotaExceeded(period) from None
        if _CLAIM_LOST in str(e):
            raise IdempotencyClaimLost() from None
        if _LEASE_LOST in str(e):
            raise LeaseLost() from None
        raise
    except pgerrors.ForeignKeyViolation as e:
        # A sending domain deleted (on another node) since it was looked up and cached.
        if getattr(e.diag, "constraint_name", None) == "emails_domain_id_fkey":
            raise SendingDomainGone() from None
        raise
