"""A page of a newest-first list, as SQL."""

from __future__ import annotations

import uuid
from typing import Any

import attrs


@attrs.frozen
class Page:
    """Newest first; ``after`` is the last id of the previous page, ``before`` the first id
    of the current one. Neither cursor is itself included."""

    limit: int
    after: uuid.UUID | None = None
    before: uuid.UUID | None = None

    def clause(self, column: str = "id") -> tuple[str, str, list[Any]]:
        """(extra WHERE condition or "TRUE", ORDER BY ... LIMIT ..., its parameters)."""
        if self.after is not None:
            return f"{column} < %s", f"ORDER BY {column} DESC LIMIT %s", [self.after, self.limit + 1]
        if self.before is not None:
            return f"{column} > %s", f"ORDER BY {column} ASC LIMIT %s", [self.before, self.limit + 1]
        return "TRUE", f"ORDER BY {column} DESC LIMIT %s", [self.limit + 1]

    def finish(self, rows: list) -> tuple[list, bool]:
        """The page's rows newest first, and whether more lie beyond it in that direction."""
        has_more = len(rows) > self.limit
        rows = rows[: self.limit]
        if self.before is not None:
            rows.reverse()
        return rows, has_more
