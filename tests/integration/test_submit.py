"""
The one submit contract (``mailsvc.app.submit``): which outcomes an idempotency key keeps over
HTTP and SMTP alike, a claim that no longer holds, and a sender that is no API key.
"""

import uuid

import pytest
import pytest_twisted as pt
from twisted.internet import reactor, task, threads

from mailsvc import timefmt
from mailsvc.app.idempotency import IdempotencyKey, IdempotencyKeys
from mailsvc.app.submit import Item, ServiceSender
from mailsvc.domain.email import submission_from_json
from mailsvc.domain.errors import IdempotencyClaimLost
from mailsvc.domain.headers import Mailbox
from mailsvc.store import accept, accounts
from mailsvc.store.accept import AcceptRows, AttachmentRow, Completion, DeliveryRow, EmailRow, EventRow
from tests.helpers.sending import BODY, sending_tenant
from tests.helpers.smtp import message, submit


@pt.ensureDeferred
async def test_http_keeps_a_refusal_and_replays_it(api):
    _, key, _ = await sending_tenant(api)
    headers = {"Idempotency-Key": "bad-1"}
    bad = {**BODY, "to": ["not an address"]}
    code, first, _ = await api.json("POST", "/emails", key, json=bad, headers=headers)
    code2, second, response = await api.json("POST", "/emails", key, json=bad, headers=headers)
    assert (code, code2, first["name"]) == (422, 422, "validation_error") and first == second
    assert response.headers.getRawHeaders("idempotent-replayed") == ["true"]


@pt.ensureDeferred
async def test_http_strict_batch_keeps_the_refused_item(api):
    _, key, _ = await sending_tenant(api)
    headers = {"Idempotency-Key": "batch-1"}
    batch = [BODY, {**BODY, "from": "x@unverified.example.com"}]
    code, first, _ = await api.json("POST", "/emails/batch", key, json=batch, headers=headers)
    assert (code, first["name"]) == (403, "validation_error") and first["message"].startswith("[1] ")
    code2, second, response = await api.json("POST", "/emails/batch", key, json=batch, headers=headers)
    assert (code2, second) == (code, first) and response.headers.getRawHeaders("idempotent-replayed") == ["true"]
    assert await api.parts.db.fetchone("SELECT count(*) AS n FROM emails") == {"n": 0}


@pt.ensureDeferred
async def test_smtp_keeps_a_refusal_as_http_does(api, smtp_ports, pem):  # noqa: F811 (fixtures)
    _, key, domain_id = await sending_tenant(api)
    await api.parts.db.execute("UPDATE domains SET status = 'pending' WHERE id = %s", (domain_id,))

    def attempt(idempotency_key):
        msg = message(Resend_Idempotency_Key=idempotency_key)
        try:
            submit(smtp_ports["implicit"], pem, key, msg, implicit=True)
        except Exception as e:
            return e.smtp_code, e.smtp_error
        return 250, b""

    code, text = await threads.deferToThread(attempt, "smtp-refused")
    assert code == 550 and text.startswith(b"5.7.1") and b"not verified" in text
    # The domain is verified since, but the key keeps its refusal; a new key sends.
    await api.parts.db.execute("UPDATE domains SET status = 'verified' WHERE id = %s", (domain_id,))
    assert await threads.deferToThread(attempt, "smtp-refused") == (code, text)
    assert (await threads.deferToThread(attempt, "smtp-new"))[0] == 250
    assert await api.parts.db.fetchone("SELECT count(*) AS n FROM emails") == {"n": 1}


@pt.ensureDeferred
async def test_a_service_sender_needs_no_key(api):
    tenant, _, _ = await sending_tenant(api)
    account = await accounts.get_tenant(api.parts.db, uuid.UUID(tenant["id"]))
    item = Item(lambda now: submission_from_json(BODY, now))
    outcome = await api.parts.submitter.submit(ServiceSender(account), [item], "broadcast")
    (accepted,) = outcome.accepted
    row = await api.parts.db.fetchone("SELECT source, tenant_id FROM emails WHERE id = %s", (accepted.id,))
    assert row == {"source": "broadcast", "tenant_id": account.id}


@pt.ensureDeferred
async def test_the_final_write_needs_the_claim_to_hold(api):
    tenant, _, _ = await sending_tenant(api)
    tenant_id = uuid.UUID(tenant["id"])
    keys = IdempotencyKeys(reactor, api.parts.db)  # another node's: the claims are in the database
    claim = await keys.claim(tenant_id, IdempotencyKey("k", b"h" * 32))
    # Another request took the key over (as it may once the lease ran out).
    await api.parts.db.execute("UPDATE idempotency_keys SET locked_until = locked_until + interval '1 second'")
    rows = AcceptRows()
    rows.completions.append(Completion(tenant_id, claim.key, claim.token, 200, b"{}"))
    rows.events.append(EventRow(tenant_id, "email.sent", {"email_id": "x"}))
    with pytest.raises(IdempotencyClaimLost):
        await accept.write(api.parts.db, reactor, rows, timefmt.from_seconds(0))
    assert await api.parts.db.fetchone("SELECT count(*) AS n FROM events") == {"n": 0}
    with pytest.raises(IdempotencyClaimLost):
        await keys.complete(api.parts.db, claim, 200, b"{}")
    await keys.release(claim)  # a lost claim is not released: the new holder keeps it
    assert await api.parts.db.fetchone("SELECT state FROM idempotency_keys") == {"state": "pending"}


@pt.ensureDeferred
async def test_the_accept_statement_encodes_typed_rows_itself(api):
    """The use case gives rows by name; the store writes each column as the API reads it back."""
    tenant, _, domain_id = await sending_tenant(api)
    tenant_id, domain_id = uuid.UUID(tenant["id"]), uuid.UUID(domain_id)
    now = timefmt.from_seconds(1_800_000_000)
    email_id, delivery_id = uuid.uuid4(), uuid.uuid4()
    tags = [{"name": "kind", "value": "welcome"}]
    rows = AcceptRows()
    rows.emails.append(EmailRow(
        id=email_id, tenant_id=tenant_id, domain_id=domain_id, message_id="<m1@acme.example.com>",
        sender="Acme <news@acme.example.com>", to=(Mailbox("Ann", "ann@example.com"),), cc=(),
        bcc=(Mailbox("", "bob@example.com"),), reply_to=(Mailbox("Help, Desk", "help@acme.example.com"),),
        subject="Hello", html="<p>Hi</p>", text=None, tags=tags, stream="transactional", source="api",
        scheduled_at=None, status="queued", last_event="sent", message=b"the message", created_at=now,
        headers=[("X-Entity-Ref-ID", "7")], links_base=None))
    rows.attachments.append(AttachmentRow(
        id=uuid.uuid4(), email_id=email_id, tenant_id=tenant_id, filename="logo.png", content_type="image/png",
        inline=True, content_id="logo", content=b"\x89PNG"))
    rows.deliveries.append(DeliveryRow(
        id=delivery_id, email_id=email_id, tenant_id=tenant_id, recipient="ann@example.com", status="queued",
        due_at=now, updated_at=now, retry_until=None))
    rows.events.append(EventRow(tenant_id, "email.sent", {"email_id": str(email_id)}))
    await accept.write(api.parts.db, reactor, rows, now)
    email = await api.parts.db.fetchone(
        "SELECT recipients, tags, signed, status, last_event, convert_from(message, 'UTF8') AS message, headers"
        " FROM emails WHERE id = %s", (email_id,))
    assert email == {
        "recipients": {"to": ["Ann <ann@example.com>"], "cc": [], "bcc": ["bob@example.com"],
                       "reply_to": ['"Help, Desk" <help@acme.example.com>']},
        "tags": tags, "signed": False, "status": "queued", "last_event": "sent", "message": "the message",
        "headers": [["X-Entity-Ref-ID", "7"]]}
    attachment = await api.parts.db.fetchone(
        "SELECT content_disposition, size, content_id FROM attachments WHERE email_id = %s", (email_id,))
    assert attachment == {"content_disposition": "inline", "size": 4, "content_id": "logo"}
    delivery = await api.parts.db.fetchone("SELECT recipient, status, message FROM deliveries WHERE id = %s",
                                           (delivery_id,))
    assert delivery == {"recipient": "ann@example.com", "status": "queued", "message": None}
    event = await api.parts.db.fetchone("SELECT type, data FROM events WHERE tenant_id = %s", (tenant_id,))
    assert event == {"type": "email.sent", "data": {"email_id": str(email_id)}}


def test_the_accept_statement_inlines_values_as_psycopg2_writes_them(pg_dsn):
    """``accept.inlined`` changes nothing of the statement PostgreSQL receives."""
    from datetime import UTC, datetime, timedelta, timezone

    import psycopg2
    import psycopg2.extras

    psycopg2.extras.register_uuid()
    now = datetime(2026, 11, 25, 13, 40, 1, 123456, tzinfo=UTC)
    elsewhere = now.astimezone(timezone(timedelta(hours=2)))  # the same instant, written differently
    sql = "SELECT " + ", ".join(["%s"] * 12) + " WHERE %s::uuid IS NOT NULL"
    parameters = [uuid.uuid4(), now, elsewhere, now, None, True, False, "it's 100% %s text", b"\x00\xff bytes",
                  psycopg2.extras.Json({"to": ["a@b.example"], "n": 1}), 7, datetime(2026, 1, 1), uuid.uuid4()]
    statement, kept = accept.inlined(sql, parameters)
    assert len(kept) == 4  # the text, the bytes, the JSON text and the integer
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        assert cur.mogrify(statement, kept) == cur.mogrify(sql, parameters)
    with pytest.raises(ValueError):
        accept.inlined("SELECT %s", [])


def test_the_columnar_statement_writes_what_a_row_per_values_does(pg_dsn):
    """
    ``accept.columnar`` (one parameter per column: a value every row shares, or a JSON array of
    texts, or a list for times and bytes) writes the same rows as one VALUES row per row, for
    awkward texts, NULLs in any column, JSON, bytes, times and one row alone.
    """
    from datetime import UTC, datetime, timedelta

    import psycopg2
    import psycopg2.extras

    psycopg2.extras.register_uuid()
    columns = "a, b, c, d, e, f, g, h"
    types = ("uuid", "uuid", "text", "jsonb", "timestamptz", "bytea", "integer", "boolean")
    t = datetime(2026, 11, 25, 13, 40, 1, 123456, tzinfo=UTC)
    shared = uuid.uuid4()
    rows = [
        (uuid.uuid4(), shared, "it's 100% \"quoted\", {braced}\\ \u00e9\u4e2d\U0001f600", '{"to": ["a@b.example"]}',
         t, b"\x00\xff", 1, True),
        (uuid.uuid4(), shared, None, None, t + timedelta(microseconds=1), None, None, False),
        (uuid.uuid4(), shared, "NULL", '[["X-A", "1"]]', None, b"", 3, None),
        (uuid.uuid4(), shared, "", "null", t, b"bytes", -2, True),
    ]
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        declared = ", ".join(f"{c} {k}" for c, k in zip(columns.split(", "), types, strict=True))
        cur.execute(f"CREATE TEMP TABLE per_row (n serial, {declared})")
        cur.execute("CREATE TEMP TABLE per_column (LIKE per_row INCLUDING DEFAULTS)")
        cur.execute("CREATE TEMP SEQUENCE s")
        cur.execute("ALTER TABLE per_column ALTER COLUMN n SET DEFAULT nextval('s')")
        for chosen in (rows, rows[:1], [rows[1], rows[1]]):
            cur.execute("TRUNCATE per_row, per_column")
            cur.execute("SELECT setval('per_row_n_seq', 1, false), setval('s', 1, false)")
            row = "(" + ", ".join(f"%s::{k}" for k in types) + ")"
            cur.execute(f"INSERT INTO per_row ({columns}) VALUES {', '.join([row] * len(chosen))}",
                        [v for r in chosen for v in r])
            select, parameters = accept.columnar(columns, types, chosen)
            statement, kept = accept.inlined(f"INSERT INTO per_column ({columns}) {select}", parameters)
            cur.execute(statement, kept)
            cur.execute(f"SELECT n, {columns} FROM per_row ORDER BY n")
            expected = cur.fetchall()
            cur.execute(f"SELECT n, {columns} FROM per_column ORDER BY n")
            assert [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in cur.fetchall()] == \
                [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in expected]
            assert len(expected) == len(chosen)
    with pytest.raises(ValueError):
        accept.columnar("a, b", ("uuid",), [(1,)])


@pt.ensureDeferred
async def test_a_batch_writes_every_email_delivery_and_event_as_given(api):
    """
    A permissive batch of different e-mails (a suppressed recipient among them) through the one
    accept path: each row and each event's data in the database is what the use case composed
    (``sent_event``, ``first_event``), one ``email.sent`` per e-mail with a live recipient.
    """
    from mailsvc.domain.delivery import sent_event

    tenant, key, _ = await sending_tenant(api)
    tenant_id = uuid.UUID(tenant["id"])
    db = api.parts.db
    await db.execute("INSERT INTO suppressions (id, tenant_id, email, origin, created_at)"
                     " VALUES (gen_random_uuid(), %s, 'gone@example.net', 'manual', now())", (tenant_id,))
    submitter = api.parts.submitter
    bodies = [
        {**BODY, "to": ["ann@example.net"], "subject": "It's \"one\" \u00e9", "tags": [{"name": "k", "value": "1"}]},
        {**BODY, "to": ["bob@example.net", "gone@example.net"], "cc": ["Carl <carl@example.net>"], "subject": "Two"},
        {**BODY, "to": ["gone@example.net"], "subject": "Three"},
        {**BODY, "to": ["dan@example.net"], "subject": "Four", "headers": {"X-Entity-Ref-ID": "4"}},
    ]
    account = await accounts.get_tenant(db, tenant_id)
    items = [Item(lambda now, b=b: submission_from_json(b, now)) for b in bodies]
    outcome = await submitter.submit(ServiceSender(account), items, "api", batch="permissive")
    ids = [a.id for a in outcome.accepted]
    emails = await db.fetchall("SELECT id, sender, subject, tags, recipients, status, last_event, created_at, headers"
                               " FROM emails WHERE tenant_id = %s ORDER BY id", (tenant_id,))
    assert [e["id"] for e in emails] == ids
    assert [e["subject"] for e in emails] == [b["subject"] for b in bodies]
    assert [e["last_event"] for e in emails] == ["sent", "sent", "suppressed", "sent"]
    assert emails[1]["recipients"]["cc"] == ["Carl <carl@example.net>"]
    assert emails[3]["headers"] == [["X-Entity-Ref-ID", "4"]]
    deliveries = await db.fetchall("SELECT id, email_id, recipient, status FROM deliveries WHERE tenant_id = %s"
                                   " ORDER BY id", (tenant_id,))
    assert [(d["email_id"], d["recipient"], d["status"]) for d in deliveries] == [
        (ids[0], "ann@example.net", "queued"), (ids[1], "bob@example.net", "queued"),
        (ids[1], "gone@example.net", "suppressed"), (ids[1], "carl@example.net", "queued"),
        (ids[2], "gone@example.net", "suppressed"), (ids[3], "dan@example.net", "queued")]
    events = await db.fetchall("SELECT type, data FROM events WHERE tenant_id = %s AND type LIKE 'email.%%'"
                               " ORDER BY id", (tenant_id,))
    expected = []
    by_id = {e["id"]: e for e in emails}
    for n, email_id in enumerate(ids):
        e = by_id[email_id]
        live = [d["recipient"] for d in deliveries if d["email_id"] == email_id and d["status"] == "queued"]
        if live:
            expected.append(("email.sent", sent_event(email_id, e["sender"], bodies[n]["subject"], e["tags"], None,
                                                      live, e["created_at"])))
        for d in deliveries:
            if d["email_id"] == email_id and d["status"] == "suppressed":
                expected.append(("email.suppressed", {
                    "email_id": str(email_id), "created_at": timefmt.iso(e["created_at"]), "to": live,
                    "delivery_id": str(d["id"]), "recipient": d["recipient"], "reason": "manual"}))
    assert [(e["type"], e["data"]) for e in events] == expected


def _two_emails(tenant_id: uuid.UUID, domain_id: uuid.UUID, now) -> AcceptRows:
    """Two e-mails that differ in every kind of column (NULLs, bytes, JSON, times), three
    recipients, an attachment, their events and their charge."""
    rows = AcceptRows()
    first, second = uuid.uuid4(), uuid.uuid4()
    rows.emails += [
        EmailRow(id=first, tenant_id=tenant_id, domain_id=domain_id, message_id="<m1@acme.example.com>",
                 sender="Acme <news@acme.example.com>", to=(Mailbox("Ann", "ann@example.com"),), cc=(),
                 bcc=(Mailbox("", "bob@example.com"),), reply_to=(), subject="Hello", html="<p>Hi</p>", text=None,
                 tags=[{"name": "kind", "value": "welcome"}], stream="transactional", source="api",
                 scheduled_at=None, status="queued", last_event="sent", message=None, created_at=now,
                 headers=[("X-Entity-Ref-ID", "7")], links_base=None),
        EmailRow(id=second, tenant_id=tenant_id, domain_id=None, message_id="<m2@acme.example.com>",
                 sender="news@acme.example.com", to=(Mailbox("", "cy@example.com"),), cc=(), bcc=(), reply_to=(),
                 subject="It's 'quoted' \\ and \u00e9", html=None, text="plain", tags=[], stream="broadcast",
                 source="smtp", scheduled_at=timefmt.from_seconds(now.timestamp() + 60), status="scheduled",
                 last_event="scheduled", message=b"\x00\xffthe message", created_at=now, headers=(),
                 links_base="https://acme.example.com"),
    ]
    rows.attachments.append(AttachmentRow(uuid.uuid4(), first, tenant_id, "logo.png", "image/png", True, "logo",
                                          b"\x89PNG"))
    rows.deliveries += [
        DeliveryRow(uuid.uuid4(), first, tenant_id, "ann@example.com", "queued", now, now, None),
        DeliveryRow(uuid.uuid4(), first, tenant_id, "bob@example.com", "suppressed", None, now, None),
        DeliveryRow(uuid.uuid4(), second, tenant_id, "cy@example.com", "scheduled", None, now,
                    timefmt.from_seconds(now.timestamp() + 86400)),
    ]
    rows.events += [EventRow(tenant_id, "email.sent", {"n": 1, "to": ["ann@example.com"]}),
                    EventRow(tenant_id, "email.sent", {"n": 2, "to": []})]
    rows.charge(tenant_id, 3, 1000, 1000)
    return rows


@pt.ensureDeferred
async def test_both_row_forms_store_the_same_rows(api, monkeypatch):
    """A VALUES list (few rows) and columns split by unnest (more) write the same rows."""
    tenant, _, domain_id = await sending_tenant(api)
    tenant_id, db = uuid.UUID(tenant["id"]), api.parts.db
    clock = task.Clock()
    clock.advance(1_800_000_000)
    now = timefmt.from_seconds(clock.seconds())
    tables = {"emails": ("id", "message_id"), "deliveries": ("id, email_id", "recipient"),
              "attachments": ("id, email_id", "filename"), "events": ("id", "data->>'n'")}

    async def stored(values_rows: int) -> dict:
        monkeypatch.setattr(accept, "VALUES_ROWS", values_rows)
        await accept.write(db, clock, _two_emails(tenant_id, uuid.UUID(domain_id), now), now)
        seen = {}
        for table, (ids, order) in tables.items():
            dropped = " - ".join(f"'{column.strip()}'" for column in ids.split(","))
            found = await db.fetchall(
                f"SELECT to_jsonb(t) - {dropped} AS row FROM {table} t WHERE tenant_id = %s ORDER BY {order}",
                (tenant_id,))
            seen[table] = [one["row"] for one in found]
        for table in ("deliveries", "attachments", "emails", "events"):
            await db.execute(f"DELETE FROM {table} WHERE tenant_id = %s", (tenant_id,))
        return seen

    by_columns, by_values = await stored(0), await stored(4)
    assert [len(by_columns[table]) for table in tables] == [2, 3, 1, 2]
    assert by_values == by_columns
    usage = await db.fetchall("SELECT count FROM usage WHERE tenant_id = %s", (tenant_id,))
    assert [row["count"] for row in usage] == [6, 6]
