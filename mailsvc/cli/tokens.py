"""``mailsvc tokens``: the named operator tokens, listed, made (shown once) and revoked."""

from __future__ import annotations

from mailsvc.cli.client import Client
from mailsvc.cli.output import Io, shown_as_json, table
from mailsvc.domain.display import shown


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
