"""``mailsvc audit``: the audit log, who did what over the operator API and to users' passwords."""

from __future__ import annotations

import json

from mailsvc.cli.client import Client
from mailsvc.cli.output import Io, more, shown_as_json, table


def audit(api: Client, io: Io, args) -> int:
    page = api.call("GET", "/admin/v1/audit", {"limit": args.limit, "after": args.after,
                                               "actor_kind": args.actor_kind, "tenant_id": args.tenant})
    if shown_as_json(io, args, page):
        return 0
    io.out(table(["AT", "ACTOR", "ACTION", "COUNT", "FILTER"],
                 [[e["at"], e["actor"], e["action"], e.get("count"),
                   json.dumps(e.get("filter") or {}, separators=(",", ":"))] for e in page["data"]]))
    more(io, page)
    return 0
