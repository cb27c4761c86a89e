"""
Templates: the rules of a template's fields (docs/decisions.md, "Templates"), of its variables,
and of a send that names one (``template: {id, variables}``); rendering a version with a send's
values through the one placeholder scanner (``mailsvc.domain.placeholders``). Pure: no I/O.
"""

from __future__ import annotations

import html as html_escaping
import math
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import attrs

from mailsvc.domain import documents, placeholders
from mailsvc.domain.email import MAX_SUBJECT_BYTES, Submission, submission_from_json
from mailsvc.domain.errors import Invalid
from mailsvc.domain.headers import parse_mailbox, parse_mailboxes
from mailsvc.domain.htmltext import html_to_text
from mailsvc.domain.text import checked_string, refuse_control

MAX_VARIABLES = 50
MAX_VALUE_CHARS = 2000
MAX_NUMBER = 2**53 - 1
NAME_MAX = 256
#: A duplicate's name is at most this long (the broadcasts' rule, used for templates too).
DUPLICATE_NAME_MAX = 70
TYPES = ("string", "number")
ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")
VARIABLE_KEY = re.compile(r"^[A-Za-z0-9_]{1,50}\Z")
#: Filled by the platform (contacts, unsubscribe links): a template may not declare them.
UNSUBSCRIBE_KEYS = frozenset({"UNSUBSCRIBE_URL", "SVC_UNSUBSCRIBE_URL", "RESEND_UNSUBSCRIBE_URL"})
RESERVED_KEYS = frozenset({"FIRST_NAME", "LAST_NAME", "EMAIL", "contact", "this", *UNSUBSCRIBE_KEYS})
#: The fields a template write may carry (the body's names).
FIELDS = ("name", "alias", "from", "subject", "reply_to", "html", "text", "variables", "builder")


@attrs.frozen
class Variable:
    key: str
    type: str
    fallback_value: str | int | float | None = None


@attrs.frozen
class Version:
    """What a send renders: a published version (or, for a preview, the draft)."""

    sender: str | None
    subject: str | None
    reply_to: tuple[str, ...]
    html: str
    text: str | None
    variables: tuple[Variable, ...]
    #: What the sends of a kept version reuse (``prepare``): the variables by key, and html,
    #: text and subject cut at their placeholders.
    _made: dict[str, Any] = attrs.field(factory=dict, init=False, eq=False, repr=False, hash=False)

    def variable(self, key: str) -> Variable | None:
        return self.declared().get(key)

    def declared(self) -> dict[str, Variable]:
        """The variables by key."""
        found = self._made.get("variables")
        if found is None:
            found = self._made["variables"] = {v.key: v for v in self.variables}
        return found

    def prepare(self) -> Version:
        """Scan html, text and subject once, for the many sends of a version that is kept."""
        for part in _PARTS:
            if part not in self._made:
                self._made[part] = placeholders.scan(getattr(self, part) or "")
        return self

    def fill(self, part: str, value_of: placeholders.ValueOf, escape: Callable[[str], str] | None = None) -> str:
        """
        ``placeholders.fill`` of ``html``, ``text`` or ``subject``, from its scan once prepared
        (``value_of`` must then give the same for the same key and fallback, as ``render``'s does).
        """
        scanned = self._made.get(part)
        if scanned is None:
            return placeholders.fill(getattr(self, part), value_of, escape)
        return placeholders.fill_scanned(scanned, value_of, escape)

    def weight(self) -> int:
        """
        About the bytes it holds once prepared (what a cache of versions counts, known before
        preparing): its text, and some 300 bytes of objects per placeholder (at most one per ``}}}``).
        """
        parts = [getattr(self, part) or "" for part in _PARTS]
        return sum(len(p) + 300 * p.count(placeholders.CLOSE) for p in parts) + 200 * len(self.variables)


_PARTS = ("html", "text", "subject")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(field: str, value: Any) -> int | float:
    if not _is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
        raise Invalid(field, f"{field} must be a number")
    if abs(value) > MAX_NUMBER:
        raise Invalid(field, f"{field} must be at most 2^53-1 in magnitude")
    return value


def number_text(value: int | float) -> str:
    """A number as a template shows it: ``3``, ``2.5`` (never ``3.0``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def name_of(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("name", "name is required and must be a non-empty string")
    return checked_string("name", value.strip(), NAME_MAX, line=True)


def alias_of(value: Any) -> str | None:
    """An alias, or None to have none (``null``)."""
    if value is None:
        return None
    if not isinstance(value, str) or not ALIAS.match(value):
        raise Invalid("alias", "alias must start with a letter or digit and hold at most 100 letters, digits,"
                               " `_`, `.` or `-`")
    try:
        uuid.UUID(value)
    except ValueError:
        return value
    raise Invalid("alias", "alias must not be a UUID (it would read as a template id)")


def variables_of(value: Any) -> tuple[Variable, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Invalid("variables", "variables must be an array of {key, type, fallback_value}")
    if len(value) > MAX_VARIABLES:
        raise Invalid("variables", f"variables: at most {MAX_VARIABLES} per template")
    seen: set[str] = set()
    result = []
    for index, item in enumerate(value):
        field = f"variables[{index}]"
        if not isinstance(item, dict):
            raise Invalid("variables", f"{field} must be an object with `key` and `type`")
        key = item.get("key")
        if not isinstance(key, str) or not VARIABLE_KEY.match(key):
            raise Invalid("variables", f"{field}.key must be 1 to 50 letters, digits or underscores")
        if key in RESERVED_KEYS:
            raise Invalid("variables", f"{field}.key: `{key}` is reserved and cannot be declared")
        if key in seen:
            raise Invalid("variables", f"{field}.key: `{key}` is declared twice")
        seen.add(key)
        kind = item.get("type")
        if kind not in TYPES:
            raise Invalid("variables", f"{field}.type must be `string` or `number`")
        fallback = item.get("fallback_value")
        if fallback is not None:
            if kind == "number":
                fallback = _number(f"{field}.fallback_value", fallback)
            else:
                fallback = checked_string(f"{field}.fallback_value", fallback, MAX_VALUE_CHARS)
        result.append(Variable(key, kind, fallback))
    return tuple(result)


def _subject(value: Any) -> str | None:
    if value is None or value == "":
        return None
    subject = checked_string("subject", value)
    if "\r" in subject or "\n" in subject:
        raise Invalid("subject", "subject must not contain line breaks")
    refuse_control("subject", subject, line=True)
    if len(subject.encode("utf-8")) > MAX_SUBJECT_BYTES:
        raise Invalid("subject", f"subject must be at most {MAX_SUBJECT_BYTES} bytes")
    return subject


def _sender(value: Any) -> str | None:
    if value is None or value == "":
        return None
    parse_mailbox("from", value)
    return value.strip()


def _reply_to(value: Any) -> tuple[str, ...]:
    return tuple(str(m) for m in parse_mailboxes("reply_to", value))


def template_fields(body: dict, *, creating: bool) -> dict[str, Any]:
    """
    The fields of a create (``creating``: ``name`` required, and ``html`` unless a builder
    document is given) or of a PATCH (only the keys present), validated; keyed by FIELDS,
    ``from`` as ``sender``. Unknown keys are ignored (the SDKs send ``id`` and the like).
    """
    given = {k: body[k] for k in FIELDS if k in body}
    fields: dict[str, Any] = {}
    if creating or "name" in given:
        fields["name"] = name_of(given.get("name"))
    if "alias" in given:
        fields["alias"] = alias_of(given["alias"])
    if "from" in given:
        fields["sender"] = _sender(given["from"])
    if "subject" in given:
        fields["subject"] = _subject(given["subject"])
    if "reply_to" in given:
        fields["reply_to"] = _reply_to(given["reply_to"])
    if "builder" in given and given["builder"] is not None:
        fields["builder"] = document_of(given["builder"])
    if "html" in given and given["html"] is not None:
        fields["html"] = checked_string("html", given["html"])
        if not fields["html"]:
            raise Invalid("html", "html must not be empty")
    elif creating and "builder" not in fields:
        raise Invalid("html", "html is required")
    if "text" in given:
        # Empty is unset, as the template shows it (``""``): generated from the html at send time.
        fields["text"] = None if given["text"] is None else checked_string("text", given["text"]) or None
    if "variables" in given:
        fields["variables"] = variables_of(given["variables"])
    return fields


def duplicate_name(name: str) -> str:
    return (name + " (copy)")[:DUPLICATE_NAME_MAX]


# Builder documents (docs/contract/dashboard.md): checked by ``mailsvc.domain.documents`` (paths
# start with ``builder.``) and stored as given; rendered by the template builder's renderer.

def document_of(value: Any) -> dict:
    documents.document_of(value, "builder.")
    return value


# Sending with a template.

@attrs.frozen
class TemplateRef:
    """A send's ``template``: the template's id or alias, and the values given."""

    key: str
    values: Mapping[str, str | int | float]


def template_ref(body: dict) -> TemplateRef:
    """The send's ``template`` checked (docs/contract/main-api.md, "Sending": never with html or text)."""
    value = body.get("template")
    for part in ("html", "text", "react"):
        if body.get(part) not in (None, ""):
            raise Invalid("template", f"template cannot be combined with `{part}`")
    if not isinstance(value, dict):
        raise Invalid("template", "template must be an object {id, variables}")
    key = value.get("id")
    if not isinstance(key, str) or not key.strip():
        raise Invalid("template", "template.id is required: a template id or alias")
    values = value.get("variables")
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise Invalid("template", "template.variables must be an object of names to strings or numbers")
    if len(values) > MAX_VARIABLES + len(UNSUBSCRIBE_KEYS):
        raise Invalid("template", f"template.variables: at most {MAX_VARIABLES}")
    for name, given in values.items():
        field = f"template.variables.{name}"
        if isinstance(given, str):
            checked_string(field, given, MAX_VALUE_CHARS)
        else:
            _number(field, given)
    return TemplateRef(key.strip(), dict(values))


@attrs.frozen
class Rendered:
    subject: str | None
    html: str
    text: str | None


def render(version: Version, values: Mapping[str, str | int | float], *, strict: bool = True) -> Rendered:
    """
    ``version`` filled with ``values``: escaped in html, as is in text and subject. Each value
    must name a declared variable (or an unsubscribe placeholder) and match its type; a
    declared variable a placeholder uses with no value, no fallback of its own and no
    ``fallback_value`` is refused (``strict``) or left as written (a preview).
    """
    declared = version.declared()
    for name, given in values.items():
        variable = declared.get(name)
        if variable is None:
            if name in UNSUBSCRIBE_KEYS:
                continue
            raise Invalid("template.variables",
                          f"template.variables: `{name}` is not a variable of this template")
        if variable.type == "number" and not _is_number(given):
            raise Invalid("template.variables", f"template.variables: `{name}` must be a number")

    def value_of(key: str, fallback: str | None) -> str | None:
        if key in values:
            given = values[key]
            return given if isinstance(given, str) else number_text(given)
        variable = declared.get(key)
        if variable is None:
            return None  # names no variable: left as written
        if fallback is not None:
            return fallback
        if variable.fallback_value is not None:
            fv = variable.fallback_value
            return fv if isinstance(fv, str) else number_text(fv)
        if strict:
            raise Invalid("template.variables",
                          f"template.variables: `{key}` has no value and no fallback value")
        return None

    def subject_value(key: str, fallback: str | None) -> str | None:
        value = value_of(key, fallback)
        if value is not None and ("\r" in value or "\n" in value):
            raise Invalid("template.variables",
                          f"template.variables: `{key}` is used in the subject and must not contain line breaks")
        return value

    html = version.fill("html", value_of, _escape)
    text = version.fill("text", value_of) if version.text else version.text
    subject = version.fill("subject", subject_value) if version.subject else version.subject
    return Rendered(subject, html, text)


def _escape(value: str) -> str:
    return html_escaping.escape(value, quote=True)


def preview(version: Version, values: Any) -> dict:
    """``POST /templates/{key}/preview``: the draft rendered with ``values`` (docs/decisions.md)."""
    if values is None:
        values = {}
    checked = template_ref({"template": {"id": "preview", "variables": values}}).values
    rendered = render(version, checked, strict=False)
    text = rendered.text
    if text is None and rendered.html:
        text = html_to_text(rendered.html).strip() + "\n"
    return {"object": "template_preview", "subject": rendered.subject, "html": rendered.html, "text": text}


def templated_body(body: dict, ref: TemplateRef, version: Version) -> dict:
    """
    The send body a templated send stands for: the version rendered with the send's values,
    its ``from``, ``subject`` and ``reply_to`` where the send has none (the send's win).
    """
    rendered = render(version, ref.values)
    merged = {k: v for k, v in body.items() if k != "template"}
    merged["html"] = rendered.html
    if rendered.text is not None:
        merged["text"] = rendered.text
    if merged.get("from") in (None, "") and version.sender:
        merged["from"] = version.sender
    if merged.get("subject") in (None, "") and rendered.subject:
        merged["subject"] = rendered.subject
    if merged.get("reply_to") in (None, "", []) and version.reply_to:
        merged["reply_to"] = list(version.reply_to)
    return merged


@attrs.frozen
class Templated:
    """
    A send that names a template: ``complete`` turns the published version (looked up by the
    accept path, ``Submitter``) into the submission.
    """

    key: str
    complete: Callable[[Version], Submission]


def send_from_json(body: dict, now: datetime, allow_attachments: bool = True) -> Templated:
    """A templated send body (one whose ``template`` is set), checked as far as it can be alone."""
    ref = template_ref(body)

    def complete(version: Version) -> Submission:
        return submission_from_json(templated_body(body, ref, version), now, allow_attachments)

    return Templated(ref.key, complete)


def version_of(row: Mapping[str, Any]) -> Version:
    """A version (or draft) as stored (``mailsvc.store.templates``)."""
    return Version(
        sender=row["sender"], subject=row["subject"], reply_to=tuple(row["reply_to"] or ()),
        html=row["html"], text=row["text"],
        variables=tuple(Variable(v["key"], v["type"], v.get("fallback_value")) for v in row["variables"] or ()),
    )
