"""Unsubscribe links in delivered mail: a broadcast's body, the link of a message, what was delivered."""

import email
import email.policy
import uuid

from mailsvc.store import delivery_contents
from tests.helpers.sending import BODY

BROADCAST = {
    **BODY, "stream": "broadcast", "to": ["ann@example.com", "bob@example.com"],
    "html": '<p>News</p><a href="{{{SVC_UNSUBSCRIBE_URL}}}">Unsubscribe</a>',
    "text": "News\nUnsubscribe: {{{RESEND_UNSUBSCRIBE_URL}}}\n",
}


def parse(raw) -> email.message.EmailMessage:
    return email.message_from_bytes(bytes(raw), policy=email.policy.default)


def link_of(message) -> str:
    (value,) = message.get_all("List-Unsubscribe")
    assert value.startswith("<") and value.endswith(">")
    return value[1:-1]


def path_of(api, url: str) -> str:
    assert url.startswith(api.url + "/public/unsubscribe/"), url
    return url[len(api.url):]


async def deliveries(api, email_id) -> dict[str, bytes | None]:
    """Each recipient's own message as the delivery worker builds it (unsigned), from what it
    reads (``store.delivery_contents.contents``); None: the e-mail's (transactional), or none at all
    (suppressed)."""
    rows = await api.parts.db.fetchall(
        "SELECT id, email_id, tenant_id, recipient, status, message FROM deliveries WHERE email_id = %s"
        " ORDER BY recipient", (email_id,))
    assert all(r["message"] is None for r in rows)  # never stored: built at delivery
    contents = await delivery_contents.contents(api.parts.db, [r["id"] for r in rows])
    email = contents.emails[uuid.UUID(str(email_id))]
    own = [r["recipient"] for r in rows if r["status"] != "suppressed"] if email.stream == "broadcast" else []
    built = api.parts.delivery.messages.per_recipient(
        email, contents.attachments.get(email.id, ()), own, contents.broadcast_of(email))
    return {r["recipient"]: built.get(r["recipient"]) for r in rows}
