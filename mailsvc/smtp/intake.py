"""
From a message submitted over SMTP to the accept path: the submission read from the message's
own headers (Bcc = envelope recipients named in no header), idempotency from
``Resend-Idempotency-Key``, the account's rate limit, and every refusal as an SMTP reply.

| failure | reply |
|---|---|
| account paused or suspended, domain not verified or not allowed for the key | 550 5.7.1 |
| malformed message (no From, bad address, too long) | 550 5.6.0 |
| daily or monthly quota used up, API rate limit | 451 4.7.1 (try later) |
| idempotency key reused with another message | 550 5.6.0 |
| the same key still being processed | 451 4.5.0 |
| anything unexpected | 451 4.3.0 |
"""

from __future__ import annotations

import json
from email import policy
from email.parser import BytesParser

from mailsvc.app import idempotency
from mailsvc.app.apikeys import Caller
from mailsvc.app.idempotency import IdempotencyKeys, Replay
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.app.submit import Acceptor
from mailsvc.domain.errors import DomainError, IdempotencyKeyInFlight, NotAllowed, QuotaExceeded
from mailsvc.smtp.message import submission_from_message
from mailsvc.smtp.submission import Refusal

_IDEMPOTENCY_HEADERS = ("Resend-Idempotency-Key", "X-Resend-Idempotency-Key")


def refusal_for(error: DomainError) -> Refusal:
    if isinstance(error, NotAllowed):
        return Refusal(550, "5.7.1", error.message)
    if isinstance(error, QuotaExceeded):
        return Refusal(451, "4.7.1", error.message)
    if isinstance(error, IdempotencyKeyInFlight):
        return Refusal(451, "4.5.0", error.message)
    return Refusal(550, "5.6.0", error.message)


class SmtpIntake:
    def __init__(self, acceptor: Acceptor, limiter: RateLimiter, keys: IdempotencyKeys):
        self._acceptor = acceptor
        self._limiter = limiter
        self._keys = keys

    async def accept_message(self, caller: Caller, raw: bytes, recipients: list[str], _=()) -> str:
        try:
            return await self._accept(caller, raw, recipients)
        except DomainError as e:
            raise refusal_for(e) from None

    async def _accept(self, caller: Caller, raw: bytes, recipients: list[str]) -> str:
        if await self._limiter.take(caller.tenant.id, caller.tenant.api_rate_per_sec) is not None:
            raise Refusal(451, "4.7.1", "Too many requests; slow down and retry")
        parsed = BytesParser(policy=policy.compat32).parsebytes(raw)
        key = next((parsed[h] for h in _IDEMPOTENCY_HEADERS if parsed[h]), None)
        submission = submission_from_message(raw, recipients, parsed)
        claim = None
        if key is not None:
            # What was asked, not how it was encoded: a client re-encoding the same message
            # (new MIME boundaries) is still the same request.
            asked = [str(submission.sender), list(submission.recipients), submission.subject,
                     submission.html, submission.text]
            claimed = await self._keys.claim(caller.tenant.id, key.strip(), idempotency.request_hash("smtp", asked))
            if isinstance(claimed, Replay):
                return json.loads(claimed.body)["id"]
            claim = claimed
        try:
            prepared = await self._acceptor.prepare(caller, submission, raw=raw)

            async def finish(txn, accepted):
                reply = json.dumps({"id": str(accepted[0].id)}).encode()
                await self._keys.complete(txn, claim, 200, reply)

            accepted = await self._acceptor.store(caller, [prepared], "smtp", finish if claim is not None else None)
        except BaseException:
            if claim is not None:
                await self._keys.release(claim)
            raise
        return str(accepted[0].id)
