"""
Webhooks: which events may be subscribed to (under main and native names), the rules of an
endpoint URL and of create/update bodies, and the retry schedule of a delivery.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import attrs

from mailsvc import timefmt
from mailsvc.domain.errors import Invalid
from mailsvc.domain.gcra import Gcra

#: Every event type a subscription may name (docs/webhooks.md, "Event names": sent ones,
#: then accepted but never sent ones). Subscriptions are stored under these names.
EVENT_TYPES = (
    "email.sent", "email.delivered", "email.delivery_delayed", "email.bounced",
    "email.complained", "email.failed", "email.suppressed", "domain.updated",
    "contact.created", "contact.updated", "contact.deleted",
    "email.opened", "email.clicked", "email.received", "email.scheduled",
    "domain.created", "domain.deleted",
)

#: The native surface's name of each event type (docs/webhooks.md).
NATIVE_NAMES = {
    "email.sent": "message.accepted",
    "email.delivered": "message.delivered",
    "email.delivery_delayed": "message.deferred",
    "email.bounced": "message.bounced",
    "email.complained": "message.complained",
    "email.failed": "message.failed",
    "email.suppressed": "message.suppressed",
    "email.opened": "message.opened",
    "email.clicked": "message.clicked",
    "email.received": "message.received",
    "email.scheduled": "message.scheduled",
    "domain.updated": "domain.status_changed",
    "domain.created": "domain.created",
    "domain.deleted": "domain.deleted",
    "contact.created": "contact.created",
    "contact.updated": "contact.updated",
    "contact.deleted": "contact.deleted",
}
FROM_NATIVE = {native: main for main, native in NATIVE_NAMES.items()}

#: How a webhook names event types in its subscription view and in the payloads it receives.
MAIN_NAMING = "main"
NATIVE_NAMING = "native"

STATUSES = ("enabled", "disabled")
ENDPOINT_MAX = 2048

#: Seconds to wait after failed attempt n (1-based) before attempt n + 1: the first attempt
#: is immediate, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (docs/webhooks.md, "Delivery").
RETRY_DELAYS = (5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
#: A Retry-After beyond this is not believed (a receiver cannot park an event for days).
RETRY_AFTER_MAX = 24 * 3600


def endpoint_url(value: Any) -> str:
    """A well-formed absolute ``https`` URL (where it points is checked by the caller)."""
    if value is None:
        raise Invalid("endpoint", "endpoint is required")
    if not isinstance(value, str) or not value.strip():
        raise Invalid("endpoint", "endpoint must be a non-empty string")
    value = value.strip()
    if len(value) > ENDPOINT_MAX:
        raise Invalid("endpoint", f"endpoint must be at most {ENDPOINT_MAX} characters")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise Invalid("endpoint", "endpoint must be a valid URL") from None
    if parts.scheme.lower() != "https":
        raise Invalid("endpoint", "endpoint must be an https URL")
    if not parts.hostname:
        raise Invalid("endpoint", "endpoint must name a host")
    if parts.username is not None or parts.password is not None:
        raise Invalid("endpoint", "endpoint must not contain credentials")
    if port == 0:
        raise Invalid("endpoint", "endpoint must name a valid port")
    if any(c.isspace() for c in value):
        raise Invalid("endpoint", "endpoint must be a valid URL")
    return value


def event_list(value: Any, naming: str) -> tuple[str, ...]:
    """At least one known event type, in the caller's naming; returned in main names."""
    if value is None:
        raise Invalid("events", "events is required")
    if not isinstance(value, list) or not value:
        raise Invalid("events", "events must be a non-empty array of event types")
    known = FROM_NATIVE if naming == NATIVE_NAMING else {t: t for t in EVENT_TYPES}
    chosen: list[str] = []
    for item in value:
        if not isinstance(item, str) or item not in known:
            raise Invalid("events", f"events: unknown event type `{item}`")
        if known[item] not in chosen:
            chosen.append(known[item])
    return tuple(chosen)


def named(types: Iterable[str], naming: str) -> list[str]:
    """Stored (main) names as a webhook of ``naming`` sees them."""
    if naming == NATIVE_NAMING:
        return [NATIVE_NAMES[t] for t in types]
    return list(types)


@attrs.frozen
class NewWebhook:
    endpoint: str
    events: tuple[str, ...]
    naming: str


@attrs.frozen
class WebhookChange:
    """The fields a PATCH sets; None leaves a field alone."""

    endpoint: str | None = None
    events: tuple[str, ...] | None = None
    status: str | None = None


def new_webhook(body: dict, naming: str = MAIN_NAMING) -> NewWebhook:
    return NewWebhook(endpoint_url(body.get("endpoint")), event_list(body.get("events"), naming), naming)


def webhook_change(body: dict) -> WebhookChange:
    endpoint = events = status = None
    if body.get("endpoint") is not None:
        endpoint = endpoint_url(body["endpoint"])
    if body.get("events") is not None:
        events = event_list(body["events"], MAIN_NAMING)
    if body.get("status") is not None:
        status = body["status"]
        if status not in STATUSES:
            raise Invalid("status", "status must be `enabled` or `disabled`")
    return WebhookChange(endpoint, events, status)


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """A ``Retry-After`` header (delta seconds or an HTTP date) as seconds from ``now``."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - now
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


def next_attempt_delay(attempt: int, retry_after: float | None) -> float | None:
    """
    Seconds until the attempt after failed attempt number ``attempt`` (1-based), or None when
    it was the last. A receiver's Retry-After can push the next attempt later, never earlier.
    """
    if attempt >= MAX_ATTEMPTS:
        return None
    delay = float(RETRY_DELAYS[attempt - 1])
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


@attrs.define
class HostPace:
    """
    The starts to one host: ``rate`` a second on average, at most ``burst`` at once after a
    quiet spell (a ``Gcra``). ``tat`` is the theoretical arrival time of the next start.
    """

    rate: float
    burst: float
    tat: float = float("-inf")
    _gcra: Gcra = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._gcra = Gcra.per_second(self.rate, self.burst)

    def wait(self, now: float) -> float:
        """Seconds until a start is allowed (0: at once)."""
        return self._gcra.wait(self.tat, now)

    def start(self, now: float) -> None:
        """Count a start (allowed by ``wait``)."""
        self.tat = self._gcra.counted(self.tat, now)

    def idle(self, now: float) -> bool:
        """Nothing of the past counts any more: forgetting this pace changes nothing."""
        return self.tat <= now


def payload(row: dict) -> bytes:
    """The request body of an event (``type``, ``created_at``, ``data``) in the webhook's
    ``naming``; the same bytes on every retry, and what the dashboard shows as sent."""
    name = NATIVE_NAMES[row["type"]] if row["naming"] == NATIVE_NAMING else row["type"]
    document = {"type": name, "created_at": timefmt.iso(row["created_at"]), "data": row["data"]}
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


#: What went wrong in an attempt, as the dashboard tells it in words (``web/words.js``):
#: no answer (timeout, refused, connect, tls, dns, connection, too_large, redirect), not sent
#: (blocked: the endpoint's address is not public; internal), or the answer's status.
ATTEMPT_ERRORS = ("timeout", "refused", "connect", "tls", "dns", "connection", "too_large", "redirect",
                  "blocked", "http_4xx", "http_5xx", "http_other", "internal")
#: The fetcher's reasons (``outside/fetch.FetchFailed``) that are kinds as they are.
_FETCH_REASONS = ("timeout", "tls", "dns", "connection", "too_large", "redirect")


def attempt_error(status: int | None, reason: str | None, message: str = "") -> str | None:
    """
    The kind of failure of an attempt: None for a success (a 2xx answer); else by its status,
    or, without an answer, by the fetcher's ``reason`` ("connect" is "refused" when the port
    refused the connection), "blocked" for a target refused before any request, "internal".
    """
    if status is not None:
        if 200 <= status < 300:
            return None
        return "http_5xx" if status >= 500 else "http_4xx" if status >= 400 else "http_other"
    if reason == "connect":
        return "refused" if "ConnectionRefused" in message else "connect"
    if reason in _FETCH_REASONS or reason in ("blocked", "internal"):
        return reason
    return "internal"
