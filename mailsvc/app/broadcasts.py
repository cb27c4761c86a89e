"""
Broadcasts (issue 17): one draft message sent to every contact of a segment, each contact
getting its own copy (its name and properties filled in, its own one-click unsubscribe link).

``Broadcasts`` is the resource: create, read, PATCH (drafts), delete, send (now or at
``scheduled_at``), cancel, duplicate, preview, and the release of scheduled broadcasts (the
scheduler role). Every change of status is one guarded UPDATE (``mailsvc.store.broadcasts``).

``Fanout`` is the job (the ``broadcasts`` role), a leased job in PostgreSQL: it starts queued
broadcasts (their segment's membership fixed at that moment) and then, chunk by chunk, claims
pending recipients with a lease, renders each one's message and hands the chunk to the one
accept path (``app/submit``) as ONE request of the service on the account's behalf
(``ServiceSender``). The chunk's recipients are recorded, with their e-mails, by that same
accept statement, and only while the chunk still holds its lease: a node that dies mid-chunk
leaves nothing of it, and another node takes the chunk over once the lease expires; no
recipient is written twice. Quotas are charged per recipient by the accept statement; a chunk
takes no more recipients than the quota leaves, and a used-up quota makes the broadcast wait
for the next UTC day (``wait_reason``) while its status stays ``sending``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from mailsvc import timefmt
from mailsvc.app.emails import Schedules
from mailsvc.app.spam import SpamChecks
from mailsvc.app.submit import Item, Outcome, ServiceSender, Submitter
from mailsvc.domain import broadcasts as rules
from mailsvc.domain.broadcasts import Contact, Content, personalised
from mailsvc.domain.email import MAX_SUBJECT_BYTES, Submission, parse_mailbox, parse_mailboxes
from mailsvc.domain.errors import Invalid, LeaseLost, NotAllowed, NotFound, QuotaExceeded
from mailsvc.domain.htmltext import html_to_text
from mailsvc.domain.tenant import Tenant
from mailsvc.ids import parse_uuid, uuid7
from mailsvc.loop import Loop
from mailsvc.mail import mime
from mailsvc.store import accounts
from mailsvc.store import broadcasts as rows
from mailsvc.store.database import Database

log = Logger()

KIND = "Broadcast"
#: Recipients one chunk takes (one accept statement).
CHUNK = 500
#: Seconds a chunk is held by the node that claimed it; another node takes it over after.
LEASE_SECONDS = 60
#: How often a broadcast whose account is paused (reputation) looks again.
PAUSED_RECHECK = timedelta(seconds=60)
#: Chunks one run of the fan-out writes before giving the loop back (it runs again at once).
CHUNKS_PER_RUN = 8
#: Chunks of one broadcast in flight at once on a node: one is rendered while another's accept
#: statement runs.
PARALLEL_CHUNKS = 2
#: Delivery statuses counted in ``stats`` (the keys always shown), from the delivery rows.
STATS = ("delivered", "bounced", "complained", "suppressed", "failed", "delivery_delayed")
_STAT_OF_STATUS = {"delivered": "delivered", "bounced": "bounced", "complained": "complained",
                   "suppressed": "suppressed", "failed": "failed", "deferred": "delivery_delayed"}


def _id(text: str) -> uuid.UUID:
    parsed = parse_uuid(text)
    if parsed is None:
        raise NotFound(KIND)
    return parsed


class Broadcasts:
    def __init__(self, clock, db: Database, schedules: Schedules, public_url: str = "",
                 spam: SpamChecks | None = None):
        self._clock = clock
        self._db = db
        self._schedules = schedules
        self._public_url = public_url.rstrip("/")
        #: The spam score (issue 23): beside the preview, and at send over the operator's threshold.
        self._spam = spam

    def _now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    async def _check_segment(self, tenant_id: uuid.UUID, fields: dict) -> None:
        segment = fields.get("segment_id")
        if segment is not None and not await rows.segment_exists(self._db, tenant_id, segment):
            raise Invalid("segment_id", f"segment_id: no segment `{segment}` in this account")

    async def _row(self, tenant_id: uuid.UUID, broadcast_id: str) -> dict:
        row = await rows.get(self._db, tenant_id, _id(broadcast_id))
        if row is None:
            raise NotFound(KIND)
        return row

    async def _refused(self, tenant_id: uuid.UUID, broadcast_id: uuid.UUID, refuse: Callable[[str], Exception]):
        """Why a guarded transition changed nothing: absent (404), or the state's 409."""
        status = await rows.status(self._db, tenant_id, broadcast_id)
        if status is None:
            return NotFound(KIND)
        return refuse(status)

    async def _when(self, value: Any, now: datetime) -> datetime | None:
        return await self._schedules.read("scheduled_at", value, now) if value not in (None, "") else None

    # The resource

    async def create(self, tenant: Tenant, body: dict, links_base: str) -> dict:
        fields = rules.broadcast_fields(body, creating=True)
        send = body.get("send", False)
        if send is not None and not isinstance(send, bool):
            raise Invalid("send", "send must be a boolean")
        now = self._now()
        scheduled_at = await self._when(body.get("scheduled_at"), now)
        status = "scheduled" if scheduled_at is not None else "queued" if send else "draft"
        if status != "draft":
            rules.check_sendable({"html": fields.get("html"), "text": fields.get("text")})
        await self._check_segment(tenant.id, fields)
        if status != "draft":
            await self._refuse_spammy(tenant.id, {"segment_id": None, "preview_text": None, "text": None,
                                                  "html": None, **fields})
        row = await rows.insert(self._db, uuid7(self._clock.seconds()), tenant.id, fields, status, scheduled_at,
                                self._public_url or links_base, now)
        if status == "queued":
            await rows.wake_fanout(self._db)
        return row

    async def get(self, tenant_id: uuid.UUID, broadcast_id: str) -> dict:
        """The broadcast as ``GET /broadcasts/{id}`` shows it, with its counts."""
        row = await self._row(tenant_id, broadcast_id)
        counts = await rows.counts(self._db, row["id"]) if row["started_at"] else {}
        deliveries = await rows.delivery_counts(self._db, row["id"]) if counts.get("written") else {}
        return resource(row, counts, deliveries)

    async def list(self, tenant_id: uuid.UUID, page) -> tuple[list[dict], bool]:
        found, has_more = await rows.page(self._db, tenant_id, page)
        return [list_item(row) for row in found], has_more

    async def update(self, tenant_id: uuid.UUID, broadcast_id: str, body: dict) -> dict:
        parsed = _id(broadcast_id)
        fields = rules.broadcast_fields(body, creating=False)
        await self._check_segment(tenant_id, fields)
        row = await rows.update_draft(self._db, tenant_id, parsed, fields, self._now())
        if row is None:
            raise await self._refused(tenant_id, parsed, rules.refuse_update)
        return row

    async def delete(self, tenant_id: uuid.UUID, broadcast_id: str) -> uuid.UUID:
        parsed = _id(broadcast_id)
        row = await rows.delete(self._db, tenant_id, parsed, rules.DELETABLE, rules.DELETABLE_WHEN_QUIET)
        if row is None:
            raise await self._refused(tenant_id, parsed, rules.refuse_delete)
        return row["id"]

    async def send(self, tenant_id: uuid.UUID, broadcast_id: str, body: dict, links_base: str) -> dict:
        """A draft sent now (queued) or at ``scheduled_at`` (scheduled)."""
        row = await self._row(tenant_id, broadcast_id)
        if row["status"] != "draft":
            raise rules.refuse_send(row["status"])
        rules.check_sendable(row)
        if row["segment_id"] is None:
            raise Invalid("segment_id", "segment_id: the broadcast's segment was deleted; choose another")
        now = self._now()
        scheduled_at = await self._when((body or {}).get("scheduled_at"), now)
        await self._refuse_spammy(tenant_id, row)
        after = "scheduled" if scheduled_at is not None else "queued"
        sent = await rows.transition(self._db, tenant_id, row["id"], ("draft",), after, now,
                                     scheduled_at=scheduled_at, links_base=self._public_url or links_base)
        if sent is None:
            raise await self._refused(tenant_id, row["id"], rules.refuse_send)
        if after == "queued":
            await rows.wake_fanout(self._db)
        return sent

    async def cancel(self, tenant_id: uuid.UUID, broadcast_id: str) -> dict:
        """
        Scheduled: back to draft. Queued or sending: canceled, and no recipient not yet written
        will be (the chunk being written either commits first or sees the cancel).
        """
        parsed = _id(broadcast_id)
        now = self._now()
        row = await rows.transition(self._db, tenant_id, parsed, ("scheduled",), "draft", now, scheduled_at=None)
        if row is None:
            row = await rows.transition(self._db, tenant_id, parsed, ("queued", "sending"), "canceled", now,
                                        wait_reason=None, wait_until=None)
        if row is None:
            raise await self._refused(tenant_id, parsed, rules.refuse_cancel)
        return row

    async def duplicate(self, tenant_id: uuid.UUID, broadcast_id: str) -> dict:
        """A new draft with the same segment, sender, subject, reply-to, preview and content."""
        original = await self._row(tenant_id, broadcast_id)
        fields = {c: original[c] for c in ("segment_id", "sender", "subject", "reply_to", "preview_text",
                                            "html", "text")}
        fields["name"] = rules.duplicate_name(original["name"])
        return await rows.insert(self._db, uuid7(self._clock.seconds()), tenant_id, fields, "draft", None,
                                 original["links_base"], self._now())

    async def preview(self, tenant_id: uuid.UUID, broadcast_id: str, body: dict) -> dict:
        """``{subject, html, text}`` for the contact named (``contact_id``), else a member of the
        segment, else none (the fallbacks); the unsubscribe placeholders are left as written.
        With spamd configured, ``spam`` is the rendered message's score (issue 23)."""
        row = await self._row(tenant_id, broadcast_id)
        contact_id = None
        given = (body or {}).get("contact_id")
        if given not in (None, ""):
            contact_id = parse_uuid(given) if isinstance(given, str) else None
            if contact_id is None:
                raise Invalid("contact_id", "contact_id must be a contact id (UUID)")
        shown, contact = await self._rendered(tenant_id, row, contact_id)
        if contact_id is not None and contact is None:
            raise Invalid("contact_id", f"contact_id: no contact `{given}` in this account")
        preview = {"object": "broadcast_preview", "subject": shown["subject"], "html": shown["html"],
                   "text": shown["text"], "contact_id": str(contact.id) if contact is not None else None}
        if self._spam is not None and self._spam.enabled:
            preview["spam"] = await self._spam.preview_score(shown, row["sender"])
        return preview

    async def _rendered(self, tenant_id: uuid.UUID, row: dict,
                        contact_id: uuid.UUID | None = None) -> tuple[dict, Contact | None]:
        """The broadcast's message as ``contact_id`` (else a member of its segment, else nobody) gets it."""
        found = await rows.sample_contact(self._db, tenant_id, row["segment_id"], contact_id)
        contact = contact_of(found) if found is not None else None
        shown = personalised(Content(row["subject"], row["html"], row["text"], row["preview_text"]), contact)
        text = shown.text
        if text is None and shown.html:
            text = html_to_text(shown.html).strip() + "\n"
        return {"subject": shown.subject, "html": shown.html, "text": text}, contact

    async def _refuse_spammy(self, tenant_id: uuid.UUID, row: dict) -> None:
        """
        At send (or a create that sends or schedules): with ``spam.broadcast_threshold`` > 0, the
        message rendered for a member of the segment is scored and a score at or over the
        threshold refused (403 ``validation_error`` naming it). spamd failing then refuses too
        (503 ``spam_check_unavailable``): the operator asked for the check. Never on plain sends.
        """
        if self._spam is None or self._spam.broadcast_threshold <= 0:
            return
        shown, _ = await self._rendered(tenant_id, row)
        score = await self._spam.spam_check(self._spam.message(shown, row["sender"]))
        self._spam.refuse_over_threshold(score)

    async def release_due(self) -> int:
        """Scheduled broadcasts whose time has come are queued for the fan-out (the scheduler)."""
        released = await rows.release_due(self._db, self._now())
        if released:
            await rows.wake_fanout(self._db)
        return len(released)


def contact_of(row: dict) -> Contact:
    return Contact(row.get("id") or row["contact_id"], row["email"], row["first_name"], row["last_name"],
                   row["properties"] or {})


def resource(row: dict, counts: dict[str, int], deliveries: dict[str, int]) -> dict:
    """The broadcast as ``GET /broadcasts/{id}`` shows it; SPEC's strings are never null (unset: ``""``)."""
    segment = str(row["segment_id"]) if row["segment_id"] else None
    stats = dict.fromkeys(STATS, 0)
    for status, n in deliveries.items():
        if status in _STAT_OF_STATUS:
            stats[_STAT_OF_STATUS[status]] += n
    total = row["total"] or 0
    return {
        "object": "broadcast",
        "id": str(row["id"]),
        "name": row["name"],
        "audience_id": segment,
        "segment_id": segment,
        "from": row["sender"],
        "subject": row["subject"],
        "reply_to": list(row["reply_to"] or ()),
        "preview_text": row["preview_text"] or "",
        "html": row["html"] or "",
        "text": row["text"] or "",
        "status": row["status"],
        "created_at": timefmt.resource(row["created_at"]),
        "scheduled_at": timefmt.resource(row["scheduled_at"]),
        "sent_at": timefmt.resource(row["sent_at"]),
        "topic_id": None,
        # The contacts it was sent to: those written but suppressed (unsubscribed) got nothing.
        "recipients": counts.get("written", 0) - deliveries.get("suppressed", 0),
        "stats": stats,
        "progress": {"done": total - counts.get("pending", 0) if row["started_at"] else 0, "total": total},
        "wait_reason": row["wait_reason"] if row["status"] == "sending" else None,
        "wait_until": timefmt.resource(row["wait_until"]) if row["status"] == "sending" else None,
        "failure": row["failure"] if row["status"] == "failed" else None,
    }


def list_item(row: dict) -> dict:
    segment = str(row["segment_id"]) if row["segment_id"] else None
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "audience_id": segment,
        "segment_id": segment,
        "status": row["status"],
        "created_at": timefmt.resource(row["created_at"]),
        "scheduled_at": timefmt.resource(row["scheduled_at"]),
        "sent_at": timefmt.resource(row["sent_at"]),
        "topic_id": None,
    }


class Fanout:
    """The ``broadcasts`` role: starts queued broadcasts and writes their chunks (module docstring)."""

    desc = "broadcast fan-out"

    def __init__(self, clock, db: Database, submitter: Submitter,
                 tenant: Callable[[uuid.UUID], Awaitable[Tenant | None]] | None = None,
                 chunk: int = CHUNK, lease_seconds: float = LEASE_SECONDS, interval: float = 1,
                 on_failure: Callable[[str], None] | None = None):
        self._clock = clock
        self._db = db
        self._submitter = submitter
        self._tenant = tenant or (lambda tenant_id: accounts.get_tenant(db, tenant_id))
        self.chunk = chunk
        self.lease_seconds = lease_seconds
        self._loop = Loop(clock, self.desc, interval, self.step, on_failure=on_failure)
        #: Per broadcast, the last contact this node claimed: where its next claim starts.
        self._keyset: dict[uuid.UUID, uuid.UUID] = {}

    def _now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    def wake(self, *_: object) -> None:
        self._loop.wake()

    async def step(self) -> int:
        """Start what is queued, then write chunks (round robin over the broadcasts that are
        sending) until none is left to write or CHUNKS_PER_RUN were; the recipients written."""
        while await self._db.run("start broadcast", rows.start_next, self._now()) is not None:
            pass
        written = 0
        chunks = 0
        while chunks < CHUNKS_PER_RUN:
            ready = await rows.ready(self._db, self._now(), 16)
            progressed = False
            for broadcast in ready:
                done = await self.write_chunks(broadcast)
                if done:
                    progressed = True
                    written += sum(done)
                    chunks += len(done)
            if not progressed:
                return written
        self._loop.wake()  # more to write: run again at once, after giving the loop back
        return written

    async def write_chunk(self, b: dict) -> int | None:
        """One chunk of ``b`` written; the recipients recorded, or None when there was none to take."""
        done = await self.write_chunks(b, 1)
        return done[0] if done else None

    async def write_chunks(self, b: dict, parallel: int = PARALLEL_CHUNKS) -> list[int]:
        """
        Up to ``parallel`` chunks of ``b`` claimed (within the quota left) and written at once, so
        that one is rendered while another's statement runs; the recipients each recorded.
        """
        now = self._now()
        tenant = await self._tenant(b["tenant_id"])
        if tenant is None:
            return []
        if tenant.status == "suspended":
            await self._fail(b, "account_suspended", now)
            return []
        if tenant.status == "paused":
            await rows.wait(self._db, b["id"], "account_paused", now + PAUSED_RECHECK, now)
            return []
        left, period = await rows.remaining_quota(self._db, tenant.id, tenant.daily_quota, tenant.monthly_quota, now)
        if left <= 0:
            # Nothing may be charged today: unless nothing is left to write, wait for tomorrow.
            if await rows.finish(self._db, b["id"], now) is None:
                await rows.wait(self._db, b["id"], f"{period}_quota", rules.next_utc_day(now), now)
            return []
        if b["wait_reason"] is not None:
            await rows.wait(self._db, b["id"], None, None, now)
        leases = []
        while len(leases) < parallel and left > 0:
            lease = uuid.uuid4()
            after = self._keyset.get(b["id"])
            claimed = await self._db.run("claim broadcast chunk", rows.claim, b["id"], lease, now,
                                         self.lease_seconds, min(self.chunk, left), after)
            if not claimed and after is not None:
                # Past the end: from the start again, for chunks released or whose lease expired.
                claimed = await self._db.run("claim broadcast chunk", rows.claim, b["id"], lease, now,
                                             self.lease_seconds, min(self.chunk, left))
            if not claimed:
                self._keyset.pop(b["id"], None)
                break
            self._keyset[b["id"]] = claimed[-1]["contact_id"]
            left -= len(claimed)
            leases.append((lease, claimed))
        if not leases:
            if await rows.finish(self._db, b["id"], now) is not None:
                log.info("broadcast {id} sent", id=b["id"])
            return []
        if len(leases) == 1:
            done = [await self._written(b, tenant, *leases[0], now)]
        else:
            done = await defer.gatherResults(
                [defer.ensureDeferred(self._written(b, tenant, lease, claimed, now)) for lease, claimed in leases],
                consumeErrors=True)
        return [n for n in done if n is not None]

    async def _written(self, b: dict, tenant: Tenant, lease: uuid.UUID, claimed: list[dict],
                       now: datetime) -> int | None:
        """A claimed chunk handed to the accept path; what refuses it makes the broadcast wait or fail."""
        try:
            return await self._submit(b, tenant, lease, claimed)
        except QuotaExceeded as e:
            await rows.release(self._db, b["id"], lease)
            await rows.wait(self._db, b["id"], f"{e.period}_quota", rules.next_utc_day(now), now)
        except NotAllowed as e:
            await rows.release(self._db, b["id"], lease)
            if e.reason == "tenant_paused":
                await rows.wait(self._db, b["id"], "account_paused", now + PAUSED_RECHECK, now)
            else:
                await self._fail(b, e.reason, now)
        except LeaseLost:
            # Canceled meanwhile, or the lease expired and another node took the chunk over.
            log.info("broadcast {id}: a chunk's lease was lost; nothing of it was written", id=b["id"])
        except BaseException:
            await rows.release(self._db, b["id"], lease)
            raise
        return None

    async def _fail(self, b: dict, reason: str, now: datetime) -> None:
        failed = await rows.transition(self._db, None, b["id"], ("sending",), "failed", now, failure=reason,
                                       wait_reason=None, wait_until=None)
        if failed is not None:
            log.warn("broadcast {id} failed: {reason}", id=b["id"], reason=reason)

    async def _submit(self, b: dict, tenant: Tenant, lease: uuid.UUID, claimed: list[dict]) -> int:
        # The plain text derived from the html (when the broadcast has none) is derived once,
        # its placeholders kept, then filled per recipient (values raw, as in any text part).
        text = b["text"] if b["text"] or not b["html"] else mime.text_from_html(b["html"])
        content = Content(b["subject"], b["html"], text, b["preview_text"])
        sender = parse_mailbox("from", b["sender"])
        reply_to = parse_mailboxes("reply_to", list(b["reply_to"] or ()))
        tags = (("broadcast_id", str(b["id"])),)
        marks: list[tuple[uuid.UUID, uuid.UUID | None, str]] = []  # contacts deleted since the start
        contacts: list[Contact] = []
        for row in claimed:
            if row["email"] is None:
                marks.append((row["contact_id"], None, "skipped"))
            else:
                contacts.append(contact_of(row))

        def item(contact: Contact) -> Item:
            def read(now: datetime) -> Submission:
                shown = personalised(content, contact)
                if len(shown.subject.encode("utf-8")) > MAX_SUBJECT_BYTES:
                    raise Invalid("subject", f"subject: longer than {MAX_SUBJECT_BYTES} bytes for this contact")
                return Submission(sender=sender, to=(parse_mailbox("to", contact.email),), reply_to=reply_to,
                                  subject=shown.subject, html=shown.html, text=shown.text, tags=tags,
                                  stream="broadcast")
            return Item(read)

        def recorded(outcome: Outcome):
            refused = {index for index, _ in outcome.refused}
            accepted = iter(outcome.accepted)
            states = list(marks)
            for index, contact in enumerate(contacts):
                if index in refused:
                    states.append((contact.id, None, "refused"))
                else:
                    states.append((contact.id, next(accepted).id, "written"))
            return rows.written_guard(b["id"], lease, states)

        outcome = Outcome([], [])
        if contacts:
            outcome = await self._submitter.submit(
                ServiceSender(tenant), [item(c) for c in contacts], "broadcast", batch="permissive",
                links_base=b["links_base"], also=recorded)
        for _, error in outcome.refused:
            if isinstance(error, NotAllowed):  # the sending domain: the same for every item
                raise error
        if not outcome.accepted:  # nothing accepted: no accept statement recorded the chunk
            if not await rows.record(self._db, recorded(outcome)):
                raise LeaseLost("chunk")
        return len(outcome.accepted)
