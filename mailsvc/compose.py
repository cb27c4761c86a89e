"""
The composition root: the only module that touches the global reactor. It builds every part
from the configuration and hands each its collaborators through its constructor.
"""

from __future__ import annotations

import gc
import os
import shutil
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
from treq.client import HTTPClient
from twisted.internet import endpoints, threads
from twisted.internet.error import CannotListenError
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.web.client import Agent, HTTPConnectionPool

from mailsvc import __version__, manhole, onion, processes, timefmt
from mailsvc.app import resealing
from mailsvc.app.accounts import Accounts
from mailsvc.app.ai import AiHelper
from mailsvc.app.apikeys import KeyRing
from mailsvc.app.audit import AuditLog, OperatorTokens
from mailsvc.app.brand import BrandImporter
from mailsvc.app.broadcasts import Broadcasts
from mailsvc.app.builder import Builder
from mailsvc.app.contacts import Contacts
from mailsvc.app.dashboard import Dashboard, FirstOwner, SessionSettings, first_owner
from mailsvc.app.dashboard_reads import DashboardReads
from mailsvc.app.domains import Domains, Settings, SigningKeys
from mailsvc.app.emails import Emails, Schedules
from mailsvc.app.health import Health
from mailsvc.app.idempotency import IdempotencyKeys
from mailsvc.app.operator import Destinations
from mailsvc.app.queue import Queue
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.app.segments import Segments
from mailsvc.app.spam import SpamChecks
from mailsvc.app.submit import Item, ServiceSender, Submitter
from mailsvc.app.suppressions import Suppressions
from mailsvc.app.templates import Templates
from mailsvc.app.throttle import SmtpAuthFailures, Throttle
from mailsvc.app.unsubscribe import Unsubscribes
from mailsvc.app.webhooks import WebhookRegistry
from mailsvc.broadcasting.fanout import Fanout
from mailsvc.config import Config
from mailsvc.crypto import credentials, tls
from mailsvc.crypto.peers import RecordingClientTLS, TrustStore
from mailsvc.delivery import worker as delivery
from mailsvc.delivery.connections import Connections, Destination
from mailsvc.delivery.policy import PeerPolicy, Policies
from mailsvc.delivery.returns import ReturnPath
from mailsvc.delivery.routes import Routes
from mailsvc.delivery.shaping import SYNC_SECONDS, Shaper
from mailsvc.delivery.tlsrpt import TlsReports
from mailsvc.dns.resolver import build_resolver
from mailsvc.dns.secure import SecureResolver
from mailsvc.dnsprov.cloudflare import Cloudflare
from mailsvc.domain.domains import unpublishable_reason
from mailsvc.domain.emailhtml import BuilderRenderer
from mailsvc.domain.shaping import Limits
from mailsvc.engine import LeasedEngine
from mailsvc.http.api.ai import AiResource
from mailsvc.http.api.apikeys import ApiKeysResource
from mailsvc.http.api.brand import BrandResource
from mailsvc.http.api.broadcasts import BroadcastsResource
from mailsvc.http.api.builder import BuilderResource, social_icons
from mailsvc.http.api.contacts import ContactsResource
from mailsvc.http.api.domains import DomainsResource
from mailsvc.http.api.emails import EmailsResource
from mailsvc.http.api.segments import AudiencesResource, SegmentsResource
from mailsvc.http.api.spam import SpamResource
from mailsvc.http.api.suppressions import SuppressionsResource
from mailsvc.http.api.templates import TemplatesResource
from mailsvc.http.api.webhooks import WebhooksResource
from mailsvc.http.dashboard.auth import AuthResource, set_password_link
from mailsvc.http.dashboard.content import ContentReads
from mailsvc.http.dashboard.reads import ReadsResource
from mailsvc.http.dashboard.ui import UiResource
from mailsvc.http.health import HealthResource
from mailsvc.http.openapi import OpenApiResource
from mailsvc.http.operator import OperatorResource
from mailsvc.http.public import UnsubscribeResource
from mailsvc.http.queue import QueueResource
from mailsvc.http.router import Router
from mailsvc.http.site import Site
from mailsvc.http.usage import UsageResource
from mailsvc.http.waitlist import WaitlistResource
from mailsvc.ids import parse_uuid
from mailsvc.loop import Loop
from mailsvc.mail.spam import SpamAssassin
from mailsvc.metrics import Metrics
from mailsvc.outside.addresses import PublicAddresses
from mailsvc.outside.fetch import Fetcher, TrustRoots
from mailsvc.service import Node
from mailsvc.smtp import inbound
from mailsvc.smtp.intake import SmtpIntake
from mailsvc.smtp.message import submission_from_message
from mailsvc.smtp.outbound import ENFORCED, OutboundSMTP
from mailsvc.smtp.submission import Submission, SubmissionFactory
from mailsvc.store import accounts as accounts_store
from mailsvc.store import partitions, stats
from mailsvc.store import suppressions as suppression_list
from mailsvc.store.database import Database, DatabaseUnavailable
from mailsvc.store.embedded import ClusterError, EmbeddedCluster, find_bindir
from mailsvc.store.migrate import MigrationError, migrate
from mailsvc.store.notify import Notifications
from mailsvc.webhooks.dispatcher import Dispatcher

log = Logger()

#: How often gathered ``last_used_at`` values are written.
LAST_USED_FLUSH_SECONDS = 5
#: How often scheduled emails (and broadcasts) whose time has come are looked for.
SCHEDULE_RELEASE_SECONDS = 1
#: How often a node writes its TLS report counts, and looks for finished days to report.
TLS_COUNTS_SECONDS = 30
TLS_REPORTS_SECONDS = 3600
#: How often the scheduler makes time partitions ahead and drops expired ones (when opted in).
PARTITION_MAINTENANCE_SECONDS = 3600
#: How often a worker writes its gauges where the node's /metrics gathers them.
SHARE_GAUGES_SECONDS = 1
#: How often a node samples the database's figures for /metrics (mail by plan, queues).
SAMPLE_METRICS_SECONDS = 15
#: How often a worker other than the first reads the onion address the first one published.
ONION_ADDRESS_SECONDS = 2
#: Where the first worker leaves the published onion address for the others (``GET /admin/v1``).
ONION_ADDRESS_FILE = "onion-address"


def build(config: Config, inherited: processes.Inherited | None = None,
          worker_command: list[str] | None = None) -> Node:
    """
    The node: one process serving everything, or (``node.processes`` above 1, given the
    ``worker_command`` that starts a worker) the parent of its workers; ``inherited``: this
    process is a worker, serving the sockets its parent opened.
    """
    from twisted.internet import reactor

    def fail(reason: str) -> None:
        # twistd routes sys.stderr into its log; the one-line reason goes to the real stderr.
        os.write(2, f"mailsvc: cannot start: {reason}\n".encode("utf-8", "replace"))
        reactor.addSystemEventTrigger("after", "shutdown", os._exit, 1)
        if reactor.running:
            reactor.stop()
        else:
            reactor.callWhenRunning(reactor.stop)

    if inherited is not None:
        reactor.callWhenRunning(processes.watch_parent, reactor)
    if inherited is None and worker_command is not None and config.node.process_count > 1 \
            and "api" in config.node.roles:
        node = Node(lambda node: start_parent(reactor, config, node, worker_command), fail)
    else:
        node = Node(lambda node: start(reactor, config, node, inherited), fail)
    node.expected_failures = (
        OSError, ValueError, CannotListenError, DatabaseUnavailable, ClusterError, MigrationError,
    )
    node.ready.addCallback(_freeze_startup_heap)
    return node


def _freeze_startup_heap(node: Node) -> Node:
    """
    Once started, keep the long-lived objects (modules, the assembled parts) out of the cyclic
    collector's scans: full collections otherwise walk them all and stall requests in flight
    (bench/http_auth.py: p99 about halved).
    """
    gc.collect()
    gc.freeze()
    return node


async def database_dsn(reactor, config: Config, node: Node) -> str:
    """The configured DSN, or that of the embedded cluster, started."""
    if config.database.dsn:
        return config.database.dsn
    cluster = EmbeddedCluster(
        reactor, config.state_dir / "postgresql", find_bindir(config.database.pg_bin)
    )
    dsn = await cluster.start()
    node.on_stop("embedded PostgreSQL", cluster.stop)
    log.info("embedded PostgreSQL in {dir}", dir=cluster.data_dir)
    return dsn


async def open_store(reactor, config: Config, node: Node, migrated: bool = False) -> Database:
    """The database, on the configured DSN or on the embedded cluster, migrated (unless it was)."""
    dsn = await database_dsn(reactor, config, node)
    db = Database(reactor, dsn, config.database.pool_size, config.database.statement_timeout)
    await db.start()
    node.on_stop("database pool", db.stop)
    if not migrated:
        await migrate(db)
    return db


@attrs.frozen
class RolePart:
    """A part that runs only on nodes whose ``node.roles`` include ``role``."""

    role: str
    desc: str
    start: Callable[[], Awaitable[None]]
    stop: Callable[[], Awaitable[None]]


def _engine_part(notifications: Notifications, engine: LeasedEngine) -> RolePart:
    """A leased engine as the part of its role: woken by its channel's NOTIFYs from its start.
    Every process running the role (``processes.worker_roles``) runs an engine of its own."""

    async def start() -> None:
        await notifications.listen(engine.channel, engine.notified)
        engine.start()

    return RolePart(engine.role, engine.desc, start, engine.stop)


@attrs.define
class Parts:
    """Everything a node runs, wired; tests assemble the same graph on a database of theirs."""

    db: Database
    metrics: Metrics
    keyring: KeyRing
    accounts: Accounts
    router: Router
    site: Site
    loops: list[Loop]
    notifications: Notifications
    fetcher: Fetcher
    webhooks: WebhookRegistry
    dispatcher: Dispatcher
    delivery: delivery.DeliveryWorker
    return_path: ReturnPath
    role_parts: list[RolePart]
    domains: Domains | None = None
    emails: Emails | None = None
    submission: Submission | None = None
    submitter: Submitter | None = None
    templates: Templates | None = None
    contacts: Contacts | None = None
    segments: Segments | None = None
    dashboard: Dashboard | None = None
    broadcasts: Broadcasts | None = None
    fanout: Fanout | None = None
    tls_reports: TlsReports | None = None
    shaper: Shaper | None = None
    spam: SpamChecks | None = None
    #: What ``GET /admin/v1`` tells of this node (version, roles; the onion address once published).
    node_info: dict = attrs.Factory(dict)


def dashboard_of(clock, config: Config, db: Database, master: bytes, keyring: KeyRing) -> Dashboard:
    settings = config.dashboard
    return Dashboard(
        clock, db, credentials.derive(master, "dashboard-password-links"), credentials.derive(master, "dashboard-csrf"),
        SessionSettings(settings.session_idle, settings.session_lifetime, settings.link_lifetime),
        run_blocking=lambda fn: threads.deferToThreadPool(clock, clock.getThreadPool(), fn),
        throttle=Throttle(clock, db), keys=keyring,
    )


class LagProbe:
    """Ticks every INTERVAL seconds; how late each tick ran is the event loop's lag."""

    INTERVAL = 1.0

    def __init__(self, clock, report: Callable[[float], None]):
        self._clock = clock
        self._report = report
        self._last: float | None = None

    async def tick(self) -> None:
        now = self._clock.seconds()
        if self._last is not None:
            self._report(max(0.0, now - self._last - self.INTERVAL))
        self._last = now


@attrs.frozen
class StatsOf:
    """mailsvc.store.stats bound to one database (what Metrics.sample reads)."""

    db: Database

    async def mail_today(self, day):
        return await stats.mail_today(self.db, day)

    async def queues(self):
        return await stats.queues(self.db)

    async def broadcast_progress(self):
        return await stats.broadcast_progress(self.db)


def assemble(clock, config: Config, db: Database, master: bytes, operator_token: str) -> Parts:
    metrics = Metrics()
    keyring = KeyRing(
        clock, db, credentials.derive(master, "api-key-hmac"), config.api.key_tag,
        config.api.auth_cache_seconds,
    )
    limiter = RateLimiter(clock, db, config.api.burst_factor)
    # The one check of outside addresses and the one outbound HTTP client (DESIGN.md).
    resolver = build_resolver(clock, config.dns.servers)
    addresses = PublicAddresses(clock, resolver, config.security.allow_private_targets,
                                config.security.test_public_addresses)
    # Up to every request a node has in flight may go to one host (several webhooks on it).
    fetcher = Fetcher(clock, addresses, config.security.ca_file, config.webhooks.max_in_flight)
    # The template builder's renderer (its e-mails show the social icons this node serves at
    # public_url) and its AI helper (any OpenAI-compatible provider, through the same client);
    # the account's usage shows the helper's figures.
    renderer = BuilderRenderer(config.http.public_url or f"https://{config.hostname}")
    ai = AiHelper(clock, db, fetcher, config.ai, renderer)
    accounts = Accounts(clock, db, keyring, config.api.rate_per_sec, ai)
    dashboard = dashboard_of(clock, config, db, master, keyring)
    # The audit log and the named operator tokens besides the configured one (issue 31).
    audit_log = AuditLog(clock, db)
    operator_tokens = OperatorTokens(clock, db, credentials.derive(master, "operator-token-hmac"), audit_log)
    router = Router(clock, keyring, limiter, operator_token, config.http.request_timeout,
                    public_origins=config.public.cors_origins, sessions=dashboard,
                    dashboard_origins=config.dashboard.origins, operator_tokens=operator_tokens)
    router.mount(AuthResource(dashboard, config.http.public_url, audit_log))
    dashboard_reads = DashboardReads(db)
    router.mount(UiResource(dashboard_reads))
    router.mount(ContentReads(dashboard_reads))
    router.mount(ApiKeysResource(keyring))
    node_info = {"version": __version__, "roles": list(config.node.roles), "onion": None}
    router.mount(OperatorResource(accounts, Destinations(db, config.delivery.source), metrics, node_info))
    router.mount(QueueResource(Queue(clock, db, audit_log), operator_tokens, audit_log, accounts))
    router.mount(UsageResource(accounts))
    router.mount(WaitlistResource(accounts))
    router.mount(HealthResource(Health(db)))
    router.mount(OpenApiResource(router, config.http.public_url))
    router.mount(SuppressionsResource(Suppressions(clock, db)))
    # Templates, and the template builder whose renderer (above) turns their builder documents
    # into html and text.
    templates = Templates(clock, db, renderer)
    # The spam score (issue 23): spamd when spam.spamd is set; previews and /emails/check only.
    spam = SpamChecks(SpamAssassin(clock, config.spam.spamd, config.spam.timeout) if config.spam.spamd else None,
                      config.hostname, float(config.spam.broadcast_threshold or 0))
    router.mount(TemplatesResource(templates, spam))
    router.mount(SpamResource(spam))
    # Contacts, segments and the legacy audience paths over the same segments.
    contacts = Contacts(clock, db)
    segments = Segments(clock, db)
    router.mount(ContactsResource(contacts))
    router.mount(SegmentsResource(segments, contacts))
    router.mount(AudiencesResource(segments, contacts))

    def count_failure(desc: str) -> None:
        metrics.loop_failures.labels(desc).inc()

    notifications = Notifications(db)
    # The builder and brand import use the AI helper built above.
    builder = Builder(clock, db, renderer, ai)
    router.mount(BuilderResource(builder, social_icons()))
    router.mount(AiResource(ai))
    brand = BrandImporter(
        clock, db, fetcher, builder, ai, config.brand, tuple(int(p) for p in config.security.test_extra_ports),
        run_blocking=lambda fn: threads.deferToThreadPool(clock, clock.getThreadPool(), fn),
    )
    router.mount(BrandResource(brand, config.http.public_url))
    webhook_registry = WebhookRegistry(
        clock, db, addresses,
        credentials.vault(master, credentials.old_master_keys(config.security.old_master_keys), "webhook-secrets"),
    )
    router.mount(WebhooksResource(webhook_registry))
    dispatcher = Dispatcher(
        clock, db, fetcher, webhook_registry, config.webhooks.concurrency_per_endpoint,
        config.webhooks.max_in_flight, config.webhooks.host_concurrency, config.webhooks.host_rate_per_sec,
        on_failure=count_failure,
    )

    # One key makes the VERP return paths of outgoing mail and checks those coming back.
    verp_key = credentials.derive(master, "verp")
    # The node's opened DKIM keys: the domains seal and check them, the delivery worker signs.
    signing_keys = SigningKeys(
        credentials.vault(master, credentials.old_master_keys(config.security.old_master_keys), "dkim-keys")
    )
    # TLS reporting (RFC 8460): sessions under MTA-STS or DANE counted, reported once a day.
    # Reports to mailto: addresses are the operator's account's own mail through the one accept
    # path (tlsrpt.account, from tlsrpt.sender): DKIM-signed and delivered by the MTA.
    tls_reports = TlsReports(clock, db, resolver, fetcher, config.hostname,
                             mailer=_system_mailer(db, lambda: submitter, config.tlsrpt.account),
                             mail_from=config.tlsrpt.sender)
    # Adaptive shaping: per destination limits, shared through PostgreSQL by every node.
    shaper = Shaper(clock, db, config.delivery.source,
                    Limits(config.delivery.default_concurrency, config.delivery.default_rate_per_sec),
                    on_change=metrics.destination_limits)
    worker = _delivery_worker(clock, config, db, verp_key, resolver, addresses, signing_keys, count_failure,
                              lambda outcome: metrics.delivery_outcomes.labels(outcome).inc(), fetcher, tls_reports,
                              shaper)
    metrics.deliveries_in_flight.set_function(lambda: worker.in_flight)
    return_path = ReturnPath(clock, db, verp_key, config.dmarc.max_xml_bytes)

    role_parts = [_engine_part(notifications, dispatcher), _engine_part(notifications, worker)]

    # The check loop calls the domains, which wake it when a check is due at once.
    check_domains = Loop(clock, "check domains", config.domains.check_interval, lambda: domains.check_due(),
                         on_failure=count_failure)
    domains = _domains(clock, config, db, signing_keys, resolver, check_domains.wake)
    router.mount(DomainsResource(domains))
    router.mount(ReadsResource(dashboard, dashboard_reads, domains))

    # RFC 8058 one-click unsubscribe links of the broadcast stream.
    unsubscribes = Unsubscribes(clock, db, credentials.derive(master, "unsubscribe-links"), config.http.public_url)
    router.mount(UnsubscribeResource(unsubscribes))
    idempotency_keys = IdempotencyKeys(clock, db)
    schedules = Schedules(lambda fn: threads.deferToThreadPool(clock, clock.getThreadPool(), fn),
                          config.api.date_languages)
    submitter = Submitter(
        clock, db, idempotency_keys, domains.sending_domain, suppression_list.suppressed_for,
        lambda url, max_bytes, timeout: fetcher.get(url, max_bytes, timeout, allow_http=True),
        schedules, unsubscribes=unsubscribes, templates=templates.published,
    )
    emails = Emails(clock, db, credentials.derive(master, "attachment-links"), suppression_list.suppressed_for,
                    schedules)
    router.mount(EmailsResource(submitter, emails, config.http.public_url))
    # Broadcasts: the resource, the scheduled release (scheduler role) and the fan-out through
    # the one accept path (broadcasts role).
    broadcasts = Broadcasts(clock, db, schedules, config.http.public_url, spam)
    router.mount(BroadcastsResource(broadcasts))
    fanout = Fanout(clock, db, submitter, chunk=config.broadcasts.chunk,
                    lease_seconds=config.broadcasts.lease_seconds, on_failure=count_failure)
    role_parts.append(_engine_part(notifications, fanout))
    intake = SmtpIntake(submitter, limiter, domains.sending_domain)
    submission = Submission(keyring.authenticate, intake.accept_message, config.hostname,
                            auth_failures=SmtpAuthFailures(Throttle(clock, db), clock))

    site = Site(router.resource(), clock, metrics, admit=router.admit, body_limit=router.body_limit,
                header_timeout=config.http.header_timeout, body_timeout=config.http.body_timeout)
    metrics.in_flight.set_function(lambda: site.in_flight)

    lag = LagProbe(clock, metrics.loop_lag.set)

    async def sample_metrics() -> None:
        metrics.pool_use(*db.pool_use())
        day = timefmt.from_seconds(clock.seconds()).replace(hour=0, minute=0, second=0, microsecond=0)
        await metrics.sample(StatsOf(db), day)

    loops = [
        Loop(clock, "record api key use", LAST_USED_FLUSH_SECONDS, keyring.flush_last_used,
             on_failure=count_failure),
        Loop(clock, "event loop lag", LagProbe.INTERVAL, lag.tick, on_failure=count_failure),
        Loop(clock, "sample metrics", SAMPLE_METRICS_SECONDS, sample_metrics, on_failure=count_failure),
    ]
    release = Loop(clock, "release scheduled emails", SCHEDULE_RELEASE_SECONDS, emails.release_due,
                   on_failure=count_failure)
    release_broadcasts = Loop(clock, "release scheduled broadcasts", SCHEDULE_RELEASE_SECONDS,
                              broadcasts.release_due, on_failure=count_failure)
    if "delivery" in config.node.roles:
        loops.append(Loop(clock, "read destination limits", SYNC_SECONDS, shaper.sync, on_failure=count_failure))
        loops.append(Loop(clock, "write tls report counts", TLS_COUNTS_SECONDS, tls_reports.flush,
                          on_failure=count_failure))
    async def maintain_partitions() -> None:
        for change in await partitions.maintain(db, timefmt.from_seconds(clock.seconds())):
            log.info("time partitions: {action} {name}", action=change["action"], name=change["partition_name"])

    if "scheduler" in config.node.roles:
        loops += [check_domains, release, release_broadcasts,
                  Loop(clock, "send tls reports", TLS_REPORTS_SECONDS, tls_reports.send_due, on_failure=count_failure),
                  Loop(clock, "maintain time partitions", PARTITION_MAINTENANCE_SECONDS, maintain_partitions,
                       on_failure=count_failure)]
    return Parts(
        db, metrics, keyring, accounts, router, site, loops, node_info=node_info,
        notifications=notifications, fetcher=fetcher, webhooks=webhook_registry,
        dispatcher=dispatcher, delivery=worker, return_path=return_path, role_parts=role_parts, domains=domains,
        emails=emails, submission=submission, submitter=submitter, templates=templates,
        contacts=contacts, segments=segments, dashboard=dashboard, broadcasts=broadcasts, fanout=fanout,
        tls_reports=tls_reports, shaper=shaper, spam=spam,
    )


def _system_mailer(db: Database, submitter: Callable[[], Submitter], account: str):
    """Mail of the service's own (TLS reports) sent as the configured account's, through submit."""
    tenant_id = parse_uuid(account) if account else None
    if tenant_id is None:
        return None

    async def send(to: list[str], raw: bytes) -> None:
        tenant = await accounts_store.get_tenant(db, tenant_id)
        if tenant is None:
            raise ValueError(f"tlsrpt.account: no account {tenant_id}")
        await submitter().submit(ServiceSender(tenant), [Item.of(submission_from_message(raw, to), raw)], "system")

    return send


def _delivery_worker(clock, config: Config, db: Database, verp_key: bytes, resolver, addresses: PublicAddresses,
                     signing_keys: SigningKeys, on_failure, on_outcome, fetcher: Fetcher,
                     tls_reports: TlsReports, shaper: Shaper) -> delivery.DeliveryWorker:
    """The MTA side: MX routes, pooled outbound SMTP connections, the delivery queue worker."""
    settings = config.delivery
    relay = None
    if settings.relay_host:
        relay = Destination(settings.relay_host, settings.relay_port, ENFORCED, relay=True)
    relay_auth = (settings.relay_username, settings.relay_password) if settings.relay_username else None
    trust = TrustRoots(config.security.ca_file)
    store = TrustStore(config.security.ca_file)
    policies = None
    if settings.mta_sts or settings.dane:
        secure = SecureResolver(clock, config.dns.servers or _system_servers()) if settings.dane else None
        policies = Policies(clock, db, resolver, secure, fetcher if settings.mta_sts else _NoFetcher(),
                            config.security.test_mta_sts_port or 443, tls_reports.count)

    async def connect(destination: Destination) -> OutboundSMTP:
        if destination.relay:
            endpoint = endpoints.HostnameEndpoint(clock, destination.host, destination.port, timeout=30)
            verified = tls.verified_client_options(destination.host, trust)
            if settings.relay_tls == "implicit":
                endpoint = endpoints.wrapClientTLS(verified, endpoint)
            tls_policy, tls_options = ("opportunistic", None) if settings.relay_tls != "starttls" else (
                ENFORCED, verified)
            protocol = OutboundSMTP(clock, config.hostname, tls_policy, tls_options, auth=relay_auth,
                                    allow_plaintext_auth=settings.relay_tls != "starttls")
        else:
            address = await addresses.check(destination.host)
            endpoint_type = endpoints.TCP4ClientEndpoint if address.version == 4 else endpoints.TCP6ClientEndpoint
            endpoint = endpoint_type(clock, str(address), destination.port, timeout=30)
            if destination.auth is not None:
                # MTA-STS or DANE: the certificate is checked once TLS is up (crypto/peers.py).
                creator = RecordingClientTLS(destination.host)
                protocol = OutboundSMTP(clock, config.hostname, destination.tls_policy, creator,
                                        peer_policy=PeerPolicy(destination.auth, creator, store, tls_reports.count))
            else:
                # No policy: TLS protects against passive eavesdropping; "enforced" means never
                # in plain text.
                protocol = OutboundSMTP(clock, config.hostname, destination.tls_policy,
                                        tls.unverified_client_options())
        await endpoints.connectProtocol(endpoint, protocol)
        return protocol

    node_name = f"{socket.gethostname()}:{os.getpid()}"
    return delivery.DeliveryWorker(
        clock, db, Routes(clock, resolver), Connections(clock, connect, settings.per_destination, shaper=shaper),
        delivery.Settings(
            node_name, settings.port, verp_key, settings.lease_seconds,
            settings.batch, settings.max_in_flight, relay,
        ),
        signing_keys,
        on_failure=on_failure, on_outcome=on_outcome, policies=policies, on_reply=shaper.observe,
    )


class _NoFetcher:
    """delivery.mta_sts off: no policy is ever fetched."""

    async def get(self, *args, **kwargs):
        raise RuntimeError("MTA-STS is switched off (delivery.mta_sts)")


def _system_servers() -> tuple[str, ...]:
    """The nameservers of /etc/resolv.conf, for the DNSSEC-validated lookups."""
    servers = []
    try:
        with open("/etc/resolv.conf", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver":
                    servers.append(parts[1] if ":" not in parts[1] else f"[{parts[1]}]:53")
    except OSError:
        pass
    return tuple(servers) or ("127.0.0.1:53",)


def _domains(clock, config: Config, db: Database, keys: SigningKeys, resolver, wake) -> Domains:
    http = HTTPClient(Agent(clock, tls.VerifiedHTTPS(), pool=HTTPConnectionPool(clock, persistent=False)))
    settings = Settings(
        config.domains.region, config.hostname, config.spf_include,
        config.domains.verification_window, config.domains.recheck_interval,
    )
    return Domains(
        clock, db, keys, resolver,
        Cloudflare(clock, http, config.domains.cloudflare_base_url), settings, wake,
        run_blocking=lambda fn: threads.deferToThreadPool(clock, clock.getThreadPool(), fn),
    )


async def listen_submission(reactor, description: str, submission: Submission, options,
                            inherited: processes.Inherited | None = None):
    """
    One submission listener. ``ssl:...`` is implicit TLS (465/2465) with our certificate;
    ``tcp:...`` offers STARTTLS (587/2587).
    """
    implicit = description.startswith("ssl:")
    factory = SubmissionFactory(reactor, submission, options, implicit_tls=implicit)
    if implicit:
        factory = TLSMemoryBIOFactory(options, False, factory)
    return await processes.listen(reactor, "submission", description, factory, inherited)


async def start(reactor, config: Config, node: Node, inherited: processes.Inherited | None = None) -> None:
    # Traversable (not listable) so the embedded cluster's unprivileged owner reaches its
    # directory; the secrets in it are 0600.
    config.state_dir.mkdir(parents=True, exist_ok=True)
    config.state_dir.chmod(0o711)
    if config.manhole.listen:
        manhole.check_endpoint(config.manhole.listen)  # refused before anything starts
    master = credentials.master_key(config.security.master_key, config.state_dir)
    operator_token, token_path = credentials.operator_token(config.operator.token, config.state_dir)

    # A worker's parent migrated and resealed before starting it.
    db = await open_store(reactor, config, node, migrated=inherited is not None)
    parts = assemble(reactor, config, db, master, operator_token)
    first = key_path = None
    if inherited is None:
        await reseal(config, db, master)
        if "api" in config.node.roles:  # before the node answers: its key's file is there by then
            first, key_path = await first_account(config, parts.dashboard, db, parts.accounts.create_tenant)
    # Closed after everything that makes outbound requests or listens has stopped.
    node.on_stop("outbound HTTP connections", parts.fetcher.close)
    node.on_stop("LISTEN connection", parts.notifications.stop)
    # Registered before the loops, so it runs after they stopped: the last uses are written.
    node.on_stop("api key use", parts.keyring.flush_last_used)
    loops = parts.loops
    if parts.metrics.shared_dir:
        loops = [*loops, Loop(reactor, "share gauges", SHARE_GAUGES_SECONDS, parts.metrics.share_gauges,
                              on_failure=lambda desc: parts.metrics.loop_failures.labels(desc).inc())]
    for loop in loops:
        loop.start()
        node.on_stop(loop.desc, loop.stop)
    # Role-gated parts (the webhook dispatcher) stop before the loops and the pool.
    for part in parts.role_parts:
        if part.role in config.node.roles:
            await part.start()
            node.on_stop(part.desc, part.stop)

    tls_options = None
    if config.smtp.submission or config.smtp.inbound:
        cert, key = tls.server_pem(config.tls.cert, config.tls.key, config.state_dir, config.hostname)
        tls_options = tls.server_options(cert, key)

    if "delivery" in config.node.roles and config.smtp.inbound:
        factory = inbound.InboundFactory(
            reactor, config.hostname, parts.return_path.accepts, parts.return_path.deliver, tls_options=tls_options,
        )
        inbound_port = await processes.listen(reactor, "inbound", config.smtp.inbound, factory, inherited)
        node.on_stop("SMTP return path", inbound_port.stopListening)
        node.parts["inbound_port"] = inbound_port.getHost().port
        if inherited is None:  # a worker's listeners are its parent's to tell
            log.info("SMTP return path listening on {endpoint}", endpoint=config.smtp.inbound)

    if "api" in config.node.roles:
        site = parts.site
        port = await processes.listen(reactor, "http", config.http.listen, site, inherited)

        async def drain():
            await port.stopListening()
            if site.in_flight:
                log.info("draining {n} HTTP requests", n=site.in_flight)
                waiting = site.drained()
                waiting.addTimeout(config.http.drain_timeout, reactor)
                try:
                    await waiting
                except Exception:
                    log.warn("gave up waiting for {n} HTTP requests", n=site.in_flight)

        node.on_stop("HTTP listener", drain)
        address = port.getHost()
        node.parts["http_port"] = address.port
        if inherited is None:
            log.info("HTTP API listening on {host}:{port}", host=address.host, port=address.port)

        if config.tor.onion:
            await start_onion(reactor, config, node, parts, address, inherited)

        if config.smtp.submission:
            node.parts["smtp_ports"] = []
            for description in config.smtp.submission:
                smtp_port = await listen_submission(reactor, description, parts.submission, tls_options, inherited)
                node.on_stop(f"SMTP submission {description}", smtp_port.stopListening)
                node.parts["smtp_ports"].append(smtp_port.getHost().port)
                if inherited is None:
                    log.info("SMTP submission listening on {endpoint}", endpoint=description)

    if config.manhole.listen:
        names = manhole.namespace(parts=parts, db=db, node=node, config=config, reactor=reactor)
        ssh_port = await manhole.listen(reactor, config.manhole.listen, names, config.state_dir)
        node.on_stop("SSH manhole", ssh_port.stopListening)
        node.parts["manhole_address"] = ssh_port.getHost()
        log.info("SSH manhole listening on {address}", address=manhole.describe(ssh_port.getHost()))

    node.parts["assembled"] = parts
    if inherited is None:
        announce_node(config, "one process", token_path, first, key_path, node.parts.get("http_port"))


#: The name of a development start's first key (``<state dir>/api-key``), to find and revoke it by.
FIRST_KEY_NAME = "first key (scripts/serve)"


def keeps_first_key(config: Config) -> bool:
    """A development start (``dashboard.first_key_file``, set by scripts/serve) on the embedded store."""
    return config.dashboard.first_key_file and not config.database.dsn


async def first_account(config: Config, dashboard: Dashboard, db: Database,
                        create_tenant: Callable[..., Awaitable]) -> tuple[FirstOwner | None, Path | None]:
    """
    A fresh install's first account and user (``dashboard.first_user``); on a development start,
    the file that keeps the account's first key (written when the account is made, never again).
    """
    keeps_key = keeps_first_key(config)
    first = await first_owner(dashboard, db, config.dashboard.first_user, create_tenant,
                              key_name=FIRST_KEY_NAME if keeps_key else "Default")
    if first is None or not keeps_key:
        return first, None
    if first.api_key is not None:
        credentials.write_account_key(config.state_dir, first.api_key)
    key_path = config.state_dir / credentials.ACCOUNT_KEY_FILE
    return first, key_path if key_path.exists() else None


def announce_node(config: Config, processes_text: str, token_path: Path | None, first: FirstOwner | None,
                  key_path: Path | None, port: int | None) -> None:
    """
    What the node is, said once by the process that started it (its workers say none of it), and
    last what a newcomer needs: the operator token's file, the set-password link of a fresh
    install's first user and the file of its account's first key (scripts/serve shows them).
    """
    store = f"embedded PostgreSQL in {config.state_dir / 'postgresql'}" if not config.database.dsn \
        else "PostgreSQL at database.dsn"
    log.info("mailsvc {version}: roles {roles}; {processes}; store: {store}; mail hostname {hostname}",
             version=__version__, roles=", ".join(config.node.roles), processes=processes_text, store=store,
             hostname=config.hostname)
    reason = unpublishable_reason(config.hostname)
    if reason is not None:
        log.warn("{reason}", reason=reason)
    if token_path is not None:
        log.info("operator token is in {path}", path=token_path)
    if first is not None and first.password_token is not None and port is not None:
        base = config.http.public_url.rstrip("/") or f"http://127.0.0.1:{port}"
        log.info("dashboard: {email} sets a password at {link}", email=first.user["email"],
                 link=set_password_link(base, first.password_token))
    if key_path is not None:
        log.info('API key of the first account ("{name}", revocable) is in {path}', name=FIRST_KEY_NAME,
                 path=str(key_path))


async def start_onion(reactor, config: Config, node: Node, parts: Parts, http_address,
                      inherited: processes.Inherited | None) -> None:
    """
    ``tor.onion``: the HTTP API as a v3 onion service (mailsvc.onion), published by the node's
    first process only; the other workers read its address from the state directory so that
    ``GET /admin/v1`` tells it whichever worker answers.
    """
    shared = config.state_dir / ONION_ADDRESS_FILE
    if inherited is not None and inherited.slot != 0:
        async def read_address() -> None:
            try:
                parts.node_info["onion"] = shared.read_text().strip() or None
            except FileNotFoundError:
                parts.node_info["onion"] = None

        loop = Loop(reactor, "read onion address", ONION_ADDRESS_SECONDS, read_address)
        loop.start()
        node.on_stop(loop.desc, loop.stop)
        return

    import txtorcon

    shared.unlink(missing_ok=True)  # left by a run that did not stop cleanly
    password = config.tor.control_password

    def connect():
        return txtorcon.build_tor_connection(
            endpoints.clientFromString(reactor, config.tor.control), build_state=False,
            password_function=lambda: password or None,
        )

    def published(address: str) -> None:
        parts.node_info["onion"] = address
        if inherited is not None:
            partial = shared.with_name(shared.name + ".partial")
            partial.write_text(address + "\n")
            os.replace(partial, shared)

    service = onion.OnionService(
        reactor, connect, config.state_dir / onion.KEY_FILE, config.tor.port,
        onion.port_target(http_address.host, http_address.port), published,
    )

    async def stop() -> None:
        await service.stop()
        parts.node_info["onion"] = None
        shared.unlink(missing_ok=True)

    await service.start()
    node.on_stop("onion service", stop)
    node.parts["onion"] = service


async def reseal(config: Config, db: Database, master: bytes) -> None:
    old_masters = credentials.old_master_keys(config.security.old_master_keys)
    await resealing.reseal(db, credentials.vault(master, old_masters, "webhook-secrets"),
                           credentials.vault(master, old_masters, "dkim-keys"))


async def start_parent(reactor, config: Config, node: Node, worker_command: list[str]) -> None:
    """
    The parent of a node's workers (docs/decisions.md, "Processes of a node"): what is done
    once (secrets, TLS material, the embedded cluster, migrations, resealing), then the
    listening sockets, then the workers that serve them.
    """
    config.state_dir.mkdir(parents=True, exist_ok=True)
    config.state_dir.chmod(0o711)
    if config.manhole.listen:
        manhole.check_endpoint(config.manhole.listen)
    master = credentials.master_key(config.security.master_key, config.state_dir)
    _, token_path = credentials.operator_token(config.operator.token, config.state_dir)
    if config.smtp.submission or config.smtp.inbound:
        tls.server_pem(config.tls.cert, config.tls.key, config.state_dir, config.hostname)

    dsn = await database_dsn(reactor, config, node)
    db = Database(reactor, dsn, 1, config.database.statement_timeout)
    await db.start()
    try:
        await migrate(db)
        await reseal(config, db, master)
        keyring = KeyRing(reactor, db, credentials.derive(master, "api-key-hmac"), config.api.key_tag, 0)
        dashboard = dashboard_of(reactor, config, db, master, keyring)
        accounts = Accounts(reactor, db, keyring, config.api.rate_per_sec)
        first, key_path = await first_account(config, dashboard, db, accounts.create_tenant)
    finally:
        db.stop()

    listeners = [("http", config.http.listen), *(("submission", d) for d in config.smtp.submission)]
    if "delivery" in config.node.roles and config.smtp.inbound:
        listeners.append(("inbound", config.smtp.inbound))
    ports = await processes.open_sockets(reactor, listeners)
    for name, port in ports.items():
        node.on_stop(f"socket {name}", port.stopListening)
    address = ports[processes.listener("http", config.http.listen)].getHost()
    node.parts["http_port"] = address.port
    log.info("HTTP API listening on {host}:{port}", host=address.host, port=address.port)
    node.parts["smtp_ports"] = []
    for description in config.smtp.submission:
        node.parts["smtp_ports"].append(ports[processes.listener("submission", description)].getHost().port)
        log.info("SMTP submission listening on {endpoint}", endpoint=description)
    if "delivery" in config.node.roles and config.smtp.inbound:
        log.info("SMTP return path listening on {endpoint}", endpoint=config.smtp.inbound)

    # The workers' values of one /metrics (prometheus_client's multiprocess mode); those of an
    # earlier run are gone with its processes.
    metrics_dir = config.state_dir / "metrics"
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(mode=0o700)
    sockets, child_fds = processes.worker_sockets(ports)

    def spawn(worker, slot: int) -> None:
        environ = dict(
            os.environ, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
            MAILSVC_NODE_ROLES=",".join(processes.worker_roles(config.node.roles, slot)),
        )
        if not config.database.dsn:
            environ["MAILSVC_DATABASE_DSN"] = dsn  # the embedded cluster, started once, here
        if slot:
            environ["MAILSVC_MANHOLE_LISTEN"] = ""  # the first worker's, like the other once-per-node parts
        inherited = processes.Inherited(slot, sockets)
        reactor.spawnProcess(worker, worker_command[0], [*worker_command, "--worker", inherited.to_json()],
                             env=environ, childFDs={0: "w", 1: 1, 2: 2, **child_fds})

    supervisor = processes.Supervisor(
        reactor, config.node.process_count, spawn, kill_after=config.http.drain_timeout + 30,
        on_exit=lambda pid: Metrics.process_gone(str(metrics_dir), pid),
    )
    supervisor.start()
    node.on_stop("workers", supervisor.stop)
    node.parts["supervisor"] = supervisor
    announce_node(config, f"{config.node.process_count} worker processes", token_path, first, key_path,
                  address.port)
