"""
What every feature builder of the composition root (compose.py) takes: the process's shared
parts, built once and first, and how a builder places its services in the node's tree.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import argon2
import attrs
from twisted.application.service import IService
from twisted.internet.interfaces import IResolver

from mailsvc.app.throttle import Throttle
from mailsvc.config import Config
from mailsvc.crypto import credentials
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.dns.resolver import build_resolver
from mailsvc.domain.shares import Share
from mailsvc.engine import LeasedEngine
from mailsvc.http.router import Router
from mailsvc.metrics import Metrics
from mailsvc.outside.addresses import PublicAddresses
from mailsvc.outside.fetch import Fetcher
from mailsvc.service import Group, Part
from mailsvc.store.database import Database
from mailsvc.store.notify import Notifications


def by_role(config: Config, children: dict[str, list[IService]]) -> list[IService]:
    """The services of the roles this node runs (``node.roles``), in the order given."""
    return [child for role, services in children.items() if role in config.node.roles for child in services]


def woken(notifications: Notifications, engine: LeasedEngine) -> Group:
    """A leased engine after the LISTEN on the channel that wakes it; every process running its
    role (``parent.worker_roles``) runs an engine of its own."""
    listen = Part(f"LISTEN {engine.channel}", lambda: notifications.listen(engine.channel, engine.notified))
    return Group(engine.desc, [listen, engine])


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


def password_hasher(config: Config) -> argon2.PasswordHasher:
    """The hasher of the dashboard's and the console's passwords: argon2-cffi's defaults (argon2id,
    RFC 9106's low-memory profile), or the cheapest (tests only)."""
    if config.security.test_cheap_password_hashes:
        return argon2.PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)  # argon2id's least
    return argon2.PasswordHasher()


@attrs.frozen
class Outside:
    """The one resolver, the one check of outside addresses and the one outbound HTTP client."""

    resolver: IResolver
    addresses: PublicAddresses
    fetcher: Fetcher


def outside_of(clock, config: Config) -> Outside:
    resolver = build_resolver(clock, config.dns.servers)
    addresses = PublicAddresses(clock, resolver, config.security.allow_private_targets,
                                config.security.test_public_addresses)
    # Up to every request a node has in flight may go to one host (several webhooks on it).
    fetcher = Fetcher(clock, addresses, config.security.ca_file, config.webhooks.max_in_flight)
    return Outside(resolver, addresses, fetcher)


@attrs.frozen
class Shared:
    """What every feature builder may take: built once per process, first."""

    clock: Any
    config: Config
    db: Database
    master: bytes
    vaults: Vaults
    outside: Outside
    metrics: Metrics
    notifications: Notifications
    throttle: Throttle
    run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]]
    router: Router
    share: Share

    def count_failure(self, desc: str) -> None:
        self.metrics.loop_failures.labels(desc).inc()

    def derive(self, purpose: str) -> bytes:
        return credentials.derive(self.master, purpose)
