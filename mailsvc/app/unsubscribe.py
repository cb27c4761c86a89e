"""
RFC 8058 one-click unsubscribe for the broadcast stream: the per-recipient signed link put in
``List-Unsubscribe`` (and in ``{{{SVC_UNSUBSCRIBE_URL}}}``), the page a person sees when they
open it, and the one-click POST that puts the address on the account's suppression list.

Token: base64url (no padding) of ``version (1 byte, 1) | tenant id (16) | email id (16) |
recipient address (UTF-8) | HMAC-SHA256 of everything before it, first 16 bytes``, keyed by
HKDF(master key, ``unsubscribe-links``). It never expires: a message may be read years after
it was sent. It is self-contained (no table behind it), so it keeps working after the email
and its deliveries are gone.
"""

from __future__ import annotations

import html
import uuid

import attrs

from mailsvc.app import suppressions
from mailsvc.crypto.links import LINK_MAC_BYTES, link_payload, signed_link
from mailsvc.domain.errors import LinkRefused, NotFound
from mailsvc.store import accounts, emails
from mailsvc.store.database import Database, Transaction

VERSION = 1
_FIXED = 1 + 16 + 16
#: Longest address a token names (RFC 5321 path limit, with room for UTF-8 local parts).
MAX_ADDRESS_BYTES = 512
PATH = "/public/unsubscribe/"


@attrs.frozen
class Link:
    tenant_id: uuid.UUID
    email_id: uuid.UUID
    address: str


class Unsubscribes:
    def __init__(self, clock, db: Database, key: bytes, public_url: str = ""):
        self._clock = clock
        self._db = db
        self._key = key
        #: Base of links made without a request to take it from (``http.public_url``).
        self.public_url = public_url.rstrip("/")

    # Links

    def token(self, tenant_id: uuid.UUID, email_id: uuid.UUID, address: str) -> str:
        encoded = address.encode("utf-8")
        if len(encoded) > MAX_ADDRESS_BYTES:
            raise ValueError("address too long for an unsubscribe link")
        return signed_link(self._key, bytes([VERSION]) + tenant_id.bytes + email_id.bytes + encoded)

    def url(self, base_url: str, tenant_id: uuid.UUID, email_id: uuid.UUID, address: str) -> str:
        return base_url.rstrip("/") + PATH + self.token(tenant_id, email_id, address)

    def read(self, token: str) -> Link:
        """What a token names; LinkRefused (403) when it is not one of ours, unaltered."""
        refused = LinkRefused("This unsubscribe link is invalid.")
        if not token or len(token) > 2 * (_FIXED + MAX_ADDRESS_BYTES + LINK_MAC_BYTES):
            raise refused
        payload = link_payload(self._key, token)
        if payload is None or len(payload) <= _FIXED or payload[0] != VERSION:
            raise refused
        try:
            address = payload[_FIXED:].decode("utf-8")
        except UnicodeDecodeError:
            raise refused from None
        return Link(uuid.UUID(bytes=payload[1:17]), uuid.UUID(bytes=payload[17:33]), address)

    # The endpoints' work

    async def page(self, token: str) -> bytes:
        """GET: the confirmation page with a button that POSTs; nothing changes (link scanners)."""
        link = self.read(token)
        known, sender = await emails.sender(self._db, link.tenant_id, link.email_id)
        if not known:
            raise NotFound("Unsubscribe link")
        already = await suppressions.get(self._db, link.tenant_id, link.address)
        return render_question(link.address, sender, already is not None)

    async def unsubscribe(self, token: str) -> bytes:
        """POST (one-click or the page's button): suppress the address with origin ``unsubscribe``."""
        link = self.read(token)

        async def add(txn: Transaction) -> dict | None:
            if await accounts.get_tenant(txn, link.tenant_id) is None:
                return None
            return await suppressions.add(
                txn, self._clock, link.tenant_id, link.address, "unsubscribe", source_id=link.email_id
            )

        if await self._db.run("unsubscribe", add) is None:
            raise NotFound("Unsubscribe link")
        return render_done(link.address)


# Pages: small, self-contained, no scripts, no outside resources.

_STYLE = (
    "body{font-family:-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;"
    "background:#f4f4f5;color:#18181b;margin:0;padding:48px 16px}"
    "main{max-width:440px;margin:0 auto;background:#fff;border-radius:8px;padding:32px;"
    "box-shadow:0 1px 3px rgba(0,0,0,.1)}h1{font-size:20px;margin:0 0 16px}p{line-height:1.5}"
    "button{font:inherit;background:#18181b;color:#fff;border:0;border-radius:6px;padding:10px 20px;"
    "cursor:pointer}"
)

#: Headers of both pages: not cached, not framed, no referrer (the token is in the URL).
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self';"
                               " frame-ancestors 'none'",
    "X-Robots-Tag": "noindex",
}
HTML = b"text/html; charset=utf-8"


def _page(title: str, body: str) -> bytes:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="robots" content="noindex"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body><main>{body}</main></body></html>"
    ).encode()


def render_question(address: str, sender: str | None, already: bool) -> bytes:
    who = f"<strong>{html.escape(address)}</strong>"
    source = f" from <strong>{html.escape(sender)}</strong>" if sender else " from this sender"
    if already:
        return _page("Unsubscribed", f"<h1>You are unsubscribed</h1><p>{who} no longer receives e-mail{source}.</p>")
    # No action: the form posts back to this very URL, the one-click body included.
    return _page("Unsubscribe", (
        f"<h1>Unsubscribe</h1><p>Stop sending e-mail{source} to {who}?</p>"
        '<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click">'
        '<button type="submit">Unsubscribe</button></form>'
    ))


def render_done(address: str) -> bytes:
    return _page("Unsubscribed", (
        f"<h1>You are unsubscribed</h1><p><strong>{html.escape(address)}</strong> will no longer"
        " receive e-mail from this sender.</p>"
    ))
