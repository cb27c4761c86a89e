"""
The delivery queue in the operator's hands (issue 31, docs/operations.md "The queue"): its
summary and list, and retry, hold, release and bounce, each written to the audit log with the
operator token's name, the filter and how many deliveries it touched.
"""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.audit import AuditLog
from mailsvc.domain.delivery import RETRY_WINDOW
from mailsvc.domain.paging import Page
from mailsvc.domain.queue import STATES, QueueFilter
from mailsvc.store import queue
from mailsvc.store.database import Database


def _code(response: str | None) -> int | None:
    head = (response or "")[:3]
    return int(head) if head.isdigit() else None


def last_response(text: str | None) -> dict | None:
    return None if text is None else {"code": _code(text), "text": text}


class Queue:
    def __init__(self, clock, db: Database, log: AuditLog):
        self._clock = clock
        self._db = db
        self._log = log

    def _now(self):
        return timefmt.from_seconds(self._clock.seconds())

    async def summary(self) -> dict:
        now = self._now()
        read = await queue.summary(self._db, now)
        holds = {(h["kind"], h["value"]): h for h in read["holds"]}
        by_state: dict = {}
        groups: dict[tuple, dict] = {}
        for row in read["groups"]:
            if row["destination"] is None and row["tenant_id"] is None:
                by_state[row["state"]] = row
                continue
            key = ("destination", row["destination"]) if row["destination"] is not None \
                else ("tenant", str(row["tenant_id"]))
            group = groups.setdefault(key, {"count": 0, "states": dict.fromkeys(STATES, 0),
                                            "oldest": None, "next_due": None, "top": []})
            if row["last_response"] is not None:
                group["top"].append(row)
                continue
            group["count"] += row["n"]
            group["states"][row["state"]] = row["n"]
            group["oldest"] = min(filter(None, (group["oldest"], row["oldest"])), default=None)
            group["next_due"] = min(filter(None, (group["next_due"], row["next_due"])), default=None)

        def fields(key, group) -> dict:
            hold = holds.get(key)
            return {
                "count": group["count"], "states": group["states"],
                "oldest_age_seconds": self._age(group["oldest"], now),
                "next_attempt_at": timefmt.iso(group["next_due"]) if group["next_due"] else None,
                "top_responses": [{"code": _code(r["last_response"]), "text": r["last_response"], "count": r["n"]}
                                  for r in sorted(group["top"], key=lambda r: -r["n"])[:3]],
                "hold": None if hold is None else {
                    "reason": hold["reason"], "created_at": timefmt.iso(hold["created_at"]),
                    "created_by": hold["created_by"]},
            }

        def ranked(kind):
            chosen = [(k, g) for k, g in groups.items() if k[0] == kind and g["count"]]
            return sorted(chosen, key=lambda kg: (-kg[1]["count"], kg[0][1]))[:queue.GROUPS_SHOWN]

        return {
            "object": "queue_summary", "generated_at": timefmt.iso(now),
            "by_state": [{"state": s, "count": by_state[s]["n"] if s in by_state else 0,
                          "oldest_age_seconds": self._age(by_state[s]["oldest"], now) if s in by_state else None}
                         for s in STATES],
            "by_destination": [{"destination": k[1], "mx": None, **fields(k, g)} for k, g in ranked("destination")],
            "by_tenant": [{"tenant_id": k[1], "tenant_name": read["tenant_names"].get(k[1]),
                           **fields(k, g)} for k, g in ranked("tenant")],
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

    async def retry(self, found: QueueFilter, by: str) -> int:
        count = await queue.retry(self._db, found, self._now())
        await self._log.write(by, "queue.retry", found.as_json(), count)
        return count

    async def hold(self, found: QueueFilter, reason: str, by: str) -> int:
        count = await queue.hold(self._db, found, reason, self._now(), by)
        await self._log.write(by, "queue.hold", found.as_json(), count, reason=reason)
        return count

    async def release(self, found: QueueFilter, by: str) -> int:
        count = await queue.release(self._db, self._clock, found)
        await self._log.write(by, "queue.release", found.as_json(), count)
        return count

    async def bounce(self, found: QueueFilter, by: str) -> int:
        count = await queue.bounce(self._db, self._clock, found)
        await self._log.write(by, "queue.bounce", found.as_json(), count)
        return count
