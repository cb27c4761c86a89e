"""
The one accept path of every message (HTTP, SMTP, broadcasts, the service's TLS reports):
``Submitter.submit`` checks the account and the sending domain and gives the store typed rows
that ONE statement writes with the idempotency outcome and the quota charge, so that every
surface follows the same rules. A message is stored as content and built at delivery
(``app/messages``), except one submitted over SMTP, stored as it came (unsigned: signed at
delivery). What a key keeps, the broadcast stream and content stored once: docs/decisions.md.
Test addresses (``domain/testaddresses.py``): a ``from`` on the test domain needs no verified
domain when every recipient is a test address. The ``path`` attachments are fetched by
``app/attachments.py``; the message's size and parts are checked by ``app/mimebudget.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, overload

import attrs

from mailsvc import timefmt
from mailsvc.app.attachments import AttachmentFetch, Fetch, fetched_content
from mailsvc.app.emails import Schedules
from mailsvc.app.idempotency import Claim, IdempotencyKey, IdempotencyKeys, Replay
from mailsvc.app.mimebudget import MimeBudget
from mailsvc.domain import policy
from mailsvc.domain.delivery import first_event, first_last_event, first_status, first_times, sent_event
from mailsvc.domain.email import Attachment, SchedulePhrase, Submission
from mailsvc.domain.errors import (
    DomainError,
    IdempotencyKeyInFlight,
    Invalid,
    ItemRefused,
    NotAllowed,
    QuotaExceeded,
    RateLimited,
    SendingDomainGone,
)
from mailsvc.domain.templates import Templated, Version
from mailsvc.domain.tenant import Tenant
from mailsvc.domain.testaddresses import TestAddresses, check_reserved
from mailsvc.ids import uuid7
from mailsvc.mail import mime
from mailsvc.mail.limits import MimeLimits
from mailsvc.store import accept
from mailsvc.store.accept import (
    DELIVERIES,
    AcceptRows,
    AttachmentRow,
    Completion,
    DeliveryRow,
    EmailRow,
    EventRow,
    Guard,
)
from mailsvc.store.database import Database
from mailsvc.store.groupcommit import GroupCommit

if TYPE_CHECKING:
    from mailsvc.app.unsubscribe import Unsubscribes

__all__ = ["DELIVERIES", "Submitter", "Item", "Outcome", "AcceptedEmail", "Sender", "Answers"]

#: Accept statements a node runs at once; the requests that arrive meanwhile are written
#: together in the next one (``GroupCommit``), at most so many, with messages of at most
#: so many bytes (a request larger than that alone).
CONCURRENT_WRITES = 2
GROUP_REQUESTS = 64
GROUP_BYTES = 16 * 1024 * 1024
#: Refusals that ask the client to come back later: they free an idempotency key.
_RETRY_LATER = (QuotaExceeded, RateLimited, IdempotencyKeyInFlight)


class Sender(Protocol):
    """Who submits: an API key's caller, or the service itself for an account (a broadcast)."""

    @property
    def tenant(self) -> Tenant: ...

    @property
    def domain_id(self) -> uuid.UUID | None:
        """The only sending domain allowed, or None for any of the account's."""


@attrs.frozen
class ServiceSender:
    """The service sending for an account on its own account (broadcasts, TLS reports)."""

    tenant: Tenant
    domain_id: uuid.UUID | None = None


@attrs.frozen
class Item:
    """
    One email of a request: ``read(now)`` gives its submission (raising Invalid for bad input,
    inside the key's claim so that the refusal is kept), or for a send that names a template
    what completes it once the published version is looked up (``Templated``); ``raw`` is a
    message submitted over SMTP, kept as written but for the headers the service manages.
    ``broadcast_id``: a broadcast's recipient, whose submission carries the broadcast's content
    unpersonalised (but for the subject): its e-mail stores no html nor text, its message is
    built from the broadcast's content and the recipient's snapshot (``broadcasting/fanout``).
    """

    read: Callable[[datetime], Submission | Templated]
    raw: bytes | None = None
    broadcast_id: uuid.UUID | None = None

    @classmethod
    def of(cls, submission: Submission, raw: bytes | None = None) -> Item:
        return cls(lambda now: submission, raw)


@attrs.frozen
class AcceptedEmail:
    id: uuid.UUID
    last_event: str


@attrs.frozen
class Outcome:
    """The emails accepted, in the order of the items, and the items a permissive batch refused."""

    accepted: list[AcceptedEmail]
    refused: list[tuple[int, DomainError]] = attrs.Factory(list)


class Answers(Protocol):
    """How the edge answers an outcome or a refusal: the ``(status, body)`` a key replays."""

    def accepted(self, outcome: Outcome) -> tuple[int, bytes]: ...

    def refused(self, error: DomainError) -> tuple[int, bytes]: ...


def keeps(error: DomainError) -> bool:
    """
    Whether an idempotency key keeps this refusal: not one that asks the client to come back
    later, which frees the key for a retry (docs/decisions.md, "What an idempotency key keeps").
    """
    if isinstance(error, ItemRefused):
        return keeps(error.error)
    return not isinstance(error, _RETRY_LATER)


@attrs.frozen
class TestSends:
    """The test addresses' rules, and whether recipients on reserved names are refused."""

    __test__ = False  # not a pytest class

    addresses: TestAddresses = TestAddresses()
    refuse_reserved: bool = True


@attrs.frozen
class TestSender:
    """The sending "domain" of the test sender: no domain row (``emails.domain_id`` stays NULL,
    so it is never listed nor counted), signed at delivery with the node's test key."""

    __test__ = False

    name: str
    id: None = None


@attrs.frozen
class Prepared:
    """A submission checked against the account, with its Message-ID."""

    submission: Submission
    domain_id: uuid.UUID | None  # None: the test sender
    domain_name: str
    message_id: str
    #: The message as submitted over SMTP (unsigned), else None: built from the content.
    message: bytes | None
    attachments: tuple[Attachment, ...]
    #: Bytes of content it stores (its share of a group commit's statement).
    size: int
    #: Broadcast stream: where its unsubscribe links point.
    links_base: str | None = None
    #: A broadcast's recipient (``Item.broadcast_id``).
    broadcast_id: uuid.UUID | None = None


@attrs.frozen
class _Request:
    """A request's emails, waiting for their accept statement."""

    sender: Sender
    prepared: list[Prepared]
    source: str
    claim: Claim | None
    answers: Answers | None
    refused: list[tuple[int, DomainError]]
    #: What the caller writes in the same statement, given the outcome (a broadcast's chunk).
    also: Callable[[Outcome], Guard | None] | None = None


class Submitter:
    def __init__(
        self,
        clock,
        db: Database,
        keys: IdempotencyKeys,
        sending_domain: Callable[[uuid.UUID, str], Awaitable[object]],
        suppressed_for: Callable[[Database, Mapping[uuid.UUID, set[str]]], Awaitable[dict[uuid.UUID, dict[str, str]]]],
        fetch_attachment: Fetch | None,
        schedules: Schedules,
        unsubscribes: Unsubscribes | None = None,
        templates: Callable[[uuid.UUID, str], Awaitable[Version]] | None = None,
        tests: TestSends | None = None,
        limits: MimeLimits | None = None,
    ):
        self._clock = clock
        self._db = db
        self._keys = keys
        self._sending_domain = sending_domain
        self._suppressed_for = suppressed_for
        self._fetched = AttachmentFetch(fetch_attachment)
        self._schedules = schedules
        self._unsubscribes = unsubscribes
        self._templates = templates
        self._tests = tests or TestSends()
        self._budget = MimeBudget(limits or MimeLimits())
        self._writes: GroupCommit[_Request, list[AcceptedEmail]] = GroupCommit(
            self._write, CONCURRENT_WRITES, GROUP_REQUESTS, GROUP_BYTES)

    def now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    @property
    def waiting(self) -> int:
        """Requests whose emails wait for an accept statement (group commit)."""
        return self._writes.waiting

    @overload
    async def submit(
        self, sender: Sender, items: Sequence[Item], source: str, idempotency_key: None = None, *,
        answers: Answers | None = None, batch: Literal["strict", "permissive"] | None = None,
        links_base: str | None = None, also: Callable[[Outcome], Guard | None] | None = None,
    ) -> Outcome: ...

    @overload
    async def submit(
        self, sender: Sender, items: Sequence[Item], source: str, idempotency_key: IdempotencyKey | None = None,
        *, answers: Answers | None = None, batch: Literal["strict", "permissive"] | None = None,
        links_base: str | None = None, also: Callable[[Outcome], Guard | None] | None = None,
    ) -> Outcome | Replay: ...

    async def submit(
        self,
        sender: Sender,
        items: Sequence[Item],
        source: str,
        idempotency_key: IdempotencyKey | None = None,
        *,
        answers: Answers | None = None,
        batch: Literal["strict", "permissive"] | None = None,
        links_base: str | None = None,
        also: Callable[[Outcome], Guard | None] | None = None,
    ) -> Outcome | Replay:
        """
        Accept ``items`` (one email, or a batch: a strict one is refused whole when an item is,
        as ``ItemRefused``; a permissive one keeps the others) from ``source`` ("api", "smtp",
        "broadcast"). With an ``idempotency_key`` (and the edge's ``answers``, which give what
        is stored for it), a request made again gets the stored ``Replay`` instead.
        ``links_base`` is where unsubscribe links point (``scheme://host``; default: the
        configured public URL). ``also``, given the outcome, gives a guarded write of the
        caller's (``store.accept.Guard``) that is part of the same statement: a broadcast records
        its chunk's recipients with their e-mails, in one transaction, only while it holds them.
        """
        if idempotency_key is None:
            return await self._submit(sender, items, source, None, answers, batch, links_base, also)
        if answers is None:
            raise TypeError("an idempotency key needs the answers to keep")
        claimed = await self._keys.claim(sender.tenant.id, idempotency_key)
        if isinstance(claimed, Replay):
            return claimed
        try:
            return await self._submit(sender, items, source, claimed, answers, batch, links_base, also)
        except DomainError as e:
            if keeps(e):
                await self._keys.complete(self._db, claimed, *answers.refused(e))
            elif not isinstance(e, IdempotencyKeyInFlight):  # a lost claim is no longer ours
                await self._keys.release(claimed)
            raise
        except BaseException:
            await self._keys.release(claimed)
            raise

    async def _submit(self, sender: Sender, items: Sequence[Item], source: str, claim: Claim | None,
                      answers: Answers | None, batch: str | None, links_base: str | None,
                      also: Callable[[Outcome], Guard | None] | None = None) -> Outcome:
        check_account(sender.tenant)
        now = self.now()
        prepared: list[Prepared] = []
        refused: list[tuple[int, DomainError]] = []
        domains: dict = {}  # each sending domain looked up once per request
        versions: dict = {}  # each template looked up once per request
        for index, item in enumerate(items):
            try:
                submission = item.read(now)
                if isinstance(submission, Templated):
                    submission = submission.complete(await self._published(sender, submission.key, versions))
                if isinstance(submission.scheduled_at, SchedulePhrase):
                    when = await self._schedules.phrase(submission.scheduled_at, now)
                    submission = attrs.evolve(submission, scheduled_at=when)
                prepared.append(await self._prepare(sender, submission, item, links_base, domains))
            except DomainError as e:
                if batch == "permissive":
                    refused.append((index, e))
                    continue
                if batch == "strict":
                    raise ItemRefused(index, e) from None
                raise
        if not prepared:
            outcome = Outcome([], refused)
            if claim is not None:
                assert answers is not None  # ``submit`` claims a key only with its answers
                await self._keys.complete(self._db, claim, *answers.accepted(outcome))
            return outcome
        request = _Request(sender, prepared, source, claim, answers, refused, also)
        size = sum(p.size for p in prepared)
        try:
            accepted = await self._writes.add(request, size)
        except SendingDomainGone:
            raise not_verified(prepared[0].domain_name, self._tests.addresses) from None
        return Outcome(accepted, refused)

    async def _published(self, sender: Sender, key: str, versions: dict) -> Version:
        """The published version of the template ``key`` names (once per request)."""
        if self._templates is None:
            raise Invalid("template", "template: templates are not available on this server")
        if key not in versions:
            versions[key] = await self._templates(sender.tenant.id, key)
        return versions[key]

    async def _prepare(self, sender: Sender, submission: Submission, item: Item, links_base: str | None,
                       domains: dict) -> Prepared:
        """
        Everything that needs no transaction: domain checks, fetching, the size of the message.
        ``domains`` (the sending domains looked up, each once) is shared by the items of one
        request.
        """
        domain_name = submission.sender.domain
        key = domain_name.rstrip(".").lower()
        if key not in domains:
            domains[key] = await self._sending_domain(sender.tenant.id, domain_name)
        domain = domains[key]
        tests = self._tests
        if tests.refuse_reserved:
            check_reserved(submission, tests.addresses)
        if (domain is None or domain.status != "verified") and tests.addresses.is_test_sender(domain_name):
            # The test sender: no domain of the account's, and to test addresses only.
            tests.addresses.check_test_send(submission, sender.domain_id)
            domain = TestSender(tests.addresses.domain)
        elif domain is None or domain.status != "verified":
            raise not_verified(domain_name, tests.addresses)
        elif sender.domain_id is not None and sender.domain_id != domain.id:
            raise NotAllowed(
                f"This API key cannot send from the domain {domain_name}: it is restricted to another domain.",
                reason="insufficient_scope",
            )
        raw = item.raw
        if raw is None:
            self._budget.check_parts(submission)
        attachments = await self._fetched(submission.attachments)
        message_id = mime.new_message_id(domain.name)
        if raw is not None:
            message = mime.resubmitted(raw, message_id, self.now())
            self._budget.check_message(message)
            return Prepared(submission, domain.id, domain.name, message_id, message, attachments, len(message))
        base = None
        if submission.stream == "broadcast":
            links = self._unsubscribes
            base = (links_base or (links.public_url if links is not None else "")).rstrip("/")
            if links is None or not base:
                raise Invalid("stream", "stream: `broadcast` needs the server's public URL (http.public_url)")
        parts = [(a.filename, fetched_content(a), a.content_type, a.content_id) for a in attachments]
        self._budget.check_built(submission, message_id, self.now(), parts)
        stored = len(submission.subject) + sum(len(fetched_content(a)) for a in attachments)
        if item.broadcast_id is None:
            stored += len(submission.html or "") + len(submission.text or "")
        return Prepared(submission, domain.id, domain.name, message_id, None, attachments, stored, base,
                        item.broadcast_id)

    async def _write(self, group: list[_Request]) -> list[list[AcceptedEmail]]:
        """
        The accept statement of ``group`` (``mailsvc.store.accept``). The suppression list is
        read just before it (a read in the transaction would see no more: nothing is locked).
        """
        now = self.now()
        recipients: dict[uuid.UUID, set[str]] = {}
        for one in group:
            recipients.setdefault(one.sender.tenant.id, set()).update(
                r for p in one.prepared for r in p.submission.recipients)
        suppressed = await self._suppressed_for(self._db, recipients)
        rows = AcceptRows()
        outcomes: list[list[AcceptedEmail]] = []
        for one in group:
            tenant = one.sender.tenant
            lower = {address.lower(): origin for address, origin in suppressed.get(tenant.id, {}).items()}
            accepted = [self._rows_of(tenant, p, one.source, lower, now, rows) for p in one.prepared]
            outcomes.append(accepted)
            charged = sum(1 for p in one.prepared for r in p.submission.recipients if r.lower() not in lower)
            rows.charge(tenant.id, charged, tenant.daily_quota, tenant.monthly_quota)
            if one.also is not None:
                guard = one.also(Outcome(accepted, one.refused))
                if guard is not None:
                    rows.guards.append(guard)
            if one.claim is not None:
                assert one.answers is not None  # ``submit`` claims a key only with its answers
                status, body = one.answers.accepted(Outcome(accepted, one.refused))
                rows.completions.append(Completion(one.claim.tenant_id, one.claim.key, one.claim.token, status, body))
        await accept.write(self._db, self._clock, rows, now)
        return outcomes

    def _rows_of(self, tenant: Tenant, p: Prepared, source: str,
                 suppressed: dict[str, str], now: datetime, rows: AcceptRows) -> AcceptedEmail:
        """The rows of one email (added to ``rows``) and what its sender is answered."""
        s = p.submission
        at = s.scheduled_at
        assert not isinstance(at, SchedulePhrase)  # ``_submit`` read every phrase before preparing
        email_id = uuid7(self._clock.seconds())
        scheduled = at is not None and at > now
        recipients = s.recipients
        live = [r for r in recipients if r.lower() not in suppressed]
        last_event = first_last_event(bool(live), scheduled)
        tags = [{"name": n, "value": v} for n, v in s.tags]
        rows.emails.append(EmailRow(
            id=email_id, tenant_id=tenant.id, domain_id=p.domain_id, message_id=p.message_id, sender=str(s.sender),
            to=s.to, cc=s.cc, bcc=s.bcc, reply_to=s.reply_to, subject=s.subject,
            html=s.html if p.broadcast_id is None else None, text=s.text if p.broadcast_id is None else None,
            # A broadcast's recipient keeps neither its one tag (``broadcast_id``) nor where its links
            # point: both are the broadcast's, and derived from it where read (docs/decisions.md,
            # "Content stored once").
            tags=tags if p.broadcast_id is None else [], stream=s.stream, source=source,
            scheduled_at=at, status="scheduled" if scheduled else "queued", last_event=last_event,
            message=p.message, created_at=now, headers=s.headers if p.message is None else (),
            links_base=p.links_base if p.broadcast_id is None else None, broadcast_id=p.broadcast_id))
        for a in p.attachments:
            rows.attachments.append(AttachmentRow(
                id=uuid7(self._clock.seconds()), email_id=email_id, tenant_id=tenant.id, filename=a.filename,
                content_type=a.content_type, inline=a.inline, content_id=a.content_id, content=fetched_content(a)))
        if live and not scheduled:
            sent = sent_event(email_id, str(s.sender), s.subject, tags, at, live, now)
            rows.events.append(EventRow(tenant.id, "email.sent", sent))
        base = {"email_id": str(email_id), "created_at": timefmt.iso(now), "to": live}
        for recipient in recipients:
            delivery_id = uuid7(self._clock.seconds())
            origin = suppressed.get(recipient.lower())
            status = first_status(origin, scheduled)
            due, retry_until = first_times(status, now)
            rows.deliveries.append(DeliveryRow(
                id=delivery_id, email_id=email_id, tenant_id=tenant.id, recipient=recipient, status=status, due_at=due,
                updated_at=now, retry_until=retry_until, bulk=s.stream == "broadcast"))
            event = first_event(status, base, str(delivery_id), recipient, origin)
            if event is not None:
                rows.events.append(EventRow(tenant.id, *event))
        return AcceptedEmail(email_id, last_event)


def check_account(tenant: Tenant) -> None:
    """A paused or suspended account sends nothing (the delivery policy's admission)."""
    admitted = policy.resolve(tenant).admission
    if not admitted.sends:
        # Resolved without holds: a refusal is the account status's, which says why.
        assert admitted.message is not None and admitted.reason is not None
        raise NotAllowed(admitted.message, reason=admitted.reason)


def not_verified(domain_name: str, tests: TestAddresses) -> NotAllowed:
    """The 403 of an unverified sending domain, saying what to do (verify it, or try the test sender)."""
    return NotAllowed(f"The {domain_name} domain is not verified. Please, add and verify your domain."
                      + tests.unverified_hint(), reason="domain_not_verified")
