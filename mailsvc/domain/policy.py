"""
The delivery policy: one value per account and destination (an egress path) that says whether
mail may go that way now, how fast, how many recipients share a transaction, which TLS it
needs, whether it leaves through the smarthost, and when a deferral is tried again. The accept
path, the broadcast fan-out, the delivery claim and the delivery worker all ask ``resolve``;
the store only carries out what it decided (docs/architecture.md, "A new delivery policy goes
here").
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import attrs

from mailsvc.domain.delivery import ACCOUNT_SUSPENDED, Reputation
from mailsvc.domain.tenant import STATUSES

#: An email's recipients at one domain share an SMTP transaction, up to this many.
RECIPIENTS_PER_TRANSACTION = 50
#: A sending domain with no ``tls`` setting asks for TLS when the server offers it.
DEFAULT_TLS = "opportunistic"
#: The status reason a reputation pause gives, before the breach it names.
REPUTATION_PAUSE = "reputation guard"

#: Admission verdicts.
SEND = "send"
#: Paused (by an operator or the reputation guard): nothing is accepted, queued mail waits.
PAUSE = "pause"
#: Suspended: nothing is accepted, the queue fails (``account_suspended``).
SUSPEND = "suspend"
#: An operator's standing hold on the account or the destination: the mail is held.
HOLD = "hold"


class Account(Protocol):
    """What the policy reads of an account (``domain.tenant.Tenant`` is one)."""

    @property
    def id(self) -> Any: ...
    @property
    def status(self) -> str: ...
    @property
    def status_reason(self) -> str | None: ...
    @property
    def send_rate_per_sec(self) -> float: ...
    @property
    def delivery_mode(self) -> str: ...


@attrs.frozen
class Admission:
    """Whether mail may take the path now, and if not, why (``reason``, ``message``)."""

    verdict: str
    #: The refusal's reason code (``tenant_paused``, ``tenant_suspended``) or the hold's reason.
    reason: str | None = None
    #: What the sender is told when the accept path refuses.
    message: str | None = None

    @property
    def sends(self) -> bool:
        return self.verdict == SEND

    @property
    def failure(self) -> str | None:
        """The failure reason of mail that can never go this way (a suspended account's)."""
        return ACCOUNT_SUSPENDED if self.verdict == SUSPEND else None


@attrs.frozen
class RetrySchedule:
    """
    When a temporary failure is tried again: the first retry waits ``first_seconds``, each one
    after twice as long, up to ``cap_seconds``; each wait is spread by up to ``jitter`` either
    way, so that mail deferred together by one busy server does not come back all at once.
    """

    first_seconds: float = 60
    cap_seconds: float = 2 * 3600
    jitter: float = 0.2

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds before attempt ``attempt + 1`` after attempt ``attempt`` (1-based) was deferred."""
        base = min(self.first_seconds * 2 ** min(attempt - 1, 20), self.cap_seconds)
        return base * (1 + (rng or random).uniform(-self.jitter, self.jitter))

    def next_attempt(self, now: float, attempt: int, retry_until: float,
                     rng: random.Random | None = None) -> float | None:
        """When to try again after a deferral at ``now``, or None when the window is over; the
        last attempt falls on the window's end rather than beyond it."""
        if now >= retry_until:
            return None
        return min(now + self.delay(attempt, rng), retry_until)


RETRY = RetrySchedule()


@attrs.frozen
class Holds:
    """The operator's standing holds (store/queue.py), their reasons by account id and by
    recipient domain."""

    accounts: Mapping[str, str] = attrs.field(factory=dict)
    destinations: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def of(cls, rows: Iterable[tuple[str, str, str]]) -> Holds:
        """From ``(kind, value, reason)`` rows, ``kind`` being ``tenant`` or ``destination``."""
        accounts: dict[str, str] = {}
        destinations: dict[str, str] = {}
        for kind, value, reason in rows:
            (accounts if kind == "tenant" else destinations)[value] = reason
        return cls(accounts, destinations)


NO_HOLDS = Holds()


@attrs.frozen
class PathPolicy:
    """What the policy decided for one account and destination."""

    admission: Admission
    #: The account's deliveries a second (GCRA, ``domain.delivery.AccountPace``).
    pace_per_sec: float
    recipients_per_transaction: int
    #: The TLS the destination's hosts are asked for when no DANE or MTA-STS policy says more
    #: (``delivery.policy``): ``opportunistic`` or ``enforced``.
    tls: str
    #: The mail leaves through the smarthost (relay mode) rather than the destination's MX hosts.
    relay: bool
    #: The mail is signed and kept in the inbox instead of leaving (capture mode).
    capture: bool
    retry: RetrySchedule


def account_admission(status: str, status_reason: str | None = None) -> Admission:
    """May an account with this status send: a paused or suspended one sends nothing."""
    if status == "paused":
        reason = f": {status_reason}" if status_reason else ""
        return Admission(PAUSE, "tenant_paused",
                         f"Sending is paused for this account{reason}. Contact support to resume.")
    if status == "suspended":
        return Admission(SUSPEND, "tenant_suspended", "This account is suspended and cannot send email.")
    return Admission(SEND)


def admission(tenant: Account, destination: str | None = None, holds: Holds = NO_HOLDS) -> Admission:
    """May ``tenant`` send (to ``destination``, if named) now: the account's status first,
    then a standing hold on the account, then one on the destination."""
    by_status = account_admission(tenant.status, tenant.status_reason)
    if not by_status.sends:
        return by_status
    held = holds.accounts.get(str(tenant.id))
    if held is None and destination is not None:
        held = holds.destinations.get(destination.lower())
    return by_status if held is None else Admission(HOLD, held)


def resolve(tenant: Account, destination: str | None = None, *, holds: Holds = NO_HOLDS,
            sending_tls: str | None = None) -> PathPolicy:
    """
    The path of ``tenant``'s mail to ``destination`` (a recipient domain; None: the account as a
    whole, as the accept path asks), given the standing ``holds`` and the sending domain's
    ``tls`` setting.
    """
    return PathPolicy(
        admission=admission(tenant, destination, holds),
        pace_per_sec=tenant.send_rate_per_sec,
        recipients_per_transaction=RECIPIENTS_PER_TRANSACTION,
        tls=sending_tls or DEFAULT_TLS,
        relay=tenant.delivery_mode == "relay",
        capture=tenant.delivery_mode == "capture",
        retry=RETRY,
    )


#: The account statuses whose due mail the delivery claim reads (the claim statement's filter).
CLAIMABLE_STATUSES = tuple(s for s in STATUSES if account_admission(s).sends)


def reputation_pause(reputation: Reputation) -> str | None:
    """The status reason that pauses an active account whose rates are over the guard's limits,
    or None."""
    why = reputation.breach()
    return None if why is None else f"{REPUTATION_PAUSE}: {why}"
