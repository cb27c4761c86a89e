"""Webhook dispatch nodes on one database with a clock each (the ``rig`` fixture) and an HTTPS receiver."""

from __future__ import annotations

import time

import attrs
import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor, task

from mailsvc.app.webhooks import WebhookRegistry
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.dns.resolver import build_resolver
from mailsvc.domain.webhooks import new_webhook
from mailsvc.outside.addresses import PublicAddresses
from mailsvc.outside.fetch import Fetcher
from mailsvc.store import events
from mailsvc.store.database import Database
from mailsvc.webhooks.dispatcher import DRAIN_SECONDS, Dispatcher
from tests.helpers.tenants import new_tenant


class CountingFetcher(Fetcher):
    """The real client, counting the requests it made (to tell two nodes' work apart)."""

    posts = 0

    async def post(self, *args, **kwargs):
        self.posts += 1
        return await super().post(*args, **kwargs)


@attrs.define
class Node:
    clock: task.Clock
    db: Database
    registry: WebhookRegistry
    dispatcher: Dispatcher
    fetcher: CountingFetcher

    async def run(self) -> None:
        """One step, and everything it started finished and written."""
        await self.dispatcher.step()
        await self.dispatcher.settled()

    async def stop(self) -> None:
        stopping = defer.ensureDeferred(self.dispatcher.stop())
        self.clock.advance(DRAIN_SECONDS)
        await stopping
        await self.fetcher.close()


@attrs.define
class Rig:
    """One tenant, an HTTPS receiver, and dispatcher nodes on one database and one Clock."""

    clock: task.Clock
    db: Database
    dns_server: object
    https_receiver: object
    ca_file: str
    tenant_id: object
    nodes: list[Node] = attrs.Factory(list)

    @property
    def received(self):
        return self.https_receiver.receiver.received

    @property
    def receiver(self):
        return self.https_receiver.receiver

    def url(self, path: str = "/hook") -> str:
        return f"https://hooks.example.com:{self.https_receiver.number}{path}"

    def node(self, db: Database | None = None, allow_private: bool = True, **options) -> Node:
        addresses = PublicAddresses(
            self.clock, build_resolver(reactor, (self.dns_server.address,)), allow_private
        )
        fetcher = CountingFetcher(reactor, addresses, self.ca_file)
        registry = WebhookRegistry(self.clock, db or self.db, addresses, KeyVault(b"v" * 32))
        node = Node(self.clock, db or self.db, registry, Dispatcher(
            self.clock, db or self.db, fetcher, registry, **options
        ), fetcher)
        self.nodes.append(node)
        return node

    async def webhook(self, node: Node, events_=("domain.updated",), path="/hook", naming="main"):
        body = {"endpoint": self.url(path), "events": list(events_)}
        row, secret = await node.registry.create(self.tenant_id, new_webhook(body, naming))
        return row, secret

    async def event(self, type="domain.updated", data=None, tenant_id=None):
        data = data if data is not None else {"domain_id": "d1", "domain": "example.com",
                                              "status": "verified", "previous": "pending"}

        async def write(txn):
            return await events.record(txn, self.clock, tenant_id or self.tenant_id, type, data)

        return await self.db.run("test event", write)

    async def delivery(self, webhook_id, event_id) -> dict | None:
        return await self.db.fetchone(
            "SELECT * FROM webhook_deliveries WHERE webhook_id = %s AND event_id = %s", (webhook_id, event_id)
        )


async def webhook_tenant(clock, db, name="t"):
    return (await new_tenant(clock, db, name=name)).id


@pytest.fixture
def ca_file(ca, tmp_path):
    return ca.write(tmp_path / "ca.pem")


@pt.async_yield_fixture
async def rig(db, dns_server, https_receiver, ca_file):
    dns_server.a("hooks.example.com", "127.0.0.1")
    clock = task.Clock()
    clock.advance(time.time())  # signatures are checked against the wall clock by verifiers
    setup = Rig(clock, db, dns_server, https_receiver, ca_file, await webhook_tenant(clock, db))
    yield setup
    https_receiver.receiver.release()
    for node in setup.nodes:
        await node.stop()
