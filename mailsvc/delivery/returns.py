"""
What comes back to the return path: the inbound listener asks ``accepts`` about every
recipient (our VERP addresses, and postmaster/abuse/fbl of our return-path hosts, nothing
else) and hands each message to ``deliver``, which turns delivery status notifications into
hard bounces and feedback reports into complaints, written like every other outcome.

A report is matched to a delivery by the VERP address it was sent to, not by what it claims;
a DSN's recipient only picks, among the recipients of the same email, the one it is about
(several recipients at one domain share one transaction and so one return path). A report
sent to postmaster/abuse/fbl is matched through the enclosed original: its Return-Path or
Original-Mail-From (our VERP address when the provider kept it), then its Message-ID.
"""

from __future__ import annotations

from twisted.logger import Logger

from mailsvc.mail import reports, verp
from mailsvc.store import deliveries as store
from mailsvc.store.database import Database
from mailsvc.store.deliveries import Outcome

log = Logger()

#: Role addresses of a return-path host that take feedback reports.
ROLE_ADDRESSES = ("postmaster", "abuse", "fbl")


class ReturnPath:
    def __init__(self, clock, db: Database, verp_key: bytes):
        self._clock = clock
        self._db = db
        self._key = verp_key

    async def accepts(self, address: str) -> bool:
        local, _, host = address.rpartition("@")
        host = host.rstrip(".").lower()
        if not await self._is_return_path_host(host):
            return False
        if local.lower() in ROLE_ADDRESSES:
            return True
        return verp.delivery_of(self._key, address) is not None

    async def _is_return_path_host(self, host: str) -> bool:
        row = await self._db.fetchone(
            "SELECT 1 AS found FROM domains WHERE return_path || '.' || name = %s LIMIT 1", (host,),
            desc="return path host",
        )
        return row is not None

    async def deliver(self, mail_from: str, recipients: list[str], message: bytes) -> None:
        report = reports.parse(message)
        if report is None:
            log.info("return path: dropped a message from <{sender}> that is no DSN or feedback report",
                     sender=mail_from)
            return
        outcomes = []
        for recipient in recipients:
            named = await self._named(recipient, report)
            if named is None:
                log.info("return path: a report to {rcpt} matches no delivery; dropped", rcpt=recipient)
                continue
            if isinstance(report, reports.DeliveryReport):
                outcomes.extend(await self._bounces(named, report))
            elif report.is_complaint:
                outcomes.append(Outcome(
                    named["id"], named["tenant_id"], named["email_id"], named["recipient"], "complained",
                    {"source": "fbl"}, None, attempted=False))
            else:
                log.info("return path: a {kind} feedback report about {rcpt} changes nothing",
                         kind=report.feedback_type, rcpt=named["recipient"])
        if outcomes:
            await store.record(self._db, self._clock, outcomes)

    async def _named(self, recipient: str, report) -> dict | None:
        """The delivery a report names, through its recipient or the original it encloses."""
        candidates = [recipient]
        if isinstance(report, reports.FeedbackReport):
            candidates += [a for a in (report.original_return_path, report.original_mail_from) if a]
        for address in candidates:
            delivery_id = verp.delivery_of(self._key, address.strip("<>"))
            if delivery_id is not None:
                row = await store.find_for_report(self._db, delivery_id)
                if row is not None:
                    return row
        message_id = report.original_message_id
        if isinstance(report, reports.FeedbackReport) and message_id:
            return await self._by_message_id(recipient, message_id, report)
        return None

    async def _by_message_id(self, recipient: str, message_id: str, report) -> dict | None:
        """A report to postmaster@<return path host>: the email of that domain with that Message-ID."""
        host = recipient.rpartition("@")[2].lower()
        wanted = message_id.strip()
        if not wanted.startswith("<"):
            wanted = f"<{wanted}>"
        rows = await self._db.fetchall(
            "SELECT d.id, d.email_id, d.tenant_id, d.recipient, d.status FROM emails e"
            " JOIN domains dom ON dom.id = e.domain_id AND dom.return_path || '.' || dom.name = %s"
            " JOIN deliveries d ON d.email_id = e.id WHERE e.message_id = %s ORDER BY d.id",
            (host, wanted), desc="find reported email",
        )
        reported = {a.lower() for a in (*report.original_rcpt_to, *report.original_to)}
        for row in rows:
            if row["recipient"].lower() in reported:
                return row
        return rows[0] if len(rows) == 1 else None

    async def _bounces(self, named: dict, report: reports.DeliveryReport) -> list[Outcome]:
        failures = report.permanent_failures
        outcomes = []
        for failure in failures:
            row = None
            for address in (failure.original_recipient, failure.final_recipient):
                if address and address.lower() == named["recipient"].lower():
                    row = named
                    break
                if address:
                    row = await store.sibling(self._db, named["email_id"], address)
                    if row is not None:
                        break
            if row is None and len(failures) == 1:
                row = named  # forwarded or aliased: the address changed on the way
            if row is None:
                continue
            outcomes.append(Outcome(
                row["id"], row["tenant_id"], row["email_id"], row["recipient"], "bounced",
                {"type": "hard", "source": "dsn", "code": failure.smtp_code, "enhanced_code": failure.enhanced_code,
                 "message": failure.diagnostic_code or f"{failure.action} {failure.status}"},
                failure.diagnostic_code, attempted=False))
        return outcomes

