"""A page of a newest-first list (``mailsvc.domain.paging.Page``), as SQL."""

from __future__ import annotations

from typing import Any

from mailsvc.domain.paging import Page


def clause(page: Page, column: str = "id") -> tuple[str, str, list[Any]]:
    """(extra WHERE condition or "TRUE", ORDER BY ... LIMIT ..., its parameters): one row
    beyond the page, for ``Page.finish`` to tell whether more lie beyond it."""
    if page.after is not None:
        return f"{column} < %s", f"ORDER BY {column} DESC LIMIT %s", [page.after, page.limit + 1]
    if page.before is not None:
        return f"{column} > %s", f"ORDER BY {column} ASC LIMIT %s", [page.before, page.limit + 1]
    return "TRUE", f"ORDER BY {column} DESC LIMIT %s", [page.limit + 1]
