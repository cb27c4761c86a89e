"""
The deliverability tables (migration 0016): MTA-STS policies, TLS report counts, destination
limits and their operator defaults, DMARC aggregate reports.
"""

from __future__ import annotations

from mailsvc.store.database import Database

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
