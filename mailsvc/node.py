"""
How a node's process starts: the whole node in one process, or one of the workers of a parent
(mailsvc/parent.py). Each step adds what it started to the node's service tree
(mailsvc.service): the store, then the parts' background tree (compose.assemble), then the
listeners; a stop undoes them in reverse order.
"""

from __future__ import annotations

from pathlib import Path

import attrs
from twisted.internet.error import CannotListenError
from twisted.logger import Logger

from mailsvc import manhole, processes
from mailsvc.app import resealing
from mailsvc.compose import assemble
from mailsvc.compose_shared import Vaults
from mailsvc.config import Config
from mailsvc.crypto import credentials, tls
from mailsvc.domain.shares import Share
from mailsvc.first_account import announce_node, first_account
from mailsvc.listeners import listen_http, listen_inbound, listen_manhole, listen_submissions
from mailsvc.publish_onion import start_onion
from mailsvc.service import Node
from mailsvc.store.database import Database, DatabaseUnavailable
from mailsvc.store.embedded import ClusterError, EmbeddedCluster, find_bindir
from mailsvc.store.migrate import MigrationError, migrate

log = Logger()

#: Start failures that explain themselves in one line (no traceback in the log).
EXPECTED_FAILURES = (OSError, ValueError, CannotListenError, DatabaseUnavailable, ClusterError, MigrationError)


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




def worker_share(config: Config, inherited: processes.Inherited | None) -> Share:
    """A worker's part of the node's limits: its slot of ``node.processes`` (one process: all)."""
    return Share() if inherited is None else Share(inherited.slot, config.node.process_count)



async def reseal(db: Database, vaults: Vaults) -> None:
    """Every stored secret sealed again under the current master key (app/resealing.py)."""
    await resealing.reseal(db, vaults.webhook_secrets, vaults.dkim_keys)



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
    await node.add(parts.service)
    node.parts.assembled = parts
    tls_options = tls.server_options(*opened.tls_pem) if opened.tls_pem is not None else None
    if "delivery" in config.node.roles and config.smtp.inbound:
        await listen_inbound(reactor, config, node, parts.return_path, tls_options, inherited)
    if "api" in config.node.roles:
        address = await listen_http(reactor, config, node, parts.site, inherited)
        if config.tor.onion:
            await start_onion(reactor, config, node, parts.node_info, address, inherited)
        await listen_submissions(reactor, config, node, parts.submission, tls_options, inherited)
    if config.manhole.listen:
        await listen_manhole(reactor, config, node, parts)
    if inherited is None:
        announce_node(config, "one process", opened.token_path, first, key_path, node.parts.http_port)
