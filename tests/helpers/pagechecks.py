"""
What the dashboard's browser walks check on every page they show: nothing scrolls sideways,
no address, subject, button or badge breaks over lines, text meets WCAG AA contrast, and axe-core
finds no violation, in both themes at 375 and 1,280 px; and the dashboard's own API as a page calls it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.helpers.browser import screenshots_wanted, settled
from tests.helpers.daemon import ROOT
from tests.helpers.node_sdk import NODE_DIR

#: A label longer than any phone screen is wide, for addresses, names and URLs.
LONG_LABEL = "a-very-long-label-that-no-phone-screen-has-room-for"

#: Per element of text: its colour against the first opaque background behind it, as WCAG 2's
#: contrast ratio. Returns the texts below 4.5:1 (AA for normal text).
LOW_CONTRAST = """() => {
  const rgb = (c) => { const m = c.match(/[\\d.]+/g) || []; return m.map(Number); };
  const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = ([r, g, b]) => 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  const behind = (node) => {
    for (let n = node; n; n = n.parentElement) {
      const c = rgb(getComputedStyle(n).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] >= 0.99)) return c.slice(0, 3);
    }
    return rgb(getComputedStyle(document.documentElement).backgroundColor).slice(0, 3);
  };
  const low = [];
  for (const node of document.querySelectorAll("main *, header *, nav a")) {
    if (!node.checkVisibility || !node.checkVisibility()) continue;
    if (node.closest("svg, option, iframe") || node.disabled) continue;
    const own = [...node.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim());
    if (!own) continue;
    const a = lum(rgb(getComputedStyle(node).color).slice(0, 3)), b = lum(behind(node));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const what = `${node.tagName}.${node.className} "${node.textContent.trim().slice(0, 30)}"`;
    if (ratio < 4.5) low.push(`${what} ${ratio.toFixed(2)}`);
  }
  return low;
}"""

#: Every address, subject, button and badge is on one line (none breaks letter by letter).
BROKEN = """() => [...document.querySelectorAll("main .clip, main button, main a.button, main .badge, header button")]
  .filter((node) => node.checkVisibility()).filter((node) => {
    const text = document.createRange();
    text.selectNodeContents(node);
    return new Set([...text.getClientRects()].map((line) => Math.round(line.top))).size > 1;
  }).map((node) => node.textContent.slice(0, 40))"""


def page_call(page, method: str, path: str, body=None):
    """The dashboard's own API, as the page calls it (session cookie, CSRF token)."""
    return page.evaluate("""async ([method, path, body]) => {
        const me = await (await fetch("/me")).json();
        const r = await fetch(path, {method, body: body === null ? undefined : JSON.stringify(body),
            headers: {"Content-Type": "application/json", "X-CSRF-Token": me.csrf_token}});
        return [r.status, await r.json()];
    }""", [method, path, body])


def fits(page, name: str, problems: list[str], output: Path, docs: frozenset[str] = frozenset()) -> None:
    """At both widths, in both themes: no sideways scroll, nothing broken over lines, AA contrast;
    a screenshot of each in ``output`` (``screenshots_wanted``), those named in ``docs`` copied to
    docs/images/ with MAILSVC_UPDATE_SCREENSHOTS=1."""
    output.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, height in ((375, 740), (1280, 800)):
            page.set_viewport_size({"width": width, "height": height})
            settled(page)
            where = f"{name} at {width} px, {scheme}"
            wide, room = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
            if wide > room:
                problems.append(f"{where}: {wide} px wide")
            boxed = page.evaluate("""[...document.querySelectorAll('.table-wrap')]
                .filter((box) => box.scrollWidth > box.clientWidth + 1).map((box) => box.scrollWidth)""")
            if boxed:
                problems.append(f"{where}: a table scrolls sideways in its box: {boxed}")
            if broken := page.evaluate(BROKEN):
                problems.append(f"{where}: broken over lines: {broken}")
            if low := page.evaluate(LOW_CONTRAST):
                problems.append(f"{where}: contrast below 4.5: {low[:5]}")
            if screenshots_wanted():
                _screenshot(page, output / f"{name}-{width}-{scheme}.png", width, height, docs)


def _screenshot(page, shot: Path, width: int, height: int, docs: frozenset[str]) -> None:
    # As tall as the page: Chromium paints a sandboxed frame only where it is in view.
    tall = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": width, "height": max(height, tall)})
    settled(page)
    if page.locator("iframe").count():  # another process paints it: no frame of the page's tells when
        page.wait_for_timeout(150)
    page.screenshot(path=str(shot), full_page=True)
    page.set_viewport_size({"width": width, "height": height})
    if shot.stem in docs and os.environ.get("MAILSVC_UPDATE_SCREENSHOTS"):
        shutil.copy(shot, ROOT / "docs" / "images" / f"dashboard-{shot.name}")


AXE = NODE_DIR / "node_modules" / "axe-core" / "axe.min.js"
RULES = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]

#: axe's ``RULES`` on the whole document; each violation as "rule (impact): help", then up to
#: three of its elements with axe's own words on what is wrong there.
CHECK = """async (rules) => {
  const found = await axe.run(document, {runOnly: {type: "tag", values: rules}});
  return found.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map((n) => `${n.target.join(" ")}: ${n.failureSummary.replace(/\\s+/g, " ")}`)}));
}"""



def violations(page, where: str, widths=((1280, 800), (375, 740))) -> list[str]:
    """axe's violations of the page as shown, in both themes at each of ``widths``."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(f"() => {{ {AXE.read_text()} }}")
    found = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, height in widths:
            page.set_viewport_size({"width": width, "height": height})
            settled(page)
            found += [f"{where} at {width} px, {scheme}: {v['id']} ({v['impact']}): {v['help']}\n    "
                      + "\n    ".join(v["nodes"]) for v in page.evaluate(CHECK, RULES)]
    return found
