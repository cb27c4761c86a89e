"""
The waitlist: the public form's ``POST /public/waitlist``, and the operator's export of it
(``GET /admin/v1/waitlist``, JSON or CSV).
"""

from __future__ import annotations

import csv
import io

from mailsvc import timefmt
from mailsvc.app.accounts import Accounts
from mailsvc.domain.clients import network_of
from mailsvc.http.body import read_json
from mailsvc.http.errors import NATIVE, validation
from mailsvc.http.operation import PAGE, STR, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import OPERATOR, PUBLIC, Reply, route

#: What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(value: object) -> str:
    """A CSV cell a spreadsheet shows as text: one that would start a formula gets a leading ``'``."""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def _waitlist_item(row: dict) -> dict:
    return {
        "object": "waitlist_entry",
        "id": str(row["id"]),
        "email": row["email"],
        "created_at": timefmt.resource(row["created_at"]),
    }


class WaitlistResource:
    def __init__(self, accounts: Accounts):
        self._accounts = accounts

    @route("POST", "/public/waitlist", access=PUBLIC,
           op=Operation("Join the waitlist", obj(("email",), email=STR),
                        {200: obj(("object", "email"), object={"const": "waitlist_entry"})},
                        errors=(429,)))
    async def join_waitlist(self, request, _):
        # The same answer whether the address was there or not: the form tells nobody who joined.
        client = network_of(getattr(request.getClientAddress(), "host", None))
        email = await self._accounts.join_waitlist(read_json(request).get("email"), client)
        return {"object": "waitlist_entry", "email": email}

    @route("GET", "/admin/v1/waitlist", access=OPERATOR, surface=NATIVE,
           op=Operation("Export the waitlist", responses={200: listing()},
                        query=(*PAGE, ("format", {"enum": ["json", "csv"]})),
                        also=("text/csv",)))
    async def waitlist(self, request, _):
        fmt = (request.args.get(b"format") or [b"json"])[0]
        if fmt not in (b"json", b"csv"):
            raise validation("format: format must be `json` or `csv`", "format")
        rows, has_more = await self._accounts.waitlist(page_of(request.args, 100))
        if fmt == b"json":
            return envelope([_waitlist_item(row) for row in rows], has_more)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(["id", "email", "created_at"])
        for row in rows:
            writer.writerow([spreadsheet_text(cell) for cell in (row["id"], row["email"],
                                                                  timefmt.resource(row["created_at"]))])
        return Reply(
            200, out.getvalue().encode("utf-8"), b"text/csv; charset=utf-8",
            {"Content-Disposition": 'attachment; filename="waitlist.csv"'},
        )
