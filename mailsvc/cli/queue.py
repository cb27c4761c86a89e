"""``mailsvc queue``: the delivery queue summed up, listed, and acted on (retry, hold, release, bounce)."""

from __future__ import annotations

import argparse
import re

from mailsvc.cli.client import Client, CliError
from mailsvc.cli.output import Io, age, more, response, shown_as_json, table
from mailsvc.domain.display import shown

#: Actions on more deliveries than this ask first (``--yes`` does not).
CONFIRM_ABOVE = 10
STATES = ("due", "deferred", "in_flight", "held")


def duration(text: str) -> int:
    """``90``, ``30m``, ``2h``, ``3d`` as seconds."""
    match = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds, or a number with s, m, h or d (30m, 2h, 3d)")
    return int(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]


def _top(responses: list[dict]) -> str:
    return "; ".join(f"{response(r)} ×{r['count']}" for r in responses[:1]) or "-"


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
                   response(d.get("last_response")), d.get("next_attempt_at"), d.get("held_reason")]
                  for d in page["data"]]))
    more(io, page)
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
