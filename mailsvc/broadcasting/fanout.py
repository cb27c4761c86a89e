"""
The broadcast fan-out (the ``broadcasts`` role), a leased engine: it starts queued broadcasts
(fixing their segment's membership) and then, chunk by chunk, claims pending recipients with a
lease and hands each chunk to the one accept path (``app/submit``) as one request on the
account's behalf (``ServiceSender``): a recipient is a row (its e-mail, with its subject, and a
snapshot of the contact fields the content uses), its message is built when it is delivered.
That statement records the chunk's recipients only while the lease holds, so no recipient is
written twice; a used-up quota makes the broadcast wait for the next UTC day (``wait_reason``).
A step awaits every chunk it claims, so a stop waits only for the step under way
(docs/decisions.md, "Broadcasts").
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from twisted.internet import defer
from twisted.logger import Logger

from mailsvc import timefmt
from mailsvc.app.submit import Item, Outcome, ServiceSender, Submitter
from mailsvc.config import BroadcastsConfig
from mailsvc.domain import broadcasts as rules
from mailsvc.domain import policy
from mailsvc.domain.broadcasts import Contact, Content, personalised, snapshot, used_fields
from mailsvc.domain.email import MAX_SUBJECT_BYTES, Submission
from mailsvc.domain.errors import Invalid, LeaseLost, NotAllowed, QuotaExceeded
from mailsvc.domain.headers import parse_mailbox, parse_mailboxes
from mailsvc.domain.tenant import Tenant
from mailsvc.engine import LeasedEngine
from mailsvc.store import accounts
from mailsvc.store import broadcasts as rows
from mailsvc.store.broadcasts import BroadcastRow, ClaimedRecipient
from mailsvc.store.database import Database

log = Logger()

#: Recipients one chunk takes (one accept statement).
CHUNK = BroadcastsConfig().chunk
#: Seconds a chunk is held by the node that claimed it; another node takes it over after.
LEASE_SECONDS = BroadcastsConfig().lease_seconds
#: How often a broadcast whose account is paused (reputation) looks again.
PAUSED_RECHECK = timedelta(seconds=60)
#: Sending broadcasts one look of a run takes its turns between.
READY_PER_LOOK = 16
#: Chunks one run of the fan-out writes before giving the loop back (it runs again at once).
CHUNKS_PER_RUN = 8
#: Chunks of one broadcast in flight at once on a node: one is rendered while another's accept
#: statement runs.
PARALLEL_CHUNKS = 2


class Fanout(LeasedEngine):
    """Starts queued broadcasts and writes their chunks (module docstring)."""

    desc = "broadcast fan-out"
    role = "broadcasts"
    channel = rows.CHANNEL
    #: A node's first step comes after the interval, as every later one does.
    step_at_start = False

    def __init__(self, clock, db: Database, submitter: Submitter,
                 tenant: Callable[[uuid.UUID], Awaitable[Tenant | None]] | None = None,
                 chunk: int = CHUNK, lease_seconds: float = LEASE_SECONDS, interval: float = 1,
                 on_failure: Callable[[str], None] | None = None):
        super().__init__(clock, self.desc, interval, on_failure)
        self._db = db
        self._submitter = submitter
        self._tenant = tenant or (lambda tenant_id: accounts.get_tenant(db, tenant_id))
        self.chunk = chunk
        self.lease_seconds = lease_seconds
        #: Per broadcast, the last contact this node claimed: where its next claim starts.
        self._keyset: dict[uuid.UUID, uuid.UUID] = {}

    def _now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    async def stop(self) -> None:
        """Claim no more; a chunk being written is written (or given back) first."""
        await self._stop_claiming()

    async def step(self) -> int:
        """Start what is queued, then write chunks (round robin over the broadcasts that are
        sending) until none is left to write or CHUNKS_PER_RUN were; the recipients written."""
        while await self._db.run("start broadcast", rows.start_next, self._now()) is not None:
            pass
        written = 0
        chunks = 0
        while chunks < CHUNKS_PER_RUN:
            ready = await rows.ready(self._db, self._now(), READY_PER_LOOK)
            progressed = False
            for broadcast in ready:
                done = await self.write_chunks(broadcast)
                if done:
                    progressed = True
                    written += sum(done)
                    chunks += len(done)
            if not progressed:
                return written
        self.wake()  # more to write: run again at once, after giving the loop back
        return written

    async def write_chunk(self, b: BroadcastRow) -> int | None:
        """One chunk of ``b`` written; the recipients recorded, or None when there was none to take."""
        done = await self.write_chunks(b, 1)
        return done[0] if done else None

    async def write_chunks(self, b: BroadcastRow, parallel: int = PARALLEL_CHUNKS) -> list[int]:
        """
        Up to ``parallel`` chunks of ``b`` claimed (within the quota left) and written at once, so
        that one is rendered while another's statement runs; the recipients each recorded.
        """
        now = self._now()
        tenant = await self._tenant(b.tenant_id)
        if tenant is None:
            return []
        admitted = policy.resolve(tenant).admission
        if admitted.failure is not None:
            await self._fail(b, admitted.failure, now)
            return []
        if not admitted.sends:
            await rows.wait(self._db, b.id, "account_paused", now + PAUSED_RECHECK, now)
            return []
        left, period = await rows.remaining_quota(self._db, tenant.id, tenant.daily_quota, tenant.monthly_quota, now)
        if left <= 0:
            # Nothing may be charged today: unless nothing is left to write, wait for tomorrow.
            if await rows.finish(self._db, b.id, now) is None:
                await rows.wait(self._db, b.id, f"{period}_quota", rules.next_utc_day(now), now)
            return []
        if b.wait_reason is not None:
            await rows.wait(self._db, b.id, None, None, now)
        leases: list[tuple[uuid.UUID, list[ClaimedRecipient]]] = []
        while len(leases) < parallel and left > 0:
            lease = uuid.uuid4()
            after = self._keyset.get(b.id)
            claimed = await self._db.run("claim broadcast chunk", rows.claim, b.id, lease, now,
                                         self.lease_seconds, min(self.chunk, left), after)
            if not claimed and after is not None:
                # Past the end: from the start again, for chunks released or whose lease expired.
                claimed = await self._db.run("claim broadcast chunk", rows.claim, b.id, lease, now,
                                             self.lease_seconds, min(self.chunk, left))
            if not claimed:
                self._keyset.pop(b.id, None)
                break
            self._keyset[b.id] = claimed[-1].contact_id
            left -= len(claimed)
            leases.append((lease, claimed))
        if not leases:
            if await rows.finish(self._db, b.id, now) is not None:
                log.info("broadcast {id} sent", id=b.id)
            return []
        if len(leases) == 1:
            done = [await self._written(b, tenant, *leases[0], now)]
        else:
            done = await defer.gatherResults(
                [defer.ensureDeferred(self._written(b, tenant, lease, claimed, now)) for lease, claimed in leases],
                consumeErrors=True)
        return [n for n in done if n is not None]

    async def _written(self, b: BroadcastRow, tenant: Tenant, lease: uuid.UUID, claimed: list[ClaimedRecipient],
                       now: datetime) -> int | None:
        """A claimed chunk handed to the accept path; what refuses it makes the broadcast wait or fail."""
        try:
            return await self.submit_chunk(b, tenant, lease, claimed)
        except QuotaExceeded as e:
            await rows.release(self._db, b.id, lease)
            await rows.wait(self._db, b.id, f"{e.period}_quota", rules.next_utc_day(now), now)
        except NotAllowed as e:
            await rows.release(self._db, b.id, lease)
            if e.reason == "tenant_paused":
                await rows.wait(self._db, b.id, "account_paused", now + PAUSED_RECHECK, now)
            else:
                await self._fail(b, e.reason, now)
        except LeaseLost:
            # Canceled meanwhile, or the lease expired and another node took the chunk over.
            log.info("broadcast {id}: a chunk's lease was lost; nothing of it was written", id=b.id)
        except BaseException:
            await rows.release(self._db, b.id, lease)
            raise
        return None

    async def _fail(self, b: BroadcastRow, reason: str, now: datetime) -> None:
        failed = await rows.transition(self._db, None, b.id, ("sending",), "failed", now, failure=reason,
                                       wait_reason=None, wait_until=None)
        if failed is not None:
            log.warn("broadcast {id} failed: {reason}", id=b.id, reason=reason)

    async def submit_chunk(self, b: BroadcastRow, tenant: Tenant, lease: uuid.UUID,
                           claimed: list[ClaimedRecipient]) -> int:
        """The recipients ``claimed`` under ``lease`` handed to the accept path, and recorded by
        its statement only while the lease holds (else ``LeaseLost``, nothing written); the
        number accepted."""
        # Only the subject is filled here (each e-mail keeps its own); the body is filled when
        # the message is built (``app/messages``), from the snapshot taken here.
        subject = Content(b.subject, None, None)
        used = used_fields(Content(b.subject, b.html, b.text, b.preview_text))
        sender = parse_mailbox("from", b.sender)
        reply_to = parse_mailboxes("reply_to", list(b.reply_to or ()))
        tags = (("broadcast_id", str(b.id)),)
        marks: list[tuple] = []  # contacts deleted since the start
        contacts: list[Contact] = []
        for row in claimed:
            if row.contact is None:
                marks.append((row.contact_id, None, "skipped", None))
            else:
                contacts.append(row.contact)

        def item(contact: Contact) -> Item:
            def read(now: datetime) -> Submission:
                shown = personalised(subject, contact).subject
                if len(shown.encode("utf-8")) > MAX_SUBJECT_BYTES:
                    raise Invalid("subject", f"subject: longer than {MAX_SUBJECT_BYTES} bytes for this contact")
                return Submission(sender=sender, to=(parse_mailbox("to", contact.email),), reply_to=reply_to,
                                  subject=shown, html=b.html, text=b.text, tags=tags, stream="broadcast")
            return Item(read, broadcast_id=b.id)

        def recorded(outcome: Outcome):
            refused = {index for index, _ in outcome.refused}
            accepted = iter(outcome.accepted)
            states = list(marks)
            for index, contact in enumerate(contacts):
                if index in refused:
                    states.append((contact.id, None, "refused", None))
                else:
                    states.append((contact.id, next(accepted).id, "written", snapshot(contact, used)))
            return rows.written_guard(b.id, lease, states)

        outcome = Outcome([], [])
        if contacts:
            outcome = await self._submitter.submit(
                ServiceSender(tenant), [item(c) for c in contacts], "broadcast", batch="permissive",
                links_base=b.links_base, also=recorded)
        for _, error in outcome.refused:
            if isinstance(error, NotAllowed):  # the sending domain: the same for every item
                raise error
        if not outcome.accepted:  # nothing accepted: no accept statement recorded the chunk
            if not await rows.record(self._db, recorded(outcome)):
                raise LeaseLost("chunk")
        return len(outcome.accepted)
