"""
The door: where mail that must not leave the node stops, once signed as it would have left, and
is kept in the account's development inbox (the last ``inbox_size``). Mail of a capture-mode
account is delivered to nobody; mail to a test address completes as the address says, through
the same paths as real mail: ``delivered@`` is delivered, ``bounced@`` gets a DSN and
``complained@`` a feedback report, sent to the VERP return path and handled as any report.
None of it counts toward the reputation guard (``Outcome.guarded``).
"""

from __future__ import annotations

import email.utils
from collections.abc import Awaitable, Callable

from mailsvc import timefmt
from mailsvc.app import suppressions
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.ids import uuid7
from mailsvc.mail import dkim, simulated
from mailsvc.store import deliveries as store
from mailsvc.store import inbox
from mailsvc.store.database import Database
from mailsvc.store.deliveries import ClaimedDelivery, Outcome
from mailsvc.store.delivery_contents import EmailContent

#: Messages the inbox keeps per account.
INBOX_SIZE = 1000
#: The return-path host of the test sender's mail (it never leaves, so it is never looked up).
TEST_RETURN_PATH = "bounces"

#: A report reaching the return path: (envelope sender, recipients, message).
Reports = Callable[[str, list[str], bytes], Awaitable[None]]


class Door:
    def __init__(self, clock, db: Database, tests: TestAddresses, test_signer: dkim.Signer, host: str,
                 reports: Reports, inbox_size: int = INBOX_SIZE):
        self._clock = clock
        self._db = db
        self._tests = tests
        self.test_signer = test_signer
        self._host = host
        self._reports = reports
        self._inbox_size = inbox_size

    @property
    def test_domain(self) -> str:
        return self._tests.domain

    def outcome(self, recipient: str) -> str | None:
        """What a test address completes as; None for any other recipient."""
        return self._tests.outcome(recipient)

    def is_test_sender(self, sender: str) -> bool:
        """Whether an email's From is the test sender's (its ``domain_id`` is NULL)."""
        address = email.utils.parseaddr(sender)[1]
        return self._tests.is_test_sender(address.rpartition("@")[2])

    def return_path_host(self) -> str:
        return f"{TEST_RETURN_PATH}.{self._tests.domain}"

    async def stop(self, group: list[ClaimedDelivery], email_row: EmailContent, message: bytes, return_path: str,
                   token) -> list[Outcome]:
        """
        Stop ``group`` (signed ``message``) here; the outcomes the worker writes with the others.
        A test address is a transaction of its own (a group of one).
        """
        now = self._clock.seconds()
        first = group[0]
        kind = self.outcome(first.recipient)
        simulated_key = email_row.domain_id is None
        entry = inbox.entry(
            uuid7(now), first.tenant_id, first.email_id, [w.recipient for w in group],
            "captured" if kind is None else kind, email_row.sender, email_row.subject,
            email_row.domain or self._tests.domain, return_path, simulated_key, message,
            timefmt.from_seconds(now))
        await inbox.keep(self._db, [entry], self._inbox_size)
        if kind is None:
            return [_delivered(w, token, "capture", "250 kept in the development inbox by capture mode")
                    for w in group]
        response = f"250 test address: {kind} (nothing left the node)"
        at = timefmt.from_seconds(now)
        if kind == "bounced":
            await self._reports(f"MAILER-DAEMON@{self._host}", [return_path],
                                simulated.bounce(self._host, return_path, first.recipient, message, at))
            return []
        if kind == "complained":
            # The complaint applies to delivered mail: the delivery is written first.
            await store.record(self._db, self._clock, [_delivered(first, token, "test", response)],
                               suppress=suppressions.add_many)
            await self._reports(f"MAILER-DAEMON@{self._host}", [return_path],
                                simulated.complaint(self._host, return_path, first.recipient, message, at))
            return []
        # delivered@; suppressed@ is suppressed by the accept path and never comes here.
        return [_delivered(first, token, "test", response)]


def _delivered(w: ClaimedDelivery, token, transport: str, response: str) -> Outcome:
    return Outcome(w.id, w.tenant_id, w.email_id, w.recipient, "delivered",
                   {"transport": transport, "remote_host": None, "response": response}, response,
                   claim=token, guarded=False)
