"""
The composition root: the only module that touches the global reactor. It builds every part
from the configuration and hands each its collaborators through its constructor.
"""

from __future__ import annotations

import os

import attrs
from twisted.internet import endpoints
from twisted.internet.error import CannotListenError
from twisted.logger import Logger

from mailsvc import credentials
from mailsvc.accounts import Accounts
from mailsvc.apikeys import KeyRing
from mailsvc.config import Config
from mailsvc.http import admin, apikeys
from mailsvc.http.router import Router
from mailsvc.http.site import Site
from mailsvc.loop import Loop
from mailsvc.metrics import Metrics
from mailsvc.ratelimit import RateLimiter
from mailsvc.service import Node
from mailsvc.store.database import Database, DatabaseUnavailable
from mailsvc.store.embedded import ClusterError, EmbeddedCluster, find_bindir
from mailsvc.store.migrate import MigrationError, migrate

log = Logger()

#: How often gathered ``last_used_at`` values are written.
LAST_USED_FLUSH_SECONDS = 5


def build(config: Config) -> Node:
    from twisted.internet import reactor

    def fail(reason: str) -> None:
        # twistd routes sys.stderr into its log; the one-line reason goes to the real stderr.
        os.write(2, f"mailsvc: cannot start: {reason}\n".encode("utf-8", "replace"))
        reactor.addSystemEventTrigger("after", "shutdown", os._exit, 1)
        if reactor.running:
            reactor.stop()
        else:
            reactor.callWhenRunning(reactor.stop)

    node = Node(lambda node: start(reactor, config, node), fail)
    node.expected_failures = (
        OSError, ValueError, CannotListenError, DatabaseUnavailable, ClusterError, MigrationError,
    )
    return node


async def open_store(reactor, config: Config, node: Node) -> Database:
    """The database, on the configured DSN or on the embedded cluster, migrated."""
    dsn = config.database.dsn
    if not dsn:
        cluster = EmbeddedCluster(
            reactor, config.state_dir / "postgresql", find_bindir(config.database.pg_bin)
        )
        dsn = await cluster.start()
        node.on_stop("embedded PostgreSQL", cluster.stop)
        log.info("embedded PostgreSQL in {dir}", dir=cluster.data_dir)
    db = Database(reactor, dsn, config.database.pool_size)
    await db.start()
    node.on_stop("database pool", db.stop)
    await migrate(db)
    return db


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


def assemble(clock, config: Config, db: Database, master: bytes, operator_token: str) -> Parts:
    metrics = Metrics()
    keyring = KeyRing(
        clock, db, credentials.derive(master, "api-key-hmac"), config.api.key_tag,
        config.api.auth_cache_seconds,
    )
    limiter = RateLimiter(clock, db, config.api.burst_factor)
    accounts = Accounts(clock, db, keyring, config.api.rate_per_sec)
    router = Router(clock, keyring, limiter, operator_token, config.http.request_timeout)
    apikeys.install(router, keyring)
    admin.install(router, accounts, db, metrics)
    site = Site(router.resource(), clock, metrics)
    metrics.in_flight.set_function(lambda: site.in_flight)

    def count_failure(desc: str) -> None:
        metrics.loop_failures.labels(desc).inc()

    loops = [
        Loop(clock, "record api key use", LAST_USED_FLUSH_SECONDS, keyring.flush_last_used,
             on_failure=count_failure),
    ]
    return Parts(db, metrics, keyring, accounts, router, site, loops)


async def start(reactor, config: Config, node: Node) -> None:
    # Traversable (not listable) so the embedded cluster's unprivileged owner reaches its
    # directory; the secrets in it are 0600.
    config.state_dir.mkdir(parents=True, exist_ok=True)
    config.state_dir.chmod(0o711)
    master = credentials.master_key(config.security.master_key, config.state_dir)
    operator_token, token_path = credentials.operator_token(config.operator.token, config.state_dir)

    db = await open_store(reactor, config, node)
    parts = assemble(reactor, config, db, master, operator_token)
    # Registered before the loops, so it runs after they stopped: the last uses are written.
    node.on_stop("api key use", parts.keyring.flush_last_used)
    for loop in parts.loops:
        loop.start()
        node.on_stop(loop.desc, loop.stop)

    if "api" in config.node.roles:
        site = parts.site
        port = await endpoints.serverFromString(reactor, config.http.listen).listen(site)

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
        log.info("HTTP API listening on {host}:{port}", host=address.host, port=address.port)

    if token_path is not None:
        log.info("operator token is in {path}", path=token_path)
    node.parts["assembled"] = parts
