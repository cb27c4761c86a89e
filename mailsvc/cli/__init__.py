"""
``mailsvc``: the operator's command line. It talks to a node's operator API (``/admin/v1``)
like any other client, never to the database, so that what it does is what the API allows and
the audit log records; ``mailsvc doctor`` checks a node's set-up as a sending MTA.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import TextIO

from tabulate import tabulate

from mailsvc.cli.client import Client, CliError, connect
from mailsvc.domain.audit import ACTOR_KINDS
from mailsvc.domain.display import shown
from mailsvc.domain.tenant import DELIVERY_MODES, PLANS, STATUSES

#: Actions on more deliveries than this ask first (``--yes`` does not).
CONFIRM_ABOVE = 10
STATES = ("due", "deferred", "in_flight", "held")
PLAN_NAMES = tuple(PLANS)


class Io:
    """Where a command reads and writes (the process's streams, or a test's). What it writes
    for a person to read shows every value it did not write itself through ``shown`` (one
    field, one line, no control, bidirectional or zero-width character acting); ``--json``
    writes the API's answer as it came (JSON escapes every control character itself)."""

    def __init__(self, stdin: TextIO, stdout: TextIO, stderr: TextIO, environ: dict[str, str]):
        self.stdin, self.stdout, self.stderr, self.environ = stdin, stdout, stderr, environ

    def out(self, text: str = "") -> None:
        print(text, file=self.stdout)

    def note(self, text: str) -> None:
        print(text, file=self.stderr)


# -- output ----------------------------------------------------------------------------------


def table(headers: list[str], rows: list[list[object]]) -> str:
    """Rows in left-aligned columns under their headers (``-`` for an empty cell)."""
    cells = [[("-" if value is None or value == "" else shown(value)) for value in row] for row in rows]
    laid_out = tabulate(cells, headers, tablefmt="plain", disable_numparse=True, stralign="left")
    return "\n".join(line.rstrip() for line in laid_out.splitlines())


def shown_as_json(io, args, value) -> bool:
    """With ``--json``, the API's answer as it came (indented), in place of the table."""
    if args.json:
        io.out(json.dumps(value, indent=2))
    return args.json


def age(seconds: float | None) -> str:
    """``3d4h``, ``2h05m``, ``42s``: an age an operator reads at a glance."""
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds >= 86400:
        return f"{seconds // 86400}d{seconds % 86400 // 3600}h"
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _response(entry: dict | None) -> str:
    if not entry:
        return "-"
    text = f"{entry.get('code') or ''} {entry.get('text') or ''}".strip()
    return text[:60] + ("…" if len(text) > 60 else "")


def _top(responses: list[dict]) -> str:
    return "; ".join(f"{_response(r)} ×{r['count']}" for r in responses[:1]) or "-"


def _fields(io: Io, record: dict) -> None:
    io.out(table(["FIELD", "VALUE"], [[k, json.dumps(v) if isinstance(v, dict | list) else v]
                                       for k, v in record.items()]))


def _more(io: Io, page: dict) -> None:
    if page.get("has_more") and page.get("data"):
        io.note(f"(more: add --after {shown(page['data'][-1]['id'])})")


def _duration(text: str) -> int:
    """``90``, ``30m``, ``2h``, ``3d`` as seconds."""
    match = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds, or a number with s, m, h or d (30m, 2h, 3d)")
    return int(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]


# -- the queue -------------------------------------------------------------------------------


def queue_summary(api: Client, io: Io, args) -> int:
    summary = api.call("GET", "/admin/v1/queue")
    if shown_as_json(io, args, summary):
        return 0
    io.out(table(["STATE", "COUNT", "OLDEST"],
                 [[s["state"], s["count"], age(s.get("oldest_age_seconds"))] for s in summary["by_state"]]))

    def grouped(rows: list[dict], first: list[str], key) -> str:
        return table(
            [*first, "COUNT", "DUE", "DEFERRED", "IN FLIGHT", "HELD", "OLDEST", "NEXT", "TOP RESPONSE", "HOLD"],
            [[*key(r), r["count"], *(r["states"].get(s, 0) for s in STATES), age(r.get("oldest_age_seconds")),
              r.get("next_attempt_at"), _top(r.get("top_responses") or []),
              (r.get("hold") or {}).get("reason")] for r in rows])

    io.out()
    io.out(grouped(summary["by_destination"], ["DESTINATION", "MX"], lambda r: [r["destination"], r.get("mx")]))
    io.out()
    io.out(grouped(summary["by_tenant"], ["TENANT", "NAME"], lambda r: [r["tenant_id"], r.get("tenant_name")]))
    if summary.get("holds"):
        io.out()
        io.out(table(["HOLD", "KIND", "ON", "REASON", "SINCE", "BY"],
                     [[h["id"], h["kind"], h["value"], h["reason"], h["created_at"], h["created_by"]]
                      for h in summary["holds"]]))
    return 0


def _filters(args) -> dict:
    filters = {"destination": args.destination, "tenant_id": args.tenant, "state": args.state,
               "code": args.code, "min_age_seconds": args.older_than}
    return {k: v for k, v in filters.items() if v is not None}


def queue_list(api: Client, io: Io, args) -> int:
    page = api.call("GET", "/admin/v1/queue/deliveries",
                    {**_filters(args), "limit": args.limit, "after": args.after})
    if shown_as_json(io, args, page):
        return 0
    io.out(table(["ID", "EMAIL", "TENANT", "RECIPIENT", "STATE", "ATTEMPTS", "LAST RESPONSE", "NEXT", "HELD"],
                 [[d["id"], d["email_id"], d["tenant_id"], d["recipient"], d["state"], d["attempts"],
                   _response(d.get("last_response")), d.get("next_attempt_at"), d.get("held_reason")]
                  for d in page["data"]]))
    _more(io, page)
    return 0


def queue_action(api: Client, io: Io, args) -> int:
    filters = _filters(args)
    if args.id and filters:
        raise CliError("name deliveries either by --id or by filters, not both")
    if not args.id and not filters:
        raise CliError("name the deliveries: --id, or at least one filter (--destination, --tenant, --state, "
                       "--code, --older-than)")
    body: dict = {"ids": args.id} if args.id else dict(filters)
    if args.action == "hold":
        body["reason"] = args.reason
    if not args.yes and not _confirmed(api, io, args.action, args.id, filters):
        io.note("Nothing done.")
        return 1
    done = api.call("POST", f"/admin/v1/queue/{args.action}", body=body)
    io.out(f"{shown(done['action'])}: {shown(done['count'])} deliveries")
    return 0


def _confirmed(api: Client, io: Io, action: str, ids: list[str] | None, filters: dict) -> bool:
    """Above CONFIRM_ABOVE deliveries, the operator says yes first (the list endpoint counts
    them: one page of 100 tells whether there are more)."""
    if ids:
        count, more = len(ids), False
    else:
        page = api.call("GET", "/admin/v1/queue/deliveries", {**filters, "limit": 100})
        count, more = len(page["data"]), page["has_more"]
    if count <= CONFIRM_ABOVE:
        return True
    what = " ".join(f"{k}={v}" for k, v in filters.items()) or f"{len(ids or [])} ids"
    io.stderr.write(f"{action} {count}{'+' if more else ''} deliveries ({shown(what)})? [y/N] ")
    io.stderr.flush()
    answer = io.stdin.readline().strip().lower()
    return answer in ("y", "yes")


# -- tenants and users -----------------------------------------------------------------------


def tenants(api: Client, io: Io, args) -> int:
    page = api.call("GET", "/admin/v1/tenants",
                    {"q": args.search, "status": args.status, "limit": args.limit, "after": args.after})
    if shown_as_json(io, args, page):
        return 0
    io.out(table(["ID", "NAME", "PLAN", "STATUS", "DELIVERY", "CREATED"],
                 [[t["id"], t["name"], t["plan"], t["status"], t["delivery_mode"], t["created_at"]]
                  for t in page["data"]]))
    _more(io, page)
    return 0


def tenant_create(api: Client, io: Io, args) -> int:
    body = {"name": args.name, "plan": args.plan, "id": args.id}
    created = api.call("POST", "/admin/v1/tenants", body={k: v for k, v in body.items() if v is not None})
    if shown_as_json(io, args, created):
        return 0
    key = created.pop("api_key")
    _fields(io, created)
    io.out()
    io.out(f"API key {shown(repr(key['name']))} (shown once, keep it now): {shown(key['token'])}")
    return 0


def tenant_show(api: Client, io: Io, args) -> int:
    tenant = api.call("GET", f"/admin/v1/tenants/{args.tenant_id}")
    if args.usage:
        tenant["usage"] = api.call("GET", f"/admin/v1/tenants/{args.tenant_id}/usage")
    if args.json:
        io.out(json.dumps(tenant, indent=2))
    else:
        _fields(io, tenant)
    return 0


#: ``tenant set`` options and the tenant field each one sets.
TENANT_FIELDS = {"name": "name", "plan": "plan", "status": "status", "reason": "status_reason",
                 "daily_quota": "daily_quota", "monthly_quota": "monthly_quota", "max_domains": "max_domains",
                 "send_rate": "send_rate_per_sec", "api_rate": "api_rate_per_sec",
                 "delivery_mode": "delivery_mode"}


def tenant_set(api: Client, io: Io, args) -> int:
    changes = {field: getattr(args, option) for option, field in TENANT_FIELDS.items()
               if getattr(args, option) is not None}
    if not changes:
        raise CliError("nothing to change: give at least one option (mailsvc tenant set --help)")
    tenant = api.call("PATCH", f"/admin/v1/tenants/{args.tenant_id}", body=changes)
    if args.json:
        io.out(json.dumps(tenant, indent=2))
    else:
        _fields(io, tenant)
    return 0


def user_link(api: Client, io: Io, args) -> int:
    if args.tenant:
        user = api.call("POST", f"/admin/v1/tenants/{args.tenant}/users",
                        body={"email": args.email, "role": args.role})
    else:
        user = api.call("POST", "/admin/v1/users/password-link", body={"email": args.email})
    if shown_as_json(io, args, user):
        return 0
    io.out(shown(user["set_password_url"]))
    io.note(f"A set-password link for {shown(user['email'])} (tenant {shown(user['tenant_id'])}): it works once, and "
            "whoever opens it takes over the account; send it only to that person.")
    return 0


def operators_create(api: Client, io: Io, args) -> int:
    """An operator's console account, or (``--link``) a new set-password link for an existing one."""
    if args.link:
        operator = api.call("POST", "/admin/v1/operators/password-link", body={"email": args.email})
    else:
        body = {"email": args.email, **({"name": args.name} if args.name else {})}
        operator = api.call("POST", "/admin/v1/operators", body=body)
    if shown_as_json(io, args, operator):
        return 0
    io.out(shown(operator["set_password_url"]))
    io.note(f"A set-password link for the operator {shown(operator['email'])}: it works once, and whoever opens it "
            "signs in to the operator console; send it only to that person.")
    return 0


# -- audit and operator tokens ---------------------------------------------------------------


def audit(api: Client, io: Io, args) -> int:
    page = api.call("GET", "/admin/v1/audit", {"limit": args.limit, "after": args.after,
                                               "actor_kind": args.actor_kind, "tenant_id": args.tenant})
    if shown_as_json(io, args, page):
        return 0
    io.out(table(["AT", "ACTOR", "ACTION", "COUNT", "FILTER"],
                 [[e["at"], e["actor"], e["action"], e.get("count"),
                   json.dumps(e.get("filter") or {}, separators=(",", ":"))] for e in page["data"]]))
    _more(io, page)
    return 0


def tokens_list(api: Client, io: Io, args) -> int:
    page = api.call("GET", "/admin/v1/operator-tokens")
    if shown_as_json(io, args, page):
        return 0
    io.out(table(["ID", "NAME", "CREATED", "LAST USED"],
                 [[t["id"], t["name"], t["created_at"], t.get("last_used_at")] for t in page["data"]]))
    return 0


def tokens_create(api: Client, io: Io, args) -> int:
    created = api.call("POST", "/admin/v1/operator-tokens", body={"name": args.name})
    if shown_as_json(io, args, created):
        return 0
    io.out(shown(created["token"]))
    io.note(f"Operator token {shown(repr(created['name']))} ({shown(created['id'])}): shown once; give it with "
            "MAILSVC_OPERATOR_TOKEN or --token-file, never on a command line.")
    return 0


def tokens_revoke(api: Client, io: Io, args) -> int:
    api.call("DELETE", f"/admin/v1/operator-tokens/{args.token_id}")
    io.out(f"revoked {shown(args.token_id)}")
    return 0


# -- the parser ------------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written (line breaks kept)."""


#: An option that names a token (``--token``, ``--operator-token``...), which the command line
#: does not take: what follows it is likely a secret. ``--token-file`` names a file.
_TOKEN_OPTION = re.compile(r"-[\w-]*token(?![\w-]*file)[\w-]*", re.I)
REDACTED = "<redacted>"


def secrets_in(argv: list[str]) -> list[str]:
    """The values given to an option naming a token (``--token X``, ``--token=X``)."""
    found = []
    for option, value in zip(argv, [*argv[1:], None], strict=False):
        name, equals, given = option.partition("=")
        if _TOKEN_OPTION.fullmatch(name):
            if equals and given:
                found.append(given)
            elif not equals and value:
                found.append(value)
    return found


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error never repeats a token given on the command line (argparse
    echoes an unknown option with its value, or takes the value for a verb and echoes it too),
    and shows nothing of what it echoes that could act on the terminal."""

    _secrets: list[str] = []

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        self._secrets = secrets_in(args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        for secret in sorted(self._secrets, key=len, reverse=True):
            message = message.replace(secret, REDACTED)
        super().error(shown(message))


def _common() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
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
    group.add_argument("--older-than", type=_duration, metavar="AGE", help="queued at least this long: 90, 30m, 2h, 3d")


def parser() -> argparse.ArgumentParser:
    common = _common()
    top = _Parser(
        prog="mailsvc", formatter_class=_Formatter, allow_abbrev=False,
        description="Operate a mailsvc node through its operator API.",
        epilog="The node is MAILSVC_URL, or the http.listen of the configuration; the token is read from\n"
               "--token-file, MAILSVC_OPERATOR_TOKEN, operator.token or <state dir>/operator-token.\n"
               "Plain http is refused except to a loopback address.\n\n"
               "example:\n  mailsvc queue\n  mailsvc queue hold --destination gmail.com --reason 'blocklisted'")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(parent, name: str, handler, summary: str, example: str, **kwargs) -> argparse.ArgumentParser:
        sub = parent.add_parser(name, help=summary, description=summary, parents=[common], allow_abbrev=False,
                                formatter_class=_Formatter, epilog="example:\n  " + example, **kwargs)
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
    args = parser().parse_args(argv)
    try:
        if args.verb == "doctor":
            return args.handler(io, args)
        return args.handler(connect(args.config, args.token_file, io.environ), io, args)
    except CliError as e:
        io.note(f"mailsvc: {shown(e)}")
        return 1

