"""
What comes back to the return path: the inbound listener asks ``accepts`` about each recipient
(our VERP addresses, and postmaster/abuse/fbl/dmarc of our return-path hosts, nothing else) and
hands each message to ``deliver``: DSNs become hard bounces and feedback reports complaints,
written like every other outcome; DMARC aggregate reports are stored for the host's domain.

Anyone can send here, so a report is matched by what we made (a VERP address whose MAC checks,
or our own Message-ID), never by what it claims; its own recipient fields only pick among the
deliveries so found, and one naming none or several of them is dropped. A report about mail
sent through the smarthost carries ``source: relay`` (docs/decisions.md, "Return path matching").
"""

from __future__ import annotations

import uuid

import attrs
from twisted.logger import Logger

from mailsvc import ids
from mailsvc.app import suppressions
from mailsvc.domain.domains import DMARC_REPORTS_LOCAL
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.mail import dmarc, reports, verp
from mailsvc.store import deliverability as reports_store
from mailsvc.store import deliveries as outcomes_store
from mailsvc.store import returns as store
from mailsvc.store.database import Database
from mailsvc.store.deliveries import Outcome

log = Logger()

#: Role addresses of a return-path host that take feedback reports.
ROLE_ADDRESSES = ("postmaster", "abuse", "fbl")


class ReturnPath:
    def __init__(self, clock, db: Database, verp_key: bytes, max_dmarc_xml: int = 20 * 1024 * 1024,
                 tests: TestAddresses | None = None):
        self._clock = clock
        #: Reports about test addresses (made by ``delivery.door``) count apart from the guard.
        self._tests = tests or TestAddresses()
        self._db = db
        self._key = verp_key
        self._max_dmarc_xml = max_dmarc_xml

    async def accepts(self, address: str) -> bool:
        local, _, host = address.rpartition("@")
        host = host.rstrip(".").lower()
        if not await store.is_return_path_host(self._db, host):
            return False
        if local.lower() in (*ROLE_ADDRESSES, DMARC_REPORTS_LOCAL):
            return True
        return verp.delivery_of(self._key, address) is not None

    async def deliver(self, mail_from: str, recipients: list[str], message: bytes) -> None:
        aggregate = [r for r in recipients if r.rpartition("@")[0].lower() == DMARC_REPORTS_LOCAL]
        if aggregate:
            await self._dmarc(aggregate, message)
            recipients = [r for r in recipients if r not in aggregate]
            if not recipients:
                return
        report = reports.parse(message)
        if report is None:
            log.info("return path: dropped a message from <{sender}> that is no DSN or feedback report",
                     sender=mail_from)
            return
        # One outcome per delivery, however often the message names it (recipients, blocks).
        outcomes: dict[uuid.UUID, Outcome] = {}
        for recipient in recipients:
            if isinstance(report, reports.DeliveryReport):
                found = await self._bounces(recipient, report)
            elif report.is_complaint:
                found = await self._complaints(recipient, report)
            else:
                log.info("return path: a {kind} feedback report to {rcpt} changes nothing",
                         kind=report.feedback_type, rcpt=recipient)
                continue
            for outcome in found:
                outcomes.setdefault(outcome.delivery_id, outcome)
        if outcomes:
            relayed = await store.relayed(self._db, [(o.email_id, o.delivery_id) for o in outcomes.values()])
            await outcomes_store.record(self._db, self._clock, [
                attrs.evolve(o, event={**o.event, "source": "relay"} if o.delivery_id in relayed else o.event,
                             guarded=not self._tests.is_test(o.recipient))
                for o in outcomes.values()], suppress=suppressions.add_many)

    async def _dmarc(self, recipients: list[str], message: bytes) -> None:
        """
        DMARC aggregate reports to dmarc@<return-path host>: stored for the domain of that host,
        and only about that domain (a report's policy domain must be the domain or under it).
        """
        for recipient in recipients:
            host = recipient.rpartition("@")[2].rstrip(".").lower()
            domain = await reports_store.domain_of_return_path_host(self._db, host)
            if domain is None:
                continue
            try:
                parsed = [dmarc.parse(d) for d in dmarc.documents(message, self._max_dmarc_xml)]
            except dmarc.ReportRefused as e:
                log.info("return path: a DMARC report to {rcpt} was refused: {why}", rcpt=recipient, why=str(e))
                return
            for report in parsed:
                if report.domain != domain["name"] and not report.domain.endswith("." + domain["name"]):
                    log.info("return path: a DMARC report about {other} sent to {rcpt}; dropped",
                             other=report.domain, rcpt=recipient)
                    continue
                await reports_store.save_dmarc_report(self._db, ids.uuid7(self._clock.seconds()), domain["id"], report)

    async def _bounces(self, recipient: str, report: reports.DeliveryReport) -> list[Outcome]:
        named, deliveries = await self._named_by_verp(recipient)
        if named is None:
            log.info("return path: a DSN to {rcpt} matches no delivery; dropped", rcpt=recipient)
            return []
        return [
            Outcome(row["id"], row["tenant_id"], row["email_id"], row["recipient"], "bounced",
                    {"type": "hard", "source": "dsn", "code": failure.smtp_code,
                     "enhanced_code": failure.enhanced_code,
                     "message": failure.diagnostic_code or f"{failure.action} {failure.status}"},
                    failure.diagnostic_code, attempted=False)
            for row, failure in bounced(named, deliveries, report.permanent_failures)
        ]

    async def _complaints(self, recipient: str, report: reports.FeedbackReport) -> list[Outcome]:
        candidates = await self._complained_about(recipient, report)
        row = complained(candidates, report)
        if row is None:
            log.info("return path: a feedback report to {rcpt} names {count} deliveries and cannot tell which"
                     " one complained; dropped", rcpt=recipient, count=len(candidates))
            return []
        return [Outcome(row["id"], row["tenant_id"], row["email_id"], row["recipient"], "complained",
                        {"source": "fbl"}, None, attempted=False)]

    async def _complained_about(self, recipient: str, report: reports.FeedbackReport) -> list[dict]:
        """The deliveries a feedback report can be about, by our VERP address, else our Message-ID."""
        for address in (recipient, report.original_return_path, report.original_mail_from):
            if not address:
                continue
            named, deliveries = await self._named_by_verp(address.strip("<>"))
            if named is not None:
                return shared_return_path(named, deliveries)
        if not report.original_message_id:
            return []
        host = recipient.rpartition("@")[2].rstrip(".").lower()
        wanted = report.original_message_id.strip()
        if not wanted.startswith("<"):
            wanted = f"<{wanted}>"
        return await store.deliveries_by_message_id(self._db, host, wanted)

    async def _named_by_verp(self, address: str) -> tuple[dict | None, list[dict]]:
        """The delivery a VERP address names and every delivery of its email; None when none."""
        delivery_id = verp.delivery_of(self._key, address)
        if delivery_id is None:
            return None, []
        deliveries = await store.deliveries_of_the_email_of(self._db, delivery_id)
        named = next((d for d in deliveries if d["id"] == delivery_id), None)
        return named, deliveries


def _recipient_domain(delivery: dict) -> str:
    return delivery["recipient"].rpartition("@")[2].lower()


def shared_return_path(named: dict, deliveries: list[dict]) -> list[dict]:
    """
    The deliveries that may have gone out under ``named``'s VERP address: the delivery worker
    sends an email's deliveries to one recipient domain in one transaction, with the first one's
    VERP address as its sender, except a delivery with a message of its own, sent alone.
    """
    if named["own_message"]:
        return [named]
    return [d for d in deliveries if not d["own_message"] and _recipient_domain(d) == _recipient_domain(named)]


def complained(candidates: list[dict], report: reports.FeedbackReport) -> dict | None:
    """
    The one delivery of ``candidates`` (those a feedback report was proven to be about) that
    complained: the only one, else the one the report names, by its Original-Rcpt-To, else by
    the enclosed original's Delivered-To / X-Original-To, else by its To and Cc. A step naming
    none of them gives way to the next; one naming several cannot tell: None.
    """
    if len(candidates) == 1:
        return candidates[0]
    by_address: dict[str, list[dict]] = {}
    for row in candidates:
        by_address.setdefault(row["recipient"].lower(), []).append(row)
    for named in (report.original_rcpt_to, report.original_delivered_to, report.original_to + report.original_cc):
        picked = {row["id"]: row for address in named for row in by_address.get(address.lower(), ())}
        if len(picked) == 1:
            return next(iter(picked.values()))
        if picked:
            return None
    return None


def bounced(named: dict, deliveries: list[dict],
            failures: tuple[reports.DsnRecipient, ...]) -> list[tuple[dict, reports.DsnRecipient]]:
    """
    (delivery, failure) for each permanent failure of a DSN sent to ``named``'s VERP address
    (``deliveries``: all of its email's). A failure names a delivery that shared the return path;
    one naming an address we never sent to (forwarded or aliased on the way) is about ``named``
    only when it is the one failure and ``named`` went out alone: then there is no one else.
    """
    mates = shared_return_path(named, deliveries)
    by_address = {d["recipient"].lower(): d for d in mates}
    ours = {d["recipient"].lower() for d in deliveries}
    found = []
    for failure in failures:
        addresses = [a.lower() for a in (failure.original_recipient, failure.final_recipient) if a]
        row = next((by_address[a] for a in addresses if a in by_address), None)
        if row is None and len(failures) == 1 and len(mates) == 1 and ours.isdisjoint(addresses):
            row = named
        if row is not None:
            found.append((row, failure))
    return found
