"""
What a dashboard shows beyond the API's own resources (``/dashboard/*``): the overview's
figures, an e-mail's timeline, the search of e-mails, a webhook's deliveries, a domain's
DMARC summary and live DNS answers, and the account's activity. docs/decisions.md, "Dashboard".
"""

from __future__ import annotations

from datetime import datetime

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.app.dashboard import OVERVIEW_PERIODS, Dashboard
from mailsvc.app.dashboard_reads import ACTIVITY_MOST, DELIVERIES_MOST, SEARCH_MOST, DashboardReads
from mailsvc.app.domains import Domains
from mailsvc.domain.audit import ACTIVITY_KINDS, activity_filter
from mailsvc.domain.webhooks import ATTEMPT_ERRORS
from mailsvc.http.dashboard.auth import id_or_not_found
from mailsvc.http.operation import (
    BOOL,
    INT,
    LIST_ONLY,
    NULLABLE_INT,
    NULLABLE_STR,
    NUMBER,
    OBJECT,
    PAGE,
    STR,
    UUID,
    Operation,
    obj,
)
from mailsvc.http.pagination import page_of
from mailsvc.http.router import SESSION, route
from mailsvc.http.schemas import DASHBOARD_USAGE, DMARC
from mailsvc.ids import parse_uuid

#: One of the reputation guard's lines (``Reputation.lines``): ``count`` of ``judged`` messages
#: (``rate``: null until some were judged) against ``limit``, once at least ``minimum`` were.
_GUARD_LINE = obj(("count", "judged", "rate", "limit", "minimum", "counts", "over"), count=INT, judged=INT,
                  rate={"type": ["number", "null"]}, limit=NUMBER, minimum=INT, counts=BOOL, over=BOOL)


def _event(row: dict) -> dict:
    data = row["data"]
    return {"id": str(row["id"]), "type": row["type"], "created_at": timefmt.resource(row["created_at"]),
            "recipient": data.get("to") if isinstance(data.get("to"), str) else None,
            "data": data}


def _arg(request, name: bytes) -> str | None:
    """A query argument's first value as text; None when absent or empty."""
    return (request.args.get(name) or [b""])[0].decode("utf-8", "replace") or None


class ReadsResource:
    def __init__(self, dashboard: Dashboard, reads: DashboardReads, domains: Domains):
        self._dashboard = dashboard
        self._reads = reads
        self._domains = domains

    @route("GET", "/dashboard/stats", access=SESSION,
           op=Operation("Sends and outcomes per day over 30 days (or `days`: 7 or 90), of the account or of the mail"
                        " sent from one `domain`, the quota used, and the reputation guard's lines as it judges the"
                        " account now (over its last `guard.days` days)",
                        query=(("days", {"type": "integer", "enum": list(OVERVIEW_PERIODS)}), ("domain", STR)),
                        responses={200: obj(
               ("object", "days", "usage", "guard"), object={"const": "stats"}, usage=DASHBOARD_USAGE,
               guard=obj(("days", "bounce", "complaint"), days=INT, bounce=_GUARD_LINE, complaint=_GUARD_LINE),
               days={"type": "array", "items": obj(("day", "sent", "delivered", "bounced", "complained"), day=STR,
                                                   sent=INT, delivered=INT, bounced=INT, complained=INT)})}))
    async def stats(self, request, caller: Caller):
        """Sends (recipients accepted) and outcomes per day over 30 days (or ``days``: 7 or 90), of
        the account or of the mail sent from one ``domain``, the quota used, and the reputation
        guard's lines: the account's own, whatever ``domain`` narrows the days to."""
        days = _arg(request, b"days") or "30"
        return {"object": "stats", "days": await self._dashboard.daily(
                    caller.tenant.id, int(days) if days.isdigit() else 0, _arg(request, b"domain")),
                "usage": await self._dashboard.usage(caller.tenant),
                "guard": await self._dashboard.guard(caller.tenant.id)}

    @route("GET", "/dashboard/emails/<email_id>/events", access=SESSION,
           op=Operation("An e-mail's events and its deliveries", responses={200: obj(
               ("object", "has_more", "data", "deliveries"), object={"const": "list"}, has_more={"const": False},
               data={"type": "array", "items": obj(("id", "type", "created_at", "data"), id=UUID, type=STR,
                                                   created_at=STR, recipient=NULLABLE_STR, data=OBJECT)},
               deliveries={"type": "array", "items": obj(("recipient", "status", "attempts"), recipient=STR, status=STR,
                                                         attempts=INT, last_response=NULLABLE_STR, updated_at=STR)})}))
    async def timeline(self, request, caller: Caller, email_id: str):
        rows, deliveries = await self._reads.email_timeline(caller.tenant.id, id_or_not_found(email_id, "Email"))
        return {
            "object": "list", "has_more": False, "data": [_event(row) for row in rows],
            "deliveries": [{"recipient": d["recipient"], "status": d["status"], "attempts": d["attempts"],
                            "last_response": d["last_response"],
                            "updated_at": timefmt.resource(d["updated_at"])} for d in deliveries],
        }

    @route("GET", "/dashboard/emails/<email_id>/particulars", access=SESSION,
           op=Operation("An e-mail's Message-ID, idempotency key, Inbox copy and source (as signed, or as submitted)",
                        responses={200: obj(("object", "id", "message_id"), object={"const": "email_particulars"},
                                            id=STR, message_id=STR, idempotency_key=NULLABLE_STR, inbox_id=NULLABLE_STR,
                                            source=NULLABLE_STR, source_signed=BOOL)}))
    async def particulars(self, request, caller: Caller, email_id: str):
        """What an e-mail's page shows beside its resource: Message-ID, idempotency key, its
        Inbox copy, and its source (as signed in the Inbox, or as submitted over SMTP)."""
        found = await self._reads.email_particulars(caller.tenant.id, parse_uuid(email_id))
        return {"object": "email_particulars", "id": email_id, **found}

    @route("GET", "/dashboard/search/emails", access=SESSION,
           op=Operation("The e-mails by text (address, subject or id) and status, a page at a time",
                        query=(("q", STR), ("status", STR), ("since", STR), ("until", STR), ("domain", STR), *PAGE),
                        responses={200: {**LIST_ONLY, "properties": {**LIST_ONLY["properties"], "data": {
                            "type": "array", "items": obj(
                                ("id", "from", "to", "subject", "created_at"), id=UUID, **{"from": STR},
                                to={"type": "array", "items": STR}, subject=NULLABLE_STR,
                                last_event=NULLABLE_STR, created_at=STR)}}}}))
    async def search(self, request, caller: Caller):
        """The e-mails, newest first, by text (subject, sender, recipient or id), last event
        (``status``), time made (``since``, ``until``: ISO 8601 instants, ``until`` left out) and
        sending domain (``domain``), a page at a time (``limit``, ``after`` and ``before`` as the
        API's lists)."""
        text = (request.args.get(b"q") or [b""])[0].decode("utf-8", "replace").strip()[:200]
        status, since, until, domain = (_arg(request, name) for name in (b"status", b"since", b"until", b"domain"))
        rows, more = await self._reads.search_emails(caller.tenant.id, text, status, page_of(request.args, SEARCH_MOST),
                                                     since, until, domain)
        return {"object": "list", "has_more": more, "data": [{
            "id": str(r["id"]), "from": r["sender"], "to": r["recipients"].get("to", []), "subject": r["subject"],
            "last_event": r["last_event"], "created_at": timefmt.resource(r["created_at"]),
        } for r in rows]}

    @route("GET", "/dashboard/webhooks/<webhook_id>/deliveries", access=SESSION,
           op=Operation(
               "A webhook's deliveries with their payloads and every attempt, newest first, a page at a time (50"
               " unless `limit` says), and the last 24 hours' outcomes",
               query=PAGE, responses={200: {
                   **LIST_ONLY, "properties": {**LIST_ONLY["properties"], "has_more": BOOL, "last_24_hours": obj(
                       ("delivered", "attempted", "succeeded", "made"), delivered=INT, attempted=INT, succeeded=INT,
                       made=INT), "data": {
                       "type": "array", "items": obj(
                           ("event_id", "event", "state", "attempts", "attempts_made"), event_id=UUID, event=STR,
                           state=STR, attempts=INT, response_status=NULLABLE_INT, response=STR,
                           last_attempt_at={"type": ["string", "null"]}, next_attempt_at={"type": ["string", "null"]},
                           in_flight=BOOL, created_at=STR, payload=STR,
                           attempts_made={"type": "array", "items": obj(
                               ("attempt", "at", "status", "duration_ms", "error", "detail", "response"),
                               attempt=INT, at=STR, status=NULLABLE_INT, duration_ms=INT,
                               error={"enum": [*ATTEMPT_ERRORS, None]}, detail=STR, response=STR)})}}}}))
    async def webhook_deliveries(self, request, caller: Caller, webhook_id: str):
        """A page of the deliveries (``limit``, ``after`` and ``before`` as the API's lists, an
        event's id the cursor), each with its last attempt's answer (as much as is kept), every
        attempt (time, status, duration, the answer's first 2 KB, what went wrong), when the next
        is due, and its payload as sent; and of the last 24 hours, the deliveries delivered and
        attempted and the attempts that succeeded and were made."""
        rows, more, day = await self._reads.webhook_deliveries(
            caller.tenant.id, id_or_not_found(webhook_id, "Webhook"), page_of(request.args, DELIVERIES_MOST))
        now = timefmt.from_seconds(self._reads.seconds())
        return {"object": "list", "has_more": more, "last_24_hours": day, "data": [{
            "event_id": str(r["event_id"]), "event": r["type"], "state": r["state"], "attempts": r["attempts"],
            "response_status": r["last_status"], "response": r["last_response"] or "",
            "last_attempt_at": timefmt.resource(r["last_attempt_at"]),
            "next_attempt_at": timefmt.resource(r["due_at"]) if r["state"] == "pending" else None,
            "in_flight": r["claimed_until"] is not None and r["claimed_until"] > now,
            "created_at": timefmt.resource(r["created_at"]), "payload": r["payload"].decode("utf-8"),
            "attempts_made": [{**a, "at": timefmt.resource(datetime.fromisoformat(a["at"]))}
                              for a in r["attempts_made"]],
        } for r in rows]}

    @route("GET", "/dashboard/activity", access=SESSION,
           op=Operation(
               "The account's activity, newest first, a page at a time (50 unless `limit` says): who made and revoked"
               " keys, added and removed domains, invited and removed members, signed in; a domain's checks",
               query=(("kind", {"enum": list(ACTIVITY_KINDS)}), ("member", UUID), *PAGE),
               responses={200: {**LIST_ONLY, "properties": {**LIST_ONLY["properties"], "has_more": BOOL, "data": {
                   "type": "array", "items": obj(
                       ("id", "at", "action", "actor", "detail"), id=UUID, at=STR, action=STR, detail=OBJECT,
                       actor=obj(("type",), type={"enum": ["user", "api_key", "operator", "system"]},
                                 id=STR, email=NULLABLE_STR, name=NULLABLE_STR, removed=BOOL))}}}}))
    async def activity(self, request, caller: Caller):
        """
        A page (``limit``, ``after`` and ``before`` as the API's lists) of what was done on the
        account: the audit log's entries about it and its members' sign-ins; of one ``kind``
        of action, by one ``member`` (a user's id). Where a sign-in came from is an owner's to see.
        """
        found = activity_filter(_arg(request, b"kind"), _arg(request, b"member"))
        rows, more = await self._reads.activity(caller.tenant.id, page_of(request.args, ACTIVITY_MOST), found,
                                                caller.role == "owner")
        return {"object": "list", "has_more": more, "data": [
            {**row, "id": str(row["id"]), "at": timefmt.resource(row["at"])} for row in rows]}

    @route("GET", "/dashboard/domains/<domain_id>/dmarc", access=SESSION,
           op=Operation("The domain's DMARC aggregate reports over the last 30 days",
                        responses={200: DMARC}))
    async def dmarc(self, request, caller: Caller, domain_id: str):
        """The DMARC aggregate reports' summary of the last 30 days (as GET /domains/{id}/dmarc)."""
        return await self._domains.dmarc(caller.tenant.id, id_or_not_found(domain_id, "Domain"), 30)

    @route("GET", "/dashboard/domains/<domain_id>/dns", access=SESSION,
           op=Operation(
               "A domain's records, each with its stored status and what DNS answers now, and whether they can be "
               "published (not while the node's mail.hostname is localhost or has no dot: the reason says so)",
               responses={200: {**LIST_ONLY,
                                "required": [*LIST_ONLY["required"], "records_publishable", "unpublishable_reason"],
                         "properties": {**LIST_ONLY["properties"], "records_publishable": BOOL,
                                        "unpublishable_reason": NULLABLE_STR, "data": {"type": "array", "items": obj(
                                            ("record", "name", "type", "value", "status"), record=STR, name=STR,
                                            type=STR, value=STR, priority=NULLABLE_INT, status=STR,
                                            live={"enum": ["match", "mismatch", "temporary"]})}}}}))
    async def live_dns(self, request, caller: Caller, domain_id: str):
        """
        Each record with its stored status and what DNS answers now (match, mismatch, temporary),
        and whether the records can be published at all (not while the node's mail.hostname is
        localhost or has no dot).
        """
        view, live = await self._domains.live_records(caller.tenant.id, id_or_not_found(domain_id, "Domain"))
        reason = self._domains.unpublishable_reason()
        return {"object": "list", "has_more": False,
                "records_publishable": reason is None, "unpublishable_reason": reason, "data": [
            {"record": r.record, "name": r.name, "type": r.type, "value": r.value, "priority": r.priority,
             "status": status, "live": found}
            for (r, status), found in zip(view.records, live, strict=True)
        ]}
