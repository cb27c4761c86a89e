"""
The delivery worker of a node: claims due deliveries, sends them through the outbound SMTP
client (to the recipients' MX hosts, or to the smarthost in relay mode) and writes what became
of each. Each step (woken by NOTIFY on "deliveries", a finished transaction, paced
mail coming due, or a slow timer) writes the outcomes gathered so far and claims what the node
has room for. An email's recipients at one domain share a transaction (at most the delivery
policy's ``recipients_per_transaction``; one with a message of its own goes alone) under the
first one's VERP address; the policy (``domain/policy.py``) also says which TLS a path asks
for, whether it leaves through the smarthost, and when a deferral is tried again. Messages stored as content
are built here (``app/messages``: once per email per step, or once per recipient of the
broadcast stream), and DKIM-signed, once per step, just before sending; mail for a test
address or a capture-mode account is signed the same way and stops at ``delivery.door``.
Every attempt ends within half the claim's lease, and the lease is renewed right before DATA:
nothing is sent on a claim that no longer holds (docs/decisions.md, "Delivery transactions").
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from collections.abc import Callable, Hashable

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from mailsvc import timefmt
from mailsvc.app import suppressions
from mailsvc.app.domains import SigningKeys
from mailsvc.app.messages import Messages
from mailsvc.config import DeliveryConfig
from mailsvc.delivery.connections import ConnectFailed, Connections, Destination, TooLate
from mailsvc.delivery.door import Door
from mailsvc.delivery.policy import Policies, PolicyDeferral
from mailsvc.delivery.routes import NoRoute, Routes, RouteUnknown
from mailsvc.delivery.transactions import Transaction, Transactions
from mailsvc.domain import policy
from mailsvc.domain.delivery import CONTENT_EXPIRED, RETRY_WINDOW_EXHAUSTED
from mailsvc.engine import LeasedEngine
from mailsvc.mail import dkim, verp
from mailsvc.smtp.replies import ConnectionFault, DeadlinePassedUnsent, RecipientResult
from mailsvc.store import deliveries as store
from mailsvc.store.accept import DELIVERIES
from mailsvc.store.database import Database
from mailsvc.store.deliveries import ClaimedDelivery, Outcome

log = Logger()

#: The safety net: a step at least this often even if no wake-up arrived.
SAFETY_INTERVAL = 5
#: Seconds a stop waits for transactions in flight before giving their rows back.
DRAIN_SECONDS = 30
#: An attempt's deadline, as a share of the lease from the claim: the lease outlives it.
DEADLINE_SHARE = 0.5
#: Seconds the wake-ups of a busy moment wait for each other (a NOTIFY per accepted request, an
#: outcome per finished transaction), so that they make one step: its claim, contents and
#: outcome statements are shared by the transactions of those seconds. With every worker
#: delivering, steps were as frequent as transactions ending, and their statements cost more
#: CPU per message than the whole rest of a delivery but signing.
GATHER = 0.01


class LeaseNotHeld(Exception):
    """Right before DATA, the claim could not be proven to hold: the message is not sent."""


class LeaseUnconfirmed(LeaseNotHeld):
    """The renewal before DATA failed because the database did not answer (stopped, failing
    over): not the destination's fault, so the deliveries are given back, not deferred."""


@attrs.frozen
class Settings:
    node: str
    port: int
    verp_key: bytes
    lease_seconds: float = DeliveryConfig().lease_seconds
    batch: int = DeliveryConfig().batch
    max_in_flight: int = DeliveryConfig().max_in_flight
    #: The smarthost of tenants in relay mode (None: relay mode defers their mail).
    relay: Destination | None = None
    #: ``delivery.test_first_retry_seconds`` (tests only; 0: the policy's retry schedule as it is).
    first_retry: float = 0


class _StepSignatures:
    """
    The signed messages of one step, each signed once however many of the step's transactions
    send it; kept only until its last transaction has taken it.
    """

    def __init__(self):
        self._uses: Counter = Counter()
        self._signed: dict[Hashable, bytes] = {}

    def expect(self, key: Hashable) -> None:
        self._uses[key] += 1

    def take(self, key: Hashable, sign: Callable[[], bytes]) -> bytes:
        signed = self._signed.pop(key, None)
        if signed is None:
            signed = sign()
        self._uses[key] -= 1
        if self._uses[key] > 0:
            self._signed[key] = signed
        else:
            del self._uses[key]
        return signed


def _response(result: RecipientResult) -> str:
    reply = result.reply
    return " ".join(str(p) for p in (reply.code, reply.enhanced_code, reply.text) if p)


class DeliveryWorker(LeasedEngine):
    desc = "delivery worker"
    role = "delivery"
    channel = DELIVERIES
    notify_gather = GATHER
    landed_gather = GATHER

    def __init__(
        self,
        clock,
        db: Database,
        routes: Routes,
        connections: Connections,
        settings: Settings,
        keys: SigningKeys,
        on_failure: Callable[[str], None] | None = None,
        on_outcome: Callable[[str], None] | None = None,
        policies: Policies | None = None,
        on_reply: Callable[[str, object], None] | None = None,
        *,
        door: Door,
        messages: Messages,
    ):
        super().__init__(clock, "deliver mail", SAFETY_INTERVAL, on_failure)
        #: The transport security policies (DANE, MTA-STS) of destinations; None: the sending
        #: domain's ``tls`` setting alone.
        self.policies = policies
        #: Told (MX host, reply or None for a success) after each transaction: adaptive shaping.
        self._on_reply = on_reply
        self._door = door
        #: Builds the messages stored as content (tests build with it what would be sent).
        self.messages = messages
        self._grouping = Transactions(door, messages)
        self._db = db
        #: Where each domain's mail goes, and which hosts failed lately.
        self.routes = routes
        self._connections = connections
        self._settings = settings
        self._keys = keys
        self._renewals = store.Renewals(db, clock, settings.lease_seconds)
        #: Called with the name of each point a transaction passes: "sending" (signed, handed to
        #: the SMTP client: nothing of it sent yet), "replied" (the final reply read, no outcome
        #: decided yet). A seam for the tests that stop a transaction dead at one
        #: (tests/integration/test_delivery_crash_points.py).
        self.at_point: Callable[[str], None] = lambda name: None
        self._on_outcome = on_outcome
        self._outcomes: list[Outcome] = []
        self._serial = itertools.count()

    @property
    def in_flight(self) -> int:
        """Deliveries in SMTP transactions under way (steps run one at a time, so these are all
        the deliveries this worker holds between steps)."""
        return sum(len(group) for group, _ in self._held())

    async def step(self) -> None:
        await self._write_outcomes()
        room = 0 if self._stopping else min(self._settings.batch, self._settings.max_in_flight - self.in_flight)
        if room <= 0:
            return
        token = uuid.uuid4()
        deadline = self._clock.seconds() + self._settings.lease_seconds * DEADLINE_SHARE
        claimed = await store.claim(
            self._db, self._clock, self._settings.node, token, room, self._settings.lease_seconds
        )
        self._plan(claimed.next_due)
        if not claimed.work:
            return
        grouping = self._grouping.of(claimed.work, claimed.contents)
        for w, why in grouping.expired:
            self._decide(w, token, "failed", {"reason": CONTENT_EXPIRED}, why)
        for w in grouping.unbuilt:
            self._defer(w, token, "transient", None, None, "internal error")
        transactions = grouping.transactions
        signatures = _StepSignatures()
        for t in transactions:
            if t.shared is not None:
                signatures.expect(t.shared)
        for t in transactions:
            d = defer.ensureDeferred(self._deliver(t, signatures, token, deadline))
            self._track(next(self._serial), d, (t.group, token), wake=True)
        if len(claimed.work) == room:
            self.wake()

    def _plan(self, due: float | None) -> None:
        """A step when the next claimable delivery comes due, unless one is planned earlier."""
        planned = self._wake_planned()
        if planned is not None and (due is None or planned <= due):
            return
        self._wake_at(due)

    def _outcome_ready(self) -> None:
        """A step soon to write the outcome, shared with the others of the next GATHER seconds."""
        self._loop.wake(GATHER)

    def _decide(self, w: ClaimedDelivery, token, status: str, event: dict, response: str) -> None:
        self._outcomes.append(Outcome(w.id, w.tenant_id, w.email_id, w.recipient, status, event, response,
                                      claim=token, attempted=status != "failed"))
        self._outcome_ready()

    def _signed(self, t: Transaction, signatures: _StepSignatures) -> bytes:
        """The transaction's message as it leaves: DKIM-signed now unless it was stored signed."""
        if t.keys is None and not t.test_sender:
            return t.message

        def sign() -> bytes:
            if t.test_sender:
                domain, signers = self._door.test_domain, [self._door.test_signer]
            else:
                # Not the test sender: its domain's (a deleted one's expired), keys and all (none: left unsigned above).
                assert t.email.domain is not None and t.keys is not None
                domain = t.email.domain
                signers = [self._keys.signer(k.id, k.selector, k.algorithm, k.private_key)
                           for k in t.keys]
            return dkim.sign(t.message, domain, signers, timestamp=int(self._clock.seconds())) + t.message

        return sign() if t.shared is None else signatures.take(t.shared, sign)

    async def _deliver(self, t: Transaction, signatures: _StepSignatures, token: uuid.UUID,
                       deadline: float) -> None:
        if t.at_door:
            await self._at_door(t, signatures, token)
            return
        destinations = await self._chosen_destinations(t, token)
        if destinations is None:
            return
        try:
            message = self._signed(t, signatures)
        except Exception:
            log.failure("signing a message of {domain} failed", domain=t.email.domain)
            for w in t.group:
                self._defer(w, token, "transient", None, None, "internal error")
            return
        await self._send(t, destinations, message, token, deadline)

    async def _chosen_destinations(self, t: Transaction, token: uuid.UUID) -> list[Destination] | None:
        """Where the transaction goes; None when it cannot go anywhere now (its outcomes decided)."""
        try:
            return await self._destinations(t)
        except NoRoute as e:
            for w in t.group:
                self._bounce(w, token, e.code, e.enhanced, e.message, "smtp")
        except RouteUnknown as e:
            for w in t.group:
                self._defer(w, token, "unreachable", None, None, str(e))
        except PolicyDeferral as e:
            for w in t.group:
                self._defer(w, token, "blocked", None, None, str(e))
        except Exception:
            log.failure("choosing the destinations of {domain} failed", domain=t.email.domain)
            for w in t.group:
                self._defer(w, token, "transient", None, None, "internal error")
        return None

    async def _send(self, t: Transaction, destinations: list[Destination], message: bytes, token: uuid.UUID,
                    deadline: float) -> None:
        """The transaction tried at each destination in turn until one answers it."""
        group = t.group
        sender = self._envelope_sender(t)
        recipients = [w.recipient for w in group]
        failures = []
        self.at_point("sending")
        for destination in destinations:
            try:
                result = await self._connections.send(destination, sender, recipients, message, deadline,
                                                       lambda: self._renew(group, token), ahead=not group[0].bulk)
            except ConnectFailed as e:
                self.routes.mark_bad(destination.host)
                failures.append(f"{destination.host}: {e}")
                continue
            except TooLate:
                if failures:
                    failures.append("the delivery deadline passed before the next host")
                    break
                await self._give_back(group, token)
                return
            except (LeaseUnconfirmed, DeadlinePassedUnsent):
                # The renewal before DATA failed, or the database had not answered it by the
                # deadline (a failover): unsent, and not the destination's fault. Due again at
                # once if the release is written; otherwise when the lease ends.
                await self._give_back(group, token)
                return
            except (ConnectionFault, LeaseNotHeld) as e:
                for w in group:
                    self._defer(w, token, "transient", None, None, f"{destination.host}: {e}")
                return
            except Exception:
                log.failure("delivery to {host} failed unexpectedly", host=destination.host)
                for w in group:
                    self._defer(w, token, "transient", None, None, "internal error")
                return
            self._answered(group, token, destination, result)
            return
        message_text = "; ".join(failures) or "no host to deliver to"
        for w in group:
            self._defer(w, token, "unreachable", None, None, message_text)

    def _answered(self, group: list[ClaimedDelivery], token: uuid.UUID, destination: Destination, result) -> None:
        """The destination's replies to a transaction, each recipient's outcome decided."""
        self.at_point("replied")
        if self._on_reply is not None and not destination.relay:
            self._on_reply(destination.host, result)
        by_recipient = {r.recipient: r for r in result.recipients}
        for w in group:
            self._settle(w, token, by_recipient[w.recipient], destination)

    def _envelope_sender(self, t: Transaction) -> str:
        email = t.email
        host = self._door.return_path_host() if t.test_sender else f"{email.return_path}.{email.domain}"
        return verp.envelope_sender(self._settings.verp_key, t.group[0].id, host)

    async def _at_door(self, t: Transaction, signatures: _StepSignatures, token: uuid.UUID) -> None:
        """Signed as it would have left, then stopped: kept in the inbox, completed there."""
        try:
            message = self._signed(t, signatures)
            decided = await self._door.stop(t.group, t.email, message, self._envelope_sender(t), token)
        except Exception:
            log.failure("stopping a message of {domain} at the door failed", domain=t.email.domain)
            for w in t.group:
                self._defer(w, token, "transient", None, None, "internal error")
            return
        if decided:
            self._outcomes.extend(decided)
            self._outcome_ready()

    async def _give_back(self, group: list[ClaimedDelivery], token: uuid.UUID) -> None:
        try:
            await store.release(self._db, self._clock, [(w, token) for w in group])
        except Exception:
            log.failure("giving back {n} deliveries failed; their lease will end", n=len(group))

    async def _renew(self, group: list[ClaimedDelivery], token: uuid.UUID) -> None:
        try:
            held = await self._renewals.renew([w.id for w in group], token)
        except Exception as e:
            raise LeaseUnconfirmed(f"the lease could not be renewed before DATA ({type(e).__name__})") from None
        if not held:
            raise LeaseNotHeld("the lease was lost before DATA")

    async def _destinations(self, t: Transaction) -> list[Destination]:
        if t.path.relay:
            if self._settings.relay is None:
                raise RouteUnknown("relay mode, but no smarthost is configured (delivery.relay_host)")
            return [self._settings.relay]
        route = await self.routes.route(t.group[0].recipient.rpartition("@")[2])
        if self.policies is not None:
            return await self.policies.destinations(route.domain, route.hosts, self._settings.port, t.path.tls)
        return [Destination(host, self._settings.port, t.path.tls) for host in route.hosts]

    def _settle(self, w: ClaimedDelivery, token, result: RecipientResult, destination: Destination) -> None:
        reply = result.reply
        source = "relay" if destination.relay else "smtp"
        if result.outcome == "delivered":
            self._outcomes.append(Outcome(
                w.id, w.tenant_id, w.email_id, w.recipient, "delivered",
                {"transport": source, "remote_host": destination.host, "response": _response(result)},
                _response(result), claim=token))
            self._outcome_ready()
        elif result.outcome == "bounced":
            self._bounce(w, token, reply.code, reply.enhanced_code, reply.text, source)
        else:
            self._defer(w, token, result.deferral_class or "transient", reply.code, reply.enhanced_code,
                        reply.text)

    def _bounce(self, w: ClaimedDelivery, token, code, enhanced: str, message: str, source: str) -> None:
        self._outcomes.append(Outcome(
            w.id, w.tenant_id, w.email_id, w.recipient, "bounced",
            {"type": "hard", "source": source, "code": code, "enhanced_code": enhanced or None, "message": message},
            " ".join(str(p) for p in (code, enhanced, message) if p), claim=token))
        self._outcome_ready()

    def _defer(self, w: ClaimedDelivery, token, kind: str, code, enhanced, message: str) -> None:
        now = self._clock.seconds()
        response = " ".join(str(p) for p in (code, enhanced, message) if p)
        retry = policy.resolve(w.account, w.recipient.rpartition("@")[2].lower()).retry
        if self._settings.first_retry:
            retry = attrs.evolve(retry, first_seconds=self._settings.first_retry)
        due = retry.next_attempt(now, w.attempts + 1, w.retry_until)
        if due is None:
            self._outcomes.append(Outcome(
                w.id, w.tenant_id, w.email_id, w.recipient, "failed", {"reason": RETRY_WINDOW_EXHAUSTED},
                response, claim=token))
        else:
            self._outcomes.append(Outcome(
                w.id, w.tenant_id, w.email_id, w.recipient, "deferred",
                {"class": kind, "code": code, "enhanced_code": enhanced or None, "message": message,
                 "next_attempt_at": timefmt.iso(timefmt.from_seconds(due))},
                response, claim=token, due_at=due))
        self._outcome_ready()

    async def settled(self) -> None:
        """Wait for every transaction started so far and for a step under way, then write
        every outcome."""
        await self._all_landed()
        await self._loop.idle()
        await self._flush()

    async def _write_outcomes(self) -> None:
        """Write the outcomes gathered so far; if that fails, they wait for the next try."""
        outcomes, self._outcomes = self._outcomes, []
        if not outcomes:
            return
        try:
            await store.record(self._db, self._clock, outcomes, suppress=suppressions.add_many)
        except Exception:
            self._outcomes[:0] = outcomes
            raise
        if self._on_outcome is not None:
            for outcome in outcomes:
                self._on_outcome(outcome.status)

    async def _flush(self) -> None:
        """``_write_outcomes`` outside the loop, whose runner would have logged the failure."""
        try:
            await self._write_outcomes()
        except Exception:
            log.failure("recording {n} delivery outcomes failed", n=len(self._outcomes))

    async def stop(self) -> None:
        """Stop claiming, let transactions finish (up to DRAIN_SECONDS; the rest are given
        back at once for any node to take), write every outcome, close connections."""
        await self._stop_claiming()
        abandoned = [(w, token) for group, token in await self._drain(DRAIN_SECONDS, cancel=False) for w in group]
        await self._flush()
        if abandoned:
            await store.release(self._db, self._clock, abandoned)
        await self._connections.close()

