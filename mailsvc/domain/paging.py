"""A page of a newest-first list: what the edges parse from a request and the store reads."""

from __future__ import annotations

import uuid

import attrs


@attrs.frozen
class Page:
    """Newest first; ``after`` is the last id of the previous page, ``before`` the first id
    of the current one. Neither cursor is itself included."""

    limit: int
    after: uuid.UUID | None = None
    before: uuid.UUID | None = None

    def finish(self, rows: list) -> tuple[list, bool]:
        """The page's rows newest first (read one beyond ``limit``), and whether more lie beyond
        it in that direction."""
        has_more = len(rows) > self.limit
        rows = rows[: self.limit]
        if self.before is not None:
            rows.reverse()
        return rows, has_more
