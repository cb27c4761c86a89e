"""
The stages of a message's end-to-end path, and which stack frames of a py-spy profile
belong to each: the one place bench/budget.py reads them from.

A stage is a list of patterns ``(module, function)``: ``module`` a dotted module or package
name (a package covers its modules), ``function`` a qualified name (a class covers its
methods, a function its nested functions) or ``*`` for every function of the module. A
sample belongs to the stage of the innermost frame that one of the patterns names, among the
frames run since the last resumption of a coroutine or a Deferred's callbacks
(bench/pyspy_shares.py's rule: what lies above that is whatever fired the Deferred). A stage
applies to the samples of the processes it names ("api": the node that accepts, "delivery":
the node that delivers).

``patterns`` must name functions that exist in mailsvc now (tests/unit/test_bench_stages.py
imports each one, so a rename cannot silently empty a stage). ``earlier`` names the
functions of the same stage in the commits before the delivery step's statements were cut
(the "before" side of bench/budget.sh); the test checks that they do *not* exist now (else
they belong in ``patterns``), and bench/budget.py checks against the tree it measures that
every stage has a pattern there.

``STATEMENTS`` sorts what PostgreSQL's backends run (sampled from pg_stat_activity) into the
same stages, by the statement's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bench.pyspy_shares import RESUMED

API, DELIVERY = "api", "delivery"


@dataclass(frozen=True)
class Stage:
    name: str
    processes: tuple[str, ...]
    patterns: tuple[tuple[str, str], ...]
    earlier: tuple[tuple[str, str], ...] = field(default=())


STAGES: tuple[Stage, ...] = (
    Stage("HTTP accept", (API,), (
        ("mailsvc.http", "*"),
        ("mailsvc.app.submit", "Submitter.submit"),
        ("mailsvc.app.submit", "Submitter._submit"),
        ("mailsvc.app.submit", "Submitter._prepare"),
        ("mailsvc.app.submit", "check_account"),
        ("mailsvc.app.apikeys", "*"),
        ("mailsvc.app.ratelimit", "*"),
        ("mailsvc.app.idempotency", "*"),
        ("mailsvc.app.mimebudget", "*"),
        ("mailsvc.domain.email", "*"),
        ("mailsvc.domain.addresses", "*"),
        ("mailsvc.domain.headers", "*"),
        ("mailsvc.mail.mime", "new_message_id"),
        ("mailsvc.mail.mime", "size_bound"),
        ("mailsvc.mail.mime", "part_count"),
        ("mailsvc.store.api_rate", "*"),
        ("klein", "*"),
        ("werkzeug", "*"),
        ("json", "*"),
        ("twisted.web", "*"),
        ("twisted.internet.tcp", "*"),
    )),
    Stage("accept statement", (API,), (
        ("mailsvc.app.submit", "Submitter._write"),
        ("mailsvc.app.submit", "Submitter._rows_of"),
        ("mailsvc.store.accept", "*"),
        ("mailsvc.store.groupcommit", "GroupCommit"),
        ("mailsvc.domain.delivery", "first_status"),
        ("mailsvc.domain.delivery", "first_times"),
        ("mailsvc.domain.delivery", "first_last_event"),
        ("mailsvc.ids", "*"),
    )),
    Stage("claim", (DELIVERY,), (
        ("mailsvc.delivery.worker", "DeliveryWorker.step"),
        ("mailsvc.delivery.worker", "DeliveryWorker._renew"),
        ("mailsvc.delivery.transactions", "Transactions.of"),
        ("mailsvc.delivery.transactions", "Transactions._chunked"),
        ("mailsvc.store.deliveries", "claim"),
        ("mailsvc.store.deliveries", "_claim"),
        ("mailsvc.store.deliveries", "_write_claim"),
        ("mailsvc.store.deliveries", "_hold_standing"),
        ("mailsvc.store.deliveries", "_paces"),
        ("mailsvc.store.deliveries", "_account"),
        ("mailsvc.store.deliveries", "_claimed"),
        ("mailsvc.store.deliveries", "Renewals"),
        ("mailsvc.store.deliveries", "ClaimedDelivery"),
        ("mailsvc.domain.delivery", "fair_shares"),
        ("mailsvc.domain.delivery", "AccountPace"),
        ("mailsvc.domain.policy", "*"),
    ), earlier=(
        ("mailsvc.store.deliveries", "renew"),
        ("mailsvc.domain.delivery", "Pace"),
    )),
    Stage("contents", (DELIVERY,), (
        ("mailsvc.store.delivery_contents", "*"),
    ), earlier=(
        ("mailsvc.store.deliveries", "contents"),
    )),
    Stage("build", (DELIVERY,), (
        ("mailsvc.delivery.transactions", "Transactions._built"),
        ("mailsvc.app.messages", "*"),
        ("mailsvc.mail.mime", "*"),
        ("mailsvc.domain.htmltext", "*"),
    )),
    Stage("DKIM sign", (DELIVERY,), (
        ("mailsvc.delivery.worker", "DeliveryWorker._signed"),
        ("mailsvc.delivery.worker", "_StepSignatures"),
        ("mailsvc.mail.dkim", "*"),
        ("mailsvc.crypto.keyvault", "*"),
        ("mailsvc.app.domains", "SigningKeys"),
    )),
    Stage("SMTP I/O", (DELIVERY,), (
        ("mailsvc.delivery.worker", "DeliveryWorker._deliver"),
        ("mailsvc.delivery.worker", "DeliveryWorker._chosen_destinations"),
        ("mailsvc.delivery.worker", "DeliveryWorker._send"),
        ("mailsvc.delivery.worker", "DeliveryWorker._destinations"),
        ("mailsvc.delivery.worker", "DeliveryWorker._envelope_sender"),
        ("mailsvc.delivery.connections", "*"),
        ("mailsvc.delivery.dialer", "*"),
        ("mailsvc.delivery.routes", "*"),
        ("mailsvc.smtp.outbound", "*"),
        ("mailsvc.smtp.outbound_transaction", "*"),
        ("mailsvc.smtp.outbound_tls", "*"),
        ("mailsvc.smtp.outbound_auth", "*"),
        ("mailsvc.smtp.direct_writes", "*"),
        ("mailsvc.smtp.replies", "*"),
        ("mailsvc.dns", "*"),
        ("twisted.names", "*"),
        ("twisted.protocols.basic", "*"),
        ("twisted.internet.tcp", "*"),
        ("twisted.internet.udp", "*"),
    )),
    Stage("outcome", (DELIVERY,), (
        ("mailsvc.delivery.worker", "DeliveryWorker._answered"),
        ("mailsvc.delivery.worker", "DeliveryWorker._settle"),
        ("mailsvc.delivery.worker", "DeliveryWorker._decide"),
        ("mailsvc.delivery.worker", "DeliveryWorker._defer"),
        ("mailsvc.delivery.worker", "DeliveryWorker._bounce"),
        ("mailsvc.delivery.worker", "DeliveryWorker._outcome_ready"),
        ("mailsvc.delivery.worker", "DeliveryWorker._write_outcomes"),
        ("mailsvc.delivery.worker", "DeliveryWorker._flush"),
        ("mailsvc.store.deliveries", "record"),
        ("mailsvc.store.delivery_outcomes", "*"),
    ), earlier=(
        ("mailsvc.store.deliveries", "_write"),
    )),
    Stage("events", (API, DELIVERY), (
        ("mailsvc.store.events", "*"),
        ("mailsvc.domain.delivery", "sent_event"),
        ("mailsvc.domain.delivery", "first_event"),
        ("mailsvc.store.delivery_outcomes", "_row"),
    )),
    Stage("webhook fan-out", (API,), (
        ("mailsvc.webhooks", "*"),
        ("mailsvc.store.webhooks", "*"),
    )),
    Stage("database driver (every statement's sending and reading)", (API, DELIVERY), (
        ("mailsvc.store.database", "*"),
        ("mailsvc.store.connection", "*"),
        ("mailsvc.store.notify", "*"),
        ("txpostgres", "*"),
        ("psycopg2", "*"),
    )),
)

#: What the samples no stage names fall to.
OTHER = "other (reactor, Deferreds, logging, metrics)"

#: The order of the table: the path's order, PostgreSQL's share after the accept statement.
ORDER = ("HTTP accept", "accept statement", "claim", "contents", "build", "DKIM sign", "SMTP I/O", "outcome",
         "events", "webhook fan-out", "database driver (every statement's sending and reading)", OTHER)

#: PostgreSQL's statements by stage, by their text (the first pattern that matches; lower case,
#: spaces folded). What none names is "other statements" (BEGIN, COMMIT, the loops beside).
STATEMENTS: tuple[tuple[str, str], ...] = (
    ("webhook fan-out", r"webhook_handover|webhook_deliveries|fanned_out|from webhooks"),
    ("accept statement", r"insert into emails|new_events as \(insert|insert into deliveries"),
    ("contents", r"from emails e left join domains|from dkim_keys|from attachments"),
    ("outcome", r"delivery_stats|insert into events|last_event|set status = v\.status"),
    ("claim", r"update deliveries|from deliveries|delivery_pace|from tenants|due_accounts"),
    ("HTTP accept", r"api_rate|api_keys|idempotency"),
)


def statement_stage(text: str) -> str:
    folded = " ".join(text.lower().split())
    for name, pattern in STATEMENTS:
        if re.search(pattern, folded):
            return name
    return "other statements"


# ---------------------------------------------------------------------------------------------
# Frames


def frame_of(frame: str) -> tuple[str, str]:
    """``(module, qualified name)`` of a py-spy frame, ``"Class.method (mailsvc/x/y.py:12)"``."""
    name, _, where = frame.rpartition(" (")
    path = where.rsplit(":", 1)[0]
    for cut in ("site-packages/", "/mailsvc/"):
        if cut in path:
            path = path.rsplit(cut, 1)[1] if cut == "site-packages/" else "mailsvc/" + path.rsplit(cut, 1)[1]
    module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    return module, name


def names(pattern: tuple[str, str], module: str, qualname: str) -> bool:
    want_module, want = pattern
    if module != want_module and not module.startswith(want_module + "."):
        return False
    return want == "*" or qualname == want or qualname.startswith(want + ".")


def stage_of(process: str, frames: list[str]) -> str:
    """The stage of one sample of ``process`` (its frames outermost first)."""
    for i in range(len(frames) - 1, -1, -1):
        if RESUMED.match(frames[i]):
            frames = frames[i + 1:]
            break
    stages = [s for s in STAGES if process in s.processes]
    for frame in reversed(frames):
        module, qualname = frame_of(frame)
        for stage in stages:
            if any(names(p, module, qualname) for p in stage.patterns + stage.earlier):
                return stage.name
    return OTHER
