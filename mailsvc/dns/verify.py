"""
Checking a domain's published records through the one twisted.names resolver: every record
is looked up at once and judged MATCH, MISMATCH (an answer without it, or no such name) or
TEMPORARY (no usable answer: timeout, SERVFAIL, refused).
"""

from __future__ import annotations

from twisted.internet import defer
from twisted.names import dns, error

from mailsvc.domain.domains import (
    MATCH,
    MISMATCH,
    TEMPORARY,
    DkimKey,
    Record,
    dkim_matches,
    host_matches,
    is_dmarc,
    spf_matches,
)

#: Seconds of each try of one query: a check gives up on a silent server after four seconds.
QUERY_TIMEOUT = (1, 3)


class LookupFailed(Exception):
    """No usable answer; the record's presence is unknown."""


def _texts(answers) -> list[str]:
    return [
        b"".join(rr.payload.data).decode("utf-8", "replace")
        for rr in answers
        if rr.type == dns.TXT
    ]


def _exchanges(answers) -> list[str]:
    return [rr.payload.name.name.decode("ascii", "replace") for rr in answers if rr.type == dns.MX]


async def _lookup(method, name: str, extract) -> list:
    try:
        answers, _, _ = await method(name, timeout=QUERY_TIMEOUT)
    except error.DNSNameError:
        return []
    except (error.DomainError, error.DNSServerError, error.DNSQueryRefusedError,
            error.DNSFormatError, error.DNSNotImplementedError, error.DNSUnknownError,
            defer.TimeoutError, OSError) as e:
        raise LookupFailed(f"{name}: {type(e).__name__}") from None
    return extract(answers)


async def texts(resolver, name: str) -> list[str]:
    """The TXT strings at ``name`` (each record's strings joined); [] when there are none."""
    return await _lookup(resolver.lookupText, name, _texts)


async def exchanges(resolver, name: str) -> list[str]:
    return await _lookup(resolver.lookupMailExchange, name, _exchanges)


async def check_records(
    resolver, domain: str, records: list[Record], keys: dict[str, DkimKey], mx_host: str,
    spf_include: str,
) -> dict[str, str]:
    """A finding per record key."""

    async def judge(record: Record) -> tuple[str, str]:
        name = record.fqdn(domain)
        try:
            if record.purpose == "dkim":
                found = dkim_matches(await texts(resolver, name), keys[record.key])
            elif record.purpose == "return_path":
                found = any(host_matches(h, mx_host) for h in await exchanges(resolver, name))
            elif record.purpose == "spf":
                found = spf_matches(await texts(resolver, name), spf_include)
            else:
                found = any(is_dmarc(t) for t in await texts(resolver, name))
        except LookupFailed:
            return record.key, TEMPORARY
        return record.key, MATCH if found else MISMATCH

    results = await defer.gatherResults(
        [defer.ensureDeferred(judge(record)) for record in records], consumeErrors=True
    )
    return dict(results)
