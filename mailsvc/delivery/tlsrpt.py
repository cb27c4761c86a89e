"""
TLS reporting (RFC 8460): every SMTP session under a policy (MTA-STS or DANE) is counted per
recipient domain, UTC day, policy, MX host and result (``success`` or an RFC 8460 result
type) in memory, written to PostgreSQL by the node's flush step (shared by every node), and
once a day is over each domain's counts become one JSON report sent to the ``rua`` of its
``_smtp._tls`` TXT record: https: POSTed gzip-compressed through the one gate; mailto: as an
RFC 8460 §3 e-mail (``multipart/report; report-type=tlsrpt``, the gzip report attached) handed
to ``mailer``, which compose makes the one accept path for the operator's configured account
(``tlsrpt.account``, from ``tlsrpt.from``): DKIM-signed and delivered by the MTA like any mail.
"""

from __future__ import annotations

import email.policy
import gzip
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime
from urllib.parse import unquote

from twisted.logger import Logger

from mailsvc.domain import mtasts
from mailsvc.store import deliverability as store
from mailsvc.store.database import Database

log = Logger()

FLUSH_SECONDS = 30
REPORT_TIMEOUT = 30


def report_json(organization: str, contact: str, domain: str, day, rows: list[dict]) -> dict:
    """The RFC 8460 §4 report of one domain and day from its counts."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    end = start + timedelta(days=1) - timedelta(seconds=1)
    policies: dict[tuple[str, str], dict] = {}
    for row in rows:
        key = (row["policy_type"], row["policy"])
        entry = policies.setdefault(key, {
            "policy": {"policy-type": row["policy_type"], "policy-string": row["policy"].split("\n") if row["policy"]
                       else [], "policy-domain": domain},
            "summary": {"total-successful-session-count": 0, "total-failure-session-count": 0},
            "failure-details": [],
        })
        if row["result"] == "success":
            entry["summary"]["total-successful-session-count"] += row["count"]
        else:
            entry["summary"]["total-failure-session-count"] += row["count"]
            entry["failure-details"].append({"result-type": row["result"], "receiving-mx-hostname": row["mx_host"],
                                             "failed-session-count": row["count"]})
    return {
        "organization-name": organization,
        "date-range": {"start-datetime": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "end-datetime": end.strftime("%Y-%m-%dT%H:%M:%SZ")},
        "contact-info": contact,
        "report-id": f"{start:%Y%m%d}.{domain}@{organization}",
        "policies": [{**v, "failure-details": v["failure-details"] or []} for v in policies.values()],
    }


def mailto_addresses(uri: str) -> list[str]:
    """The addresses of a ``mailto:`` URI (RFC 6068: comma-separated, percent-encoded; no query)."""
    to = uri[len("mailto:"):].split("?", 1)[0]
    return [a for a in (unquote(part).strip() for part in to.split(",")) if "@" in a and "\n" not in a]


def report_message(sender: str, to: list[str], organization: str, domain: str, report: dict, body: bytes,
                   now: datetime) -> bytes:
    """
    The RFC 8460 §3 report e-mail: ``TLS-Report-Domain`` and ``TLS-Report-Submitter`` headers,
    the subject of §3 ("Report Domain: ... Submitter: ... Report-ID: <...>"), a
    ``multipart/report; report-type="tlsrpt"`` body whose first part says what it is in words and
    whose second is the gzip JSON (``application/tlsrpt+gzip``) named
    ``submitter!policy-domain!begin!end.json.gz`` (the range in Unix seconds).
    """
    begin = int(datetime.strptime(report["date-range"]["start-datetime"], "%Y-%m-%dT%H:%M:%SZ")
                .replace(tzinfo=UTC).timestamp())
    end = int(datetime.strptime(report["date-range"]["end-datetime"], "%Y-%m-%dT%H:%M:%SZ")
              .replace(tzinfo=UTC).timestamp()) + 1
    message = EmailMessage(policy=email.policy.SMTP)
    message["From"] = sender
    message["To"] = ", ".join(to)
    message["Subject"] = f"Report Domain: {domain} Submitter: {organization} Report-ID: <{report['report-id']}>"
    message["Date"] = format_datetime(now)
    message["TLS-Report-Domain"] = domain
    message["TLS-Report-Submitter"] = organization
    message["MIME-Version"] = "1.0"
    message.set_content(f"This is an aggregate TLS report (RFC 8460) from {organization} for {domain}, "
                        f"{report['date-range']['start-datetime']} to {report['date-range']['end-datetime']}.\n")
    message.add_attachment(body, maintype="application", subtype="tlsrpt+gzip",
                           filename=f"{organization}!{domain}!{begin}!{end}.json.gz")
    message.replace_header("Content-Type", 'multipart/report; report-type="tlsrpt"; '
                           f'boundary="{message.get_boundary()}"')
    return message.as_bytes()


class TlsReports:
    def __init__(self, clock, db: Database, resolver=None, fetcher=None, organization: str = "mailsvc",
                 mailer: Callable[[list[str], bytes], Awaitable[None]] | None = None, mail_from: str = ""):
        self._clock = clock
        self._db = db
        self._resolver = resolver
        self._fetcher = fetcher
        self._organization = organization
        #: Sends a report e-mail to mailto: rua addresses (the accept path); None: not sent.
        self._mailer = mailer
        self._mail_from = mail_from
        self._counts: Counter = Counter()

    def count(self, auth, result: str) -> None:
        day = datetime.fromtimestamp(self._clock.seconds(), UTC).date()
        self._counts[(auth.domain, day, auth.report_type, auth.policy_text, auth.host, result)] += 1

    @property
    def pending(self) -> dict:
        return dict(self._counts)

    async def flush(self) -> None:
        counts, self._counts = self._counts, Counter()
        if not counts:
            return
        try:
            await store.add_tls_counts(self._db, dict(counts))
        except Exception:
            self._counts.update(counts)
            raise

    async def send_due(self) -> None:
        """Each domain's report of every finished day not reported yet (https, then mailto rua)."""
        today = datetime.fromtimestamp(self._clock.seconds(), UTC).date()
        for due in await store.unreported_tls_days(self._db, today):
            outcome = await self._send(due["domain"], due["day"])
            await store.tls_report_sent(self._db, due["domain"], due["day"], outcome)

    async def _send(self, domain: str, day) -> str:
        if self._resolver is None or self._fetcher is None:
            return "no_transport"
        try:
            answers, _, _ = await self._resolver.lookupText(f"_smtp._tls.{domain}", timeout=(2, 5))
            texts = [b"".join(a.payload.data).decode("utf-8", "replace") for a in answers if a.type == 16]
        except Exception:
            return "no_record"
        rua = mtasts.tlsrpt_destinations(texts)
        destinations = [d for d in rua if d.startswith("https:")]
        mailto = [a for d in rua if d.startswith("mailto:") for a in mailto_addresses(d)]
        if not destinations and not (mailto and self._mailer is not None):
            return "no_usable_rua" if mailto else "no_https_rua"
        report = report_json(self._organization, f"postmaster@{self._organization}", domain, day,
                             await store.tls_counts(self._db, domain, day))
        body = gzip.compress(json.dumps(report).encode("utf-8"))
        for url in destinations:
            try:
                fetched = await self._fetcher.post(url, body, {"Content-Type": "application/tlsrpt+gzip"}, 4096,
                                                   REPORT_TIMEOUT)
                if 200 <= fetched.status < 300:
                    return "sent"
            except Exception as e:
                log.info("TLS report for {domain} to {url} failed: {why}", domain=domain, url=url, why=str(e))
        if mailto and self._mailer is not None:
            now = datetime.fromtimestamp(self._clock.seconds(), UTC)
            try:
                await self._mailer(mailto, report_message(self._mail_from, mailto, self._organization, domain,
                                                          report, body, now))
                return "mailed"
            except Exception as e:
                log.info("TLS report for {domain} to {to} was not accepted: {why}", domain=domain, to=mailto,
                         why=str(e))
        return "failed"
