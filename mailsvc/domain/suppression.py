"""
The suppression list's rules: the one normal form an address is stored and looked up in, the
origins and which of them outranks another, and the shape of the list's request bodies.

Normal form (docs/decisions.md "Suppressions"): the syntax check and the domain rule of
``normalize_address`` (trimmed, domain lower-cased in IDNA A-labels, no trailing dot), a quoted
local part that needs no quotes written without them, and the local part lower-cased, because
mailbox providers compare it without regard to case. Dots and ``+tags`` are left alone: whether
they matter is the receiving system's own business, and folding them would merge mailboxes that
are distinct on most domains.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from mailsvc.domain.addresses import is_dot_atom, normalize_address
from mailsvc.domain.errors import Invalid
from mailsvc.ids import parse_uuid

#: Origins from the weakest to the strongest. Adding an address that is already on the list
#: keeps its record; the record takes the new origin (and its source) only when it is stronger.
ORIGINS_BY_STRENGTH = ("manual", "unsubscribe", "hard_bounce", "complaint")
ORIGINS = frozenset(ORIGINS_BY_STRENGTH)

#: Filter spellings of the compatible API that mean one of our origins (its SDKs type them).
_ORIGIN_ALIASES = {"bounce": "hard_bounce"}

BATCH_MAX = 100

_QUOTED_PAIR = re.compile(r"\\(.)")


def normal_form(address: object, field: str = "email") -> str:
    """The address as the list stores and compares it; raises Invalid naming ``field``."""
    local, _, domain = normalize_address(field, address).rpartition("@")
    if local.startswith('"'):
        bare = _QUOTED_PAIR.sub(r"\1", local[1:-1])
        if is_dot_atom(bare):
            local = bare
    return f"{local.lower()}@{domain}"


def stronger(new: str, old: str) -> bool:
    """Whether a record of origin ``old`` takes origin ``new`` when the address is added again."""
    return ORIGINS_BY_STRENGTH.index(new) > ORIGINS_BY_STRENGTH.index(old)


def origin_filter(value: str | None) -> str | None:
    """The ``origin`` a list is filtered on, or None for every origin."""
    if value is None:
        return None
    origin = _ORIGIN_ALIASES.get(value, value)
    if origin not in ORIGINS:
        raise Invalid(
            "origin", "origin must be one of `hard_bounce`, `complaint`, `unsubscribe`, `manual`"
        )
    return origin


def _batch(value: Any, field: str, what: str) -> list:
    if value is None:
        raise Invalid(field, f"{field} is required")
    if not isinstance(value, list):
        raise Invalid(field, f"{field} must be an array of {what}")
    if not 1 <= len(value) <= BATCH_MAX:
        raise Invalid(field, f"{field} must contain between 1 and {BATCH_MAX} {what}")
    return value


def _distinct(items: list) -> list:
    return list(dict.fromkeys(items))


def batch_addresses(value: Any, field: str = "emails") -> list[str]:
    """1 to 100 addresses, in normal form, each once, in the order given."""
    items = _batch(value, field, "email addresses")
    return _distinct([normal_form(item, f"{field}[{i}]") for i, item in enumerate(items)])


def batch_ids(value: Any, field: str = "ids") -> list[uuid.UUID]:
    """1 to 100 suppression ids, each once, in the order given."""
    items = _batch(value, field, "ids")
    ids = []
    for i, item in enumerate(items):
        parsed = parse_uuid(item)
        if parsed is None:
            raise Invalid(f"{field}[{i}]", f"{field}[{i}] must be a valid UUID")
        ids.append(parsed)
    return _distinct(ids)


def removal(body: dict) -> tuple[list[str], list[uuid.UUID]]:
    """A batch removal names addresses or ids, never both: (addresses, ids), one of them empty."""
    emails, ids = body.get("emails"), body.get("ids")
    if emails is not None and ids is not None:
        raise Invalid("emails", "emails and ids cannot be used together; provide one of them")
    if emails is None and ids is None:
        raise Invalid("emails", "emails or ids is required")
    if emails is not None:
        return batch_addresses(emails), []
    return [], batch_ids(ids)
