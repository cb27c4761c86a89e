"""
From a message submitted over SMTP to the accept path: recipients read from the message's own
headers (``smtp/message.py``), ``Sender`` checked like ``From``, idempotency from
``Resend-Idempotency-Key``, the account's rate limit, and every refusal as an SMTP reply:

| failure | reply |
|---|---|
| account paused or suspended, domain not verified or not allowed for the key | 550 5.7.1 |
| the test domain's sender (``From``, ``Sender``) to a recipient that is no test address | 550 5.7.1 |
| a recipient on a reserved name (``mail.refuse_reserved_recipients``) | 550 5.6.0 |
| a ``Sender`` header off the account's verified domains, a ``Resent-*`` header | 550 5.7.1 |
| malformed message (a header line that is no field, no From or two, bad address, too long, ...) | 550 5.6.0 |
| more MIME parts, nesting, header fields or header bytes than ``mail.max_*`` allow (``mail/limits.py``) | 554 5.6.0 |
| daily or monthly quota used up, API rate limit | 451 4.7.1 (try later) |
| idempotency key reused with another message | 550 5.6.0 |
| a refusal kept under the message's idempotency key | the same reply again |
| the same key still being processed | 451 4.5.0 |
| anything unexpected | 451 4.3.0 |
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable

from mailsvc.app import idempotency
from mailsvc.app.apikeys import Caller
from mailsvc.app.domains import SendingDomain
from mailsvc.app.idempotency import IdempotencyKey, Replay
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.app.submit import Item, Outcome, Submitter
from mailsvc.domain.errors import (
    DomainError,
    IdempotencyKeyInFlight,
    NotAllowed,
    OverMimeLimit,
    QuotaExceeded,
    RateLimited,
)
from mailsvc.domain.headers import Mailbox
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.mail.limits import MimeLimits
from mailsvc.smtp.message import check_structure, header_fields, sender_header, submission_from_message
from mailsvc.smtp.server import Refusal

_IDEMPOTENCY_HEADERS = ("resend-idempotency-key", "x-resend-idempotency-key")


def refusal_for(error: DomainError) -> Refusal:
    if isinstance(error, NotAllowed):
        return Refusal(550, "5.7.1", error.message)
    if isinstance(error, OverMimeLimit):
        return Refusal(554, "5.6.0", error.message)
    if isinstance(error, (QuotaExceeded, RateLimited)):
        return Refusal(451, "4.7.1", error.message)
    if isinstance(error, IdempotencyKeyInFlight):
        return Refusal(451, "4.5.0", error.message)
    return Refusal(550, "5.6.0", error.message)


class _Answers:
    """What a message with an idempotency key keeps: its email id, or the refusal as a reply."""

    @staticmethod
    def accepted(outcome: Outcome) -> tuple[int, bytes]:
        return 200, json.dumps({"id": str(outcome.accepted[0].id)}).encode()

    @staticmethod
    def refused(error: DomainError) -> tuple[int, bytes]:
        refusal = refusal_for(error)
        return refusal.code, json.dumps({"enhanced": refusal.enhanced, "text": refusal.text}).encode()


def _replayed(replay: Replay) -> str:
    """The email id a kept outcome names, or the kept refusal raised again."""
    body = json.loads(replay.body)
    if replay.status == 200:
        return body["id"]
    raise Refusal(replay.status, body["enhanced"], body["text"])


class SmtpIntake:
    def __init__(self, submitter: Submitter, limiter: RateLimiter,
                 sending_domain: Callable[[uuid.UUID, str], Awaitable[SendingDomain | None]],
                 tests: TestAddresses | None = None,
                 limits: MimeLimits = MimeLimits()):
        self._submitter = submitter
        self._limits = limits
        self._tests = tests or TestAddresses()
        self._limiter = limiter
        self._sending_domain = sending_domain

    async def accept_message(self, caller: Caller, raw: bytes, recipients: list[str], _=()) -> str:
        try:
            return await self._accept(caller, raw, recipients)
        except DomainError as e:
            raise refusal_for(e) from None

    async def _accept(self, caller: Caller, raw: bytes, recipients: list[str]) -> str:
        if await self._limiter.take(caller.tenant.id, caller.tenant.api_rate_per_sec) is not None:
            raise Refusal(451, "4.7.1", "Too many requests; slow down and retry")
        check_structure(raw, self._limits)  # before anything parses it
        fields = header_fields(raw)
        key = next((fields[h][0] for h in _IDEMPOTENCY_HEADERS if fields.get(h, [""])[0]), None)
        acting = sender_header(fields)
        submission = submission_from_message(raw, recipients, fields)
        if acting is not None:
            await self._check_sender(caller, acting, submission.sender)
        asked = None
        if key is not None:
            # What was asked, not how it was encoded: a client re-encoding the same message
            # (new MIME boundaries) is still the same request.
            what = [str(submission.sender), list(submission.recipients), submission.subject,
                    submission.html, submission.text]
            asked = IdempotencyKey(key.strip(), idempotency.request_hash("smtp", what))
        result = await self._submitter.submit(caller, [Item.of(submission, raw)], "smtp", asked, answers=_Answers())
        if isinstance(result, Replay):
            return _replayed(result)
        return str(result.accepted[0].id)

    async def _check_sender(self, caller: Caller, sender: Mailbox, author: Mailbox) -> None:
        """
        A ``Sender`` header names the account too: one of its verified domains, allowed for the
        key; or the test domain, with a ``From`` of the test domain too (whose rules the accept
        path applies: test addresses only).
        """
        domain = await self._sending_domain(caller.tenant.id, sender.domain)
        tests = self._tests
        if (domain is None or domain.status != "verified") and tests.is_test_sender(sender.domain) \
                and tests.is_test_sender(author.domain):
            return
        if domain is None or domain.status != "verified":
            raise NotAllowed(f"The Sender header's domain {sender.domain} is not a verified domain of this account.",
                             reason="domain_not_verified")
        if caller.domain_id is not None and caller.domain_id != domain.id:
            raise NotAllowed(f"This API key cannot send from the domain {sender.domain} (Sender header): it is"
                             " restricted to another domain.", reason="insufficient_scope")
