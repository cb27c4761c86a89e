"""
The MTA side's wiring (part of the composition root, compose.py): TLS reports, adaptive
shaping, the delivery queue worker, the return path and the door where test mail stops.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import attrs

from mailsvc.app.domains import SigningKeys
from mailsvc.app.messages import Messages
from mailsvc.app.submit import Item, ServiceSender, Submitter
from mailsvc.compose_shared import Shared, by_role, woken
from mailsvc.crypto.peers import TrustStore
from mailsvc.delivery.connections import Connections, Destination
from mailsvc.delivery.dialer import Dialer
from mailsvc.delivery.door import Door
from mailsvc.delivery.policy import NoFetcher, Policies
from mailsvc.delivery.returns import ReturnPath
from mailsvc.delivery.routes import Routes
from mailsvc.delivery.shaping import SYNC_SECONDS, Shaper
from mailsvc.delivery.tlsrpt import TlsReports
from mailsvc.delivery.worker import DeliveryWorker
from mailsvc.delivery.worker import Settings as DeliverySettings
from mailsvc.dns.resolver import system_servers
from mailsvc.dns.secure import SecureResolver
from mailsvc.domain.shaping import Limits
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.ids import parse_uuid
from mailsvc.loop import Loop
from mailsvc.mail import simulated
from mailsvc.outside.fetch import TrustRoots
from mailsvc.service import Group
from mailsvc.smtp.message import submission_from_message
from mailsvc.smtp.outbound_tls import ENFORCED
from mailsvc.store import accounts as accounts_store
from mailsvc.store import deliveries as deliveries_store
from mailsvc.store.database import Database

#: How often a node writes its TLS report counts, and looks for finished days to report.
TLS_COUNTS_SECONDS = 30
TLS_REPORTS_SECONDS = 3600
#: How often a delivery node looks for suspended accounts' queued mail to fail in bulk, and for
#: held accounts' new mail to hold (the claim never takes either).
QUEUE_SWEEP_SECONDS = 5


@attrs.frozen
class Delivery:
    """What ``_delivery`` builds: the worker, the return path, and what runs them by role (``service``)."""

    worker: DeliveryWorker
    return_path: ReturnPath
    tls_reports: TlsReports
    shaper: Shaper
    #: Signs the reports of test addresses' deliveries; the development inbox checks them.
    test_signer: Any
    engine: Group
    service: Group


def delivery(shared: Shared, signing_keys: SigningKeys, submitter: Submitter, unsubscribes, tests: TestAddresses,
              ) -> Delivery:
    """
    The MTA side: TLS reports, adaptive shaping, the delivery queue worker, the return path, and
    the door where test addresses and capture mode's mail stop (kept in the development inbox).
    """
    clock, config, db, outside, metrics = shared.clock, shared.config, shared.db, shared.outside, shared.metrics
    # TLS reporting (RFC 8460): sessions under MTA-STS or DANE counted, reported once a day.
    # Reports to mailto: addresses are the operator's account's own mail through the one accept
    # path (tlsrpt.account, from tlsrpt.sender): DKIM-signed and delivered by the MTA.
    tls_reports = TlsReports(clock, db, outside.resolver, outside.fetcher, config.hostname,
                             mailer=_system_mailer(db, submitter, config.tlsrpt.account),
                             mail_from=config.tlsrpt.sender)
    # Adaptive shaping: per destination limits, shared through PostgreSQL by every node; each
    # worker of a node keeps its share of them.
    shaper = Shaper(clock, db, config.delivery.source,
                    Limits(config.delivery.default_concurrency, config.delivery.default_rate_per_sec),
                    on_change=metrics.destination_limits, share=shared.share)
    # One key makes the VERP return paths of outgoing mail and checks those coming back.
    verp_key = shared.derive("verp")
    # Test addresses are completed through the return path's own handling of DSNs and reports.
    return_path = ReturnPath(clock, db, verp_key, config.dmarc.max_xml_bytes, tests)
    test_signer = simulated.test_signer(verp_key)
    door = Door(clock, db, tests, test_signer, config.hostname, return_path.deliver)
    # Messages stored as content are built at delivery, the broadcast stream's with their unsubscribe links.
    worker = _delivery_worker(shared, verp_key, signing_keys, tls_reports, shaper, door,
                              lambda outcome: metrics.delivery_outcomes.labels(outcome).inc(),
                              Messages(unsubscribes))
    metrics.deliveries_in_flight.set_function(lambda: worker.in_flight)
    engine = woken(shared.notifications, worker)
    return Delivery(worker, return_path, tls_reports, shaper, test_signer, engine,
                    Group("delivery", by_role(config, _delivery_services(shared, tls_reports, shaper, engine))))


def _delivery_services(shared: Shared, tls_reports: TlsReports, shaper: Shaper, engine: Group) -> dict:
    """What the delivery role runs (the worker last: it stops first), and what the scheduler role runs of delivery."""
    clock, db, on_failure = shared.clock, shared.db, shared.count_failure
    return {
        "delivery": [
            Loop(clock, "read destination limits", SYNC_SECONDS, shaper.sync, on_failure=on_failure),
            Loop(clock, "write tls report counts", TLS_COUNTS_SECONDS, tls_reports.flush, on_failure=on_failure),
            # What the claim never reads: suspended accounts' queues fail here in chunks, held accounts'
            # new mail is held (docs/decisions.md, "A fair claim").
            Loop(clock, "sweep the delivery queue", QUEUE_SWEEP_SECONDS, lambda: deliveries_store.sweep(db, clock),
                 on_failure=on_failure),
            engine,
        ],
        "scheduler": [Loop(clock, "send tls reports", TLS_REPORTS_SECONDS, tls_reports.send_due,
                           on_failure=on_failure)],
    }


def _system_mailer(db: Database, submitter: Submitter, account: str):
    """Mail of the service's own (TLS reports) sent as the configured account's, through submit."""
    tenant_id = parse_uuid(account) if account else None
    if tenant_id is None:
        return None

    async def send(to: list[str], raw: bytes) -> None:
        tenant = await accounts_store.get_tenant(db, tenant_id)
        if tenant is None:
            raise ValueError(f"tlsrpt.account: no account {tenant_id}")
        await submitter.submit(ServiceSender(tenant), [Item.of(submission_from_message(raw, to), raw)], "system")

    return send


def _delivery_worker(shared: Shared, verp_key: bytes, signing_keys: SigningKeys, tls_reports: TlsReports,
                     shaper: Shaper, door: Door, on_outcome, messages: Messages) -> DeliveryWorker:
    """
    MX routes, MTA-STS and DANE, pooled outbound SMTP connections, the delivery queue worker;
    its connections per host and deliveries in flight are this process's share of the node's.
    """
    clock, config, db, outside, share = shared.clock, shared.config, shared.db, shared.outside, shared.share
    settings = config.delivery
    relay = None
    if settings.relay_host:
        relay = Destination(settings.relay_host, settings.relay_port, ENFORCED, relay=True)
    relay_auth = (settings.relay_username, settings.relay_password) if settings.relay_username else None
    policies = None
    if settings.mta_sts or settings.dane:
        secure = SecureResolver(clock, config.dns.servers or system_servers()) if settings.dane else None
        policies = Policies(clock, db, outside.resolver, secure, outside.fetcher if settings.mta_sts else NoFetcher(),
                            config.security.test_mta_sts_port or 443, tls_reports.count)
    dialer = Dialer(clock, config.hostname, outside.addresses, TrustRoots(config.security.ca_file),
                    TrustStore(config.security.ca_file), tls_reports.count, settings.relay_tls, relay_auth)
    node_name = f"{socket.gethostname()}:{os.getpid()}"
    return DeliveryWorker(
        clock, db, Routes(clock, outside.resolver),
        Connections(clock, dialer.connect, share.of_count(settings.per_destination), shaper=shaper),
        DeliverySettings(
            node_name, settings.port, verp_key, settings.lease_seconds,
            settings.batch, share.of_count(settings.max_in_flight), relay, settings.test_first_retry_seconds,
        ),
        signing_keys,
        on_failure=shared.count_failure, on_outcome=on_outcome, policies=policies, on_reply=shaper.observe, door=door,
        messages=messages,
    )
