"""
Contacts and segments: the rules of a contact's fields, of its typed properties,
of segment references in both shapes the SDKs send, of segment names and of the batch. Pure:
the store applies what these return.

A contact is unique by its address in the suppression list's normal form
(``domain.suppression.normal_form``), so the contact and its suppression record always meet.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from mailsvc import timefmt
from mailsvc.domain.errors import Invalid, NotFound
from mailsvc.domain.suppression import normal_form
from mailsvc.domain.text import refuse_control
from mailsvc.ids import parse_uuid

NAME_MAX = 200
PROPERTIES_MAX = 100
VALUE_MAX = 2000
MAX_NUMBER = 2**53 - 1
PROPERTY_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,49}\Z")
BATCH_MAX = 1000
SEGMENT_NAME_MAX = 256
TYPES = ("string", "number", "boolean")

CONTACT = "Contact"
SEGMENT = "Segment"
AUDIENCE = "Audience"


def type_of(value: Any) -> str:
    """The property type of a stored (already checked) value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string"


def property_value(field: str, value: Any) -> Any:
    """A property value as stored: a string of up to 2,000 characters, a finite number, a boolean."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise Invalid(field, f"{field} must be a finite number")
        if abs(value) > MAX_NUMBER:
            raise Invalid(field, f"{field} must be at most 2^53-1 in magnitude")
        return value
    if isinstance(value, str):
        if len(value) > VALUE_MAX:
            raise Invalid(field, f"{field} must be at most {VALUE_MAX} characters")
        refuse_control(field, value)  # a text of lines (a CSV cell may hold a line break)
        return value
    raise Invalid(field, f"{field} must be a string, a number, a boolean or null")


@attrs.frozen
class Properties:
    """A write's properties: keys to set (with their values) and keys to delete (``null``)."""

    set: Mapping[str, Any] = attrs.field(factory=dict)
    unset: tuple[str, ...] = ()

    def types(self) -> dict[str, str]:
        return {key: type_of(value) for key, value in self.set.items()}


def properties_of(value: Any, field: str = "properties") -> Properties:
    if value is None:
        return Properties()
    if not isinstance(value, dict):
        raise Invalid(field, f"{field} must be an object")
    if len(value) > PROPERTIES_MAX:
        raise Invalid(field, f"{field} may hold at most {PROPERTIES_MAX} keys")
    to_set: dict[str, Any] = {}
    unset = []
    for key, item in value.items():
        if not PROPERTY_KEY.match(key):
            shown = f"{field}.{key if len(key) <= 60 else key[:57] + '...'}"
            raise Invalid(shown, f"{shown}: a property key must match ^[A-Za-z_][A-Za-z0-9_]{{0,49}}$")
        if item is None:
            unset.append(key)
        else:
            to_set[key] = property_value(f"{field}.{key}", item)
    return Properties(to_set, tuple(unset))


def check_types(properties: Properties, known: Mapping[str, str], field: str = "properties") -> None:
    """Refuse a value whose type differs from the type its key already has in the account."""
    for key, kind in properties.types().items():
        first = known.get(key)
        if first is not None and first != kind:
            raise Invalid(f"{field}.{key}", f"{field}.{key} must be a {first} (the key's type), not a {kind}")


def merged_count(existing: Mapping[str, Any], properties: Properties) -> int:
    """How many keys a contact holds after the write."""
    return len((set(existing) | set(properties.set)) - set(properties.unset))


def check_count(existing: Mapping[str, Any], properties: Properties, field: str = "properties") -> None:
    if merged_count(existing, properties) > PROPERTIES_MAX:
        raise Invalid(field, f"{field}: a contact may hold at most {PROPERTIES_MAX} properties")


def _name(field: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(field, f"{field} must be a string")
    if len(value) > NAME_MAX:
        raise Invalid(field, f"{field} must be at most {NAME_MAX} characters")
    refuse_control(field, value, line=True)
    return value


def segment_refs(value: Any, field: str = "segments") -> tuple[uuid.UUID, ...]:
    """Segment ids given as ``[{"id": …}]`` (docs, Node) or ``["…"]`` (OAS), each once."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Invalid(field, f"{field} must be an array of segment ids or of {{id}} objects")
    ids = []
    for i, item in enumerate(value):
        raw = item.get("id") if isinstance(item, dict) else item
        parsed = parse_uuid(raw)
        if parsed is None:
            raise Invalid(f"{field}[{i}]", f"{field}[{i}] must be a segment id or an object with a segment `id`")
        ids.append(parsed)
    return tuple(dict.fromkeys(ids))


def refuse_topics(body: Mapping[str, Any], field: str = "topics") -> None:
    """Topics are unavailable (docs/contract/README.md): a non-empty ``topics`` is refused."""
    topics = body.get("topics")
    if topics is not None and topics != [] and topics != {}:
        raise Invalid(field, f"{field}: topics are not available on this service")


def _unsubscribed(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise Invalid("unsubscribed", "unsubscribed must be a boolean")


@attrs.frozen
class ContactWrite:
    """
    What a create (upsert), a batch row or a PATCH asks for. ``names`` holds only the name
    fields given (a ``null`` clears one); ``unsubscribed`` None leaves it as it is.
    """

    email: str | None
    names: Mapping[str, str | None] = attrs.field(factory=dict)
    properties: Properties = attrs.field(factory=Properties)
    unsubscribed: bool | None = None
    segments: tuple[uuid.UUID, ...] = ()


def contact_write(body: Any, *, creating: bool, field: str = "") -> ContactWrite:
    """
    Read a create or a PATCH body (or a batch row, whose fields are named ``field.name``).
    Unknown keys are ignored (the Python SDK repeats ``id``, ``email`` and ``audience_id``
    in a PATCH); a PATCH does not change the address, the contact's identity.
    """
    def named(name: str) -> str:
        return f"{field}.{name}" if field else name

    if not isinstance(body, dict):
        raise Invalid(field or "body", f"{field or 'body'} must be an object")
    refuse_topics(body, named("topics"))
    email = None
    if creating:
        if body.get("email") is None:
            raise Invalid(named("email"), f"{named('email')} is required")
        email = normal_form(body["email"], named("email"))
    names = {key: _name(named(key), body[key]) for key in ("first_name", "last_name") if key in body}
    return ContactWrite(
        email=email,
        names=names,
        properties=properties_of(body.get("properties"), named("properties")),
        unsubscribed=_unsubscribed(body.get("unsubscribed")),
        segments=segment_refs(body.get("segments"), named("segments")) if creating else (),
    )


def batch_rows(body: Mapping[str, Any]) -> tuple[list[Any], uuid.UUID | None]:
    """The rows of ``POST /contacts/batch`` (1 to 1,000, unread) and its optional ``segment_id``."""
    rows = body.get("contacts")
    if not isinstance(rows, list):
        raise Invalid("contacts", "contacts is required and must be an array")
    if not 1 <= len(rows) <= BATCH_MAX:
        raise Invalid("contacts", f"contacts must contain between 1 and {BATCH_MAX} rows")
    refuse_topics(body)
    segment_id = body.get("segment_id") if body.get("segment_id") is not None else body.get("audience_id")
    parsed = None
    if segment_id is not None:
        parsed = parse_uuid(segment_id)
        if parsed is None:
            raise Invalid("segment_id", "segment_id must be a segment id")
    return rows, parsed


def contact_key(text: str) -> uuid.UUID | str:
    """A path's ``{key}``: a contact id, or an address (normal form); NotFound when neither."""
    parsed = parse_uuid(text)
    if parsed is not None:
        return parsed
    try:
        return normal_form(text)
    except Invalid:
        raise NotFound(CONTACT) from None


def segment_id_of(text: Any, kind: str = SEGMENT) -> uuid.UUID:
    """A segment id from a path or a query; NotFound when it is not a UUID (docs/contract/README.md, "Path ids")."""
    parsed = parse_uuid(text)
    if parsed is None:
        raise NotFound(kind)
    return parsed


def segment_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("name", "name is required and must be a non-empty string")
    value = value.strip()
    if len(value) > SEGMENT_NAME_MAX:
        raise Invalid("name", f"name must be at most {SEGMENT_NAME_MAX} characters")
    refuse_control("name", value, line=True)
    return value


def search_prefix(value: str | None) -> str | None:
    """``q`` as a LIKE pattern: lower-cased, its wildcards escaped, ``%`` appended; None: no filter."""
    if value is None or not value.strip():
        return None
    text = value.strip().lower()
    if len(text) > 320:
        raise Invalid("q", "q must be at most 320 characters")
    refuse_control("q", text, line=True)
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def shown_properties(stored: Mapping[str, Any]) -> dict[str, dict]:
    """Properties as responses show them: each ``{value, type}``."""
    return {key: {"value": value, "type": type_of(value)} for key, value in stored.items()}


def event_data(row: Mapping[str, Any]) -> dict:
    """
    ``data`` of a ``contact.*`` event (docs/contract/main-api.md, "Events"), from a contact as the store reads it; a
    name never set is ``""``, as the API shows it.
    """
    return {
        "id": str(row["id"]),
        "email": row["email"],
        "first_name": row["first_name"] or "",
        "last_name": row["last_name"] or "",
        "unsubscribed": bool(row["unsubscribed"]),
        "created_at": timefmt.iso(row["created_at"]),
        "updated_at": timefmt.iso(row["updated_at"]),
    }
