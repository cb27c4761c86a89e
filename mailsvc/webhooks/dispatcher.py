"""
The webhook dispatcher: takes events from the outbox's hand-over, fans each out to the tenant's
enabled webhooks subscribed to it, and delivers the resulting rows. One dispatcher of a node
fans out (``fans_out``, woken by NOTIFY on "events"); it NOTIFYs "webhook_deliveries" when it
queued deliveries, which wakes the node's others. Each step (woken by its NOTIFY, a finished
attempt, a retry coming due, or a slow timer) leases due deliveries
(FOR UPDATE SKIP LOCKED, ``claimed_until``) and writes earlier outcomes only while their lease
holds. Requests run in parallel within ``per_endpoint`` per webhook across nodes and, per
target address on this node, ``host_concurrency`` and ``host_rate_per_sec`` (``HostLimits``).
"""

from __future__ import annotations

import codecs
import time
import uuid
from collections import deque

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from mailsvc import timefmt
from mailsvc.app.webhooks import WebhookRegistry
from mailsvc.crypto import webhook_signatures as signing
from mailsvc.domain.webhooks import HostPace, attempt_error, next_attempt_delay, payload, retry_after_seconds
from mailsvc.engine import LeasedEngine
from mailsvc.outside.fetch import Fetcher, FetchFailed, TargetRefused
from mailsvc.store import webhooks as rows
from mailsvc.store.database import Database
from mailsvc.store.events import CHANNEL

log = Logger()

#: Seconds an attempt may take, connection to last byte.
TIMEOUT_SECONDS = 15
#: Bytes of a response read (the rest is dropped with the connection) and bytes kept (the
#: delivery's last answer, and each attempt's).
RESPONSE_READ = 64 * 1024
RESPONSE_KEPT = 2048
#: A lease outlives the attempt's timeout by a wide margin: it only ends early if a node died.
LEASE_SECONDS = 60
#: A delivery waiting for its target host longer than this is given back unattempted: started
#: any later, its attempt (up to TIMEOUT_SECONDS) could outlive the lease it was claimed under.
HOST_WAIT_SECONDS = LEASE_SECONDS - 2 * TIMEOUT_SECONDS
#: Target hosts whose limits are remembered before idle ones are forgotten.
HOSTS_KEPT = 1000
#: The safety net: a step at least this often even if no wake-up arrived.
SAFETY_INTERVAL = 10
#: A NOTIFY on "events" (one per accepted request, under load hundreds a second) waits this
#: long for others, so that they make one step (one round trip) between them. Wake-ups of the
#: dispatcher's own (a finished request, a retry due) and the NOTIFY of a fan-out (one per
#: step of the dispatcher that fans out) do not wait. When every worker's dispatcher was woken
#: by every NOTIFY, SMTP submission on 2 workers ran about 20 % slower at 10 ms than at 50 ms
#: (docs/benchmarks.md, "Throughput").
WAKE_GATHER = 0.05
FAN_OUT_BATCH = 500
#: Seconds a stop waits for attempts in flight before abandoning (and releasing) them.
DRAIN_SECONDS = 10
PRUNE_EVERY = 3600
DELIVERIES_KEPT = 7 * 86400
EVENTS_KEPT = 30 * 86400


@attrs.frozen
class _Job:
    webhook_id: uuid.UUID
    event_id: uuid.UUID
    claim: uuid.UUID
    attempt: int  # 1-based number of this attempt
    endpoint: str
    message_id: str
    body: bytes
    keys: list[bytes]


@attrs.frozen
class _Attempt:
    """What one attempt came to: the answer's status and first bytes (``response``), or why
    there was none; its duration; what went wrong (``domain.webhooks.attempt_error``)."""

    status: int | None
    response: str
    retry_after: float | None = None
    duration_ms: int = 0
    error: str | None = None


def kept_text(body: bytes) -> str:
    """The first RESPONSE_KEPT bytes of an answer as text: a character cut at the end is left
    out, bytes that are not UTF-8 read as U+FFFD, and so does a NUL (no text column holds one)."""
    # Not final when cut: the decoder holds back a character the cut split.
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(body[:RESPONSE_KEPT], len(body) <= RESPONSE_KEPT)
    return text.replace("\x00", "\ufffd")


@attrs.define
class _Host:
    pace: HostPace
    busy: int = 0
    waiting: deque[defer.Deferred] = attrs.Factory(deque)
    timer: object = None  # the call that resumes admission when the pace allows

    def idle(self, now: float) -> bool:
        return self.busy == 0 and not self.waiting and self.timer is None and self.pace.idle(now)


class HostLimits:
    """
    Requests in flight to one target address, and the rate they start at, across every
    webhook on the node of every tenant, so that many webhooks aimed at one host do not make
    the service a traffic amplifier. A request over a limit waits (in order of arrival) until
    a request to that host ends or the pace allows; bursts of up to one second's rate.
    """

    def __init__(self, clock, concurrency: int, rate_per_sec: float):
        self._clock = clock
        self._concurrency = concurrency
        self._rate = rate_per_sec
        self._hosts: dict[str, _Host] = {}

    def enter(self, host: str) -> defer.Deferred:
        """Fires when a request to ``host`` may start (then ``leave`` once it ended); cancel
        it to stop waiting."""
        entry = self._hosts.get(host)
        if entry is None:
            if len(self._hosts) >= HOSTS_KEPT:
                self._forget_idle()
            entry = self._hosts[host] = _Host(HostPace(self._rate, max(self._rate, 1)))
        turn: defer.Deferred[None] = defer.Deferred(entry.waiting.remove)
        entry.waiting.append(turn)
        self._admit(entry)
        return turn

    def leave(self, host: str) -> None:
        entry = self._hosts[host]
        entry.busy -= 1
        self._admit(entry)

    def stop_waiting(self) -> None:
        """Cancel every request still waiting for its turn."""
        for entry in self._hosts.values():
            while entry.waiting:
                entry.waiting[0].cancel()

    def _admit(self, entry: _Host) -> None:
        while entry.waiting and entry.busy < self._concurrency:
            now = self._clock.seconds()
            wait = entry.pace.wait(now)
            if wait > 0:
                if entry.timer is None:
                    entry.timer = self._clock.callLater(wait, self._resume, entry)
                return
            entry.pace.start(now)
            entry.busy += 1
            entry.waiting.popleft().callback(None)

    def _resume(self, entry: _Host) -> None:
        entry.timer = None
        self._admit(entry)

    def _forget_idle(self) -> None:
        now = self._clock.seconds()
        for host, entry in list(self._hosts.items()):
            if entry.idle(now):
                del self._hosts[host]


class Dispatcher(LeasedEngine):
    """
    ``fans_out``: this dispatcher also hands events over to webhook deliveries, woken by every
    NOTIFY on "events"; one per node does (``compose``), the node's others only deliver.
    """

    desc = "webhook dispatcher"
    role = "webhooks"

    def __init__(
        self,
        clock,
        db: Database,
        fetcher: Fetcher,
        registry: WebhookRegistry,
        per_endpoint: int = 8,
        max_in_flight: int = 256,
        host_concurrency: int = 64,
        host_rate_per_sec: float = 500,
        on_failure=None,
        fans_out: bool = True,
        timeout_seconds: float = TIMEOUT_SECONDS,
        timer=time.monotonic,
    ):
        super().__init__(clock, "webhook dispatch", SAFETY_INTERVAL, on_failure)
        self.channel = CHANNEL if fans_out else rows.QUEUED_CHANNEL
        self.notify_gather = WAKE_GATHER if fans_out else 0
        self._fan_out_batch = FAN_OUT_BATCH if fans_out else 0
        self._db = db
        self._fetcher = fetcher
        self._registry = registry
        self._per_endpoint = per_endpoint
        self._max_in_flight = max_in_flight
        self._hosts = HostLimits(clock, host_concurrency, host_rate_per_sec)
        self._timeout = timeout_seconds
        #: What an attempt's duration is measured with (wall time, whatever clock schedules).
        self._timer = timer
        self._outcomes: list[rows.Outcome] = []
        self._pruned_at = float("-inf")

    async def step(self) -> None:
        """
        One round trip: write the outcomes gathered since the last step (which frees their
        endpoints' capacity), fan out new events, lease due deliveries; then start them.
        """
        now = self._clock.seconds()
        outcomes, self._outcomes = self._outcomes, []
        room = 0 if self._stopping else self._max_in_flight - len(self._in_flight)
        claim = uuid.uuid4()
        try:
            done = await rows.dispatch(
                self._db, outcomes, timefmt.from_seconds(now), timefmt.from_seconds(now + LEASE_SECONDS),
                claim, self._per_endpoint, room, self._fan_out_batch,
            )
        except Exception:
            self._outcomes[:0] = outcomes
            raise
        for row in done.claimed:
            self._launch(row, claim, now)
        self._plan_next_retry(done.next_due)
        if done.backlog:
            self.wake()
        if now - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = now
            await rows.prune(
                self._db, timefmt.from_seconds(now - DELIVERIES_KEPT), timefmt.from_seconds(now - EVENTS_KEPT)
            )

    def _plan_next_retry(self, due) -> None:
        """A step when the next retry falls due; none for one due already (it waits for its
        endpoint's capacity, freed by an attempt landing, which wakes a step)."""
        at = due.timestamp() if due is not None else None
        self._wake_at(at if at is not None and at > self._clock.seconds() else None)

    def _launch(self, row: dict, claim: uuid.UUID, now: float) -> None:
        key = (row["webhook_id"], row["event_id"])
        try:
            job = _Job(
                row["webhook_id"], row["event_id"], claim, row["attempts"] + 1, row["endpoint"],
                signing.message_id(row["event_id"]), payload(row), self._registry.signing_keys(row, now),
            )
        except Exception:
            log.failure("cannot prepare webhook delivery {key}", key=key)
            self._finish(key, claim, row["attempts"] + 1, _Attempt(None, "internal error preparing the request",
                                                                   error="internal"))
            return
        d = defer.ensureDeferred(self._deliver(job))
        if not d.called:
            # Landing, it writes its outcome, which wakes a step (``_finish``, ``_release``).
            self._track(key, d)

    async def _deliver(self, job: _Job) -> None:
        status = retry_after = None
        started = None
        try:
            host = str(await self._fetcher.address_of(job.endpoint))
            if not await self._turn(host):
                self._release(job)
                return
            started = self._timer()
            try:
                headers = signing.headers(job.keys, job.message_id, int(self._clock.seconds()), job.body)
                headers["content-type"] = "application/json"
                fetched = await self._fetcher.post(
                    job.endpoint, job.body, headers, RESPONSE_READ, self._timeout
                )
            finally:
                self._hosts.leave(host)
            status = fetched.status
            response = kept_text(fetched.body)
            retry_after = retry_after_seconds(fetched.headers.get("retry-after"), self._clock.seconds())
            reason = None
        except TargetRefused as e:
            response, reason = f"refused: {e.message}", "blocked"
        except FetchFailed as e:
            response, reason = f"{e.reason}: {e.message}", e.reason
        except Exception:
            log.failure("webhook delivery {id} failed unexpectedly", id=job.message_id)
            response, reason = "internal error", "internal"
        if status is None and self._stopping:
            self._release(job)
            return
        duration = round((self._timer() - started) * 1000) if started is not None else 0
        error = attempt_error(status, reason, response)
        self._finish((job.webhook_id, job.event_id), job.claim, job.attempt,
                     _Attempt(status, response, retry_after, duration, error))

    async def _turn(self, host: str) -> bool:
        """Wait for the target host's limits: False when it took too long or the dispatcher
        is stopping (the attempt is then given back)."""
        turn = self._hosts.enter(host)
        if turn.called:  # admitted at once: no timer to set and cancel
            return True
        turn.addTimeout(HOST_WAIT_SECONDS, self._clock)
        try:
            await turn
        except (defer.CancelledError, defer.TimeoutError):
            return False
        return True

    def _finish(self, key, claim, attempt: int, made: _Attempt) -> None:
        now = self._clock.seconds()
        at = timefmt.from_seconds(now)
        if made.status is not None and 200 <= made.status < 300:
            state, due = "delivered", now
        else:
            delay = next_attempt_delay(attempt, made.retry_after)
            if delay is None:
                state, due = "failed", now
                log.info("gave up on webhook delivery {key} after {n} attempts", key=key, n=attempt)
            else:
                state, due = "pending", now + delay
        detail = made.response if made.status is None else ""
        webhook_id, event_id = key
        self._outcomes.append(rows.Outcome(
            webhook_id, event_id, claim, state, 1, timefmt.from_seconds(due), at, made.status, made.response,
            made.duration_ms, made.error, detail,
        ))
        self.wake()

    def _release(self, job: _Job) -> None:
        """Give an unfinished attempt back at once instead of leaving it to its lease."""
        now = timefmt.from_seconds(self._clock.seconds())
        self._outcomes.append(rows.Outcome(job.webhook_id, job.event_id, job.claim, "pending", 0, now))
        self.wake()

    async def settled(self) -> None:
        """Wait until every attempt started so far has finished and its outcome is written
        (if the write fails, the outcomes wait for the next step)."""
        await self._all_landed()
        outcomes, self._outcomes = self._outcomes, []
        if outcomes:
            try:
                await rows.record_outcomes(self._db, outcomes)
            except Exception:
                log.failure("recording {n} webhook attempts failed", n=len(outcomes))
                self._outcomes[:0] = outcomes

    async def stop(self) -> None:
        """Stop claiming, let attempts in flight finish (up to DRAIN_SECONDS; the rest are
        abandoned and given back; those still waiting for their host at once), and write every
        outcome."""
        await self._stop_claiming()
        self._hosts.stop_waiting()
        await self._drain(DRAIN_SECONDS, cancel=True)
        await self.settled()
