"""
Sending domains: creation with their DKIM keys, reads and writes of the API, verification
(asked for, then re-run by the scheduler with exactly one node checking a domain), and
``sending_domain``, the lookup the sending path signs with. The DNS provider set-up is
``app.dnssetup``.
"""

from __future__ import annotations

import builtins
import secrets
import string
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, overload

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from mailsvc import timefmt
from mailsvc.app.audit import record
from mailsvc.crypto.keyvault import KeyVault
from mailsvc.dns.verify import check_records
from mailsvc.domain.audit import SYSTEM_ACTOR
from mailsvc.domain.domains import (
    CheckState,
    DkimKey,
    Record,
    Verdict,
    claim_lapsed,
    domain_changes,
    judge,
    new_domain,
    records_of,
    unpublishable_reason,
)
from mailsvc.domain.errors import NotAllowed, NotFound, Taken
from mailsvc.domain.paging import Page
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.ids import uuid7
from mailsvc.mail import dkim
from mailsvc.mail.dkim import Signer
from mailsvc.store import deliverability, events
from mailsvc.store import domains as store
from mailsvc.store.database import Database, Transaction

log = Logger()

#: How long a node holds the domains it claimed for a check (a check takes a few seconds).
CLAIM_SECONDS = 120
#: Domains one scheduler run checks at once.
CHECK_BATCH = 20


@attrs.frozen
class SendingDomain:
    """What the sending path needs of the From domain, private keys opened."""

    id: uuid.UUID
    name: str
    status: str
    tls: str  # opportunistic | enforced
    return_path_host: str
    signers: tuple[Signer, ...]


@attrs.frozen
class DomainView:
    """A domain row and the records it publishes, each with its last status."""

    row: dict
    records: list[tuple[Record, str]]




class SigningKeys:
    """
    Seals new private keys and opens stored ones, keeping the keys it opened recently: one per
    node, shared by the domains (sealing, the accept path's lookups) and the delivery worker,
    which signs. Kept by key id, so a rotated key (a new id) is opened at its first use.
    """

    CACHE_SIZE = 10_000

    def __init__(self, vault: KeyVault):
        self._vault = vault
        self._opened: dict[uuid.UUID, Any] = {}

    def seal(self, key_id: uuid.UUID, der: bytes) -> bytes:
        return self._vault.seal(der, key_id.bytes)

    def signer(self, key_id: uuid.UUID, selector: str, algorithm: str, sealed: bytes | memoryview) -> Signer:
        key = self._opened.get(key_id)
        if key is None:
            if len(self._opened) >= self.CACHE_SIZE:
                self._opened.clear()
            key = dkim.load_private_key(self._vault.open(bytes(sealed), key_id.bytes))
            self._opened[key_id] = key
        return Signer(selector, algorithm, key)


#: How long a node keeps a verified sending domain (with its signers) it looked up.
SENDING_DOMAIN_CACHE_SECONDS = 5.0


class SendingDomainCache:
    """
    A node's verified sending domains, each kept ``seconds`` after it was looked up, so that a
    send needs no lookup statement. Only verified domains are kept: a domain that becomes
    verified sends at once everywhere; one deleted, unverified (failed) or changed on another
    node may still send from this node for at most ``seconds``; on the node that changed it,
    ``forget`` (called by ``Domains``) applies the change at once.
    """

    MAX_ENTRIES = 10_000

    def __init__(self, clock, seconds: float,
                 lookup: Callable[[uuid.UUID, str], Awaitable[SendingDomain | None]]):
        self._clock = clock
        self._seconds = seconds
        self._lookup = lookup
        self._entries: dict[tuple[uuid.UUID, str], tuple[float, SendingDomain]] = {}

    async def __call__(self, tenant_id: uuid.UUID, name: str) -> SendingDomain | None:
        """``lookup``, from this node's cache when a verified domain was looked up lately."""
        key = (tenant_id, name.rstrip(".").lower())
        now = self._clock.seconds()
        entry = self._entries.get(key)
        if entry is not None and now - entry[0] < self._seconds:
            return entry[1]
        domain = await self._lookup(tenant_id, name)
        if domain is not None and domain.status == "verified":
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = (now, domain)
        else:
            self._entries.pop(key, None)
        return domain

    def forget(self, tenant_id: uuid.UUID) -> None:
        """Drop the tenant's domains (one of them was deleted or changed on this node)."""
        for key in [key for key in self._entries if key[0] == tenant_id]:
            del self._entries[key]


@attrs.frozen
class Settings:
    """The configuration a domain's records and checks depend on."""

    region: str
    mx_host: str
    spf_include: str
    verification_window: float
    recheck_interval: float
    #: The test domain's rules: it and the names under it are nobody's sending domain.
    tests: TestAddresses = TestAddresses()


def _selector_tag() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "ms" + "".join(secrets.choice(alphabet) for _ in range(6))


def _seconds(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


@overload
def _at(seconds: float) -> datetime: ...
@overload
def _at(seconds: float | None) -> datetime | None: ...
def _at(seconds: float | None) -> datetime | None:
    return timefmt.from_seconds(seconds) if seconds is not None else None


async def _run_here(fn: Callable[[], Any]) -> Any:
    return fn()


class Domains:
    def __init__(
        self,
        clock,
        db: Database,
        keys: SigningKeys,
        resolver,
        settings: Settings,
        wake: Callable[[], None],
        run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]] = _run_here,
    ):
        self._clock = clock
        self._db = db
        self._keys = keys
        self._resolver = resolver
        self._settings = settings
        self._run_blocking = run_blocking
        #: Called when a check is due now (the check loop's ``wake``).
        self._wake = wake
        #: Verified sending domains kept per node for a few seconds (docs/decisions.md, Domains);
        #: dropped at once on this node when one of the tenant's domains changes.
        self._sending = SendingDomainCache(clock, SENDING_DOMAIN_CACHE_SECONDS, self.lookup_sending_domain)

    def _now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    async def sending_domain(self, tenant_id: uuid.UUID, name: str) -> SendingDomain | None:
        """The tenant's domain called ``name`` with its signers (from this node's cache if verified)."""
        return await self._sending(tenant_id, name)

    async def lookup_sending_domain(self, tenant_id: uuid.UUID, name: str) -> SendingDomain | None:
        """
        The tenant's domain called ``name`` (ASCII, any case) with its signers, whatever its
        status; None if the tenant has no such domain (never added, or deleted).
        """
        rows = await store.signing_keys(self._db, tenant_id, name.rstrip(".").lower())
        if not rows:
            return None
        first = rows[0]
        return SendingDomain(
            id=first["id"],
            name=first["name"],
            status=first["status"],
            tls=first["tls"],
            return_path_host=f"{first['return_path']}.{first['name']}",
            signers=tuple(
                self._keys.signer(r["key_id"], r["selector"], r["algorithm"], r["private_key"]) for r in rows
            ),
        )

    # The API

    async def create(self, tenant_id: uuid.UUID, body: dict, actor: str | None = None) -> DomainView:
        """A new domain and its DKIM keys; ``actor`` (who asked) is written to the audit log with it."""
        new = new_domain(body)
        refused = self._settings.tests.not_a_sending_domain(new.name)
        if refused is not None:
            raise NotAllowed(f"name: {refused}")

        async def admit(txn: Transaction):
            tenant = await store.lock_tenant(txn, tenant_id)
            claim = await store.claim_of(txn, new.name)
            if claim is not None and claim["tenant_id"] == tenant_id:
                raise NotAllowed(f"name: the domain {new.name} has already been added to this account")
            if claim is not None:
                if not claim_lapsed(claim["status"], claim["created_at"].timestamp(), self._clock.seconds(),
                                    self._settings.verification_window):
                    raise NotAllowed(_TAKEN.format(new.name))
                # Never verified by its account within the window: the name goes to who asks now.
                await store.delete_domain(txn, claim["tenant_id"], claim["id"])
            limit = tenant["max_domains"]
            if limit is not None and await store.count_domains(txn, tenant_id) >= limit:
                raise NotAllowed(
                    f"name: your plan allows {limit} domain{'s' if limit != 1 else ''};"
                    " remove one or upgrade the plan to add another",
                    reason="plan_limit",
                )

        # Checked before the keys are made (RSA takes a while), and again when they are stored.
        await self._db.run("admit_domain", admit)
        tag = _selector_tag()
        pairs = await self._run_blocking(
            lambda: [dkim.generate(f"{tag}-rsa", dkim.RSA), dkim.generate(f"{tag}-ed25519", dkim.ED25519)]
        )

        async def insert(txn: Transaction):
            await admit(txn)
            now = self._now()
            row = await store.insert_domain(
                txn, uuid7(self._clock.seconds()), tenant_id, new.name, new.return_path, new.tls,
                self._settings.region, now,
            )
            keys = []
            for pair in pairs:
                key_id = uuid7(self._clock.seconds())
                keys.append(await store.insert_key(
                    txn, key_id, row["id"], pair.selector, pair.algorithm, pair.public_key,
                    self._keys.seal(key_id, pair.private_der), now,
                ))
            if actor is not None:
                await record(txn, self._clock.seconds(), actor, "domain.create", **_audited(row))
            return row, keys

        try:
            row, keys = await self._db.run("create_domain", insert)
        except Taken:  # another account added the name at the same moment
            raise NotAllowed(_TAKEN.format(new.name)) from None
        return self._view(row, keys)

    async def get(self, tenant_id: uuid.UUID, domain_id: uuid.UUID) -> DomainView:
        row = await store.get_domain(self._db, tenant_id, domain_id)
        if row is None:
            raise NotFound("Domain")
        return self._view(row, await store.keys_of(self._db, domain_id))

    async def dmarc(self, tenant_id: uuid.UUID, domain_id: uuid.UUID, days: int = 30) -> dict:
        """
        What receivers' DMARC aggregate reports say of the domain's mail over the last ``days``
        UTC days: per day, each source's messages and the share with DKIM and SPF aligned.
        """
        row = await store.get_domain(self._db, tenant_id, domain_id)
        if row is None:
            raise NotFound("Domain")
        today = timefmt.from_seconds(self._clock.seconds()).date()
        rows = await deliverability.dmarc_days(self._db, domain_id, today - timedelta(days=days - 1))
        by_day: dict = {}
        for r in rows:
            by_day.setdefault(r["day"], []).append(r)
        out = []
        for day, sources in sorted(by_day.items(), reverse=True):
            total = sum(s["messages"] for s in sources)
            out.append({
                "date": day.isoformat(), "messages": total,
                "dkim_pass_rate": _rate(sum(s["dkim_pass"] for s in sources), total),
                "spf_pass_rate": _rate(sum(s["spf_pass"] for s in sources), total),
                "sources": [{"source_ip": s["source_ip"], "messages": s["messages"],
                             "dkim_pass_rate": _rate(s["dkim_pass"], s["messages"]),
                             "spf_pass_rate": _rate(s["spf_pass"], s["messages"]),
                             "reporters": sorted(s["reporters"])} for s in sources],
            })
        return {"object": "dmarc_summary", "domain_id": str(domain_id), "domain": row["name"], "days": days,
                "data": out}

    def unpublishable_reason(self) -> str | None:
        """Why no domain's records can be published while the node's hostname is what it is."""
        return unpublishable_reason(self._settings.mx_host)

    async def live_records(self, tenant_id: uuid.UUID, domain_id: uuid.UUID) -> tuple[DomainView, list[str]]:
        """The domain, and what DNS answers now for each of its records (as a check finds it)."""
        row = await store.get_domain(self._db, tenant_id, domain_id)
        if row is None:
            raise NotFound("Domain")
        keys = await store.keys_of(self._db, domain_id)
        records, dkim_keys = self.records(row, keys)
        findings = await check_records(
            self._resolver, row["name"], records, dkim_keys, self._settings.mx_host, self._settings.spf_include,
        )
        return self._view(row, keys), [findings[r.key] for r in records]

    async def list(self, tenant_id: uuid.UUID, page: Page) -> tuple[builtins.list[dict], bool]:
        return await store.list_domains(self._db, tenant_id, page)

    async def update(self, tenant_id: uuid.UUID, domain_id: uuid.UUID, body: dict) -> dict:
        row = await store.update_domain(self._db, tenant_id, domain_id, domain_changes(body), self._now())
        self._sending.forget(tenant_id)
        if row is None:
            raise NotFound("Domain")
        return row

    async def delete(self, tenant_id: uuid.UUID, domain_id: uuid.UUID, actor: str | None = None) -> None:
        """
        The domain, its keys and the API keys restricted to it go at once. Its emails keep
        their row with no domain (``emails.domain_id`` is set NULL), which is how the delivery
        side knows not to deliver what is still queued (docs/decisions.md, Domains). ``actor``
        (who asked) is written to the audit log with it.
        """
        async def delete(txn: Transaction) -> dict | None:
            row = await store.delete_domain(txn, tenant_id, domain_id)
            if row is not None and actor is not None:
                await record(txn, self._clock.seconds(), actor, "domain.delete",
                             **_audited({**row, "tenant_id": tenant_id}))
            return row

        row = await self._db.run("delete_domain", delete)
        self._sending.forget(tenant_id)
        if row is None:
            raise NotFound("Domain")

    async def verify(self, tenant_id: uuid.UUID, domain_id: uuid.UUID, actor: str | None = None) -> dict:
        """
        Plan a check now. A domain that is not verified becomes ``pending`` with a fresh
        verification window; a verified one stays verified while it is checked again. ``actor``
        (who asked) is written to the audit log (``domain.check``).
        """

        async def plan(txn: Transaction):
            row = await store.lock_domain(txn, tenant_id, domain_id)
            if row is None:
                raise NotFound("Domain")
            status = "verified" if row["status"] == "verified" else "pending"
            updated = await store.plan_check(txn, domain_id, status, self._now(), status == "pending")
            await self._status_changed(txn, row, status)
            if actor is not None:
                await record(txn, self._clock.seconds(), actor, "domain.check", **_audited(row))
            return updated

        row = await self._db.run("verify_domain", plan)
        self._sending.forget(tenant_id)
        self._wake()
        return row

    async def _status_changed(self, txn: Transaction, row: dict, status: str, reason: str | None = None) -> None:
        """
        ``domain.updated`` for a change of status, ``previous`` one of ``pending``, ``verified``,
        ``failed`` (docs/contract/main-api.md, "Events"): leaving ``not_started`` (the first verify)
        reports nothing, the first event is the first check's outcome (from ``pending``). ``reason``: why a domain
        failed other than by its DNS records, added to the event.
        """
        if status != row["status"] and status in ("verified", "failed"):
            # The outcome of a check, in the account's activity (the service did it).
            await record(txn, self._clock.seconds(), SYSTEM_ACTOR, f"domain.{status}",
                         **_audited(row), **({"reason": reason} if reason is not None else {}))
        if status != row["status"] and row["status"] != "not_started":
            data = {"domain_id": str(row["id"]), "domain": row["name"], "status": status, "previous": row["status"]}
            if reason is not None:
                data["reason"] = reason
            await events.record(txn, self._clock, row["tenant_id"], "domain.updated", data)

    def records(self, row: dict, keys: builtins.list[dict]) -> tuple[builtins.list[Record], dict[str, DkimKey]]:
        """The records the domain ``row`` with the DKIM ``keys`` publishes, and those keys by record key."""
        dkim_keys = {
            f"dkim:{k['selector']}": DkimKey(k["selector"], k["algorithm"], k["public_key"]) for k in keys
        }
        records = records_of(
            row["return_path"], list(dkim_keys.values()), self._settings.mx_host, self._settings.spf_include,
            row["name"],
        )
        return records, dkim_keys

    def _view(self, row: dict, keys: builtins.list[dict]) -> DomainView:
        records, _ = self.records(row, keys)
        statuses = row["record_status"] or {}
        return DomainView(row, [(r, statuses.get(r.key, "not_started")) for r in records])

    # The scheduler

    async def check_due(self) -> int:
        """Check the domains that are due, claimed so that no other node checks them too."""
        now = self._clock.seconds()
        claim = uuid.uuid4()
        rows = await store.claim_due(
            self._db, _at(now), _at(now + CLAIM_SECONDS), claim, CHECK_BATCH
        )
        await defer.DeferredList(
            [defer.ensureDeferred(self.check_claimed(row, claim)) for row in rows], consumeErrors=True
        )
        if len(rows) == CHECK_BATCH:
            self._wake()
        return len(rows)

    async def check_claimed(self, row: dict, claim: uuid.UUID) -> None:
        """Check ``row``, a domain claimed by ``claim`` (``check_due`` claims them); a failure is logged."""
        try:
            await self._check_one(row, claim)
        except Exception:
            # The claim runs out and another run tries again; the other domains go on.
            log.failure("checking domain {name} failed", name=row["name"])

    async def _check_one(self, row: dict, claim: uuid.UUID) -> None:
        records, dkim_keys = self.records(row, await store.keys_of(self._db, row["id"]))
        now = self._clock.seconds()
        # A name added before the test domain was refused at creation: it fails whatever its DNS says.
        refused = self._settings.tests.not_a_sending_domain(row["name"])
        if refused is not None:
            verdict = Verdict("failed", {r.key: "failed" for r in records}, None, None, row["checks"] + 1)
        else:
            findings = await check_records(
                self._resolver, row["name"], records, dkim_keys, self._settings.mx_host,
                self._settings.spf_include,
            )
            verdict = judge(
                CheckState(row["status"], _seconds(row["window_started"]), row["checks"],
                           _seconds(row["suspect_since"])),
                findings,
                frozenset(r.key for r in records if r.required),
                now,
                self._settings.verification_window,
                self._settings.recheck_interval,
            )

        async def record(txn: Transaction):
            current = await store.lock_claimed(txn, row["id"], claim)
            if current is None:  # deleted, or a newer check was asked for meanwhile
                return
            await store.record_check(
                txn, row["id"], verdict.status, verdict.record_status, _at(verdict.next_check_at),
                _at(verdict.suspect_since), verdict.checks, _at(now),
            )
            await self._status_changed(txn, current, verdict.status, refused)

        await self._db.run("record_domain_check", record)
        self._sending.forget(row["tenant_id"])
        if refused is not None:
            log.warn("domain {name} checked: failed: {reason}", name=row["name"], reason=refused)
        else:
            log.info("domain {name} checked: {status}", name=row["name"], status=verdict.status)


_TAKEN = "name: the domain {} has already been added by another account"


def _rate(part: int, whole: int) -> float | None:
    return None if not whole else round(part / whole, 4)


def _audited(row: dict) -> dict:
    """What the audit log keeps of a domain's change."""
    return {"tenant_id": str(row["tenant_id"]), "domain_id": str(row["id"]), "domain": row["name"]}
