"""
Template builder renders per second on one core: the every-block document of the
golden tests (tests/samples/builder/every_block.json: every block type and style field, with a
logo, a dark logo, web fonts and a brand) checked and rendered to HTML and text ``--count``
times (1,000 by default) in this one process; prints renders/s (wall and CPU time) and the
median milliseconds of one render. Target: at least 200 renders/s.

    .venv/bin/python -m bench.builder [--count 1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from mailsvc.domain.documents import document_of
from mailsvc.domain.emailhtml import BuilderRenderer
from mailsvc.domain.themes import brand_of, theme_of

DOCUMENT = Path(__file__).resolve().parent.parent / "tests" / "samples" / "builder" / "every_block.json"
THEME = {"brand_color": "#4f46e5", "link_color": "#4338ca", "font": "inter", "web_font": "Inter",
         "logo_url": "https://acme.example/logo.png", "logo_dark_url": "https://acme.example/logo-dark.png",
         "logo_alt": "Acme"}
BRAND = {"name": "Acme Inc.", "address": "1 Main Street\nSpringfield"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    raw = json.loads(DOCUMENT.read_text())
    renderer = BuilderRenderer("https://mail.acme.example")
    theme, brand = theme_of(THEME), brand_of(BRAND)
    renderer.render(document_of(raw), theme, brand)  # warm up
    times = []
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.count):
        started = time.perf_counter()
        html, text = renderer.render(document_of(raw), theme, brand)
        times.append(time.perf_counter() - started)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"every-block document ({len(html):,} bytes of HTML, {len(text):,} of text), {args.count} renders:")
    print(f"  {args.count / wall:,.0f} renders/s (wall), {args.count / cpu:,.0f} renders/s (CPU),"
          f" median {statistics.median(times) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
