"""
The delivery queue in the operator's hands (docs/operations.md "The queue"): its
summary and list, and retry, hold, release and bounce, each written to the audit log with the
operator token's name, the filter and how many deliveries it touched.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from twisted.internet import defer
from twisted.logger import Logger

from mailsvc import timefmt
from mailsvc.app.audit import AuditLog
from mailsvc.domain.delivery import RETRY_WINDOW
from mailsvc.domain.paging import Page
from mailsvc.domain.queue import STATES, QueueFilter
from mailsvc.store import queue
from mailsvc.store.database import Database

log = Logger()

def _code(response: str | None) -> int | None:
    head = (response or "")[:3]
    return int(head) if head.isdigit() else None


def last_response(text: str | None) -> dict | None:
    return None if text is None else {"code": _code(text), "text": text}


#: A summary is computed at most this often per node (from the queue's counts, store/queue.py):
#: reads in between get it as it was at its ``generated_at``. This node's actions make the next
#: read compute it anew.
SUMMARY_MAX_AGE = 10
#: How long a destination's MX, once looked up, is shown without being looked up again.
MX_SECONDS = 3600


class _Group:
    """One destination's or tenant's share of the queue."""

    def __init__(self):
        self.count = 0
        self.states = dict.fromkeys(STATES, 0)
        self.oldest = None
        self.next_due = None
        self.responses: dict[str, int] = {}

    def add(self, row: dict) -> None:
        self.count += row["n"]
        self.states[row["state"]] += row["n"]
        self.oldest = min(filter(None, (self.oldest, row["oldest"])), default=None)
        if row["state"] != "held":
            self.next_due = min(filter(None, (self.next_due, row["next_due"])), default=None)
        if row["last_response"] is not None:
            self.responses[row["last_response"]] = self.responses.get(row["last_response"], 0) + row["n"]


class Queue:
    def __init__(self, clock, db: Database, log: AuditLog,
                 mx_of: Callable[[str], Coroutine[Any, Any, str | None]] | None = None):
        #: The MX host a destination resolves to, as delivery resolves it (its cached routes); the
        #: summary shows those known (destination → (when, host)) and never waits on DNS.
        self._mx_of = mx_of
        self._mx: dict[str, tuple[float, str]] = {}
        self._looking: set[str] = set()
        self._clock = clock
        self._db = db
        self._log = log
        self._summary: tuple[float, dict] | None = None

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    async def summary(self) -> dict:
        """The summary, computed at most every SUMMARY_MAX_AGE seconds (or after an action), with the MX known now."""
        now = self._clock.seconds()
        if self._summary is None or now - self._summary[0] >= SUMMARY_MAX_AGE:
            self._summary = (now, await self._compute_summary())
        return self._with_mx(self._summary[1])

    def _with_mx(self, summary: dict) -> dict:
        """
        Each destination's MX as far as known: one not yet known (or known over MX_SECONDS ago)
        is looked up for a later read, never waited for, so that slow DNS never slows the summary.
        """
        now = self._clock.seconds()
        shown = summary["by_destination"]
        for destination in (d["destination"] for d in shown):
            known = self._mx.get(destination)
            if self._mx_of is not None and destination not in self._looking and (
                    known is None or now - known[0] >= MX_SECONDS):
                self._look_up(destination, self._mx_of)
        return {**summary, "by_destination": [
            {**d, "mx": self._mx[d["destination"]][1] if d["destination"] in self._mx else None} for d in shown]}

    def _look_up(self, destination: str, mx_of: Callable[[str], Coroutine[Any, Any, str | None]]) -> None:
        def found(host: str | None) -> None:
            if host is not None:
                if len(self._mx) > 10_000:
                    self._mx.clear()
                self._mx[destination] = (self._clock.seconds(), host)

        self._looking.add(destination)
        looking = defer.ensureDeferred(mx_of(destination)).addCallback(found)
        looking.addErrback(lambda failure: log.failure("MX of {destination}", failure, destination=destination))
        looking.addBoth(lambda _: self._looking.discard(destination))

    async def _compute_summary(self) -> dict:
        now = self._now()
        read = await queue.summary(self._db, now)
        holds = {(h["kind"], h["value"]): h for h in read["holds"]}
        by_state = {state: _Group() for state in STATES}
        destinations: dict[str, _Group] = {}
        tenants: dict[str, _Group] = {}
        for row in read["destinations"]:
            by_state[row["state"]].add(row)
            destinations.setdefault(row["destination"], _Group()).add(row)
        for row in read["tenants"]:
            tenants.setdefault(str(row["tenant_id"]), _Group()).add(row)

        def fields(key: tuple[str, str], group: _Group) -> dict:
            hold = holds.get(key)
            top = sorted(group.responses.items(), key=lambda item: (-item[1], item[0]))[:3]
            return {
                "count": group.count, "states": group.states,
                "oldest_age_seconds": self._age(group.oldest, now),
                "next_attempt_at": timefmt.iso(group.next_due) if group.next_due else None,
                "top_responses": [{"code": _code(text), "text": text, "count": n} for text, n in top],
                "hold": None if hold is None else {
                    "reason": hold["reason"], "created_at": timefmt.iso(hold["created_at"]),
                    "created_by": hold["created_by"]},
            }

        def ranked(groups: dict[str, _Group]) -> list[tuple[str, _Group]]:
            return sorted(groups.items(), key=lambda kg: (-kg[1].count, kg[0]))[:queue.GROUPS_SHOWN]

        return {
            "object": "queue_summary", "generated_at": timefmt.iso(now),
            "by_state": [{"state": s, "count": by_state[s].count,
                          "oldest_age_seconds": self._age(by_state[s].oldest, now)} for s in STATES],
            "by_destination": [{"destination": d, "mx": None, **fields(("destination", d), g)}
                               for d, g in ranked(destinations)],
            "by_tenant": [{"tenant_id": t, "tenant_name": read["tenant_names"].get(t), **fields(("tenant", t), g)}
                          for t, g in ranked(tenants)],
            "holds": [{"id": str(h["id"]), "kind": h["kind"], "value": h["value"], "reason": h["reason"],
                       "created_at": timefmt.iso(h["created_at"]), "created_by": h["created_by"]}
                      for h in read["holds"]],
        }

    @staticmethod
    def _age(oldest, now) -> int | None:
        """Seconds since the oldest was queued (its retry window is 72 hours from then)."""
        if oldest is None:
            return None
        return max(0, int((now - (oldest - RETRY_WINDOW)).total_seconds()))

    async def deliveries(self, found: QueueFilter, page: Page) -> tuple[list[dict], bool]:
        return await queue.deliveries_page(self._db, found, page, self._now())

    async def _act(self, action: str, found: QueueFilter, by: str, change, **detail) -> int:
        """``change(txn)`` and its audit entry in one transaction; how many deliveries it touched."""
        now = self._clock.seconds()

        async def act(txn) -> int:
            count = await change(txn)
            await self._log.write_in(txn, now, by, f"queue.{action}", found.as_json(), count, detail)
            return count

        count = await self._db.run(f"queue {action}", act)
        self._summary = None
        return count

    async def retry(self, found: QueueFilter, by: str) -> int:
        return await self._act("retry", found, by, lambda txn: queue.retry(txn, found, self._now()))

    async def hold(self, found: QueueFilter, reason: str, by: str) -> int:
        return await self._act("hold", found, by, lambda txn: queue.hold(txn, found, reason, self._now(), by),
                               reason=reason)

    async def release(self, found: QueueFilter, by: str) -> int:
        return await self._act("release", found, by, lambda txn: queue.release(txn, self._clock, found))

    async def bounce(self, found: QueueFilter, by: str) -> int:
        return await self._act("bounce", found, by, lambda txn: queue.bounce(txn, self._clock, found))
