"""E-mail addresses: one syntax check and one normal form for every part of the service."""

from __future__ import annotations

import functools
import re

import idna

from mailsvc.domain.errors import Invalid

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_ATOM = re.compile(rf"^{_ATEXT}+(\.{_ATEXT}+)*$")
_QUOTED = re.compile(r'^"([\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"$')
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def is_dot_atom(text: str) -> bool:
    """Whether ``text`` is a local part that needs no quoting (RFC 5322 dot-atom)."""
    return bool(_DOT_ATOM.match(text))


@functools.lru_cache(maxsize=4096)
def ascii_domain(domain: str) -> str | None:
    """
    The domain in lower-case A-labels, or None if it is no valid host name. Remembered for
    the last 4,096 domains: the IDNA check is most of an address's cost, and the addresses of
    a batch (of contacts, of recipients) share few domains.
    """
    domain = domain.rstrip(".").lower()
    if not domain or len(domain) > 253:
        return None
    try:
        domain = idna.encode(domain, uts46=True).decode("ascii")
    except idna.IDNAError:
        return None
    labels = domain.split(".")
    if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
        return None
    if labels[-1].isdigit():
        return None
    return domain


def normalize_address(field: str, text: object) -> str:
    """
    ``local@domain`` with the domain lower-cased in A-labels; the local part is kept as
    written (only the receiving system may interpret it). Raises Invalid naming ``field``.
    """
    if text is None:
        raise Invalid(field, f"{field} is required")
    if not isinstance(text, str):
        raise Invalid(field, f"{field} must be a string")
    text = text.strip()
    local, at, domain = text.rpartition("@")
    if not at or not local or len(local) > 64:
        raise Invalid(field, f"{field} must be a valid email address")
    if not (_DOT_ATOM.match(local) or _QUOTED.match(local)):
        raise Invalid(field, f"{field} must be a valid email address")
    ascii_name = ascii_domain(domain)
    if ascii_name is None:
        raise Invalid(field, f"{field} must be a valid email address")
    address = f"{local}@{ascii_name}"
    if len(address) > 254:
        raise Invalid(field, f"{field} must be at most 254 characters")
    return address
