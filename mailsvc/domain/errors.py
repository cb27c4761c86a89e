"""
Every failure the domain and the use cases report, and nothing else: the HTTP edge maps each
class to a status and its names (``mailsvc.http.errors``), the SMTP edge to a reply
(``mailsvc.smtp.intake``). Each family carries the data its edges need (a field, a batch
index, a period, a wait), never an HTTP code.
"""

from __future__ import annotations


class DomainError(Exception):
    """Base of every rule violation the domain layer reports."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Invalid(DomainError):
    """A field is missing or malformed. The message starts with the field name."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class InvalidAttachment(Invalid):
    """An attachment with neither content nor path, or content that cannot be read."""

    def __init__(self, message: str):
        super().__init__("attachments", message)


class OverMimeLimit(Invalid):
    """A message holds more MIME structure than a limit allows (``mail.<setting>``): refused for
    good (SMTP 554 5.6.0, HTTP 422)."""

    def __init__(self, field: str, message: str, setting: str):
        super().__init__(field, message)
        self.setting = setting


class ItemRefused(DomainError):
    """Item ``index`` of a strict batch was refused with ``error``: the whole batch is."""

    def __init__(self, index: int, error: DomainError):
        super().__init__(f"[{index}] {error.message}")
        self.index = index
        self.error = error


class NotFound(DomainError):
    """The resource is absent from the account (or its id cannot name one)."""

    def __init__(self, kind: str):
        super().__init__(f"{kind} not found")
        self.kind = kind


class NotAllowed(DomainError):
    """The request is well-formed but the account may not do it (paused, plan limit, ...)."""

    def __init__(self, message: str, reason: str = "forbidden"):
        super().__init__(message)
        self.reason = reason


class LinkRefused(DomainError):
    """A signed link (attachment, unsubscribe) that is expired or was altered."""


class Conflict(DomainError):
    """The request clashes with the resource's current state (an id already taken, ...)."""


class Taken(Conflict):
    """A name that must be unique (a domain's, a template's alias) was written by another
    request at the same moment: the store reports it, and its use case says what was taken."""

    def __init__(self, field: str):
        super().__init__(f"{field}: already taken")
        self.field = field


class AliasTaken(Conflict):
    """Another template of the account has this alias."""

    def __init__(self, alias: str):
        super().__init__(f"alias: another template already has the alias `{alias}`")


class PlanRequired(NotAllowed):
    """A feature of the top plan only (builder documents, builder themes, brand import)."""

    def __init__(self, message: str):
        super().__init__(message, reason="plan_required")


class NotReschedulable(Conflict):
    """Only a scheduled email can be given another time."""


class NotCancelable(Conflict):
    """Only a scheduled email can be canceled."""


class QuotaExceeded(DomainError):
    """The account's daily or monthly sending quota is used up."""

    def __init__(self, period: str):
        self.period = period  # "daily" or "monthly"
        super().__init__(
            f"You have reached your {period} email sending quota. "
            + ("It resets at 00:00 UTC." if period == "daily" else "It resets on the first day of the month (UTC).")
        )


class RateLimited(DomainError):
    """Too many requests of one kind; the caller may try again in ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class IdempotencyKeyInvalid(DomainError):
    """Empty or longer than 256 characters."""


class IdempotencyKeyReused(DomainError):
    """Same key, different request."""


class IdempotencyKeyInFlight(DomainError):
    """Same key while the first request still runs."""


class SpamCheckUnavailable(DomainError):
    """No spam score can be had: spamd is not configured (``spam.spamd``) or did not answer."""


class DnsProviderFailed(DomainError):
    """A DNS provider refused or failed a set-up; ``code`` is its ``dnsprov_*`` name."""

    def __init__(self, code: str, message: str, unavailable: bool):
        super().__init__(message)
        self.code = code
        self.unavailable = unavailable


class IdempotencyClaimLost(IdempotencyKeyInFlight):
    """The request outlived its hold on the key and another request with it took it over."""

    def __init__(self):
        super().__init__(
            "This request outlived its hold on the idempotency key and another request with the key"
            " took it over; nothing of this one was stored.")


class SendingDomainGone(NotAllowed):
    """The sending domain was deleted (on another node) after this one looked it up."""

    def __init__(self):
        super().__init__("The sending domain is not verified. Please, add and verify your domain.",
                         reason="domain_not_verified")


class SignInRefused(DomainError):
    """Wrong address or password, an unusable or used set-password link: never says which."""


class AiFailed(DomainError):
    """
    The AI helper gave no document; ``code`` is its name (docs/contract/dashboard.md): ``ai_disabled``,
    ``ai_rate_limited``, ``ai_quota_exceeded``, ``ai_busy``, ``ai_unavailable``, ``ai_timeout``,
    ``ai_invalid_output``, ``ai_refused``. ``retry_after`` (seconds) for the minute rate.
    """

    def __init__(self, code: str, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after


class BrandFailed(DomainError):
    """A brand import could not read the site: ``brand_url_forbidden`` or ``brand_fetch_failed``."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class BroadcastNotDraft(Conflict):
    """The broadcast is no longer a draft: it cannot be updated (PATCH)."""


class BroadcastNotCancelable(Conflict):
    """
    A draft cannot be canceled; a sent, canceled or failed broadcast cannot be canceled or sent
    again, and a sent one cannot be deleted.
    """


class BroadcastInProgress(Conflict):
    """
    The broadcast is scheduled, queued or sending (it cannot be sent again; only a scheduled one
    can be deleted), or it was canceled or failed with mail still queued (it cannot be deleted yet).
    """


class LeaseLost(DomainError):
    """
    A write guarded by a lease (a broadcast's chunk) found the lease no longer held: it expired
    and another node took the work over, or the work was canceled. Nothing of it was stored.
    """

    def __init__(self, what: str = "lease"):
        super().__init__(f"the {what} is no longer held; nothing was written")
