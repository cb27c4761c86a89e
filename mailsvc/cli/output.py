"""
What a command writes: tables, ``--json`` answers, ages, the next page's cursor, all through
``Io``, the streams a command reads and writes.
"""

from __future__ import annotations

import json
from typing import TextIO

from tabulate import tabulate

from mailsvc.domain.display import shown


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


def response(entry: dict | None) -> str:
    if not entry:
        return "-"
    text = f"{entry.get('code') or ''} {entry.get('text') or ''}".strip()
    return text[:60] + ("…" if len(text) > 60 else "")


def fields(io: Io, record: dict) -> None:
    io.out(table(["FIELD", "VALUE"], [[k, json.dumps(v) if isinstance(v, dict | list) else v]
                                       for k, v in record.items()]))


def more(io: Io, page: dict) -> None:
    if page.get("has_more") and page.get("data"):
        io.note(f"(more: add --after {shown(page['data'][-1]['id'])})")
