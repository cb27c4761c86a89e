"""
The repository stands alone: no tracked file cites a document that is not in it (the outside
specification, design brief, compatibility notes or style guide) or an issue number. A rule is
cited by where the repository states it: a docs/ record, the served OpenAPI document or an RFC
(docs/contract/README.md). The failure lists every citation as file:line.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Citations of what is not in the repository. Each pattern is written so that it does not
#: match its own source text.
CITATIONS = re.compile(
    r"\bS[P]EC(?:\.md)?\b"
    r"|\bD[E]SIGN(?:\.md)?\b"
    r"|\bC[O]MPAT(?:\.md)?\b"
    r"|\bS[T]YLE\.md\b"
    r"|(?<![A-Za-z])[Ii]ssues?[ _]?#?\d+"
    r"|\(#\d+\)|\*\*#\d+\*\*"
)

#: Directories never scanned when the tree is walked (no git): environments and outputs.
SKIPPED_DIRS = {".git", ".venv", "node_modules", "test-output", "build", "__pycache__", ".mailsvc",
                ".pytest_cache", ".ruff_cache"}
#: Samples of other software's output, kept byte for byte (third-party text, not ours).
THIRD_PARTY = ("tests/samples/",)

#: Files being rewritten on other branches; remove after merge. Each of those branches cleans
#: the citations of its own files.
BEING_REWRITTEN_ELSEWHERE = (
    "mailsvc/compose.py",
    "mailsvc/http/router.py",
    "mailsvc/http/site.py",
    "mailsvc/http/openapi.py",
    "mailsvc/store/deliveries.py",
    "mailsvc/delivery/worker.py",
    "mailsvc/broadcasting/fanout.py",
    "mailsvc/app/submit.py",
    "mailsvc/config.py",
    "mailsvc/store/database.py",
    "mailsvc/store/api_rate.py",
    "mailsvc/store/throttles.py",
    "mailsvc/app/dashboard.py",
    "mailsvc/web/",
    "mailsvc/http/dashboard/",
    "docs/architecture.md",
    "tests/mta.py",
)


def tracked_files() -> list[str]:
    """The tracked files (``git ls-files``), or the walked tree where there is no git."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        return [name for name in listed.stdout.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, dirs, files in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
            found.extend(str((Path(folder) / f).relative_to(ROOT)) for f in files)
        return found


def citations_in(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line citing an outside document or an issue number."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if CITATIONS.search(line)]


def _text_of(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_tracked_file_cites_an_outside_document_or_an_issue_number():
    found = []
    for name in tracked_files():
        if name.startswith(THIRD_PARTY + BEING_REWRITTEN_ELSEWHERE):
            continue
        path = ROOT / name
        text = _text_of(path) if path.is_file() else None
        if text is not None:
            found.extend(f"{name}:{n}: {line}" for n, line in citations_in(text))
    assert not found, "cite docs/, /openapi.json or an RFC instead:\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_citation_and_spares_the_words_around_them():
    outside = ["see " + "SP" + "EC §Limits", "(" + "DES" + "IGN.md, Known traps)", "COM" + "PAT.md §3",
               "ST" + "YLE.md", "(is" + "sue 29)", "Is" + "sue #13:", "def test_is" + "sue_31_queue():",
               "marked **#" + "29**", "fixed in (#" + "27)"]
    ours = ["docs/contract/main-api.md, \"Limits\"", "RFC 5322 §3.4", "a spec in the OpenAPI document",
            "issued from the dashboard", "the issuer", "Invoice #42?", "Unicode Technical Report #36",
            "compat32", "`#1a2b3c`"]
    text = "\n".join(outside + ours)
    assert [n for n, _ in citations_in(text)] == list(range(1, len(outside) + 1))
