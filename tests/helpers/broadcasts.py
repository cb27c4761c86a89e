"""Broadcasts through the HTTP API (a segment of contacts, create, get) and the fan-out run to its end."""

from __future__ import annotations

import secrets

from mailsvc.broadcasting.fanout import Fanout

FROM = "Acme News <news@acme.example.com>"
HTML = ('<html><body><p>Hi {{{FIRST_NAME|there}}} {{{contact.last_name}}}, plan {{{contact.plan|free}}}</p>'
        '<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></body></html>')


TEXT = "Hi {{{contact.first_name|there}}} <{{{EMAIL}}}>\nUnsubscribe: {{{SVC_UNSUBSCRIBE_URL}}}\n"


async def contacts(api, key: str, n: int, domain: str = "example.net", **extra) -> str:
    """A segment of ``n`` new contacts (c0..c{n-1}@domain, named F<i> L<i>); its id."""
    code, segment, _ = await api.json("POST", "/segments", key, json={"name": f"Segment {secrets.token_hex(3)}"})
    assert code == 201, segment
    for first in range(0, n, 1000):
        rows = [{"email": f"c{i}@{domain}", "first_name": f"F{i}", "last_name": f"L{i}",
                 "properties": {"plan": "pro"} if i % 2 else {}, **extra} for i in range(first, min(n, first + 1000))]
        code, done, _ = await api.json("POST", "/contacts/batch", key, json={"contacts": rows,
                                                                                "segment_id": segment["id"]})
        assert code == 200 and not done["errors"], done
    return segment["id"]


async def create(api, key: str, segment_id: str, **fields) -> dict:
    body = {"segment_id": segment_id, "from": FROM, "subject": "News for {{{FIRST_NAME|you}}}", "html": HTML,
            "text": TEXT, "name": "Launch", **fields}
    code, created, _ = await api.json("POST", "/broadcasts", key, json=body)
    assert code == 200, created
    return created


async def get(api, key: str, broadcast_id: str) -> dict:
    code, got, _ = await api.json("GET", f"/broadcasts/{broadcast_id}", key)
    assert code == 200, got
    return got


async def run_fanout(api, fanout: Fanout | None = None, rounds: int = 100) -> int:
    """Run the fan-out's steps until one writes nothing; the recipients written."""
    fanout = fanout or api.parts.fanout
    total = 0
    for _ in range(rounds):
        n = await fanout.step()
        total += n
        if n == 0:
            return total
    raise AssertionError("the fan-out never settled")
