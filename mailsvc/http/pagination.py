"""The one pagination rule of every list endpoint (docs/contract/main-api.md, "Limits")."""

from __future__ import annotations

from mailsvc.domain.paging import Page
from mailsvc.http.errors import validation
from mailsvc.ids import parse_uuid

LIMIT_MESSAGE = (
    "The pagination limit must be a number between 1 and 100. "
    "See https://resend.com/docs/pagination for more information."
)
#: Lists whose ``limit`` is optional return at most this many items in one page.
UNBOUNDED_PAGE = 1000


def _arg(args: dict, name: str) -> str | None:
    values = args.get(name.encode())
    if not values:
        return None
    return values[0].decode("utf-8", "replace")


def page_of(args: dict, default_limit: int | None) -> Page:
    """
    Parse ``limit``, ``after`` and ``before`` from query arguments. ``default_limit`` None
    marks an "older" list whose limit is optional: everything, up to UNBOUNDED_PAGE.
    """
    raw_limit = _arg(args, "limit")
    if raw_limit is None:
        limit = default_limit if default_limit is not None else UNBOUNDED_PAGE
    else:
        try:
            limit = int(raw_limit)
        except ValueError:
            raise validation(LIMIT_MESSAGE, "limit") from None
        if not 1 <= limit <= 100:
            raise validation(LIMIT_MESSAGE, "limit")
    after, before = _arg(args, "after"), _arg(args, "before")
    if after is not None and before is not None:
        raise validation("after: `after` and `before` cannot be used together", "after")
    cursors = {}
    for name, value in (("after", after), ("before", before)):
        if value is not None:
            parsed = parse_uuid(value)
            if parsed is None:
                raise validation(f"{name}: `{name}` must be a valid id", name)
            cursors[name] = parsed
    return Page(limit, **cursors)


def envelope(data: list, has_more: bool) -> dict:
    return {"object": "list", "has_more": has_more, "data": data}
