"""
What claimed deliveries send, read by the statement that claims them: ``select(head, …)`` is one
SELECT over the rows ``head`` names (``id, email_id, message`` of deliveries: the claim's
``UPDATE ... RETURNING``, or a plain read) giving a row per e-mail with its content, its
recipients' own messages, its attachments (when built from content) and, on the first e-mail
of each broadcast and each unsigned sending domain only, the broadcast's content and the
domain's DKIM keys as they are now (so a rotated key is used from the next step on).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterator
from datetime import datetime

import attrs

from mailsvc.store.database import Database


#: Not slotted: a frozen slotted class sets each field through ``object.__setattr__`` (1 µs
#: more a claimed e-mail than the dict); a frozen dict-backed one stores them as the dict did,
#: its reads a little slower (``bench.contents``, docs/benchmarks.md "Delivery contents as typed rows").
@attrs.frozen(slots=False)
class EmailContent:
    """An e-mail as its deliveries send it: its content (``message`` when stored: an SMTP
    submission's, or written by an older version), whether it is stored ``signed`` (by an older
    version), the sending domain (``domain_id`` None: deleted, or the test sender's mail) with its
    ``domain``, ``return_path`` and ``tls``, and for a broadcast's e-mail the recipient's
    ``contact_id`` and ``snapshot``."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    message_id: str
    sender: str
    #: By field (``to``, ``cc``, ``bcc``, ``reply_to``): its mailboxes.
    recipients: dict[str, list[str]]
    subject: str
    html: str | None
    text: str | None
    #: ``[name, value]`` pairs as submitted; None: none.
    headers: list[list[str]] | None
    stream: str
    links_base: str | None
    created_at: datetime
    message: memoryview | None
    signed: bool
    domain_id: uuid.UUID | None
    domain: str | None
    return_path: str | None
    tls: str | None
    broadcast_id: uuid.UUID | None
    contact_id: uuid.UUID | None
    snapshot: dict | None


@attrs.frozen
class AttachmentContent:
    """An attachment of an e-mail built from its content."""

    filename: str | None
    content_type: str
    content_id: str | None
    content: memoryview


@attrs.frozen
class SigningKey:
    """A DKIM key of a sending domain, its private key sealed."""

    id: uuid.UUID
    selector: str
    algorithm: str
    private_key: memoryview


@attrs.frozen
class BroadcastContent:
    """A broadcast's content, which its recipients' e-mails send filled from their snapshots."""

    id: uuid.UUID
    subject: str
    html: str | None
    text: str | None
    preview_text: str | None
    links_base: str | None


@attrs.frozen
class Contents:
    """What the claimed deliveries of one step send, and the keys that sign it."""

    #: By email id.
    emails: dict[uuid.UUID, EmailContent]
    #: By delivery id: a recipient's own message stored by an older version (broadcast stream).
    own: dict[uuid.UUID, bytes]
    #: By domain id: its DKIM keys as they are now, in id order.
    keys: dict[uuid.UUID, list[SigningKey]]
    #: By email id: the attachments of the emails built from their content, in order.
    attachments: dict[uuid.UUID, list[AttachmentContent]]
    #: By broadcast id: the content of the broadcasts whose recipients the emails are.
    broadcasts: dict[uuid.UUID, BroadcastContent]

    def broadcast_of(self, email: EmailContent) -> BroadcastContent | None:
        """The broadcast whose recipient ``email`` is, unless it is none's (or is gone)."""
        return None if email.broadcast_id is None else self.broadcasts.get(email.broadcast_id)


def _columns(row: type) -> tuple[str, ...]:
    return tuple(a.name for a in attrs.fields(row))


_EMAIL_COLUMNS = _columns(EmailContent)
_ATTACHMENT_COLUMNS = _columns(AttachmentContent)
_KEY_COLUMNS = _columns(SigningKey)
_BROADCAST_COLUMNS = _columns(BroadcastContent)[1:]  # and the broadcast's id, the e-mail's broadcast_id
#: A row's values in the order of the rows' fields, read at once (no Python loop per field).
_email_values = operator.itemgetter(*_EMAIL_COLUMNS)
_broadcast_values = operator.itemgetter(*(f"broadcast_{c}" for c in _BROADCAST_COLUMNS))


def select(head: str, writes: str = "") -> str:
    """The contents' SELECT over ``head``, a CTE body giving ``id, email_id, message`` of deliveries,
    after the CTEs ``writes`` (each ending in a comma: data-modifying CTEs stay at the top level)."""
    attachments = ", ".join(f"array_agg(a.{c} ORDER BY a.id) AS attachment_{c}" for c in _ATTACHMENT_COLUMNS)
    keys = ", ".join(f"array_agg(k.{c} ORDER BY k.id) AS key_{c}" for c in _KEY_COLUMNS)
    broadcasts = ", ".join(f"b.{c} AS broadcast_{c}" for c in _BROADCAST_COLUMNS)
    return (
        f"WITH {writes} claimed AS ({head}),"
        " mail AS (SELECT email_id, array_agg(id) FILTER (WHERE message IS NOT NULL) AS own_ids,"
        "   array_agg(message) FILTER (WHERE message IS NOT NULL) AS own_messages FROM claimed GROUP BY email_id),"
        " e AS (SELECT e.id, e.tenant_id, e.message_id, e.sender, e.recipients, e.subject, e.html, e.text, e.headers,"
        "   e.stream, e.links_base, e.created_at, e.message, e.signed, e.domain_id, dom.name AS domain,"
        "   dom.return_path, dom.tls, e.broadcast_id, r.contact_id, r.snapshot, mail.own_ids, mail.own_messages,"
        "   row_number() OVER (PARTITION BY e.broadcast_id ORDER BY e.id) = 1 AS first_of_broadcast,"
        "   row_number() OVER (PARTITION BY e.domain_id, e.signed ORDER BY e.id) = 1 AS first_of_domain"
        "   FROM mail JOIN emails e ON e.id = mail.email_id LEFT JOIN domains dom ON dom.id = e.domain_id"
        "   LEFT JOIN broadcast_recipients r ON r.broadcast_id = e.broadcast_id AND r.email_id = e.id)"
        f" SELECT e.*, att.*, keys.*, {broadcasts}, b.id IS NOT NULL AS has_broadcast FROM e"
        f" LEFT JOIN LATERAL (SELECT {attachments} FROM attachments a"
        "   WHERE a.email_id = e.id AND e.message IS NULL) att ON true"
        f" LEFT JOIN LATERAL (SELECT {keys} FROM dkim_keys k"
        "   WHERE k.domain_id = e.domain_id AND NOT e.signed AND e.first_of_domain) keys ON true"
        " LEFT JOIN broadcasts b ON b.id = e.broadcast_id AND e.first_of_broadcast"
    )


def parse(rows: list[dict]) -> Contents:
    """The ``Contents`` of ``select``'s rows."""
    emails: dict[uuid.UUID, EmailContent] = {}
    own: dict[uuid.UUID, bytes] = {}
    keys: dict[uuid.UUID, list[SigningKey]] = {}
    attachments: dict[uuid.UUID, list[AttachmentContent]] = {}
    broadcasts: dict[uuid.UUID, BroadcastContent] = {}
    for row in rows:
        emails[row["id"]] = EmailContent(*_email_values(row))
        own.update(zip(row["own_ids"] or (), (bytes(m) for m in row["own_messages"] or ()), strict=True))
        if row["attachment_content"]:
            attachments[row["id"]] = [AttachmentContent(*values) for values in _unzipped(row, "attachment_",
                                                                                       _ATTACHMENT_COLUMNS)]
        if row["key_id"]:
            keys[row["domain_id"]] = [SigningKey(*values) for values in _unzipped(row, "key_", _KEY_COLUMNS)]
        if row["has_broadcast"]:
            broadcasts[row["broadcast_id"]] = BroadcastContent(row["broadcast_id"], *_broadcast_values(row))
    return Contents(emails, own, keys, attachments, broadcasts)


def _unzipped(row: dict, prefix: str, columns: tuple[str, ...]) -> Iterator[tuple]:
    """The values of each row aggregated into ``row``'s arrays ``prefix + column``."""
    return zip(*(row[prefix + c] for c in columns), strict=True)


async def contents(db: Database, delivery_ids: list[uuid.UUID]) -> Contents:
    """What the deliveries ``delivery_ids`` send, read as a claim of them would read it."""
    rows = await db.fetchall(
        select("SELECT id, email_id, message FROM deliveries WHERE id = ANY(%(ids)s::uuid[])"),
        {"ids": delivery_ids}, desc="delivery contents",
    )
    return parse(rows)
