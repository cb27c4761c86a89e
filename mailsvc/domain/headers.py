"""
The header rules of a message: the one reading of a mailbox (``from``, ``reply_to``, the
recipients of a request, a message's ``From`` and ``Sender``), and the custom headers a client
may set, never one the platform writes itself.
"""

from __future__ import annotations

import re
from email import _header_value_parser as _address_parser
from email import errors as email_errors
from email.headerregistry import Address
from typing import Any

import attrs

from mailsvc.domain.addresses import normalize_address
from mailsvc.domain.errors import Invalid
from mailsvc.domain.text import holds_control, refuse_control

MAX_RECIPIENTS = 50
#: Counted before any header is read, so that a huge object costs nothing to refuse.
MAX_HEADERS = 50
#: Set by the platform on the broadcast stream (RFC 8058): a client may not set them there.
LIST_UNSUBSCRIBE_HEADERS = frozenset({"list-unsubscribe", "list-unsubscribe-post"})
_FIELD_NAME = re.compile(r"^[\x21-\x39\x3b-\x7e]{1,76}$")

#: Headers the platform writes itself; a client may not set them (docs/contract/main-api.md, "Sending"),
#: nor any other ``Resent-*`` field (a resending identity nothing checks, as over SMTP).
MANAGED_HEADERS = frozenset(
    name.lower()
    for name in (
        "From", "To", "Cc", "Bcc", "Subject", "Message-ID", "Date", "DKIM-Signature", "Return-Path",
        "Reply-To", "Sender", "MIME-Version", "Content-Type", "Content-Transfer-Encoding",
        "Content-Disposition", "Received", "Resent-From", "Resent-To", "Resent-Cc", "Resent-Bcc",
        "Resent-Date", "Resent-Message-ID", "Resent-Sender", "ARC-Seal", "ARC-Message-Signature",
        "ARC-Authentication-Results", "Authentication-Results",
    )
)


#: Characters for which ``Address`` quotes a display name, and a local part (email package).
_NEEDS_QUOTING = frozenset('()<>@,:;.\\"[]')
_LOCAL_NEEDS_QUOTING = frozenset('()<>@,:;\\"[] \t')


@attrs.frozen
class Mailbox:
    display_name: str
    address: str  # local@domain, the domain in lower-case A-labels

    @property
    def domain(self) -> str:
        return self.address.rpartition("@")[2]

    def __str__(self) -> str:
        if not self.display_name:
            return self.address
        local, _, domain = self.address.rpartition("@")
        if _NEEDS_QUOTING.isdisjoint(self.display_name) and _LOCAL_NEEDS_QUOTING.isdisjoint(local):
            return f"{self.display_name} <{self.address}>"  # what Address writes for these
        return str(Address(display_name=self.display_name, username=local, domain=domain))


_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
#: The common shapes, read without the email package's parser (which gives the same result
#: for them, more slowly): ``local@domain`` and ``Name Words <local@domain>`` with a dot-atom
#: local part and an ASCII host name; the words of the name are atoms, any non-ASCII allowed.
_WORD = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\x80-\U0010ffff-]+"
_SIMPLE_MAILBOX = re.compile(
    rf"(?:({_WORD}(?: {_WORD})*) <)?"
    rf"({_ATOM}(?:\.{_ATOM})*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?\.)+"
    r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?(1)>)\Z"
)


def simple_mailbox(text: str) -> Mailbox | None:
    """``text`` read without the email package when it has one of the common shapes, else None."""
    found = _SIMPLE_MAILBOX.match(text)
    if found is None or "=?" in text or "--" in text:  # encoded words; IDNA's hyphen rules
        return None
    name, address = found.groups()
    if name is not None and not name.isprintable():
        return None
    local, _, domain = address.rpartition("@")
    if len(local) > 64 or len(domain) > 253 or len(address) > 254:
        return None
    return Mailbox(name or "", f"{local}@{domain.lower()}")


def parse_mailbox(field: str, text: Any) -> Mailbox:
    """
    One mailbox and nothing else, bare or ``Name <address>`` (RFC 5322 §3.4 ``mailbox``:
    ``name-addr`` or ``addr-spec``; IDN domains and encoded-word names allowed). The one reading
    of ``from``, ``reply_to`` and the recipients of a request and of a message's ``From`` and
    ``Sender``: a second address after the first, a group (``x: a@b;``), a list (``a@b, c@d``)
    or anything else after the mailbox is refused, not dropped, so that what is checked and
    signed is the one address every reader sees.
    """
    if not isinstance(text, str) or not text.strip():
        raise Invalid(field, f"{field} must be an email address like `email@example.com` or "
                             "`Name <email@example.com>`")
    if "\r" in text or "\n" in text:
        raise Invalid(field, f"{field} must not contain line breaks")
    refuse_control(field, text, line=True)
    simple = simple_mailbox(text.strip())
    if simple is not None:
        return simple
    try:
        token, rest = _address_parser.get_mailbox(text.strip())
        # The obsolete forms RFC 5322 §4 still reads (a period in a name, a route) are one mailbox.
        defects: list[object] = [d for d in token.all_defects if not isinstance(d, email_errors.ObsoleteHeaderDefect)]
        name = token.display_name or ""
        if not token.domain:
            defects.append("no domain")
        addr_spec = Address(username=token.local_part or "", domain=token.domain or "").addr_spec
    except Exception:
        defects, rest, name, addr_spec = ["unparseable"], "", "", ""
    if rest.strip(" \t"):
        raise Invalid(field, f"{field} must be exactly one email address like `email@example.com` or"
                             " `Name <email@example.com>`, with nothing after it (a second address, a list"
                             " or a group is refused)")
    refuse_control(field, name, line=True)  # an encoded word decoded
    if defects:
        raise Invalid(field, f"{field} must be an email address like `email@example.com` or "
                             "`Name <email@example.com>`")
    return Mailbox(name, normalize_address(field, addr_spec))


def parse_mailboxes(field: str, value: Any, required: bool = False) -> tuple[Mailbox, ...]:
    if value is None or value == [] or value == "":
        if required:
            raise Invalid(field, f"{field} is required")
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise Invalid(field, f"{field} must be a string or an array of strings")
    return _unique_mailboxes(field, items)


def _unique_mailboxes(field: str, items: list) -> tuple[Mailbox, ...]:
    """
    The mailboxes of ``items``, each address once (the first spelling, addresses compared
    ignoring case): an address repeated is one recipient and gets one copy. An entry repeating
    an earlier one (ignoring case and surrounding spaces) is skipped unread; at most
    ``MAX_RECIPIENTS`` different entries are read, which bounds the parsing a request can ask for.
    """
    read: set[str | None] = set()  # None: an item that is not a string (parse_mailbox refuses it)
    unique: dict[str, Mailbox] = {}
    for item in items:
        seen_key = item.strip().lower() if isinstance(item, str) else None
        if seen_key is not None and seen_key in read:
            continue
        if len(read) == MAX_RECIPIENTS:
            raise Invalid(field, f"{field}: at most {MAX_RECIPIENTS} different addresses")
        mailbox = parse_mailbox(field, item)
        read.add(seen_key)
        unique.setdefault(mailbox.address.lower(), mailbox)
    return tuple(unique.values())


def custom_headers(value: Any) -> tuple[tuple[str, str], ...]:
    """The ``headers`` of a send body: names a client may set, one-line values of at most 4000 bytes."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise Invalid("headers", "headers must be an object of header names to string values")
    if len(value) > MAX_HEADERS:
        raise Invalid("headers", f"headers: at most {MAX_HEADERS} custom headers")
    result = []
    for name, header_value in value.items():
        if not _FIELD_NAME.match(name):
            raise Invalid("headers", f"headers: `{name}` is not a valid header name")
        if name.lower() in MANAGED_HEADERS or name.lower().startswith("resent-"):
            raise Invalid("headers", f"headers: `{name}` is managed by the platform and cannot be set")
        if not isinstance(header_value, str):
            raise Invalid("headers", f"headers: the value of `{name}` must be a string")
        if "\r" in header_value or "\n" in header_value:
            raise Invalid("headers", f"headers: the value of `{name}` must not contain line breaks")
        if holds_control(header_value, line=True):
            raise Invalid("headers", f"headers: the value of `{name}` must not contain control characters")
        if len(header_value.encode("utf-8")) > 4000:
            raise Invalid("headers", f"headers: the value of `{name}` is too long")
        result.append((name, header_value))
    return tuple(result)
