"""
Rules of delivery that need no I/O: what becomes of each recipient when its email is
accepted or released, when a temporary failure is tried again, when the account's
reputation pauses its sending, and how recipients' outcomes sum up to the email's
``last_event``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from mailsvc import timefmt
from mailsvc.domain.gcra import Gcra

#: Temporary failures are retried for this long after the mail was queued (docs/contract/main-api.md,
#: "Limits"; when, the delivery policy's ``RetrySchedule`` says: ``domain/policy.py``).
RETRY_WINDOW_SECONDS = 72 * 3600
RETRY_WINDOW = timedelta(seconds=RETRY_WINDOW_SECONDS)
#: ``last_event`` values in the order they advance; an email shows the most advanced status
#: among its recipients. A bounce or a complaint outranks a delivery to someone else:
#: it is the status a sender must act on.
LAST_EVENT_ORDER = (
    "queued", "scheduled", "canceled", "suppressed", "sent", "delivery_delayed", "delivered",
    "failed", "bounced", "complained",
)

#: Delivery row status → the email status it stands for.
EVENT_OF_STATUS = {
    "queued": "sent", "deferred": "delivery_delayed", "delivered": "delivered", "bounced": "bounced",
    "failed": "failed", "complained": "complained", "suppressed": "suppressed", "canceled": "canceled",
    "scheduled": "scheduled",
}

#: Why the service gave up on a delivery (``email.failed``'s ``reason``; docs/webhooks.md), and
#: nothing else (docs/decisions.md "Failure reasons"):
#: the 72-hour window of a temporary failure ended (``retry_window_exhausted``); the account is
#: suspended (``account_suspended``); the content as it was accepted can no longer be sent: its
#: sending domain (and with it its DKIM keys) was deleted, its stored message is gone, or an
#: operator bounced it (``content_expired``).
RETRY_WINDOW_EXHAUSTED = "retry_window_exhausted"
ACCOUNT_SUSPENDED = "account_suspended"
CONTENT_EXPIRED = "content_expired"
FAILURE_REASONS = (RETRY_WINDOW_EXHAUSTED, ACCOUNT_SUSPENDED, CONTENT_EXPIRED)

#: Reputation guard (docs/contract/main-api.md, "Limits"; docs/decisions.md, "Pacing and the reputation
#: guard"): over the last 7 days.
GUARD_DAYS = 7
BOUNCE_RATE_LIMIT = 0.04
BOUNCE_RATE_MINIMUM = 200
COMPLAINT_RATE_LIMIT = 0.001
COMPLAINT_RATE_MINIMUM = 1000


def first_status(origin: str | None, scheduled: bool) -> str:
    """
    A recipient's delivery status when its email is accepted or released: ``origin`` is its
    suppression's origin (None: not suppressed). A capture-mode account's mail is queued like
    any other: the delivery worker signs it and keeps it in the inbox instead of sending it.
    """
    if origin is not None:
        return "suppressed"
    if scheduled:
        return "scheduled"
    return "queued"


def first_times(status: str, now: datetime) -> tuple[datetime | None, datetime | None]:
    """When a delivery with this first status falls due, and until when it is retried."""
    return (now, now + RETRY_WINDOW) if status == "queued" else (None, None)


def first_last_event(live: bool, scheduled: bool) -> str:
    """The email's ``last_event`` then; ``live``: some recipient is not suppressed."""
    if not live:
        return "suppressed"
    if scheduled:
        return "scheduled"
    return "sent"


def first_event(status: str, base: dict, delivery_id: str, recipient: str, origin: str | None):
    """The ``(type, data)`` of the event a recipient gets with its first status, if any."""
    if status == "suppressed":
        return "email.suppressed", {**base, "delivery_id": delivery_id, "recipient": recipient, "reason": origin}
    return None


def sent_event(email_id, sender: str, subject: str, tags: list[dict], scheduled_at: datetime | None,
               live: list[str], now: datetime) -> dict:
    """The data of ``email.sent``, when an email is accepted or its scheduled time comes."""
    return {
        "email_id": str(email_id), "delivery_id": None, "created_at": timefmt.iso(now), "to": live,
        "from": sender, "subject": subject, "tags": tags, "scheduled_at": timefmt.iso(scheduled_at),
    }


def rank(last_event: str) -> int:
    return LAST_EVENT_ORDER.index(last_event)


def most_advanced(events) -> str:
    return max(events, key=rank)


@attrs.frozen
class Reputation:
    """A tenant's outcomes over the guard's window."""

    delivered: int
    bounced: int
    complained: int

    def lines(self) -> dict[str, dict]:
        """Each of the guard's lines as it judges it: the bounces counted against the messages
        judged (delivered or bounced), the complaints against those delivered; ``rate`` is None
        until some were judged, ``counts`` whether enough were (``minimum``) for the line to
        apply, ``over`` whether sending pauses for it."""
        out = {}
        for name, count, judged, limit, minimum in (
                ("bounce", self.bounced, self.delivered + self.bounced, BOUNCE_RATE_LIMIT, BOUNCE_RATE_MINIMUM),
                ("complaint", self.complained, self.delivered, COMPLAINT_RATE_LIMIT, COMPLAINT_RATE_MINIMUM)):
            rate = count / judged if judged else None
            counts = judged >= minimum
            out[name] = {"count": count, "judged": judged, "rate": rate, "limit": limit, "minimum": minimum,
                         "counts": counts, "over": counts and rate is not None and rate > limit}
        return out

    def breach(self) -> str | None:
        """Why sending must pause, or None."""
        lines = self.lines()
        bounce, complaint = lines["bounce"], lines["complaint"]
        if bounce["over"]:
            return (f"bounce rate {100 * bounce['rate']:.1f}% over the last {GUARD_DAYS} days"
                    f" ({self.bounced} of {bounce['judged']} messages) exceeds {100 * BOUNCE_RATE_LIMIT:g}%")
        if complaint["over"]:
            return (f"complaint rate {100 * complaint['rate']:.2f}% over the last {GUARD_DAYS} days"
                    f" ({self.complained} of {self.delivered} delivered) exceeds {100 * COMPLAINT_RATE_LIMIT:g}%")
        return None


@attrs.frozen
class AccountPace:
    """
    The pacing of one account's deliveries at ``rate`` per second, on the service's one ``Gcra``:
    ``tat`` is when the next message may start. Up to one second's worth (at least one) may
    start at once; the rest wait their turn.
    """

    rate: float
    tat: float

    def admit(self, now: float, wanted: int) -> tuple[int, float, float]:
        """
        How many of ``wanted`` messages may start now, the new ``tat``, and when the next one
        may start (the time to come back for the rest).
        """
        rate = max(self.rate, 0.001)
        gcra = Gcra.per_second(rate, max(1.0, rate))
        admitted = gcra.admitted(self.tat, now, wanted)
        tat = gcra.counted(self.tat, now, admitted)
        next_start = now + gcra.wait(tat, now) if admitted < wanted else tat
        return admitted, tat, next_start


def fair_shares(wanted: list[int], room: int) -> list[int]:
    """
    How many of ``room`` deliveries each account with due mail takes in one claim, given how
    many each ``wanted`` (in the order the accounts' oldest due mail came due): the room is
    shared equally, and what an account cannot use goes to those that want more. When the
    accounts outnumber the room, the first ``room`` of them take one each.
    """
    shares = [0] * len(wanted)
    left = room
    hungry = [i for i, w in enumerate(wanted) if w > 0]
    while left > 0 and hungry:
        each = max(1, left // len(hungry))
        for i in hungry:
            give = min(each, wanted[i] - shares[i], left)
            shares[i] += give
            left -= give
            if left == 0:
                break
        hungry = [i for i in hungry if shares[i] < wanted[i]]
    return shares
