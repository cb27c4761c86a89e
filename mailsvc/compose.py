"""
The composition root: it builds every part from the configuration and hands each its
collaborators through its constructor (compose_shared.py, compose_sending.py and
compose_delivery.py hold the larger features' builders); each builder also returns the
services its feature runs, which ``assemble`` puts in one tree (``Parts.service``). How a
process starts that tree and its listeners: node.py, parent.py, root.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

import attrs
from treq.client import HTTPClient
from twisted.logger import Logger
from twisted.web.client import Agent, HTTPConnectionPool

from mailsvc import __version__, timefmt
from mailsvc.app.accounts import Accounts
from mailsvc.app.ai import AiHelper
from mailsvc.app.apikeys import KeyRing
from mailsvc.app.audit import AuditLog, OperatorTokens
from mailsvc.app.brand import BrandImporter
from mailsvc.app.broadcasts import Broadcasts
from mailsvc.app.builder import Builder
from mailsvc.app.console import Console
from mailsvc.app.contacts import Contacts
from mailsvc.app.dashboard import Dashboard, LinkCaps
from mailsvc.app.dashboard_reads import DashboardReads
from mailsvc.app.dnssetup import CloudflareSetup
from mailsvc.app.domains import Domains, Settings, SigningKeys
from mailsvc.app.emails import Emails
from mailsvc.app.health import Health
from mailsvc.app.inbox import Inbox
from mailsvc.app.operator import Destinations
from mailsvc.app.queue import Queue
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.app.segments import Segments
from mailsvc.app.signin import SessionSettings
from mailsvc.app.spam import SpamChecks
from mailsvc.app.submit import Submitter
from mailsvc.app.suppressions import Suppressions
from mailsvc.app.templates import Templates
from mailsvc.app.throttle import Throttle
from mailsvc.app.webhooks import DeliveryRetries, WebhookRegistry
from mailsvc.broadcasting.fanout import Fanout
from mailsvc.compose_delivery import Delivery, delivery
from mailsvc.compose_sending import BroadcastsBundle, Sending, broadcasts_of, sending_of
from mailsvc.compose_shared import Shared, Vaults, by_role, outside_of, password_hasher, vaults_of, woken
from mailsvc.config import Config
from mailsvc.crypto import credentials, tls
from mailsvc.delivery.returns import ReturnPath
from mailsvc.delivery.routes import Routes
from mailsvc.delivery.shaping import Shaper
from mailsvc.delivery.tlsrpt import TlsReports
from mailsvc.delivery.worker import DeliveryWorker
from mailsvc.dnsprov.cloudflare import Cloudflare
from mailsvc.domain.emailhtml import BuilderRenderer
from mailsvc.domain.shares import Share
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.http.access import access_kinds
from mailsvc.http.api.ai import AiResource
from mailsvc.http.api.apikeys import ApiKeysResource
from mailsvc.http.api.brand import BrandResource
from mailsvc.http.api.builder import BuilderResource, social_icons
from mailsvc.http.api.contacts import ContactsResource
from mailsvc.http.api.domains import DomainsResource
from mailsvc.http.api.segments import AudiencesResource, SegmentsResource
from mailsvc.http.api.spam import SpamResource
from mailsvc.http.api.suppressions import SuppressionsResource
from mailsvc.http.api.templates import TemplatesResource
from mailsvc.http.api.webhooks import WebhooksResource
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.console import ConsoleResource
from mailsvc.http.dashboard.auth import AuthResource
from mailsvc.http.dashboard.content import ContentReads
from mailsvc.http.dashboard.inbox import InboxResource
from mailsvc.http.dashboard.reads import ReadsResource
from mailsvc.http.dashboard.ui import UiResource
from mailsvc.http.dashboard.webhooks import WebhookRetriesResource
from mailsvc.http.health import HealthResource
from mailsvc.http.openapi import OpenApiResource
from mailsvc.http.operator import OperatorResource
from mailsvc.http.queue import QueueResource
from mailsvc.http.router import Router
from mailsvc.http.site import Site
from mailsvc.http.usage import UsageResource
from mailsvc.http.waitlist import WaitlistResource
from mailsvc.loop import Loop
from mailsvc.mail.limits import MimeLimits
from mailsvc.mail.spam import SpamAssassin
from mailsvc.metrics import LagProbe, Metrics
from mailsvc.outside.fetch import Fetcher
from mailsvc.runners import process_pool_runner, thread_pool_runner
from mailsvc.service import Group, Part
from mailsvc.smtp.submission import Submission
from mailsvc.store import partition_maintenance, queue, stats
from mailsvc.store.database import Database
from mailsvc.store.notify import Notifications
from mailsvc.webhooks.dispatcher import Dispatcher

log = Logger()

log = Logger()

#: How often gathered ``last_used_at`` values are written.
LAST_USED_FLUSH_SECONDS = 5
#: How often the scheduler makes time partitions ahead and drops expired ones (when opted in).
PARTITION_MAINTENANCE_SECONDS = 3600
#: How often the scheduler folds the queue's counts (store/queue.py).
FOLD_QUEUE_COUNTS_SECONDS = 60
#: How often a worker writes its gauges where the node's /metrics gathers them.
SHARE_GAUGES_SECONDS = 1
#: How often a node samples the database's figures for /metrics (mail by plan, queues).
SAMPLE_METRICS_SECONDS = 15


@attrs.frozen
class Engines:
    """The leased engines as the tree holds them (each after its LISTEN), whether or not this node's
    roles run them; tests start one of them on its own (tests/helpers/mta.py)."""

    delivery: Group
    webhooks: Group
    fanout: Group


@attrs.define
class Parts:
    """
    Everything a node runs, wired, and ``service``: the tree of what it runs in the background
    (loops, engines, the LISTEN connection), which a node adds to its root once its store is
    open. Tests assemble the same graph on a database of theirs and start what they need of it.
    """

    db: Database
    metrics: Metrics
    keyring: KeyRing
    accounts: Accounts
    dashboard: Dashboard
    router: Router
    site: Site
    notifications: Notifications
    fetcher: Fetcher
    vaults: Vaults
    domains: Domains
    templates: Templates
    contacts: Contacts
    segments: Segments
    spam: SpamChecks
    emails: Emails
    submitter: Submitter
    submission: Submission
    broadcasts: Broadcasts
    fanout: Fanout
    webhooks: WebhookRegistry
    dispatcher: Dispatcher
    delivery: DeliveryWorker
    return_path: ReturnPath
    tls_reports: TlsReports
    shaper: Shaper
    engines: Engines
    #: The LISTEN connection's service: stopped once the engines and key changes it wakes are.
    listen_connection: Part
    service: Group
    #: What ``GET /admin/v1`` tells of this node (version, roles; the onion address once published).
    node_info: dict

    @property
    def loops(self) -> list[Loop]:
        """Every loop of the tree (those of this node's roles)."""
        return list(_loops_of(self.service))


def _loops_of(group: Group) -> Iterator[Loop]:
    for child in group:
        if isinstance(child, Loop):
            yield child
        elif isinstance(child, Group):
            yield from _loops_of(child)


def assemble(clock, config: Config, db: Database, master: bytes, operator_token: str,
             share: Share = Share(), submit_clock=None) -> Parts:
    """
    Every part of a node, each built after the parts it takes (one builder per feature, each
    returning its bundle and the services it runs); the routes are mounted in the order
    ``/openapi.json`` lists them. ``share``: this process's part of the node's delivery and
    webhook limits (one of its workers: ``worker_share``); ``submit_clock``: the accept path's.
    """
    metrics = Metrics()
    run_blocking = thread_pool_runner(clock)
    vaults = vaults_of(config, master)
    throttle = Throttle(clock, db)
    outside = outside_of(clock, config)
    # The template builder's renderer (its e-mails show the social icons this node serves at
    # public_url) and its AI helper (any OpenAI-compatible provider, through the one client).
    renderer = BuilderRenderer(PublicUrl(config.http.public_url).or_else(f"https://{config.hostname}"))
    ai = AiHelper(clock, db, outside.fetcher, config.ai, renderer)
    people = accounts_of(clock, config, db, master, vaults, throttle, run_blocking, ai)
    router, limiter, audit_log, operator_tokens = _router(clock, config, db, master, people, throttle, run_blocking,
                                                          vaults, operator_token)
    shared = Shared(clock, config, db, master, vaults, outside, metrics, Notifications(db), throttle, run_blocking,
                    router, share)
    dashboard_reads = DashboardReads(db, clock)
    _mount_dashboard(router, config, people.dashboard, dashboard_reads, audit_log)
    node_info = {"version": __version__, "roles": list(config.node.roles), "onion": None}
    _operator(shared, people, node_info, audit_log, operator_tokens)
    _node_routes(router, config, db)
    content = _content(shared, renderer, ai)
    webhooks = _webhooks(shared, audit_log)
    # The node's opened DKIM keys: the domains seal and check them, the delivery worker signs.
    signing_keys = SigningKeys(vaults.dkim_keys)
    # Test addresses: accepted without a domain from the test sender, completed at the delivery's
    # door as a receiver would, kept in the development inbox with capture mode's mail; the test
    # domain is nobody's sending domain.
    tests = TestAddresses(config.mail.test_domain.rstrip("."))
    domains = _domains(shared, signing_keys, tests)
    router.mount(ReadsResource(people.dashboard, dashboard_reads, domains.domains))
    sending = sending_of(shared, domains.domains, content.templates, tests, people.keyring, limiter, submit_clock)
    broadcasts = broadcasts_of(shared, sending, domains.domains, content.spam)
    mta = delivery(shared, signing_keys, sending.submitter, sending.unsubscribes, tests)
    _mount_inbox(shared, mta, content.spam)
    return _parts(shared, people, content, webhooks, domains, sending, broadcasts, mta, node_info)


def _parts(shared: Shared, people: People, content: Content, webhooks: Webhooks, domains: DomainsBundle,
           sending: Sending, broadcasts: BroadcastsBundle, mta: Delivery, node_info: dict) -> Parts:
    """The bundles handed out as one ``Parts``, with the background tree in the order its stops need."""
    db, notifications, keyring = shared.db, shared.notifications, people.keyring
    listen_connection = Part("LISTEN connection", stop=notifications.stop)
    tree = Group("background", [
        # Closed after everything that makes outbound requests has stopped.
        Part("outbound HTTP connections", stop=shared.outside.fetcher.close),
        listen_connection,
        # The process's API-key checks dropped as soon as any process revokes a key or changes its account.
        Part("follow key changes", lambda: keyring.follow(notifications)),
        # Before the loops, so it stops after they did: the last uses are written.
        Part("api key use", stop=keyring.flush_last_used),
        _process_loops(shared, keyring),
        domains.service, sending.service, broadcasts.service, webhooks.service, mta.service,
        Group("store upkeep", by_role(shared.config, {"scheduler": [_maintain_partitions(shared),
                                                                    _fold_queue_counts(shared)]})),
    ])
    engines = Engines(mta.engine, webhooks.engine, broadcasts.engine)
    return Parts(
        db, shared.metrics, keyring, people.accounts, people.dashboard, shared.router,
        _site(shared.clock, shared.config, shared.router, shared.metrics), notifications, shared.outside.fetcher,
        shared.vaults, domains.domains, content.templates, content.contacts, content.segments, content.spam,
        sending.emails, sending.submitter, sending.submission, broadcasts.broadcasts, broadcasts.fanout,
        webhooks.registry, webhooks.dispatcher, mta.worker, mta.return_path, mta.tls_reports, mta.shaper, engines,
        listen_connection, tree, node_info,
    )


@attrs.frozen
class People:
    """Accounts, their API keys and the dashboard's users: what a node's parent also takes (its
    first account, parent.py)."""

    keyring: KeyRing
    dashboard: Dashboard
    accounts: Accounts


def accounts_of(clock, config: Config, db: Database, master: bytes, vaults: Vaults, throttle: Throttle,
                run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]], ai: AiHelper | None = None) -> People:
    """The accounts bundle (``ai``: the usage shows the AI helper's figures)."""
    keyring = KeyRing(clock, db, credentials.derive(master, "api-key-hmac"), config.api.key_tag,
                      config.api.auth_cache_seconds)
    settings = config.dashboard
    dashboard = Dashboard(
        clock, db, credentials.derive(master, "dashboard-password-links"), credentials.derive(master, "dashboard-csrf"),
        SessionSettings(settings.session_idle, settings.session_lifetime, settings.link_lifetime),
        run_blocking=run_blocking, throttle=throttle, hasher=password_hasher(config), keys=keyring,
        vault=vaults.two_factor, link_caps=LinkCaps(settings.links_per_user_hour, settings.links_per_tenant_hour),
    )
    return People(keyring, dashboard, Accounts(clock, db, keyring, config.api.rate_per_sec, throttle, ai))


def _router(clock, config: Config, db: Database, master: bytes, people: People, throttle: Throttle, run_blocking,
            vaults: Vaults, operator_token: str) -> tuple[Router, RateLimiter, AuditLog, OperatorTokens]:
    """The router, with the operator's console (the audit log, the named operator tokens) mounted first."""
    limiter = RateLimiter(clock, db, config.api.burst_factor)
    audit_log = AuditLog(clock, db)
    operator_tokens = OperatorTokens(clock, db, credentials.derive(master, "operator-token-hmac"), audit_log)
    console = Console(clock, db, credentials.derive(master, "console-password-links"),
                      credentials.derive(master, "console-csrf"), throttle, run_blocking,
                      hasher=password_hasher(config), vault=vaults.two_factor)
    router = Router(clock, access_kinds(keyring=people.keyring, limiter=limiter, operator_token=operator_token,
                                        public_origins=config.public.cors_origins, sessions=people.dashboard,
                                        dashboard_origins=config.dashboard.origins, operator_tokens=operator_tokens,
                                        console=console), config.http.request_timeout)
    console_resource = ConsoleResource(console, config.http.public_url, audit_log)
    router.mount(console_resource)
    router.mount(console_resource.security)
    return router, limiter, audit_log, operator_tokens


def _mount_dashboard(router: Router, config: Config, dashboard: Dashboard, reads: DashboardReads,
                     audit_log: AuditLog) -> None:
    """The dashboard's sign-in and session routes, its pages, and the content editors' reads."""
    auth = AuthResource(dashboard, config.http.public_url, audit_log)
    router.mount(auth)
    router.mount(auth.security)
    router.mount(UiResource(reads))
    router.mount(ContentReads(reads))


def _mount_inbox(shared: Shared, mta: Delivery, spam: SpamChecks) -> None:
    """The dashboard's development inbox: each message read in a pool of processes, within the MIME limits."""
    config = shared.config
    shared.router.mount(InboxResource(Inbox(shared.db, shared.outside.resolver, config.spf_include, mta.test_signer,
                                            spam, process_pool_runner(shared.clock), MimeLimits.of(config.mail))))


def _mx_of(shared: Shared) -> Callable[[str], Coroutine[Any, Any, str | None]]:
    """The host a domain's mail goes to, as the operator's queue groups it: the smarthost for
    every domain when there is one."""
    relay = shared.config.delivery.relay_host
    if relay:

        async def smarthost(_domain: str) -> str | None:
            return relay

        return smarthost
    return Routes(shared.clock, shared.outside.resolver).first_host


def _operator(shared: Shared, people: People, node_info: dict, audit_log: AuditLog,
              operator_tokens: OperatorTokens) -> None:
    """Accounts and their API keys, and the operator API (the queue, its audit log and named tokens)."""
    clock, config, db, router = shared.clock, shared.config, shared.db, shared.router
    accounts = people.accounts
    router.mount(ApiKeysResource(people.keyring))
    router.mount(OperatorResource(accounts, Destinations(db, config.delivery.source), shared.metrics, audit_log,
                                  node_info))
    router.mount(QueueResource(Queue(clock, db, audit_log, _mx_of(shared)), operator_tokens, audit_log, accounts))
    router.mount(UsageResource(accounts))
    router.mount(WaitlistResource(accounts))


def _node_routes(router: Router, config: Config, db: Database) -> None:
    """The node's own: its health, and the OpenAPI document of the router."""
    router.mount(HealthResource(Health(db)))
    router.mount(OpenApiResource(router, config.http.public_url))


@attrs.frozen
class Content:
    """What ``_content`` builds that other features take (and tests reach through ``Parts``)."""

    templates: Templates
    spam: SpamChecks
    contacts: Contacts
    segments: Segments


def _content(shared: Shared, renderer: BuilderRenderer, ai: AiHelper) -> Content:
    """
    What accounts write their mail with and send it to: the suppression list; templates, whose
    builder documents ``renderer`` turns into html and text, and their spam score; contacts,
    segments and the legacy audience paths over the same segments; the template builder and
    brand import, with the AI helper.
    """
    clock, config, db, router = shared.clock, shared.config, shared.db, shared.router
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
        clock, db, shared.outside.fetcher, builder, ai, config.brand,
        tuple(int(p) for p in config.security.test_extra_ports), run_blocking=shared.run_blocking,
    )
    router.mount(BrandResource(brand, config.http.public_url))
    return Content(templates, spam, contacts, segments)


@attrs.frozen
class Webhooks:
    """The webhook endpoints and their dispatcher; ``service`` runs it (webhooks role)."""

    registry: WebhookRegistry
    dispatcher: Dispatcher
    engine: Group
    service: Group


def _webhooks(shared: Shared, audit_log: AuditLog) -> Webhooks:
    """
    The webhook endpoints (their signing secrets sealed by their vault) and their dispatcher,
    with this process's share of the node's requests in flight and per-host limits
    (``per_endpoint`` is counted in PostgreSQL across nodes: whole). The first worker's
    dispatcher fans events out for the node, so one process, not every worker, is woken by
    every NOTIFY on "events"; a worker restarted after a crash takes the hand-over up again.
    """
    clock, db, outside, share = shared.clock, shared.db, shared.outside, shared.share
    registry = WebhookRegistry(clock, db, outside.addresses, shared.vaults.webhook_secrets)
    shared.router.mount(WebhooksResource(registry))
    settings = shared.config.webhooks
    retries = DeliveryRetries(clock, db, shared.throttle, audit_log, settings.retries_per_hour)
    shared.router.mount(WebhookRetriesResource(retries))
    dispatcher = Dispatcher(
        clock, db, outside.fetcher, registry, settings.concurrency_per_endpoint, share.of_count(settings.max_in_flight),
        share.of_count(settings.host_concurrency), share.of_rate(settings.host_rate_per_sec),
        on_failure=shared.count_failure, fans_out=share.slot == 0,
    )
    engine = woken(shared.notifications, dispatcher)
    return Webhooks(registry, dispatcher, engine, Group("webhooks", by_role(shared.config, {"webhooks": [engine]})))


@attrs.frozen
class DomainsBundle:
    """Sending domains; ``service`` checks them (scheduler role)."""

    domains: Domains
    service: Group


def _domains(shared: Shared, keys: SigningKeys, tests: TestAddresses) -> DomainsBundle:
    """Sending domains (DNS records, Cloudflare set-up) and the scheduler's loop checking them."""
    clock, config = shared.clock, shared.config
    # A true cycle: the loop's step is the domains' check, and the domains wake the loop when a
    # check is due at once. The loop comes first; its step reaches the domains once built.
    check = Loop(clock, "check domains", config.domains.check_interval, lambda: domains.check_due(),
                 on_failure=shared.count_failure)
    http = HTTPClient(Agent(clock, tls.VerifiedHTTPS(), pool=HTTPConnectionPool(clock, persistent=False)))
    settings = Settings(
        config.domains.region, config.hostname, config.spf_include,
        config.domains.verification_window, config.domains.recheck_interval,
        tests,
    )
    domains = Domains(clock, shared.db, keys, shared.outside.resolver, settings, check.wake,
                      run_blocking=shared.run_blocking)
    cloudflare = Cloudflare(clock, http, config.domains.cloudflare_base_url)
    shared.router.mount(DomainsResource(domains, CloudflareSetup(clock, shared.db, domains, cloudflare,
                                                                 config.spf_include)))
    return DomainsBundle(domains, Group("domains", by_role(config, {"scheduler": [check]})))


def _site(clock, config: Config, router: Router, metrics: Metrics) -> Site:
    """The HTTP site serving the router; ``/metrics`` shows its requests in flight."""
    site = Site(router.resource(), clock, metrics, admit=router.admit, body_limit=router.body_limit,
                header_timeout=config.http.header_timeout, body_timeout=config.http.body_timeout)
    metrics.in_flight.set_function(lambda: site.in_flight)
    return site


def _process_loops(shared: Shared, keyring: KeyRing) -> Group:
    """What every process runs: its API keys' last uses written, the event loop's lag, the metrics
    sampled, and (a worker's) its gauges written where the node's /metrics gathers them."""
    clock, db, metrics, on_failure = shared.clock, shared.db, shared.metrics, shared.count_failure
    lag = LagProbe(clock, metrics.loop_lag.set)

    async def sample_metrics() -> None:
        metrics.pool_use(*db.pool_use())
        day = timefmt.from_seconds(clock.seconds()).replace(hour=0, minute=0, second=0, microsecond=0)
        await metrics.sample(stats.Figures(db), day)

    loops = [
        Loop(clock, "record api key use", LAST_USED_FLUSH_SECONDS, keyring.flush_last_used, on_failure=on_failure),
        Loop(clock, "event loop lag", LagProbe.INTERVAL, lag.tick, on_failure=on_failure),
        Loop(clock, "sample metrics", SAMPLE_METRICS_SECONDS, sample_metrics, on_failure=on_failure),
    ]
    if metrics.shared_dir:
        loops.append(Loop(clock, "share gauges", SHARE_GAUGES_SECONDS, metrics.share_gauges, on_failure=on_failure))
    return Group("process", loops)


def _fold_queue_counts(shared: Shared) -> Loop:
    """The scheduler's upkeep of the queue's counts: the deltas appended since the last fold added up."""

    async def fold() -> None:
        await queue.fold_counts(shared.db)

    return Loop(shared.clock, "fold queue counts", FOLD_QUEUE_COUNTS_SECONDS, fold, on_failure=shared.count_failure)


def _maintain_partitions(shared: Shared) -> Loop:
    """The scheduler's upkeep of the store: time partitions made ahead, expired ones dropped (when opted in)."""
    clock, db = shared.clock, shared.db

    async def maintain() -> None:
        for change in await partition_maintenance.maintain(db, timefmt.from_seconds(clock.seconds())):
            log.info("time partitions: {action} {name}", action=change["action"], name=change["partition_name"])

    return Loop(clock, "maintain time partitions", PARTITION_MAINTENANCE_SECONDS, maintain,
                on_failure=shared.count_failure)
