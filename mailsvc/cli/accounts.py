"""``mailsvc tenants``, ``tenant``, ``user`` and ``operators``: the accounts an operator looks after."""

from __future__ import annotations

import json

from mailsvc.cli.client import Client, CliError
from mailsvc.cli.output import Io, fields, more, shown_as_json, table
from mailsvc.domain.display import shown


def tenants(api: Client, io: Io, args) -> int:
    page = api.call("GET", "/admin/v1/tenants",
                    {"q": args.search, "status": args.status, "limit": args.limit, "after": args.after})
    if shown_as_json(io, args, page):
        return 0
    io.out(table(["ID", "NAME", "PLAN", "STATUS", "DELIVERY", "CREATED"],
                 [[t["id"], t["name"], t["plan"], t["status"], t["delivery_mode"], t["created_at"]]
                  for t in page["data"]]))
    more(io, page)
    return 0


def tenant_create(api: Client, io: Io, args) -> int:
    body = {"name": args.name, "plan": args.plan, "id": args.id}
    created = api.call("POST", "/admin/v1/tenants", body={k: v for k, v in body.items() if v is not None})
    if shown_as_json(io, args, created):
        return 0
    key = created.pop("api_key")
    fields(io, created)
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
        fields(io, tenant)
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
        fields(io, tenant)
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
