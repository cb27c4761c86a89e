"""A sender whose domain signs at delivery, and dkimpy's verdicts on a delivered message."""

import email
import email.policy
import re

import dns.resolver
from twisted.internet import threads

from tests.helpers.dkim import verify_all
from tests.helpers.domainsupport import publish


async def signing_sender(mta, **fields) -> tuple[dict, str, str]:
    """A tenant sending from DOMAIN whose DKIM records the loopback DNS server serves."""
    tenant, key = await mta.sender(**fields)
    _, listed, _ = await mta.json("GET", "/domains", key)
    domain_id = listed["data"][0]["id"]
    _, detail, _ = await mta.json("GET", f"/domains/{domain_id}", key)
    publish(mta.dns, detail)
    return tenant, key, domain_id


async def verdicts(mta, raw: bytes) -> list[bool]:
    """dkimpy's verdict on each signature, its keys looked up on the loopback DNS server."""

    def lookup(name, timeout=5):
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers, resolver.port = ["127.0.0.1"], mta.dns.port
        answer = resolver.resolve(name.decode().rstrip("."), "TXT", lifetime=timeout)
        return b"".join(b"".join(rr.strings) for rr in answer)

    # dkimpy is synchronous and the DNS server runs on this reactor: verify in a thread.
    return await threads.deferToThread(verify_all, raw, lookup)


def signatures(raw: bytes) -> list[str]:
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    return [re.sub(r"\s+", "", str(s)) for s in parsed.get_all("DKIM-Signature") or []]
