"""
The application assembled with its delivery worker running, aimed at the scriptable SMTP sink
through the loopback DNS server: every recipient domain a test names gets an MX record for
``mx.<domain>`` whose address is 127.0.0.1, and the worker connects to the sink's port.
"""

from __future__ import annotations

import secrets

from twisted.internet import reactor

from mailsvc import compose, service
from mailsvc.config import load
from mailsvc.crypto import credentials
from tests.helpers.sending import sending_tenant

DOMAIN = "acme.example.com"


class Mta:
    """The conftest ``Api`` (its ``json``, ``tenant``, ``parts``...) plus the MTA's helpers."""

    def __init__(self, api, dns, sink, master):
        self.api = api
        self.master = master
        self.verp_key = credentials.derive(master, "verp")
        self.dns = dns
        self.sink = sink

    def __getattr__(self, name):
        return getattr(self.api, name)

    def route(self, domain: str, address: str = "127.0.0.1") -> None:
        self.dns.mx(domain, f"mx.{domain}", 10)
        self.dns.a(f"mx.{domain}", address)

    async def sender(self, **tenant_fields) -> tuple[dict, str]:
        """A tenant sending from DOMAIN, verified; paced at 1,000/s unless told otherwise."""
        pace = {"send_rate_per_sec": tenant_fields.pop("send_rate_per_sec", 1000)}
        tenant, key, _ = await sending_tenant(self, DOMAIN, **tenant_fields)
        code, tenant, _ = await self.json("PATCH", f"/admin/v1/tenants/{tenant['id']}", self.operator_token,
                                          json=pace)
        assert code == 200, tenant
        return tenant, key

    async def send(self, key: str, to, **fields) -> str:
        body = {"from": f"Acme <news@{DOMAIN}>", "to": to, "subject": "Hello", "text": "Hi there", **fields}
        code, sent, _ = await self.json("POST", "/emails", key, json=body)
        assert code == 200, sent
        return sent["id"]

    async def settled(self) -> None:
        """Until the worker has nothing in flight and every outcome is written."""
        await self.parts.delivery.settled()

    async def deliveries(self, email_id: str) -> list[dict]:
        return await self.parts.db.fetchall(
            "SELECT id, recipient, status, attempts, due_at, last_response FROM deliveries"
            " WHERE email_id = %s ORDER BY recipient", (email_id,))

    async def settled_past(self, email_id: str, status: str = "queued") -> list[dict]:
        """The email's deliveries once none of them is in ``status`` any more."""
        for _ in range(200):
            await self.settled()
            rows = await self.deliveries(email_id)
            if all(r["status"] != status for r in rows):
                return rows
        raise AssertionError(f"deliveries still {status}: {rows}")

    async def events(self, type: str) -> list[dict]:
        rows = await self.parts.db.fetchall("SELECT data FROM events WHERE type = %s ORDER BY id", (type,))
        return [r["data"] for r in rows]


async def start_mta(api_type, db, dns_server, smtp_sink, master: bytes | None = None, **environ) -> Mta:
    """One node; nodes sharing a database must share the master key, as in production."""
    config = dns_server.configure(load(None, environ={
        "MAILSVC_DELIVERY_PORT": str(smtp_sink.port),
        "MAILSVC_SECURITY_ALLOW_PRIVATE_TARGETS": "true",
        "MAILSVC_MAIL_HOSTNAME": "mta.mailsvc.test",
        **environ,
    }))
    operator_token = "op_" + secrets.token_urlsafe(16)
    master = master or secrets.token_bytes(32)
    parts = compose.assemble(reactor, config, db, master, operator_token)
    port = reactor.listenTCP(0, parts.site, interface="127.0.0.1")
    # Of the node's tree: the LISTEN connection, and the delivery worker after its LISTEN.
    for part in (parts.listen_connection, parts.engines.delivery):
        await service.start(part)
    return Mta(api_type(parts, port, operator_token), dns_server, smtp_sink, master)


async def stop_mta(mta: Mta) -> None:
    """The tree stopped as a node stops it: whatever of it runs (the worker, loops a test started)."""
    await mta.parts.service.stopService()
    await mta.pool.closeCachedConnections()
    await mta.port.stopListening()

