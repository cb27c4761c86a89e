"""
Transport security policies of a recipient domain's MX hosts: DANE (RFC 7672) where the host has
DNSSEC-authenticated TLSA records, else the domain's MTA-STS policy (RFC 8461), else the sending
domain's ``tls`` setting. MTA-STS policies are fetched through ``outside.Fetcher`` and kept in
PostgreSQL until ``max_age`` ends, with a per-node cache of CACHE_SECONDS. A policy failure never
bounces: under ``enforce`` it defers the recipients (class ``blocked``) until the retry window
ends; ``testing`` only reports (docs/decisions.md, "MTA-STS and DANE").
"""

from __future__ import annotations

from twisted.logger import Logger

from mailsvc.crypto.peers import RecordingClientTLS, Tlsa, TrustStore, dane_failure
from mailsvc.delivery.connections import Authentication, Destination
from mailsvc.dns.secure import TLSA, LookupFailed, SecureResolver
from mailsvc.domain import mtasts
from mailsvc.outside.fetch import Fetcher
from mailsvc.store import deliverability as store
from mailsvc.store.database import Database

log = Logger()

#: Seconds a node keeps a domain's MTA-STS answer and a host's TLSA answer in memory.
CACHE_SECONDS = 300
#: Answers a node keeps in memory of each kind before it forgets them all.
MEMO_LIMIT = 10_000
FETCH_TIMEOUT = 30
DNS_TIMEOUT = (2, 5)


class PolicyDeferral(Exception):
    """The policy leaves no host to deliver to now: defer (class ``blocked``)."""


class PeerPolicy:
    """One connection's check, for ``OutboundSMTP(peer_policy=...)``."""

    def __init__(self, auth: Authentication, creator: RecordingClientTLS, trust: TrustStore, report):
        self._auth = auth
        self._creator = creator
        self._trust = trust
        self._report = report
        self.enforce = auth.enforce
        self.host = auth.host
        self.name = "DANE" if auth.kind == "dane" else "MTA-STS"

    def check(self) -> str | None:
        chain = self._creator.peer_chain()
        if self._auth.kind == "dane":
            return dane_failure(chain, self._auth.tlsa, self._auth.host)
        return self._trust.failure(chain, self._auth.host)

    def report(self, result: str | None) -> None:
        if self._report is not None:
            self._report(self._auth, result or "success")


class Policies:
    def __init__(self, clock, db: Database, resolver, secure: SecureResolver | None, fetcher: Fetcher | NoFetcher,
                 sts_port: int = 443, report=None):
        self._clock = clock
        self._db = db
        self._resolver = resolver
        self._secure = secure
        self._fetcher = fetcher
        self._sts_port = sts_port
        self._report = report
        self._sts_memo: dict[str, tuple[float, mtasts.StsPolicy | None]] = {}
        self._tlsa_memo: dict[str, tuple[float, tuple[Tlsa, ...] | None]] = {}

    async def destinations(self, domain: str, hosts: tuple[str, ...], port: int, tls: str) -> list[Destination]:
        """Where to try, in order, each with its policy; PolicyDeferral when no host may be used."""
        policy = await self.sts_policy(domain)
        chosen, refused = [], []
        for host in hosts:
            try:
                tlsa = await self.tlsa(host, port)
            except LookupFailed as e:
                # A signed zone whose TLSA answer cannot be had: the host cannot be used now.
                refused.append(f"{host}: TLSA lookup failed ({e})")
                continue
            if tlsa is not None:
                usable = tuple(r for r in tlsa if r.usable)
                if usable:
                    auth = Authentication("dane", True, host, domain, usable)
                    chosen.append(Destination(host, port, "enforced", auth=auth))
                else:  # RFC 7672 §2.2: TLS still required, unauthenticated
                    chosen.append(Destination(host, port, "enforced"))
                continue
            if policy is not None and policy.mode == "enforce":
                if not policy.allows(host):
                    refused.append(f"{host} is not named by the MTA-STS policy of {domain}")
                    continue
                auth = Authentication("sts", True, host, domain, policy_text=policy.text())
                chosen.append(Destination(host, port, "enforced", auth=auth))
            elif policy is not None and policy.mode == "testing":
                auth = Authentication("sts", False, host, domain, policy_text=policy.text())
                chosen.append(Destination(host, port, tls, auth=auth))
            else:
                chosen.append(Destination(host, port, tls))
        if not chosen:
            if self._report is not None and policy is not None:
                for host in hosts:
                    self._report(Authentication("sts", True, host, domain, policy_text=policy.text()),
                                 "validation-failure")
            raise PolicyDeferral("; ".join(refused) or f"no MX host of {domain} may be used")
        return chosen

    # -- DANE ------------------------------------------------------------------------------

    async def tlsa(self, host: str, port: int) -> tuple[Tlsa, ...] | None:
        """The host's authenticated TLSA records; None when there are none or the zone is unsigned."""
        if self._secure is None:
            return None
        now = self._clock.seconds()
        key = f"_{port}._tcp.{host}"
        kept = self._tlsa_memo.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        answer = await self._secure.lookup(key, TLSA)
        records = None
        if answer.authentic and not answer.empty:
            records = tuple(r for r in (Tlsa.from_wire(d) for d in answer.rdata) if r is not None)
        if len(self._tlsa_memo) > MEMO_LIMIT:
            self._tlsa_memo.clear()
        self._tlsa_memo[key] = (now + CACHE_SECONDS, records)
        return records

    # -- MTA-STS ---------------------------------------------------------------------------

    async def sts_policy(self, domain: str) -> mtasts.StsPolicy | None:
        now = self._clock.seconds()
        kept = self._sts_memo.get(domain)
        if kept is not None and kept[0] > now:
            return kept[1]
        policy = await self._sts_lookup(domain, now)
        if len(self._sts_memo) > MEMO_LIMIT:
            self._sts_memo.clear()
        self._sts_memo[domain] = (now + CACHE_SECONDS, policy)
        return policy

    def forget(self, domain: str) -> None:
        self._sts_memo.pop(domain, None)

    async def _sts_lookup(self, domain: str, now: float) -> mtasts.StsPolicy | None:
        record_id = None
        try:
            answers, _, _ = await self._resolver.lookupText(f"_mta-sts.{domain}", timeout=DNS_TIMEOUT)
            texts = [b"".join(a.payload.data).decode("utf-8", "replace") for a in answers if a.type == 16]
            record_id = mtasts.sts_record_id(texts)
        except Exception:
            pass
        row = await store.sts_policy(self._db, domain)
        cached = None
        if row is not None and row["expires_at"] > now:
            cached = mtasts.StsPolicy(row["policy_id"], row["mode"], tuple(row["mx"]), row["max_age"])
        if record_id is None or (cached is not None and cached.id == record_id):
            # No record (or none could be read): a policy still in force applies (RFC 8461 §5.1).
            return cached
        try:
            policy = await self._fetch(domain, record_id)
        except Exception as e:
            log.info("MTA-STS policy of {domain} could not be fetched: {why}", domain=domain, why=str(e))
            return cached
        await store.save_sts_policy(self._db, domain, policy, now)
        return policy

    async def _fetch(self, domain: str, record_id: str) -> mtasts.StsPolicy:
        port = "" if self._sts_port == 443 else f":{self._sts_port}"
        url = f"https://mta-sts.{domain}{port}/.well-known/mta-sts.txt"
        fetched = await self._fetcher.get(url, mtasts.MAX_POLICY_BYTES, FETCH_TIMEOUT)
        if fetched.status != 200:
            raise mtasts.PolicyInvalid(f"HTTP {fetched.status}")
        if not fetched.headers.get("content-type", "").lower().startswith("text/plain"):
            raise mtasts.PolicyInvalid("the policy is not text/plain")
        return mtasts.parse_policy(fetched.body.decode("utf-8", "replace"), record_id)


class NoFetcher:
    """``delivery.mta_sts`` off: no policy is ever fetched."""

    async def get(self, *args, **kwargs):
        raise RuntimeError("MTA-STS is switched off (delivery.mta_sts)")
