"""
Test addresses and reserved names: the recipients that simulate an outcome without
anything leaving the node, the one sender that may send to them without a verified domain,
and the recipient names a send is refused for because they can never be delivered.

``delivered@``, ``bounced@``, ``complained@`` and ``suppressed@`` the test domain (``resend.dev``
by default, ``mail.test_domain``), each with any ``+label``, are completed by the delivery worker
as their name says; any address of the test domain may be the sender of mail to them only.
docs/decisions.md, "Test addresses", "The test sender" and "Reserved recipient names".
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from mailsvc.domain.email import Submission
from mailsvc.domain.errors import Invalid, NotAllowed

#: What each test address's local part (before any ``+label``) completes as.
OUTCOMES = ("delivered", "bounced", "complained", "suppressed")
#: Names no mail can be delivered to: the hosted API's list, and RFC 2606 / RFC 6761.
RESERVED_DOMAINS = ("example.com", "example.net", "example.org", "test.com")
RESERVED_SUFFIXES = ("test", "example", "invalid", "localhost")
#: The reason a ``suppressed@`` test address is suppressed with (one of the four origins).
SUPPRESSED_REASON = "manual"


@attrs.frozen
class TestAddresses:
    """The test domain's rules; ``domain`` lower case, without a trailing dot."""

    __test__ = False  # not a pytest class

    domain: str = "resend.dev"

    def outcome(self, address: str) -> str | None:
        """What a recipient completes as (``OUTCOMES``), or None when it is no test address."""
        local, _, host = address.rpartition("@")
        if host.rstrip(".").lower() != self.domain:
            return None
        name = local.partition("+")[0].lower()
        return name if name in OUTCOMES else None

    def is_test(self, address: str) -> bool:
        return self.outcome(address) is not None

    def is_test_sender(self, domain_name: str) -> bool:
        return domain_name.rstrip(".").lower() == self.domain

    def not_a_sending_domain(self, name: str) -> str | None:
        """
        Why ``name`` (lower-case A-labels) cannot be an account's sending domain, or None: the
        test domain and the names under it are every account's test sender (to test addresses
        only); an account holding one would send as ``onboarding@`` it to anyone.
        """
        name = name.rstrip(".").lower()
        if name == self.domain:
            where = "is the test domain"
        elif name.endswith("." + self.domain):
            where = f"is under the test domain {self.domain}"
        else:
            return None
        return (f"the domain {name} {where}, from which every account sends to test addresses only;"
                " it cannot be a sending domain")

    def examples(self) -> str:
        return ", ".join(f"{name}@{self.domain}" for name in OUTCOMES[:3])

    def check_test_send(self, submission: Submission, domain_id: object) -> None:
        """
        A send from the test domain (no verified domain of the account's): every envelope
        recipient must be a test address (a mix is refused whole) and the key may not be
        restricted to a domain. Refusals are the 403 of an unverified domain, saying what to do.
        """
        if domain_id is not None:
            raise NotAllowed(
                f"This API key cannot send from the test domain {self.domain}: it is restricted to another domain.",
                reason="insufficient_scope")
        real = [r for r in submission.recipients if not self.is_test(r)]
        if real:
            raise NotAllowed(
                f"The {self.domain} domain is for testing only: it sends to the test addresses"
                f" ({self.examples()}, suppressed@{self.domain}, each with an optional +label) and"
                f" {real[0]} is not one. To send to anyone else, add and verify your domain.",
                reason="domain_not_verified")

    def unverified_hint(self) -> str:
        """Said after the 403 of an unverified sending domain: what to do."""
        return (f" To try sending without a domain, send from onboarding@{self.domain} to a test address"
                f" ({self.examples()}).")


def reserved(domain_name: str) -> bool:
    """A name no mail can be delivered to (RFC 2606, RFC 6761, the hosted API's list)."""
    name = domain_name.rstrip(".").lower()
    if any(name == d or name.endswith("." + d) for d in RESERVED_DOMAINS):
        return True
    return name.rpartition(".")[2] in RESERVED_SUFFIXES


def check_reserved(submission: Submission, tests: TestAddresses) -> None:
    """A recipient on a reserved name is 422, the message starting with its field."""
    for field, mailboxes in (("to", submission.to), ("cc", submission.cc), ("bcc", submission.bcc)):
        # A test domain set on a reserved name (a node of the tests) keeps its test addresses.
        found = next(_reserved_of(m.address for m in mailboxes if not tests.is_test(m.address)), None)
        if found is not None:
            raise Invalid(
                field,
                f"{field}: {found} is on a reserved domain that cannot receive mail; to test sending, use"
                f" a test address ({tests.examples()}, suppressed@{tests.domain}).")


def _reserved_of(addresses: Iterable[str]):
    return (a for a in addresses if reserved(a.rpartition("@")[2]))
