"""
``mailsvc``: the operator's command line. It talks to a node's operator API (``/admin/v1``)
like any other client, never to the database, so that what it does is what the API allows and
the audit log records; ``mailsvc doctor`` checks a node's set-up as a sending MTA. The commands
are in ``cli/<topic>.py``; here, the one table of their arguments and ``main``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TextIO

from mailsvc.cli.accounts import (
    operators_create,
    tenant_create,
    tenant_set,
    tenant_show,
    tenants,
    user_link,
)
from mailsvc.cli.audit import audit
from mailsvc.cli.client import CliError, connect
from mailsvc.cli.output import Io
from mailsvc.cli.parsing import Formatter, Parser
from mailsvc.cli.queue import CONFIRM_ABOVE, STATES, duration, queue_action, queue_list, queue_summary
from mailsvc.cli.tokens import tokens_create, tokens_list, tokens_revoke
from mailsvc.domain.audit import ACTOR_KINDS
from mailsvc.domain.display import shown
from mailsvc.domain.tenant import DELIVERY_MODES, PLANS, STATUSES

PLAN_NAMES = tuple(PLANS)


def _common() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    where = common.add_argument_group("node")
    where.add_argument("--config", metavar="FILE",
                       help="the node's configuration (default: /etc/mailsvc/mailsvc.conf)")
    where.add_argument("--token-file", metavar="FILE",
                       help="a file holding the operator token (default: MAILSVC_OPERATOR_TOKEN, "
                            "operator.token, or <state dir>/operator-token)")
    return common


def _read(parser: argparse.ArgumentParser, pages: bool = False) -> None:
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")
    if pages:
        parser.add_argument("--limit", type=int, default=20, help="rows per page, 1 to 100 (default 20)")
        parser.add_argument("--after", metavar="ID", help="the page after this row (cursor)")


def _filter_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("filters (combined with AND)")
    group.add_argument("--destination", metavar="DOMAIN", help="recipient domain, e.g. gmail.com")
    group.add_argument("--tenant", metavar="TENANT_ID", help="a tenant's id")
    group.add_argument("--state", choices=STATES)
    group.add_argument("--code", type=int, metavar="CODE", help="last SMTP response code, e.g. 451")
    group.add_argument("--older-than", type=duration, metavar="AGE", help="queued at least this long: 90, 30m, 2h, 3d")


def parser() -> argparse.ArgumentParser:
    common = _common()
    top = Parser(
        prog="mailsvc", formatter_class=Formatter, allow_abbrev=False,
        description="Operate a mailsvc node through its operator API.",
        epilog="The node is MAILSVC_URL, or the http.listen of the configuration; the token is read from\n"
               "--token-file, MAILSVC_OPERATOR_TOKEN, operator.token or <state dir>/operator-token.\n"
               "Plain http is refused except to a loopback address.\n\n"
               "example:\n  mailsvc queue\n  mailsvc queue hold --destination gmail.com --reason 'blocklisted'")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(parent, name: str, handler, summary: str, example: str, **kwargs) -> argparse.ArgumentParser:
        sub = parent.add_parser(name, help=summary, description=summary, parents=[common], allow_abbrev=False,
                                formatter_class=Formatter, epilog="example:\n  " + example, **kwargs)
        sub.set_defaults(handler=handler)
        return sub

    queue = verb(verbs, "queue", queue_summary, "The queue by state, destination and tenant (a table).",
                 "mailsvc queue --json")
    _read(queue)
    queue_verbs = queue.add_subparsers(dest="queue_verb", metavar="ACTION")
    listing = verb(queue_verbs, "list", queue_list, "Deliveries in the queue, filtered.",
                   "mailsvc queue list --destination gmail.com --state deferred --code 451")
    _filter_options(listing)
    _read(listing, pages=True)
    for action, summary in [("retry", "Due at once (attempts and the 72-hour window unchanged)."),
                            ("hold", "Not attempted until released; a hold on a whole destination or tenant "
                                     "applies to new mail too."),
                            ("release", "Held deliveries go back to the queue (past their window: email.failed)."),
                            ("bounce", "End the deliveries as failed (email.failed, content_expired).")]:
        example = (f"mailsvc queue {action} --destination gmail.com" + (" --reason 'listed at Spamhaus'"
                                                                          if action == "hold" else "")
                   + f"\n  mailsvc queue {action} --id 0190... --id 0190... --yes")
        sub = verb(queue_verbs, action, queue_action, summary, example)
        sub.set_defaults(action=action)
        _filter_options(sub)
        sub.add_argument("--id", action="append", metavar="DELIVERY_ID", help="a delivery (repeatable)")
        if action == "hold":
            sub.add_argument("--reason", required=True, help="why (shown in the summary and the audit log)")
        sub.add_argument("--yes", action="store_true",
                         help=f"do not ask first (asked above {CONFIRM_ABOVE} deliveries)")

    listing = verb(verbs, "tenants", tenants, "The tenants, searchable by name and status.",
                   "mailsvc tenants --search acme --status paused")
    listing.add_argument("--search", metavar="TEXT", help="part of the name")
    listing.add_argument("--status", choices=STATUSES)
    _read(listing, pages=True)

    tenant = verb(verbs, "tenant", None, "Create, show or change one tenant.", "mailsvc tenant show 0190...")
    tenant_verbs = tenant.add_subparsers(dest="tenant_verb", required=True, metavar="ACTION")
    create = verb(tenant_verbs, "create", tenant_create, "A new tenant and its first API key (shown once).",
                  "mailsvc tenant create 'Acme Ltd' --plan growth")
    create.add_argument("name")
    create.add_argument("--plan", choices=PLAN_NAMES, help="default free (sandboxed)")
    create.add_argument("--id", metavar="UUID", help="the tenant's id (default: a new one)")
    _read(create)
    show = verb(tenant_verbs, "show", tenant_show, "One tenant.", "mailsvc tenant show 0190... --usage")
    show.add_argument("tenant_id")
    show.add_argument("--usage", action="store_true", help="with its usage against its quotas")
    _read(show)
    change = verb(tenant_verbs, "set", tenant_set, "Change a tenant's plan, status, quotas or delivery.",
                  "mailsvc tenant set 0190... --status suspended --reason 'complaint rate 0.5%'")
    change.add_argument("tenant_id")
    change.add_argument("--name")
    change.add_argument("--plan", choices=PLAN_NAMES)
    change.add_argument("--status", choices=STATUSES)
    change.add_argument("--reason", help="the status's reason (shown to the tenant)")
    for option in ("daily-quota", "monthly-quota", "max-domains", "send-rate", "api-rate"):
        change.add_argument(f"--{option}", type=int, metavar="N")
    change.add_argument("--delivery-mode", choices=DELIVERY_MODES)
    _read(change)

    user = verb(verbs, "user", None, "Dashboard users.", "mailsvc user link owner@acme.example")
    user_verbs = user.add_subparsers(dest="user_verb", required=True, metavar="ACTION")
    link = verb(user_verbs, "link", user_link,
                "A set-password link for a user (audited: it can take over the account).",
                "mailsvc user link owner@acme.example\n"
                "  mailsvc user link new@acme.example --tenant 0190...   (a new user of that tenant)")
    link.add_argument("email")
    link.add_argument("--tenant", metavar="TENANT_ID", help="make a new user of this tenant")
    link.add_argument("--role", choices=("owner", "member"), default="owner", help="a new user's role")
    _read(link)

    operators = verb(verbs, "operators", None, "Operators' accounts for the web console (/console/).",
                     "mailsvc operators create olga@ops.example --name Olga")
    operator_verbs = operators.add_subparsers(dest="operators_verb", required=True, metavar="ACTION")
    made = verb(operator_verbs, "create", operators_create,
                "An operator's console account and its set-password link (audited).",
                "mailsvc operators create olga@ops.example --name Olga\n"
                "  mailsvc operators create olga@ops.example --link   (a new link: a forgotten password)")
    made.add_argument("email")
    made.add_argument("--name", help="how the console names the operator (default: the address)")
    made.add_argument("--link", action="store_true", help="a new set-password link for an existing operator")
    _read(made)

    log = verb(verbs, "audit", audit, "The audit log: who did what over the operator API and to users' passwords.",
               "mailsvc audit --actor-kind user --tenant 0190...")
    log.add_argument("--actor-kind", choices=ACTOR_KINDS,
                     help="token: an operator token; operator: the console's operators; user: a dashboard user")
    log.add_argument("--tenant", metavar="ID", help="the entries about one tenant")
    _read(log, pages=True)

    tokens = verb(verbs, "tokens", None, "Named operator tokens.", "mailsvc tokens create alice")
    token_verbs = tokens.add_subparsers(dest="tokens_verb", required=True, metavar="ACTION")
    _read(verb(token_verbs, "list", tokens_list, "The operator tokens (never their secrets).",
               "mailsvc tokens list"))
    made = verb(token_verbs, "create", tokens_create, "A new named operator token (shown once).",
                "mailsvc tokens create alice > alice.token")
    made.add_argument("name")
    _read(made)
    gone = verb(token_verbs, "revoke", tokens_revoke, "Revoke an operator token.", "mailsvc tokens revoke 0190...")
    gone.add_argument("token_id")

    from mailsvc.cli import doctor

    check = verb(verbs, "doctor", doctor.run, "Check this node's set-up as a sending MTA and say what to fix.",
                 "mailsvc doctor\n  mailsvc doctor --smtp-probe mx.example.net --dns-server 127.0.0.1:5353")
    doctor.options(check)
    return top


def main(argv: list[str] | None = None, *, stdin: TextIO | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, environ: dict[str, str] | None = None) -> int:
    io = Io(stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr,
            dict(os.environ) if environ is None else environ)
    try:
        args = parser().parse_args(argv)
        if args.verb == "doctor":
            code = args.handler(io, args)
        else:
            code = args.handler(connect(args.config, args.token_file, io.environ), io, args)
        io.stdout.flush()
        return code
    except CliError as e:
        io.note(f"mailsvc: {shown(e)}")
        return 1
    except BrokenPipeError:
        return _reader_went_away(io)


def _reader_went_away(io: Io) -> int:
    """What reads the output stopped reading (``| head``, ``| grep -q``): end quietly, with the
    status of a tool that SIGPIPE ended, as the other tools of a pipeline do. Python would print
    a traceback, and another at exit when it flushes what was left for the closed pipe (hence
    the flush above: the last of the output fails here, not at exit)."""
    if io.stdout is sys.stdout:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + signal.SIGPIPE
