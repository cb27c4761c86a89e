"""
The parent of a node's workers (docs/decisions.md, "Processes of a node"): what is done once
(secrets, TLS material, the embedded cluster, migrations, resealing, the first account), then
the listening sockets, then the workers that serve them, each started with its roles.
"""

from __future__ import annotations

import os
import shutil

from twisted.internet import tcp
from twisted.logger import Logger

from mailsvc import processes
from mailsvc.app.throttle import Throttle
from mailsvc.compose import accounts_of
from mailsvc.compose_shared import vaults_of
from mailsvc.config import Config
from mailsvc.domain.shares import Share
from mailsvc.first_account import announce_node, first_account
from mailsvc.metrics import Metrics
from mailsvc.node import database_dsn, open_state, reseal
from mailsvc.runners import thread_pool_runner
from mailsvc.service import Node
from mailsvc.store.database import Database
from mailsvc.store.migrate import migrate

log = Logger()

def runs_workers(config: Config) -> bool:
    """Whether the node is a parent of ``node.processes`` workers (a role every worker runs)."""
    return config.node.process_count > 1 and not processes.EVERY_WORKER.isdisjoint(config.node.roles)


def worker_roles(config: Config, slot: int) -> tuple[str, ...]:
    """
    The roles of worker ``slot``: the first runs every role of the node; the others serve
    requests, deliver and dispatch webhooks, leaving the scheduler and the broadcast fan-out to
    the first; without delivery or webhooks when its share of one of their caps is none (a cap
    below the number of workers: ``delivery.per_destination = 1`` delivers from the first worker
    alone, one connection).
    """
    share = Share(slot, config.node.process_count)
    caps = {"delivery": (config.delivery.per_destination, config.delivery.max_in_flight),
            "webhooks": (config.webhooks.max_in_flight, config.webhooks.host_concurrency)}
    return tuple(role for role in config.node.roles if (slot == 0 or role in processes.EVERY_WORKER)
                 and all(share.of_count(cap) > 0 for cap in caps.get(role, ())))


async def start_parent(reactor, config: Config, node: Node, worker_command: list[str]) -> None:
    """What is done once, then the listening sockets, then the workers that serve them."""
    opened = open_state(config)
    dsn = await database_dsn(reactor, config, node)
    first, key_path = await _prepare_store(reactor, config, dsn, opened.master)
    ports = await _open_sockets(reactor, config, node)
    supervisor = _spawn_workers(reactor, config, dsn, ports, worker_command)
    supervisor.start()
    node.on_stop("workers", supervisor.stop)
    node.parts.supervisor = supervisor
    announce_node(config, f"{config.node.process_count} worker processes", opened.token_path, first, key_path,
                  node.parts.http_port)


async def _prepare_store(reactor, config: Config, dsn: str, master: bytes):
    """Migrations, resealing and (api role) the first account, on a connection of the parent's own."""
    db = Database(reactor, dsn, 1, config.database.statement_timeout)
    await db.start()
    try:
        await migrate(db)
        vaults = vaults_of(config, master)
        await reseal(db, vaults)
        if "api" not in config.node.roles:
            return None, None
        people = accounts_of(reactor, config, db, master, vaults, Throttle(reactor, db), thread_pool_runner(reactor))
        return await first_account(config, people.dashboard, db, people.accounts.create_tenant)
    finally:
        db.stop()


async def _open_sockets(reactor, config: Config, node: Node) -> dict[str, tcp.Port]:
    """The listening sockets the workers share; a node without the api role (a sending node:
    delivery, webhooks) has no HTTP or submission port."""
    listeners = []
    if "api" in config.node.roles:
        listeners += [("http", config.http.listen), *(("submission", d) for d in config.smtp.submission)]
    if "delivery" in config.node.roles and config.smtp.inbound:
        listeners.append(("inbound", config.smtp.inbound))
    ports = await processes.open_sockets(reactor, listeners)
    for name, port in ports.items():
        node.on_stop(f"socket {name}", port.stopListening)
    if "api" in config.node.roles:
        address = ports[processes.listener("http", config.http.listen)].getHost()
        node.parts.http_port = address.port
        log.info("HTTP API listening on {host}:{port}", host=address.host, port=address.port)
        for description in config.smtp.submission:
            node.parts.smtp_ports.append(ports[processes.listener("submission", description)].getHost().port)
            log.info("SMTP submission listening on {endpoint}", endpoint=description)
    if "delivery" in config.node.roles and config.smtp.inbound:
        log.info("SMTP return path listening on {endpoint}", endpoint=config.smtp.inbound)
    return ports


def _spawn_workers(reactor, config: Config, dsn: str, ports: dict[str, tcp.Port],
                   worker_command: list[str]) -> processes.Supervisor:
    """The supervisor of the workers, each given the sockets and its roles."""
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

    return processes.Supervisor(
        reactor, config.node.process_count, spawn, kill_after=config.http.drain_timeout + 30,
        on_exit=lambda pid: Metrics.process_gone(str(metrics_dir), pid),
    )
