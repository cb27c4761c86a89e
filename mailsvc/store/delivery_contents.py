"""
What claimed deliveries send, read by the statement that claims them: ``select(head, …)`` is one
SELECT over the rows ``head`` names (``id, email_id, message`` of deliveries: the claim's
``UPDATE ... RETURNING``, or a plain read) giving a row per e-mail with its content, its
recipients' own messages, its attachments (when built from content) and, on the first e-mail
of each broadcast and each unsigned sending domain only, the broadcast's content and the
domain's DKIM keys as they are now (so a rotated key is used from the next step on).
"""

from __future__ import annotations

import uuid

import attrs

from mailsvc.store.database import Database


@attrs.frozen
class Contents:
    """What the claimed deliveries of one step send, and the keys that sign it."""

    #: By email id: its content (``message`` when stored: an SMTP submission's, or written by an
    #: older version), whether it is stored ``signed`` (by an older version), the sending domain
    #: (``domain_id`` None: deleted, or the test sender's mail) with its ``domain``,
    #: ``return_path`` and ``tls``.
    emails: dict[uuid.UUID, dict]
    #: By delivery id: a recipient's own message stored by an older version (broadcast stream).
    own: dict[uuid.UUID, bytes]
    #: By domain id: its DKIM keys as they are now, private keys sealed, in id order.
    keys: dict[uuid.UUID, list[dict]]
    #: By email id: the attachments of the emails built from their content, in order.
    attachments: dict[uuid.UUID, list[dict]]
    #: By broadcast id: the content of the broadcasts whose recipients the emails are (an
    #: email of a broadcast has its ``broadcast_id`` and the recipient's ``contact_id`` and
    #: ``snapshot``).
    broadcasts: dict[uuid.UUID, dict]


_EMAIL_COLUMNS = ("id", "tenant_id", "message_id", "sender", "recipients", "subject", "html", "text", "headers",
                  "stream", "links_base", "created_at", "message", "signed", "domain_id", "domain", "return_path",
                  "tls", "broadcast_id", "contact_id", "snapshot")
_ATTACHMENT_COLUMNS = ("filename", "content_type", "content_id", "content")
_KEY_COLUMNS = ("id", "selector", "algorithm", "private_key")
_BROADCAST_COLUMNS = ("subject", "html", "text", "preview_text", "links_base")


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
    emails: dict[uuid.UUID, dict] = {}
    own: dict[uuid.UUID, bytes] = {}
    keys: dict[uuid.UUID, list[dict]] = {}
    attachments: dict[uuid.UUID, list[dict]] = {}
    broadcasts: dict[uuid.UUID, dict] = {}
    for row in rows:
        emails[row["id"]] = {c: row[c] for c in _EMAIL_COLUMNS}
        own.update(zip(row["own_ids"] or (), (bytes(m) for m in row["own_messages"] or ()), strict=True))
        if row["attachment_content"]:
            attachments[row["id"]] = _unzipped(row, "attachment_", _ATTACHMENT_COLUMNS, email_id=row["id"])
        if row["key_id"]:
            keys[row["domain_id"]] = _unzipped(row, "key_", _KEY_COLUMNS, domain_id=row["domain_id"])
        if row["has_broadcast"]:
            broadcasts[row["broadcast_id"]] = {"id": row["broadcast_id"],
                                               **{c: row[f"broadcast_{c}"] for c in _BROADCAST_COLUMNS}}
    return Contents(emails, own, keys, attachments, broadcasts)


def _unzipped(row: dict, prefix: str, columns: tuple[str, ...], **common) -> list[dict]:
    """The rows aggregated into ``row``'s arrays ``prefix + column``, each with ``common``."""
    arrays = [row[prefix + c] for c in columns]
    return [{**common, **dict(zip(columns, values, strict=True))} for values in zip(*arrays, strict=True)]


async def contents(db: Database, delivery_ids: list[uuid.UUID]) -> Contents:
    """What the deliveries ``delivery_ids`` send, read as a claim of them would read it."""
    rows = await db.fetchall(
        select("SELECT id, email_id, message FROM deliveries WHERE id = ANY(%(ids)s::uuid[])"),
        {"ids": delivery_ids}, desc="delivery contents",
    )
    return parse(rows)
