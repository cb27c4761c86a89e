"""
The composition root: the only module that touches the global reactor. It builds every part
from the configuration and hands each its collaborators through its constructor.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import shutil
import socket
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import attrs
from treq.client import HTTPClient
from twisted.internet import defer, endpoints, threads
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IResolver
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.web.client import Agent, HTTPConnectionPool

from mailsvc import __version__, manhole, onion, processes, timefmt
from mailsvc.app import resealing, suppressions
from mailsvc.app.accounts import Accounts
from mailsvc.app.ai import AiHelper
from mailsvc.app.apikeys import KeyRing
from mailsvc.app.audit import AuditLog, OperatorTokens
from mailsvc.app.brand import BrandImporter
from mailsvc.app.broadcasts import Broadcasts
from mailsvc.app.builder import Builder
from mailsvc.app.console import Console
from mailsvc.app.contacts import Contacts
from mailsvc.app.dashboard import Dashboard, FirstOwner, LinkCaps, first_owner
from mailsvc.app.dashboard_reads import DashboardReads
from mailsvc.app.domains import Domains, Settings, SigningKeys
from mailsvc.app.emails import Emails, Schedules
from mailsvc.app.health import Health
from mailsvc.app.idempotency import IdempotencyKeys
from mailsvc.app.inbox import Inbox
from mailsvc.app.messages import Messages
from mailsvc.app.operator import Destinations
from mailsvc.app.queue import Queue
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.app.segments import Segments
from mailsvc.app.signin import SessionSettings
from mailsvc.app.spam import SpamChecks
from mailsvc.app.submit import Item, ServiceSender, Submitter, TestSends
from mailsvc.app.suppressions import Suppressions
from mailsvc.app.templates import Templates
from mailsvc.app.throttle import SmtpAuthFailures, Throttle
from mailsvc.app.unsubscribe import Unsubscribes
from mailsvc.app.webhooks import WebhookRegistry
from mailsvc.broadcasting.fanout import Fanout
from mailsvc.config import Config
from mailsvc.crypto import credentials, tls
from mailsvc.crypto.keyvault import KeyVault
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
from mailsvc.dns.resolver import build_resolver, system_servers
from mailsvc.dns.secure import SecureResolver
from mailsvc.dnsprov.cloudflare import Cloudflare
from mailsvc.domain.domains import unpublishable_reason
from mailsvc.domain.emailhtml import BuilderRenderer
from mailsvc.domain.shaping import Limits
from mailsvc.domain.shares import Share
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.engine import LeasedEngine
from mailsvc.http.access import access_kinds
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
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.console import ConsoleResource
from mailsvc.http.dashboard.auth import AuthResource, set_password_link
from mailsvc.http.dashboard.content import ContentReads
from mailsvc.http.dashboard.inbox import InboxResource
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
from mailsvc.mail import simulated
from mailsvc.mail.limits import MimeLimits
from mailsvc.mail.spam import SpamAssassin
from mailsvc.metrics import LagProbe, Metrics
from mailsvc.outside.addresses import PublicAddresses
from mailsvc.outside.fetch import Fetcher, TrustRoots
from mailsvc.service import Node
from mailsvc.smtp import inbound
from mailsvc.smtp.intake import SmtpIntake
from mailsvc.smtp.message import submission_from_message
from mailsvc.smtp.outbound import ENFORCED
from mailsvc.smtp.submission import Submission, SubmissionFactory
from mailsvc.store import accounts as accounts_store
from mailsvc.store import deliveries as deliveries_store
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
#: How often a delivery node looks for suspended accounts' queued mail to fail in bulk, and for
#: held accounts' new mail to hold (the claim never takes either).
QUEUE_SWEEP_SECONDS = 5
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
#: Start failures that explain themselves in one line (no traceback in the log).
EXPECTED_FAILURES = (OSError, ValueError, CannotListenError, DatabaseUnavailable, ClusterError, MigrationError)


def build(config: Config, inherited: processes.Inherited | None = None,
          worker_command: list[str] | None = None) -> Node:
    """
    The node: one process serving everything, or (``node.processes`` above 1, a role every
    worker runs, and the ``worker_command`` that starts a worker) the parent of its workers;
    ``inherited``: this process is a worker, serving the sockets its parent opened.
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
            and not processes.EVERY_WORKER.isdisjoint(config.node.roles):
        node = Node(lambda node: start_parent(reactor, config, node, worker_command), fail, EXPECTED_FAILURES)
    else:
        node = Node(lambda node: start(reactor, config, node, inherited), fail, EXPECTED_FAILURES)
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
    Every process running the role (``worker_roles``) runs an engine of its own."""

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
    delivery: DeliveryWorker
    return_path: ReturnPath
    role_parts: list[RolePart]
    vaults: Vaults
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


def assemble(clock, config: Config, db: Database, master: bytes, operator_token: str,
             share: Share = Share()) -> Parts:
    """
    Every part of a node, each built after the parts it takes (one builder per feature); the
    routes are mounted in the order ``/openapi.json`` lists them. ``share``: this process's part
    of the node's delivery and webhook limits (one of its workers: ``worker_share``).
    """
    metrics = Metrics()

    def count_failure(desc: str) -> None:
        metrics.loop_failures.labels(desc).inc()

    run_blocking = thread_pool_runner(clock)
    vaults = vaults_of(config, master)
    keyring = KeyRing(clock, db, credentials.derive(master, "api-key-hmac"), config.api.key_tag,
                      config.api.auth_cache_seconds)
    limiter = RateLimiter(clock, db, config.api.burst_factor)
    outside = _outside(clock, config)
    # The template builder's renderer (its e-mails show the social icons this node serves at
    # public_url) and its AI helper (any OpenAI-compatible provider, through the one client).
    renderer = BuilderRenderer(PublicUrl(config.http.public_url).or_else(f"https://{config.hostname}"))
    ai = AiHelper(clock, db, outside.fetcher, config.ai, renderer)
    dashboard = dashboard_of(clock, config, db, master, keyring, run_blocking, vaults.two_factor)
    # The audit log and the named operator tokens besides the configured one (issue 31).
    audit_log = AuditLog(clock, db)
    operator_tokens = OperatorTokens(clock, db, credentials.derive(master, "operator-token-hmac"), audit_log)
    console = Console(clock, db, credentials.derive(master, "console-password-links"),
                      credentials.derive(master, "console-csrf"), Throttle(clock, db), run_blocking,
                      vault=vaults.two_factor)
    router = Router(clock, access_kinds(keyring=keyring, limiter=limiter, operator_token=operator_token,
                                        public_origins=config.public.cors_origins, sessions=dashboard,
                                        dashboard_origins=config.dashboard.origins, operator_tokens=operator_tokens,
                                        console=console), config.http.request_timeout)
    console_resource = ConsoleResource(console, config.http.public_url, audit_log)
    router.mount(console_resource)
    router.mount(console_resource.security)
    dashboard_reads = DashboardReads(db, clock)
    _mount_dashboard(router, config, dashboard, dashboard_reads, audit_log)
    node_info = {"version": __version__, "roles": list(config.node.roles), "onion": None}
    accounts = _accounts(clock, config, db, keyring, ai, metrics, node_info, audit_log, operator_tokens,
                         outside.resolver, router)
    content = _content(clock, config, db, outside.fetcher, renderer, ai, run_blocking, router)
    webhooks, dispatcher = _webhooks(clock, config, db, outside, vaults.webhook_secrets, share, count_failure,
                                     router)
    # The node's opened DKIM keys: the domains seal and check them, the delivery worker signs.
    signing_keys = SigningKeys(vaults.dkim_keys)
    # Test addresses: accepted without a domain from the test sender, completed at the delivery's
    # door as a receiver would, kept in the development inbox with capture mode's mail; the test
    # domain is nobody's sending domain.
    tests = TestAddresses(config.mail.test_domain.rstrip("."))
    domains, check_domains = _domains(clock, config, db, signing_keys, outside.resolver, run_blocking,
                                      count_failure, router, tests)
    router.mount(ReadsResource(dashboard, dashboard_reads, domains))
    sending = _sending(clock, config, db, master, domains, content.templates, tests, outside.fetcher, keyring, limiter,
                       run_blocking, count_failure, router, share)
    broadcasts, fanout, release_broadcasts = _broadcasts(clock, config, db, sending, domains, content.spam,
                                                         count_failure, router)
    mta = _delivery(clock, config, db, master, outside, signing_keys, sending.submitter, tests, content.spam, metrics,
                    share, count_failure, router)
    notifications = Notifications(db)
    role_parts = [_engine_part(notifications, engine) for engine in (dispatcher, mta.worker, fanout)]
    site = _site(clock, config, router, metrics)
    loops = _process_loops(clock, db, keyring, metrics, count_failure)
    if "delivery" in config.node.roles:
        loops += mta.loops
    if "scheduler" in config.node.roles:
        loops += [check_domains, sending.release, release_broadcasts, *mta.scheduled,
                  _maintain_partitions(clock, db, count_failure)]
    return Parts(
        db, metrics, keyring, accounts, router, site, loops, notifications, outside.fetcher, webhooks, dispatcher,
        mta.worker, mta.return_path, role_parts, vaults, node_info=node_info, domains=domains, emails=sending.emails,
        submission=sending.submission, submitter=sending.submitter, templates=content.templates,
        contacts=content.contacts, segments=content.segments, dashboard=dashboard, broadcasts=broadcasts,
        fanout=fanout, tls_reports=mta.tls_reports, shaper=mta.shaper, spam=content.spam,
    )


def thread_pool_runner(reactor) -> Callable[[Callable[[], Any]], Awaitable[Any]]:
    """Runs a blocking call (password hashing, date parsing, key generation) in the reactor's threads."""

    def run_blocking(fn: Callable[[], Any]) -> Awaitable[Any]:
        return threads.deferToThreadPool(reactor, reactor.getThreadPool(), fn)

    return run_blocking


#: Processes a node's worker process parses stored messages in (the development inbox), each
#: started at its first use.
PARSE_PROCESSES = 2
PARSE_NICENESS = 10


def process_pool_runner(reactor, workers: int = PARSE_PROCESSES) -> Callable[..., Awaitable[Any]]:
    """
    Runs ``fn(*args)`` (a module's function, its arguments and result picklable) in a pool of
    processes: CPU-bound work that a thread would still run under the reactor's GIL (parsing a
    message of 500 parts takes a second). The pool starts at its first use, in a thread (starting
    a process blocks until it runs), and is stopped with the reactor; a pool whose process died
    is started anew.
    """
    pool: list[ProcessPoolExecutor] = []
    starting = threading.Lock()

    def started() -> ProcessPoolExecutor:
        with starting:
            if pool and getattr(pool[0], "_broken", False):
                pool.pop().shutdown(wait=False)
            if not pool:
                # spawn: a process started afresh, not a fork of one running a reactor and threads;
                # at a lower priority (nice 10), so that the reactor's process has a core first.
                executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                               initializer=os.nice, initargs=(PARSE_NICENESS,))
                pool.append(executor)
                reactor.callFromThread(reactor.addSystemEventTrigger, "before", "shutdown", executor.shutdown,
                                       wait=False, cancel_futures=True)
            return pool[0]

    def submitted(fn: Callable[..., Any], args: tuple):
        """The future of ``fn(*args)``; called in a thread (the first call starts the processes)."""
        try:
            return started().submit(fn, *args)
        except BrokenProcessPool:
            return started().submit(fn, *args)  # started anew

    def outcome(future) -> defer.Deferred:
        result: defer.Deferred = defer.Deferred()

        def fire(done) -> None:
            if done.cancelled():
                result.errback(defer.CancelledError())
            elif done.exception() is not None:
                result.errback(done.exception())
            else:
                result.callback(done.result())

        future.add_done_callback(lambda done: reactor.callFromThread(fire, done))
        return result

    def run(fn: Callable[..., Any], *args) -> defer.Deferred:
        if pool and not getattr(pool[0], "_broken", False):
            try:
                return outcome(pool[0].submit(fn, *args))
            except BrokenProcessPool:
                pass
        return threads.deferToThreadPool(reactor, reactor.getThreadPool(), submitted, fn, args).addCallback(outcome)

    return run


@attrs.frozen
class Vaults:
    """The keys of the secrets stored sealed; each also opens what an old master key sealed."""

    webhook_secrets: KeyVault
    dkim_keys: KeyVault
    #: Two-factor sign-in's TOTP secrets (users' and operators').
    two_factor: KeyVault


def vaults_of(config: Config, master: bytes) -> Vaults:
    old_masters = credentials.old_master_keys(config.security.old_master_keys)
    return Vaults(credentials.vault(master, old_masters, "webhook-secrets"),
                  credentials.vault(master, old_masters, "dkim-keys"),
                  credentials.vault(master, old_masters, "two-factor-secrets"))


@attrs.frozen
class Outside:
    """The one resolver, the one check of outside addresses and the one outbound HTTP client (DESIGN.md)."""

    resolver: IResolver
    addresses: PublicAddresses
    fetcher: Fetcher


def _outside(clock, config: Config) -> Outside:
    resolver = build_resolver(clock, config.dns.servers)
    addresses = PublicAddresses(clock, resolver, config.security.allow_private_targets,
                                config.security.test_public_addresses)
    # Up to every request a node has in flight may go to one host (several webhooks on it).
    fetcher = Fetcher(clock, addresses, config.security.ca_file, config.webhooks.max_in_flight)
    return Outside(resolver, addresses, fetcher)


def dashboard_of(clock, config: Config, db: Database, master: bytes, keyring: KeyRing,
                 run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
                 two_factor: KeyVault | None = None) -> Dashboard:
    settings = config.dashboard
    return Dashboard(
        clock, db, credentials.derive(master, "dashboard-password-links"), credentials.derive(master, "dashboard-csrf"),
        SessionSettings(settings.session_idle, settings.session_lifetime, settings.link_lifetime),
        run_blocking=run_blocking, throttle=Throttle(clock, db), keys=keyring, vault=two_factor,
        link_caps=LinkCaps(settings.links_per_user_hour, settings.links_per_tenant_hour),
    )


def _mount_dashboard(router: Router, config: Config, dashboard: Dashboard, reads: DashboardReads,
                     audit_log: AuditLog) -> None:
    """The dashboard's sign-in and session routes, its pages, and the content editors' reads."""
    auth = AuthResource(dashboard, config.http.public_url, audit_log)
    router.mount(auth)
    router.mount(auth.security)
    router.mount(UiResource(reads))
    router.mount(ContentReads(reads))


def _accounts(clock, config: Config, db: Database, keyring: KeyRing, ai: AiHelper, metrics: Metrics,
              node_info: dict, audit_log: AuditLog, operator_tokens: OperatorTokens, resolver,
              router: Router) -> Accounts:
    """
    Accounts and their API keys, the operator API (the queue, its audit log and named tokens),
    and the OpenAPI document of the router.
    """
    # The account's usage shows the AI helper's figures.
    accounts = Accounts(clock, db, keyring, config.api.rate_per_sec, ai)
    router.mount(ApiKeysResource(keyring))
    router.mount(OperatorResource(accounts, Destinations(db, config.delivery.source), metrics, audit_log, node_info))
    mx_of = Routes(clock, resolver).first_host
    if config.delivery.relay_host:  # every destination's mail goes to the smarthost

        async def mx_of(_domain: str) -> str:
            return config.delivery.relay_host

    router.mount(QueueResource(Queue(clock, db, audit_log, mx_of), operator_tokens, audit_log, accounts))
    router.mount(UsageResource(accounts))
    router.mount(WaitlistResource(accounts))
    router.mount(HealthResource(Health(db)))
    router.mount(OpenApiResource(router, config.http.public_url))
    return accounts


@attrs.frozen
class Content:
    """What ``_content`` builds that other features take (and tests reach through ``Parts``)."""

    templates: Templates
    spam: SpamChecks
    contacts: Contacts
    segments: Segments


def _content(clock, config: Config, db: Database, fetcher: Fetcher, renderer: BuilderRenderer, ai: AiHelper,
             run_blocking, router: Router) -> Content:
    """
    What accounts write their mail with and send it to: the suppression list; templates, whose
    builder documents ``renderer`` turns into html and text, and their spam score; contacts,
    segments and the legacy audience paths over the same segments; the template builder and
    brand import, with the AI helper.
    """
    router.mount(SuppressionsResource(Suppressions(clock, db)))
    templates = Templates(clock, db, renderer)
    # The spam score: spamd when spam.spamd is set; previews and /emails/check only.
    spam = SpamChecks(SpamAssassin(clock, config.spam.spamd, config.spam.timeout) if config.spam.spamd else None,
                      config.hostname, config.spam.broadcast_threshold)
    router.mount(TemplatesResource(templates, spam))
    router.mount(SpamResource(spam))
    contacts = Contacts(clock, db)
    segments = Segments(clock, db)
    router.mount(ContactsResource(contacts))
    router.mount(SegmentsResource(segments, contacts))
    router.mount(AudiencesResource(segments, contacts))
    builder = Builder(clock, db, renderer, ai)
    router.mount(BuilderResource(builder, social_icons()))
    router.mount(AiResource(ai))
    brand = BrandImporter(
        clock, db, fetcher, builder, ai, config.brand, tuple(int(p) for p in config.security.test_extra_ports),
        run_blocking=run_blocking,
    )
    router.mount(BrandResource(brand, config.http.public_url))
    return Content(templates, spam, contacts, segments)


def _webhooks(clock, config: Config, db: Database, outside: Outside, secrets: KeyVault, share: Share, on_failure,
              router: Router) -> tuple[WebhookRegistry, Dispatcher]:
    """
    The webhook endpoints (their signing secrets sealed by ``secrets``) and their dispatcher,
    with ``share`` of the node's requests in flight and per-host limits (``per_endpoint`` is
    counted in PostgreSQL across nodes: whole).
    """
    registry = WebhookRegistry(clock, db, outside.addresses, secrets)
    router.mount(WebhooksResource(registry))
    settings = config.webhooks
    dispatcher = Dispatcher(
        clock, db, outside.fetcher, registry, settings.concurrency_per_endpoint, share.of_count(settings.max_in_flight),
        share.of_count(settings.host_concurrency), share.of_rate(settings.host_rate_per_sec), on_failure=on_failure,
    )
    return registry, dispatcher


def _domains(clock, config: Config, db: Database, keys: SigningKeys, resolver, run_blocking, on_failure,
             router: Router, tests: TestAddresses) -> tuple[Domains, Loop]:
    """Sending domains (DNS records, Cloudflare set-up) and the scheduler's loop checking them."""
    # A true cycle: the loop's step is the domains' check, and the domains wake the loop when a
    # check is due at once. The loop comes first; its step reaches the domains once built.
    check = Loop(clock, "check domains", config.domains.check_interval, lambda: domains.check_due(),
                 on_failure=on_failure)
    http = HTTPClient(Agent(clock, tls.VerifiedHTTPS(), pool=HTTPConnectionPool(clock, persistent=False)))
    settings = Settings(
        config.domains.region, config.hostname, config.spf_include,
        config.domains.verification_window, config.domains.recheck_interval,
        tests,
    )
    domains = Domains(
        clock, db, keys, resolver, Cloudflare(clock, http, config.domains.cloudflare_base_url), settings,
        check.wake, run_blocking=run_blocking,
    )
    router.mount(DomainsResource(domains))
    return domains, check


@attrs.frozen
class Sending:
    """What ``_sending`` builds that other features take: broadcasts and delivery submit through it."""

    submitter: Submitter
    emails: Emails
    schedules: Schedules
    submission: Submission
    #: The scheduler's release of scheduled e-mails.
    release: Loop


def _sending(clock, config: Config, db: Database, master: bytes, domains: Domains, templates: Templates,
             tests: TestAddresses, fetcher: Fetcher, keyring: KeyRing, limiter: RateLimiter, run_blocking, on_failure,
             router: Router, share: Share) -> Sending:
    """
    The one accept path (``Submitter``) behind ``POST /emails`` and SMTP submission, the
    e-mails' reads and the scheduled ones' release, and the one-click unsubscribe links.
    SMTP submission holds ``share`` of the node's connection caps (at least one each).
    """
    # RFC 8058 one-click unsubscribe links of the broadcast stream.
    unsubscribes = Unsubscribes(clock, db, credentials.derive(master, "unsubscribe-links"), config.http.public_url)
    router.mount(UnsubscribeResource(unsubscribes))
    schedules = Schedules(run_blocking, config.api.date_languages)
    suppressed_for = suppressions.with_test_addresses(suppression_list.suppressed_for, tests)
    submitter = Submitter(
        clock, db, IdempotencyKeys(clock, db), domains.sending_domain, suppressed_for,
        lambda url, max_bytes, timeout: fetcher.get(url, max_bytes, timeout, allow_http=True),
        schedules, unsubscribes=unsubscribes, templates=templates.published,
        tests=TestSends(tests, config.mail.refuse_reserved_recipients), limits=MimeLimits.of(config.mail),
    )
    emails = Emails(clock, db, credentials.derive(master, "attachment-links"), suppressed_for, schedules)
    router.mount(EmailsResource(submitter, emails, config.http.public_url))
    intake = SmtpIntake(submitter, limiter, domains.sending_domain, tests, MimeLimits.of(config.mail))
    smtp = config.smtp
    submission = Submission(
        keyring.authenticate, intake.accept_message, config.hostname,
        auth_failures=SmtpAuthFailures(Throttle(clock, db), clock),
        max_connections=max(1, share.of_count(smtp.submission_max_connections)),
        max_connections_per_client=max(1, share.of_count(smtp.submission_max_connections_per_client)),
        command_line_timeout=smtp.submission_command_timeout, session_timeout=smtp.submission_session_timeout,
    )
    release = Loop(clock, "release scheduled emails", SCHEDULE_RELEASE_SECONDS, emails.release_due,
                   on_failure=on_failure)
    return Sending(submitter, emails, schedules, submission, release)


def _broadcasts(clock, config: Config, db: Database, sending: Sending, domains: Domains, spam: SpamChecks,
                on_failure, router: Router) -> tuple[Broadcasts, Fanout, Loop]:
    """
    Broadcasts: the resource, the scheduled release (scheduler role) and the fan-out through the
    one accept path (broadcasts role).
    """
    broadcasts = Broadcasts(clock, db, sending.schedules, domains.sending_domain, config.http.public_url, spam)
    router.mount(BroadcastsResource(broadcasts, config.http.public_url))
    fanout = Fanout(clock, db, sending.submitter, chunk=config.broadcasts.chunk,
                    lease_seconds=config.broadcasts.lease_seconds, on_failure=on_failure)
    release = Loop(clock, "release scheduled broadcasts", SCHEDULE_RELEASE_SECONDS, broadcasts.release_due,
                   on_failure=on_failure)
    return broadcasts, fanout, release


@attrs.frozen
class Delivery:
    """What ``_delivery`` builds: the worker (a role part), the return path, and its loops by role."""

    worker: DeliveryWorker
    return_path: ReturnPath
    tls_reports: TlsReports
    shaper: Shaper
    #: What the delivery role runs besides the worker, and what the scheduler role runs of delivery.
    loops: list[Loop]
    scheduled: list[Loop]


def _delivery(clock, config: Config, db: Database, master: bytes, outside: Outside, signing_keys: SigningKeys,
              submitter: Submitter, tests: TestAddresses, spam: SpamChecks, metrics: Metrics, share: Share,
              on_failure, router: Router) -> Delivery:
    """
    The MTA side: TLS reports, adaptive shaping, the delivery queue worker, the return path, and
    the door where test addresses and capture mode's mail stop (kept in the development inbox).
    """
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
                    on_change=metrics.destination_limits, share=share)
    # One key makes the VERP return paths of outgoing mail and checks those coming back.
    verp_key = credentials.derive(master, "verp")
    # Test addresses are completed through the return path's own handling of DSNs and reports.
    return_path = ReturnPath(clock, db, verp_key, config.dmarc.max_xml_bytes, tests)
    test_signer = simulated.test_signer(verp_key)
    door = Door(clock, db, tests, test_signer, config.hostname, return_path.deliver)
    # Messages stored as content are built at delivery, the broadcast stream's with their unsubscribe links.
    links = credentials.derive(master, "unsubscribe-links")
    messages = Messages(Unsubscribes(clock, db, links, config.http.public_url))
    worker = _delivery_worker(clock, config, db, verp_key, outside, signing_keys, tls_reports, shaper, door, share,
                              on_failure, lambda outcome: metrics.delivery_outcomes.labels(outcome).inc(), messages)
    metrics.deliveries_in_flight.set_function(lambda: worker.in_flight)
    # The inbox reads each message in a pool of processes, within the MIME limits.
    router.mount(InboxResource(Inbox(db, outside.resolver, config.spf_include, test_signer, spam,
                                     process_pool_runner(clock), MimeLimits.of(config.mail))))
    loops = [
        Loop(clock, "read destination limits", SYNC_SECONDS, shaper.sync, on_failure=on_failure),
        Loop(clock, "write tls report counts", TLS_COUNTS_SECONDS, tls_reports.flush, on_failure=on_failure),
        # What the claim never reads: suspended accounts' queues fail here in chunks, held accounts'
        # new mail is held (docs/decisions.md, "A fair claim").
        Loop(clock, "sweep the delivery queue", QUEUE_SWEEP_SECONDS, lambda: deliveries_store.sweep(db, clock),
             on_failure=on_failure),
    ]
    scheduled = [Loop(clock, "send tls reports", TLS_REPORTS_SECONDS, tls_reports.send_due, on_failure=on_failure)]
    return Delivery(worker, return_path, tls_reports, shaper, loops, scheduled)


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


def _delivery_worker(clock, config: Config, db: Database, verp_key: bytes, outside: Outside,
                     signing_keys: SigningKeys, tls_reports: TlsReports, shaper: Shaper, door: Door, share: Share,
                     on_failure, on_outcome, messages: Messages) -> DeliveryWorker:
    """
    MX routes, MTA-STS and DANE, pooled outbound SMTP connections, the delivery queue worker;
    its connections per host and deliveries in flight are ``share`` of the node's.
    """
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
            settings.batch, share.of_count(settings.max_in_flight), relay,
        ),
        signing_keys,
        on_failure=on_failure, on_outcome=on_outcome, policies=policies, on_reply=shaper.observe, door=door,
        messages=messages,
    )


def _site(clock, config: Config, router: Router, metrics: Metrics) -> Site:
    """The HTTP site serving the router; ``/metrics`` shows its requests in flight."""
    site = Site(router.resource(), clock, metrics, admit=router.admit, body_limit=router.body_limit,
                header_timeout=config.http.header_timeout, body_timeout=config.http.body_timeout)
    metrics.in_flight.set_function(lambda: site.in_flight)
    return site


def _process_loops(clock, db: Database, keyring: KeyRing, metrics: Metrics, on_failure) -> list[Loop]:
    """What every process runs: its API keys' last uses written, the event loop's lag, the metrics sampled."""
    lag = LagProbe(clock, metrics.loop_lag.set)

    async def sample_metrics() -> None:
        metrics.pool_use(*db.pool_use())
        day = timefmt.from_seconds(clock.seconds()).replace(hour=0, minute=0, second=0, microsecond=0)
        await metrics.sample(stats.Figures(db), day)

    return [
        Loop(clock, "record api key use", LAST_USED_FLUSH_SECONDS, keyring.flush_last_used, on_failure=on_failure),
        Loop(clock, "event loop lag", LagProbe.INTERVAL, lag.tick, on_failure=on_failure),
        Loop(clock, "sample metrics", SAMPLE_METRICS_SECONDS, sample_metrics, on_failure=on_failure),
    ]


def _maintain_partitions(clock, db: Database, on_failure) -> Loop:
    """The scheduler's upkeep of the store: time partitions made ahead, expired ones dropped (when opted in)."""

    async def maintain() -> None:
        for change in await partitions.maintain(db, timefmt.from_seconds(clock.seconds())):
            log.info("time partitions: {action} {name}", action=change["action"], name=change["partition_name"])

    return Loop(clock, "maintain time partitions", PARTITION_MAINTENANCE_SECONDS, maintain, on_failure=on_failure)


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


@attrs.frozen
class Opened:
    """What a node's process opens first, before the store."""

    master: bytes
    operator_token: str
    #: The file the operator token was generated in (None: it came from the configuration).
    token_path: Path | None
    #: The SMTP listeners' certificate and key (PEM), when any SMTP listener is configured.
    tls_pem: tuple[bytes, bytes] | None


def open_state(config: Config) -> Opened:
    """
    The opening steps of ``start`` and ``start_parent``: the state directory, the manhole's
    endpoint checked, the master key, the operator token and the SMTP listeners' TLS pair (made
    once, by the first process, when none is configured).
    """
    # Traversable (not listable) so the embedded cluster's unprivileged owner reaches its
    # directory; the secrets in it are 0600.
    config.state_dir.mkdir(parents=True, exist_ok=True)
    config.state_dir.chmod(0o711)
    if config.manhole.listen:
        manhole.check_endpoint(config.manhole.listen)  # refused before anything starts
    master = credentials.master_key(config.security.master_key, config.state_dir)
    operator_token, token_path = credentials.operator_token(config.operator.token, config.state_dir)
    tls_pem = None
    if config.smtp.submission or config.smtp.inbound:
        tls_pem = tls.server_pem(config.tls.cert, config.tls.key, config.state_dir, config.hostname)
    return Opened(master, operator_token, token_path, tls_pem)


async def start(reactor, config: Config, node: Node, inherited: processes.Inherited | None = None) -> None:
    """A node's single process, or one of its workers (``inherited``: the sockets its parent opened)."""
    opened = open_state(config)
    # A worker's parent migrated and resealed before starting it.
    db = await open_store(reactor, config, node, migrated=inherited is not None)
    parts = assemble(reactor, config, db, opened.master, opened.operator_token, worker_share(config, inherited))
    first = key_path = None
    if inherited is None:
        await reseal(db, parts.vaults)
        if "api" in config.node.roles:  # before the node answers: its key's file is there by then
            first, key_path = await first_account(config, parts.dashboard, db, parts.accounts.create_tenant)
    await _start_background(reactor, config, node, parts)
    tls_options = tls.server_options(*opened.tls_pem) if opened.tls_pem is not None else None
    if "delivery" in config.node.roles and config.smtp.inbound:
        await _listen_inbound(reactor, config, node, parts.return_path, tls_options, inherited)
    if "api" in config.node.roles:
        address = await _listen_http(reactor, config, node, parts.site, inherited)
        if config.tor.onion:
            await start_onion(reactor, config, node, parts, address, inherited)
        await _listen_submissions(reactor, config, node, parts.submission, tls_options, inherited)
    if config.manhole.listen:
        await _listen_manhole(reactor, config, node, parts)
    node.parts["assembled"] = parts
    if inherited is None:
        announce_node(config, "one process", opened.token_path, first, key_path, node.parts.get("http_port"))


def worker_roles(config: Config, slot: int) -> tuple[str, ...]:
    """
    The roles of worker ``slot`` (``processes.worker_roles``), without delivery or webhooks when
    its share of one of their caps is none (a cap below the number of workers:
    ``delivery.per_destination = 1`` delivers from the first worker alone, one connection).
    """
    share = Share(slot, config.node.process_count)
    caps = {"delivery": (config.delivery.per_destination, config.delivery.max_in_flight),
            "webhooks": (config.webhooks.max_in_flight, config.webhooks.host_concurrency)}
    return tuple(role for role in processes.worker_roles(config.node.roles, slot)
                 if all(share.of_count(cap) > 0 for cap in caps.get(role, ())))


def worker_share(config: Config, inherited: processes.Inherited | None) -> Share:
    """A worker's part of the node's limits: its slot of ``node.processes`` (one process: all)."""
    return Share() if inherited is None else Share(inherited.slot, config.node.process_count)


async def follow_key_changes(parts: Parts) -> None:
    """The process's API-key checks dropped as soon as any process revokes a key or changes its account."""
    await parts.keyring.follow(parts.notifications)


async def _start_background(reactor, config: Config, node: Node, parts: Parts) -> None:
    """The loops and the role parts (leased engines) started, in the order their stops need."""
    # Closed after everything that makes outbound requests or listens has stopped.
    node.on_stop("outbound HTTP connections", parts.fetcher.close)
    node.on_stop("LISTEN connection", parts.notifications.stop)
    await follow_key_changes(parts)
    # Registered before the loops, so it runs after they stopped: the last uses are written.
    node.on_stop("api key use", parts.keyring.flush_last_used)
    loops = parts.loops
    if parts.metrics.shared_dir:
        loops = [*loops, Loop(reactor, "share gauges", SHARE_GAUGES_SECONDS, parts.metrics.share_gauges,
                              on_failure=lambda desc: parts.metrics.loop_failures.labels(desc).inc())]
    for loop in loops:
        loop.start()
        node.on_stop(loop.desc, loop.stop)
    # Role-gated parts (the leased engines) stop before the loops and the pool.
    for part in parts.role_parts:
        if part.role in config.node.roles:
            await part.start()
            node.on_stop(part.desc, part.stop)


async def _listen_inbound(reactor, config: Config, node: Node, return_path: ReturnPath, tls_options,
                          inherited: processes.Inherited | None) -> None:
    """The SMTP return path (bounces, complaints, DMARC reports) on ``smtp.inbound``."""
    factory = inbound.InboundFactory(
        reactor, config.hostname, return_path.accepts, return_path.deliver, tls_options=tls_options,
    )
    port = await processes.listen(reactor, "inbound", config.smtp.inbound, factory, inherited)
    node.on_stop("SMTP return path", port.stopListening)
    node.parts["inbound_port"] = port.getHost().port
    if inherited is None:  # a worker's listeners are its parent's to tell
        log.info("SMTP return path listening on {endpoint}", endpoint=config.smtp.inbound)


async def _listen_http(reactor, config: Config, node: Node, site: Site, inherited: processes.Inherited | None):
    """The HTTP listener; its stop lets the requests in flight finish (up to ``http.drain_timeout``)."""
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
    PublicUrl(config.http.public_url).warn_if_unset(address.host)
    if inherited is None:
        log.info("HTTP API listening on {host}:{port}", host=address.host, port=address.port)
    return address


async def _listen_submissions(reactor, config: Config, node: Node, submission: Submission, tls_options,
                              inherited: processes.Inherited | None) -> None:
    """Every listener of ``smtp.submission``."""
    if not config.smtp.submission:
        return
    node.parts["smtp_ports"] = []
    for description in config.smtp.submission:
        port = await listen_submission(reactor, description, submission, tls_options, inherited)
        node.on_stop(f"SMTP submission {description}", port.stopListening)
        node.parts["smtp_ports"].append(port.getHost().port)
        if inherited is None:
            log.info("SMTP submission listening on {endpoint}", endpoint=description)


async def _listen_manhole(reactor, config: Config, node: Node, parts: Parts) -> None:
    """The operator's SSH manhole (``manhole.listen``), its namespace holding the running parts."""
    names = manhole.namespace(parts=parts, db=parts.db, node=node, config=config, reactor=reactor)
    port = await manhole.listen(reactor, config.manhole.listen, names, config.state_dir)
    node.on_stop("SSH manhole", port.stopListening)
    node.parts["manhole_address"] = port.getHost()
    log.info("SSH manhole listening on {address}", address=manhole.describe(port.getHost()))


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
        base = PublicUrl(config.http.public_url).or_else(f"http://127.0.0.1:{port}")
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


async def reseal(db: Database, vaults: Vaults) -> None:
    """Every stored secret sealed again under the current master key (app/resealing.py)."""
    await resealing.reseal(db, vaults.webhook_secrets, vaults.dkim_keys)


async def start_parent(reactor, config: Config, node: Node, worker_command: list[str]) -> None:
    """
    The parent of a node's workers (docs/decisions.md, "Processes of a node"): what is done
    once (secrets, TLS material, the embedded cluster, migrations, resealing), then the
    listening sockets, then the workers that serve them.
    """
    opened = open_state(config)
    dsn = await database_dsn(reactor, config, node)
    db = Database(reactor, dsn, 1, config.database.statement_timeout)
    await db.start()
    try:
        await migrate(db)
        await reseal(db, vaults_of(config, opened.master))
        keyring = KeyRing(reactor, db, credentials.derive(opened.master, "api-key-hmac"), config.api.key_tag, 0)
        dashboard = dashboard_of(reactor, config, db, opened.master, keyring, thread_pool_runner(reactor))
        accounts = Accounts(reactor, db, keyring, config.api.rate_per_sec)
        first = key_path = None
        if "api" in config.node.roles:
            first, key_path = await first_account(config, dashboard, db, accounts.create_tenant)
    finally:
        db.stop()

    # A node without the api role (a sending node: delivery, webhooks) has no HTTP or submission port.
    listeners = []
    if "api" in config.node.roles:
        listeners += [("http", config.http.listen), *(("submission", d) for d in config.smtp.submission)]
    if "delivery" in config.node.roles and config.smtp.inbound:
        listeners.append(("inbound", config.smtp.inbound))
    ports = await processes.open_sockets(reactor, listeners)
    for name, port in ports.items():
        node.on_stop(f"socket {name}", port.stopListening)
    address = None
    if "api" in config.node.roles:
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
            MAILSVC_NODE_ROLES=",".join(worker_roles(config, slot)),
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
    announce_node(config, f"{config.node.process_count} worker processes", opened.token_path, first, key_path,
                  address.port if address is not None else None)
