"""
The sending side's wiring (part of the composition root, compose.py): the one accept path
behind ``POST /emails`` and SMTP submission, scheduled release, broadcasts and their fan-out.
"""

from __future__ import annotations

import attrs

from mailsvc.app import suppressions
from mailsvc.app.apikeys import KeyRing
from mailsvc.app.broadcasts import Broadcasts
from mailsvc.app.domains import Domains
from mailsvc.app.emails import Emails, Schedules
from mailsvc.app.idempotency import IdempotencyKeys
from mailsvc.app.ratelimit import RateLimiter
from mailsvc.app.spam import SpamChecks
from mailsvc.app.submit import Submitter, TestSends
from mailsvc.app.templates import Templates
from mailsvc.app.throttle import SmtpAuthFailures
from mailsvc.app.unsubscribe import Unsubscribes
from mailsvc.broadcasting.fanout import Fanout
from mailsvc.compose_shared import Shared, by_role, woken
from mailsvc.domain.testaddresses import TestAddresses
from mailsvc.http.api.broadcasts import BroadcastsResource
from mailsvc.http.api.emails import EmailsResource
from mailsvc.http.public import UnsubscribeResource
from mailsvc.loop import Loop
from mailsvc.mail.limits import MimeLimits
from mailsvc.service import Group
from mailsvc.smtp.intake import SmtpIntake
from mailsvc.smtp.submission import Submission
from mailsvc.store import suppressions as suppression_list

#: How often scheduled emails (and broadcasts) whose time has come are looked for.
SCHEDULE_RELEASE_SECONDS = 1


@attrs.frozen
class Sending:
    """What ``sending_of`` builds that other features take: broadcasts and delivery submit through it."""

    submitter: Submitter
    emails: Emails
    schedules: Schedules
    submission: Submission
    #: The broadcast stream's one-click unsubscribe links: made at submit, built into messages at delivery.
    unsubscribes: Unsubscribes
    #: The scheduler's release of scheduled e-mails.
    service: Group


def sending_of(shared: Shared, domains: Domains, templates: Templates, tests: TestAddresses, keyring: KeyRing,
             limiter: RateLimiter, submit_clock=None) -> Sending:
    """
    ``submit_clock``: the clock of the accept path's ids and times (the process's clock unless given).
    The one accept path (``Submitter``) behind ``POST /emails`` and SMTP submission, the
    e-mails' reads and the scheduled ones' release, and the one-click unsubscribe links.
    SMTP submission holds this process's share of the node's connection caps (at least one each).
    """
    clock, config, db, router, fetcher = shared.clock, shared.config, shared.db, shared.router, shared.outside.fetcher
    # RFC 8058 one-click unsubscribe links of the broadcast stream.
    unsubscribes = Unsubscribes(clock, db, shared.derive("unsubscribe-links"), config.http.public_url)
    router.mount(UnsubscribeResource(unsubscribes))
    schedules = Schedules(shared.run_blocking, config.api.date_languages)
    suppressed_for = suppressions.with_test_addresses(suppression_list.suppressed_for, tests)
    submitter = Submitter(
        submit_clock or clock, db, IdempotencyKeys(clock, db), domains.sending_domain, suppressed_for,
        lambda url, max_bytes, timeout: fetcher.get(url, max_bytes, timeout, allow_http=True),
        schedules, unsubscribes=unsubscribes, templates=templates.published,
        tests=TestSends(tests, config.mail.refuse_reserved_recipients), limits=MimeLimits.of(config.mail),
    )
    emails = Emails(clock, db, shared.derive("attachment-links"), suppressed_for, schedules)
    router.mount(EmailsResource(submitter, emails, config.http.public_url))
    intake = SmtpIntake(submitter, limiter, domains.sending_domain, tests, MimeLimits.of(config.mail))
    smtp, share = config.smtp, shared.share
    submission = Submission(
        keyring.authenticate, intake.accept_message, config.hostname,
        auth_failures=SmtpAuthFailures(shared.throttle, clock),
        max_connections=max(1, share.of_count(smtp.submission_max_connections)),
        # Not shared out: the kernel spreads one client's connections unevenly between the workers
        # (docs/operations.md, "Limits of the public listeners").
        max_connections_per_client=smtp.submission_max_connections_per_client,
        command_line_timeout=smtp.submission_command_timeout, session_timeout=smtp.submission_session_timeout,
    )
    release = Loop(clock, "release scheduled emails", SCHEDULE_RELEASE_SECONDS, emails.release_due,
                   on_failure=shared.count_failure)
    return Sending(submitter, emails, schedules, submission, unsubscribes,
                   Group("sending", by_role(config, {"scheduler": [release]})))


@attrs.frozen
class BroadcastsBundle:
    """Broadcasts and their fan-out; ``service`` releases the scheduled ones (scheduler role) and
    runs the fan-out (broadcasts role)."""

    broadcasts: Broadcasts
    fanout: Fanout
    engine: Group
    service: Group


def broadcasts_of(shared: Shared, sending: Sending, domains: Domains, spam: SpamChecks) -> BroadcastsBundle:
    """Broadcasts: the resource, the scheduled release and the fan-out through the one accept path."""
    clock, config, db = shared.clock, shared.config, shared.db
    broadcasts = Broadcasts(clock, db, sending.schedules, domains.sending_domain, config.http.public_url, spam)
    shared.router.mount(BroadcastsResource(broadcasts, config.http.public_url))
    fanout = Fanout(clock, db, sending.submitter, chunk=config.broadcasts.chunk,
                    lease_seconds=config.broadcasts.lease_seconds, on_failure=shared.count_failure)
    release = Loop(clock, "release scheduled broadcasts", SCHEDULE_RELEASE_SECONDS, broadcasts.release_due,
                   on_failure=shared.count_failure)
    engine = woken(shared.notifications, fanout)
    return BroadcastsBundle(broadcasts, fanout, engine,
                            Group("broadcasts", by_role(config, {"scheduler": [release], "broadcasts": [engine]})))
