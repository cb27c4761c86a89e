"""
The one accept path of every message, whether it came over HTTP, SMTP or from a broadcast:
check the account and the sending domain, split off suppressed recipients, charge the quotas,
build and sign the MIME message once, and store the email, its deliveries, its events and the
idempotency outcome in ONE transaction. Nothing is delivered from here.

A broadcast-stream email (``stream: "broadcast"``) also gets one message per recipient, each
with its own RFC 8058 one-click unsubscribe link (``List-Unsubscribe`` and
``List-Unsubscribe-Post``, both DKIM-signed, and ``{{{SVC_UNSUBSCRIBE_URL}}}`` filled in),
stored in ``deliveries.message``; the email row keeps the message as submitted (no link,
placeholders unfilled), which is never delivered for it. Transactional mail does none of this.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import attrs
import psycopg2
from psycopg2 import errors as pgerrors
from psycopg2.extras import Json
from twisted.internet import defer
from twisted.python.failure import Failure

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.domain.delivery import first_event, first_last_event, first_status, first_times
from mailsvc.domain.email import (
    MAX_ATTACHMENT_BYTES,
    Attachment,
    Submission,
    check_attachment_content,
    has_unsubscribe_placeholder,
    with_unsubscribe_url,
)
from mailsvc.domain.errors import DomainError, Invalid, NotAllowed, QuotaExceeded
from mailsvc.ids import uuid7
from mailsvc.mail import mime
from mailsvc.store import events
from mailsvc.store.database import Database, Transaction

if TYPE_CHECKING:
    from mailsvc.app.unsubscribe import Unsubscribes

#: NOTIFY channel that wakes the delivery workers.
DELIVERIES = "deliveries"
MAX_MESSAGE_BYTES = 40 * 1024 * 1024
#: The per-recipient messages of the broadcast stream built for one request (one email or a
#: whole batch) together: each is a full copy, held in memory and stored.
MAX_PER_RECIPIENT_BYTES = 64 * 1024 * 1024
#: Per-recipient messages made between two returns to the reactor when only the header differs
#: (a message built again for its placeholder gives the reactor back after each).
_SPLICES_PER_TURN = 16
ATTACHMENT_FETCH_SECONDS = 30
#: Accept statements a node runs at once; the requests that arrive meanwhile are written
#: together in the next one (``Acceptor.store``), at most so many, with messages of at most
#: so many bytes (a request larger than that alone).
CONCURRENT_WRITES = 2
GROUP_REQUESTS = 64
GROUP_BYTES = 16 * 1024 * 1024




@attrs.frozen
class Prepared:
    """A submission checked against the account and built into its signed message."""

    submission: Submission
    domain_id: uuid.UUID
    message_id: str
    message: bytes
    attachments: tuple[Attachment, ...]
    #: Chosen when built (the unsubscribe links name it); None: chosen when stored.
    email_id: uuid.UUID | None = None
    #: Broadcast stream: each recipient's own signed message, by recipient as in ``recipients``.
    messages: Mapping[str, bytes] = attrs.field(factory=dict)


@attrs.define
class Budget:
    """Bytes of per-recipient messages one request may still build (MAX_PER_RECIPIENT_BYTES)."""

    left: int = attrs.field(factory=lambda: MAX_PER_RECIPIENT_BYTES)

    def take(self, size: int) -> None:
        if size > self.left:
            raise Invalid(
                "stream",
                "stream: the broadcast messages of this request (one per recipient, each with its own"
                f" unsubscribe link) exceed {MAX_PER_RECIPIENT_BYTES // (1024 * 1024)} MiB together;"
                " send to fewer recipients per request or a smaller message",
            )
        self.left -= size


@attrs.frozen
class AcceptedEmail:
    id: uuid.UUID
    last_event: str


class Acceptor:
    def __init__(
        self,
        clock,
        db: Database,
        sending_domain: Callable[[Database, uuid.UUID, str], Awaitable[object]],
        sign: Callable[[bytes, str, tuple], bytes],
        suppressed_for: Callable[[Database, Mapping[uuid.UUID, set[str]]], Awaitable[dict[uuid.UUID, dict[str, str]]]],
        fetch_attachment: Callable[[str, int, float], Awaitable[tuple[int, dict, bytes]]] | None,
        unsubscribes: Unsubscribes | None = None,
    ):
        self._clock = clock
        self._db = db
        self._sending_domain = sending_domain
        self._sign = sign
        self._suppressed_for = suppressed_for
        self._queue: deque[_Waiting] = deque()
        self._writing = 0
        self._fetch = fetch_attachment
        self._unsubscribes = unsubscribes

    def now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    @staticmethod
    def check_account(caller: Caller) -> None:
        tenant = caller.tenant
        if tenant.status == "paused":
            raise NotAllowed(
                "Sending is paused for this account" + (f": {tenant.status_reason}" if tenant.status_reason else "")
                + ". Contact support to resume.", reason="tenant_paused")
        if tenant.status == "suspended":
            raise NotAllowed("This account is suspended and cannot send email.", reason="tenant_suspended")

    async def prepare(
        self,
        caller: Caller,
        submission: Submission,
        raw: bytes | None = None,
        links_base: str | None = None,
        budget: Budget | None = None,
        domains: dict | None = None,
    ) -> Prepared:
        """
        Everything that needs no transaction: domain checks, fetching, building, signing.
        ``raw`` is a message submitted over SMTP, kept as written but for managed headers.
        ``links_base`` is where unsubscribe links point (``scheme://host``; default: the
        configured public URL); ``budget`` and ``domains`` (the sending domains looked up,
        each once) are shared by the items of one batch.
        """
        self.check_account(caller)
        domain_name = submission.sender.domain
        if domains is None:
            domain = await self._sending_domain(self._db, caller.tenant.id, domain_name)
        else:
            key = domain_name.rstrip(".").lower()
            if key not in domains:
                domains[key] = await self._sending_domain(self._db, caller.tenant.id, domain_name)
            domain = domains[key]
        if domain is None or domain.status != "verified":
            raise NotAllowed(
                f"The {domain_name} domain is not verified. Please, add and verify your domain.",
                reason="domain_not_verified",
            )
        if caller.domain_id is not None and caller.domain_id != domain.id:
            raise NotAllowed(
                f"This API key cannot send from the domain {domain_name}: it is restricted to another domain.",
                reason="insufficient_scope",
            )
        attachments = await self._fetched(submission.attachments)
        message_id = mime.new_message_id(domain.name)
        date = self.now()
        parts = [(a.filename, a.content, a.content_type, a.content_id) for a in attachments]
        if raw is not None:
            message = mime.resubmitted(raw, message_id, date)
        else:
            message = mime.build(submission, message_id=message_id, date=date, attachments=parts)
        if len(message) > MAX_MESSAGE_BYTES:
            raise Invalid("attachments", "attachments: the built message exceeds 40 MiB")
        signature = self._sign(message, domain.name, domain.signers)
        if raw is not None or submission.stream != "broadcast":
            return Prepared(submission, domain.id, message_id, signature + message, attachments)
        email_id = uuid7(self._clock.seconds())
        messages = await self._per_recipient(
            caller, submission, domain, email_id, message, message_id, date, parts,
            links_base, budget or Budget(),
        )
        return Prepared(submission, domain.id, message_id, signature + message, attachments, email_id, messages)

    async def _per_recipient(self, caller: Caller, submission: Submission, domain, email_id: uuid.UUID,
                             generic: bytes, message_id: str, date: datetime, parts: list,
                             links_base: str | None, budget: Budget) -> dict[str, bytes]:
        """One signed message per recipient, each with its own unsubscribe link."""
        links = self._unsubscribes
        base = (links_base or (links.public_url if links is not None else "")).rstrip("/")
        if links is None or not base:
            raise Invalid("stream", "stream: `broadcast` needs the server's public URL (http.public_url)")
        # Without a placeholder every recipient's body is the email's: only the header differs.
        # With one, each message is built again; the plain text derived from the html is
        # derived once, the placeholder kept in it.
        personal = has_unsubscribe_placeholder(submission)
        if personal and submission.text is None and submission.html:
            submission = attrs.evolve(submission, text=mime.text_from_html(submission.html))
        messages: dict[str, bytes] = {}
        taken = 0
        try:
            for n, recipient in enumerate(submission.recipients):
                if n and (personal or n % _SPLICES_PER_TURN == 0):
                    await self._yield()
                url = links.url(base, caller.tenant.id, email_id, recipient)
                body = generic
                if personal:
                    body = mime.build(with_unsubscribe_url(submission, url), message_id=message_id, date=date,
                                      attachments=parts)
                message = mime.with_fields(body, mime.unsubscribe_fields(url))
                if len(message) > MAX_MESSAGE_BYTES:
                    raise Invalid("attachments", "attachments: the built message exceeds 40 MiB")
                budget.take(len(message))
                taken += len(message)
                messages[recipient] = self._sign(message, domain.name, domain.signers) + message
        except BaseException:
            budget.left += taken  # a refused item of a permissive batch leaves the rest its room
            raise
        return messages

    def _yield(self):
        """Let the reactor serve others between builds of a large broadcast."""
        d: defer.Deferred = defer.Deferred()
        self._clock.callLater(0, d.callback, None)
        return d

    async def _fetched(self, attachments: tuple[Attachment, ...]) -> tuple[Attachment, ...]:
        total = sum(len(a.content) for a in attachments if a.content is not None)
        result = []
        for a in attachments:
            if a.content is None:
                if self._fetch is None:
                    raise Invalid("attachments", "attachments: `path` is not available on this server")
                from mailsvc.outside.fetch import FetchFailed, TargetRefused

                try:
                    status, _, body = await self._fetch(
                        a.path, MAX_ATTACHMENT_BYTES - total, ATTACHMENT_FETCH_SECONDS)
                except (FetchFailed, TargetRefused) as e:
                    # A refused address, a redirect, an oversized body, a timeout: the
                    # request's fault, not ours (422, never 500).
                    raise Invalid("attachments", f"attachments: fetching {a.path} failed: {e.message}") from None
                if not 200 <= status < 300:
                    raise Invalid("attachments", f"attachments: fetching {a.path} answered HTTP {status}")
                check_attachment_content(a.filename, body)
                total += len(body)
                a = attrs.evolve(a, content=body)
            result.append(a)
        return tuple(result)

    async def store(
        self,
        caller: Caller,
        prepared: list[Prepared],
        source: str,
        finish: Callable[[Transaction, list[AcceptedEmail]], Awaitable[None]] | None = None,
    ) -> list[AcceptedEmail]:
        """
        All of ``prepared`` (a batch is accepted or refused whole) in ONE statement, which is
        its own transaction: every email, attachment, delivery and event inserted, the
        statements of ``finish`` (the idempotency outcome), the quotas charged, the NOTIFYs.

        Requests that arrive while ``CONCURRENT_WRITES`` such statements run wait, and the
        waiting ones are then written together, in one statement (group commit): under load
        the commits, the NOTIFYs and the parsing are shared by many requests. A group whose
        statement PostgreSQL refuses is written again one request at a time, so each gets its
        own outcome (a refused quota or a deleted domain refuses only its request).
        """
        waiting = _Waiting(caller, prepared, source, finish, defer.Deferred(),
                           sum(len(p.message) + sum(map(len, p.messages.values())) for p in prepared))
        self._queue.append(waiting)
        if self._writing < CONCURRENT_WRITES:
            self._write_next()
        return await waiting.done

    def _write_next(self) -> None:
        group: list[_Waiting] = []
        size = 0
        while self._queue and len(group) < GROUP_REQUESTS and (not group or size + self._queue[0].size <= GROUP_BYTES):
            size += self._queue[0].size
            group.append(self._queue.popleft())
        self._writing += 1
        defer.ensureDeferred(self._write_group(group)).addBoth(self._written)

    def _written(self, _) -> None:
        self._writing -= 1
        if self._queue:
            self._write_next()

    async def _write_group(self, group: list[_Waiting]) -> None:
        try:
            outcomes = await self._write(group)
        except Exception as e:
            if len(group) == 1 or not _refused(e):
                # Alone, or not known to be rolled back (the connection was lost while the
                # statement ran: it may have committed, so writing again could store twice).
                failure = Failure()
                for one in group:
                    one.done.errback(failure)
                return
            for one in group:
                try:
                    (accepted,) = await self._write([one])
                except Exception:
                    one.done.errback()
                else:
                    one.done.callback(accepted)
            return
        for one, accepted in zip(group, outcomes, strict=True):
            one.done.callback(accepted)

    async def _write(self, group: list[_Waiting]) -> list[list[AcceptedEmail]]:
        """
        The statement of ``group``. The quota charge is its last part and all of the group's
        charges are one INSERT, in the order of the tenants: the tenants' ``usage`` rows,
        which every send of the tenant on every node locks, stay locked from there to the end
        of the COMMIT only, with no round trip to this (busy) process in between, and always
        in one order. Atomic across nodes: the row locks order concurrent charges, the WHERE
        refuses, and a refusal fails the statement, so nothing of it remains.

        The suppression list is read just before (a read in the transaction would see no
        more: nothing is locked by it).
        """
        now = self.now()
        recipients: dict[uuid.UUID, set[str]] = {}
        for one in group:
            recipients.setdefault(one.caller.tenant.id, set()).update(
                r for p in one.prepared for r in p.submission.recipients)
        suppressed = await self._suppressed_for(self._db, recipients)
        rows = _Rows()
        outcomes: list[list[AcceptedEmail]] = []
        charges: dict[uuid.UUID, list] = {}  # tenant: [count, daily quota, monthly quota]
        finishing: list[tuple[str, list]] = []
        for one in group:
            tenant = one.caller.tenant
            lower = {address.lower(): origin for address, origin in suppressed.get(tenant.id, {}).items()}
            accepted = [self._rows_of(one.caller, p, one.source, lower, now, rows) for p in one.prepared]
            outcomes.append(accepted)
            charged = sum(1 for p in one.prepared for r in p.submission.recipients if r.lower() not in lower)
            if charged:
                charge = charges.setdefault(tenant.id, [0, tenant.daily_quota, tenant.monthly_quota])
                charge[0] += charged
                charge[1], charge[2] = min(charge[1], tenant.daily_quota), min(charge[2], tenant.monthly_quota)
            if one.finish is not None:
                recorder = _Recorder()
                await one.finish(recorder, accepted)
                finishing += recorder.statements
        parts = [("new_emails", "emails", _EMAIL_COLUMNS, rows.emails, 17),
                 ("new_deliveries", "deliveries", _DELIVERY_COLUMNS, rows.deliveries, 9),
                 ("new_attachments", "attachments", _ATTACHMENT_COLUMNS, rows.attachments, 9)]
        ctes, parameters, inserted = [], [], []
        for name, table, columns, values, width in parts:
            if values:
                row = "(" + ", ".join(["%s"] * width) + ")"
                ctes.append(f"{name} AS (INSERT INTO {table} ({columns}) VALUES {', '.join([row] * len(values))}"
                            " RETURNING 1)")
                parameters += [value for one in values for value in one]
                inserted.append(name)
        channels = [DELIVERIES]
        if rows.events:
            values, event_parameters = events.rows(self._clock, rows.events)
            ctes.append(f"new_events AS (INSERT INTO events ({events.COLUMNS}) VALUES {values} RETURNING 1)")
            parameters += event_parameters
            inserted.append("new_events")
            channels.append(events.CHANNEL)
        for n, (sql, args) in enumerate(finishing):
            ctes.append(f"finish_{n} AS ({sql})")
            parameters += args
        notify = ", ".join(["pg_notify(%s, '')"] * len(channels))
        verdict = "0"
        if charges:
            quotas = []
            for tenant_id, (count, daily, monthly) in sorted(charges.items()):
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
            # A refused charge fails the statement: a text that is no integer, naming the
            # period (the daily one first).
            verdict = ("(SELECT coalesce(min(%s || q.kind), '0') FROM quotas q WHERE NOT EXISTS"
                       " (SELECT 1 FROM charged c WHERE c.tenant_id = q.tenant_id AND c.period = q.period))::int")
            parameters.append(_REFUSED)
        try:
            await self._db.fetchall(f"WITH {', '.join(ctes)} SELECT {verdict}, {notify}", [*parameters, *channels],
                                    desc="accept_email")
        except pgerrors.InvalidTextRepresentation as e:
            refused = str(e).partition(_REFUSED)[2]
            for period in ("daily", "monthly"):
                if refused.startswith(period):
                    raise QuotaExceeded(period) from None
            raise
        except pgerrors.ForeignKeyViolation as e:
            _refuse_deleted_domain(e, [p for one in group for p in one.prepared])
            raise
        return outcomes

    def _rows_of(self, caller: Caller, p: Prepared, source: str,
                 suppressed: dict[str, str], now: datetime, rows: _Rows) -> AcceptedEmail:
        """The rows of one email (added to ``rows``) and what its caller is answered."""
        s = p.submission
        tenant_id = caller.tenant.id
        email_id = p.email_id or uuid7(self._clock.seconds())
        scheduled = s.scheduled_at is not None and s.scheduled_at > now
        capture = caller.tenant.delivery_mode == "capture"
        recipients = s.recipients
        live = [r for r in recipients if r.lower() not in suppressed]
        last_event = first_last_event(bool(live), scheduled, capture)
        rows.emails.append((
                email_id, tenant_id, p.domain_id, p.message_id, str(s.sender),
                Json({"to": [str(m) for m in s.to], "cc": [str(m) for m in s.cc],
                      "bcc": [str(m) for m in s.bcc], "reply_to": [str(m) for m in s.reply_to]}),
                s.subject, s.html, s.text,
                Json([{"name": n, "value": v} for n, v in s.tags]), s.stream, source,
                s.scheduled_at, "scheduled" if scheduled else "queued", last_event, p.message, now,
        ))
        for a in p.attachments:
            rows.attachments.append(
                (uuid7(self._clock.seconds()), email_id, tenant_id, a.filename, a.content_type,
                 "inline" if a.inline else "attachment", a.content_id, len(a.content), a.content))
        if live and not scheduled:
            rows.events.append((tenant_id, "email.sent", sent_event(email_id, s, live, now)))
        base = {"email_id": str(email_id), "created_at": timefmt.iso(now), "to": live}
        for recipient in recipients:
            delivery_id = uuid7(self._clock.seconds())
            origin = suppressed.get(recipient.lower())
            status = first_status(origin, scheduled, capture)
            due, retry_until = first_times(status, now)
            # A suppressed recipient is never sent to: no message of its own.
            own = p.messages.get(recipient) if origin is None else None
            rows.deliveries.append((delivery_id, email_id, tenant_id, recipient, status, due, now, own, retry_until))
            event = first_event(status, base, str(delivery_id), recipient, origin)
            if event is not None:
                rows.events.append((tenant_id, *event))
        return AcceptedEmail(email_id, last_event)


_EMAIL_COLUMNS = ("id, tenant_id, domain_id, message_id, sender, recipients, subject, html, text, tags, stream,"
                  " source, scheduled_at, status, last_event, message, created_at")
_ATTACHMENT_COLUMNS = "id, email_id, tenant_id, filename, content_type, content_disposition, content_id, size, content"
_DELIVERY_COLUMNS = "id, email_id, tenant_id, recipient, status, due_at, updated_at, message, retry_until"


def _refuse_deleted_domain(error: pgerrors.ForeignKeyViolation, prepared: list[Prepared]) -> None:
    """
    A sending domain deleted (on another node) since this node looked it up and cached it:
    refused as a domain that is not verified, never stored.
    """
    if getattr(error.diag, "constraint_name", None) == "emails_domain_id_fkey":
        name = prepared[0].submission.sender.domain if prepared else "sending"
        raise NotAllowed(
            f"The {name} domain is not verified. Please, add and verify your domain.",
            reason="domain_not_verified",
        ) from None


def _refused(error: Exception) -> bool:
    """
    Whether the accept statement surely did not commit: PostgreSQL refused it (an error with
    a SQLSTATE, but for connection and operator-intervention classes, where the server may
    end the session around a commit), or a refusal read from one (a quota, a deleted domain).
    """
    if isinstance(error, DomainError):
        return True
    code = getattr(error, "pgcode", None) if isinstance(error, psycopg2.Error) else None
    return code is not None and not code.startswith(("08", "57"))


#: Starts the text that fails the accept statement when a quota refuses it.
_REFUSED = "mailsvc quota refused: "


@attrs.frozen
class _Waiting:
    """A request's emails, waiting for their accept statement."""

    caller: Caller
    prepared: list[Prepared]
    source: str
    finish: Callable[[Transaction, list[AcceptedEmail]], Awaitable[None]] | None
    done: defer.Deferred
    size: int


@attrs.define
class _Rows:
    """The rows one accept statement writes, table by table, and its events."""

    emails: list[tuple] = attrs.Factory(list)
    attachments: list[tuple] = attrs.Factory(list)
    deliveries: list[tuple] = attrs.Factory(list)
    events: list[tuple[uuid.UUID, str, dict]] = attrs.Factory(list)


class _Recorder:
    """
    What ``finish`` gets for a transaction: its statements (each one INSERT, UPDATE or DELETE)
    become part of the accept statement, so they commit, or fail, with the emails.
    """

    def __init__(self):
        self.statements: list[tuple[str, list]] = []

    async def execute(self, sql: str, args=()) -> None:
        if sql.lstrip().split(None, 1)[0].upper() not in ("INSERT", "UPDATE", "DELETE"):
            raise ValueError("a finish of the accept statement may only insert, update or delete")
        self.statements.append((sql, list(args)))


def sent_event(email_id: uuid.UUID, s: Submission, live: list[str], now: datetime) -> dict:
    return {
        "email_id": str(email_id), "delivery_id": None, "created_at": timefmt.iso(now), "to": live,
        "from": str(s.sender), "subject": s.subject,
        "tags": [{"name": n, "value": v} for n, v in s.tags],
        "scheduled_at": timefmt.iso(s.scheduled_at),
    }
