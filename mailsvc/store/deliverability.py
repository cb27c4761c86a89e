"""
The deliverability tables (migration 0016): MTA-STS policies, TLS report counts, destination
limits and their operator defaults, DMARC aggregate reports.
"""

from __future__ import annotations

from mailsvc.store.database import Database, Transaction

# -- MTA-STS -------------------------------------------------------------------------------


async def sts_policy(db: Database, domain: str) -> dict | None:
    return await db.fetchone(
        "SELECT policy_id, mode, mx, max_age, fetched_at, expires_at FROM mta_sts_policies WHERE domain = %s",
        (domain,), desc="mta-sts policy")


async def save_sts_policy(db: Database, domain: str, policy, now: float) -> None:
    await db.execute(
        "INSERT INTO mta_sts_policies (domain, policy_id, mode, mx, max_age, fetched_at, expires_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (domain) DO UPDATE SET policy_id = EXCLUDED.policy_id,"
        " mode = EXCLUDED.mode, mx = EXCLUDED.mx, max_age = EXCLUDED.max_age, fetched_at = EXCLUDED.fetched_at,"
        " expires_at = EXCLUDED.expires_at",
        (domain, policy.id, policy.mode, list(policy.mx), policy.max_age, now, now + policy.max_age),
        desc="save mta-sts policy")


# -- TLS reporting -------------------------------------------------------------------------


async def add_tls_counts(db: Database, counts: dict[tuple, int]) -> None:
    """``counts``: {(domain, day, policy_type, policy, mx_host, result): n}."""

    async def add(txn):
        for (domain, day, policy_type, policy, mx_host, result), n in sorted(counts.items()):
            await txn.execute(
                "INSERT INTO tls_report_counts (domain, day, policy_type, policy, mx_host, result, count)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (domain, day, policy_type, mx_host, result)"
                " DO UPDATE SET count = tls_report_counts.count + EXCLUDED.count, policy = EXCLUDED.policy",
                (domain, day, policy_type, policy, mx_host, result, n))

    await db.run("add tls report counts", add)


async def tls_counts(db: Database, domain: str, day) -> list[dict]:
    return await db.fetchall(
        "SELECT policy_type, policy, mx_host, result, count FROM tls_report_counts WHERE domain = %s AND day = %s"
        " ORDER BY policy_type, mx_host, result", (domain, day), desc="tls report counts")


async def unreported_tls_days(db: Database, before, limit: int = 100) -> list[dict]:
    return await db.fetchall(
        "SELECT DISTINCT c.domain, c.day FROM tls_report_counts c WHERE c.day < %s AND NOT EXISTS"
        " (SELECT 1 FROM tls_reports_sent s WHERE s.domain = c.domain AND s.day = c.day)"
        " ORDER BY c.day, c.domain LIMIT %s", (before, limit), desc="unreported tls days")


async def tls_report_sent(db: Database, domain: str, day, outcome: str) -> None:
    await db.execute(
        "INSERT INTO tls_reports_sent (domain, day, outcome) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
        (domain, day, outcome), desc="tls report sent")


# -- Adaptive shaping ----------------------------------------------------------------------


async def destination_defaults(db: Database) -> list[dict]:
    return await db.fetchall("SELECT pattern, concurrency, rate_per_sec FROM destination_defaults ORDER BY pattern",
                             desc="destination defaults")


async def set_destination_default(db: Database | Transaction, pattern: str, concurrency: int, rate: float) -> None:
    await db.execute(
        "INSERT INTO destination_defaults (pattern, concurrency, rate_per_sec) VALUES (%s, %s, %s)"
        " ON CONFLICT (pattern) DO UPDATE SET concurrency = EXCLUDED.concurrency,"
        " rate_per_sec = EXCLUDED.rate_per_sec", (pattern, concurrency, rate))


async def delete_destination_default(db: Database | Transaction, pattern: str) -> bool:
    rows = await db.fetchall("DELETE FROM destination_defaults WHERE pattern = %s RETURNING pattern", (pattern,))
    return bool(rows)


async def destination_limits(db: Database, source: str) -> list[dict]:
    return await db.fetchall(
        "SELECT destination, concurrency, rate_per_sec, throttled_at, changed_at FROM destination_limits"
        " WHERE source = %s ORDER BY destination", (source,), desc="destination limits")


async def throttle_destination(db: Database, source: str, destination: str, concurrency: int, rate: float,
                               now: float) -> None:
    """A shrink: never raises what another node has already lowered further."""
    await db.execute(
        "INSERT INTO destination_limits (source, destination, concurrency, rate_per_sec, throttled_at, changed_at)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (source, destination) DO UPDATE SET"
        " concurrency = LEAST(destination_limits.concurrency, EXCLUDED.concurrency),"
        " rate_per_sec = LEAST(destination_limits.rate_per_sec, EXCLUDED.rate_per_sec),"
        " throttled_at = EXCLUDED.throttled_at, changed_at = EXCLUDED.changed_at",
        (source, destination, concurrency, rate, now, now), desc="throttle destination")


async def recover_destination(db: Database, source: str, destination: str, concurrency: int, rate: float,
                              now: float, quiet_since: float) -> None:
    """A step back up, unless some node throttled the destination since ``quiet_since``."""
    await db.execute(
        "UPDATE destination_limits SET concurrency = %s, rate_per_sec = %s, changed_at = %s"
        " WHERE source = %s AND destination = %s AND changed_at <= %s",
        (concurrency, rate, now, source, destination, quiet_since), desc="recover destination")


async def forget_destination(db: Database | Transaction, source: str, destination: str) -> bool:
    rows = await db.fetchall("DELETE FROM destination_limits WHERE source = %s AND destination = %s"
                             " RETURNING destination", (source, destination))
    return bool(rows)


# -- DMARC aggregate reports ---------------------------------------------------------------


async def domain_of_return_path_host(db: Database, host: str) -> dict | None:
    """The domain whose return-path host is ``host`` (index ``domains_return_path_host``)."""
    return await db.fetchone(
        "SELECT id, name, tenant_id FROM domains WHERE return_path || '.' || name = %s LIMIT 1", (host,),
        desc="domain of return path host")


async def save_dmarc_report(db: Database, report_id, domain_id, report) -> bool:
    """False when the same report (organisation and id) was stored before."""

    async def save(txn):
        rows = await txn.fetchall(
            "INSERT INTO dmarc_reports (id, domain_id, org_name, report_id, begin_at, end_at, policy)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (domain_id, org_name, report_id) DO NOTHING"
            " RETURNING id", (report_id, domain_id, report.org_name, report.report_id, report.begin, report.end,
                              report.policy))
        if not rows:
            return False
        day = report.begin.date()
        for row in report.rows:
            await txn.execute(
                "INSERT INTO dmarc_records (report_id, day, source_ip, count, disposition, dkim_aligned,"
                " spf_aligned, header_from) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (report_id, day, row.source_ip, row.count, row.disposition, row.dkim_aligned, row.spf_aligned,
                 row.header_from))
        return True

    return await db.run("save dmarc report", save)


async def dmarc_days(db: Database, domain_id, since) -> list[dict]:
    """Per day and source: messages, and those with DKIM and SPF aligned."""
    return await db.fetchall(
        "SELECT r.day, r.source_ip, sum(r.count)::bigint AS messages,"
        " sum(CASE WHEN r.dkim_aligned THEN r.count ELSE 0 END)::bigint AS dkim_pass,"
        " sum(CASE WHEN r.spf_aligned THEN r.count ELSE 0 END)::bigint AS spf_pass,"
        " array_agg(DISTINCT rep.org_name) AS reporters"
        " FROM dmarc_records r JOIN dmarc_reports rep ON rep.id = r.report_id"
        " WHERE rep.domain_id = %s AND r.day >= %s GROUP BY r.day, r.source_ip ORDER BY r.day DESC, messages DESC",
        (domain_id, since), desc="dmarc days")
