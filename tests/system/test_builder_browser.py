"""
The every-block document in a real browser: Debian's headless Chromium
(/usr/bin/chromium, installed by scripts/setup.sh; nothing is downloaded), driven by
Playwright's Python client, reaching nothing but loopback (``--host-resolver-rules``), with the
pictures, logos and social icons served by a loopback HTTP server. At 375 and 600 px, in the
light and the emulated dark scheme, it measures: no horizontal scroll on a phone, a button
text contrast of at least 4.5:1, the dark logo in place of the light one in the dark scheme,
and the columns stacked on a narrow screen. The four screenshots are saved in the test's
output directory (and, with MAILSVC_UPDATE_SCREENSHOTS=1, into docs/images/ for the README).
"""

import os
import shutil
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mailsvc.http.api.builder import social_icons
from tests.helpers.browser import CHROMIUM
from tests.helpers.builder import render_every_block

DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def solid_png(width: int, height: int, rgb: tuple[int, int, int], band: tuple[int, int, int] | None = None) -> bytes:
    """A picture of one colour (with a band of another across the middle, to tell them apart)."""
    rows = []
    for y in range(height):
        colour = band if band and height // 3 <= y < 2 * height // 3 else rgb
        rows.append(b"\x00" + bytes(colour) * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))


@pytest.fixture
def pictures():
    """A loopback server for the e-mail, its pictures and the daemon's social icons."""
    files = {
        "/logo-light.png": solid_png(280, 80, (79, 70, 229), (255, 255, 255)),
        "/logo-dark.png": solid_png(280, 80, (255, 255, 255), (79, 70, 229)),
        "/hero.png": solid_png(1072, 480, (199, 210, 254), (79, 70, 229)),
        "/left.png": solid_png(480, 300, (254, 215, 170)),
        "/right.png": solid_png(480, 300, (187, 247, 208)),
        **{f"/files/social/{name}": data for name, data in social_icons().items()},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            body = files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8" if self.path.endswith(".html")
                             else "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    html, _ = render_every_block(assets=base, images=base)
    files["/email.html"] = html.encode("utf-8")
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


MEASURE = """() => {
  const rgb = (text) => text.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => {
    const c = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * c(r) + 0.7152 * c(g) + 0.0722 * c(b);
  };
  const contrast = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const visible = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0
                            && getComputedStyle(el).display !== 'none' && el.complete && el.naturalWidth > 0; };
  const buttons = [...document.querySelectorAll('a.msv-btn')].map((a) => {
    const s = getComputedStyle(a);
    return {label: a.textContent, color: s.color, background: s.backgroundColor,
            contrast: contrast(rgb(s.color), rgb(s.backgroundColor))};
  });
  const columns = [...document.querySelectorAll('.mj-column-per-50')].slice(0, 2).map((c) => {
    const r = c.getBoundingClientRect(); return {left: r.left, top: r.top, bottom: r.bottom, width: r.width};
  });
  return {
    scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
    dark: matchMedia('(prefers-color-scheme: dark)').matches,
    lightLogo: visible(document.querySelector('img.msv-logo-light')),
    darkLogo: visible(document.querySelector('.msv-logo-dark img')),
    buttons, columns,
    body: getComputedStyle(document.body).backgroundColor,
    brokenImages: [...document.images].filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.src),
  };
}"""


def test_the_every_block_email_in_headless_chromium(pictures, browser, tmp_path):
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: run scripts/setup.sh with MAILSVC_TEST_DEPS=1"
    results = {}
    for width in (375, 600):
        for scheme in ("light", "dark"):
            page = browser.new_page(viewport={"width": width, "height": 800}, color_scheme=scheme)
            page.goto(f"{pictures}/email.html", wait_until="load")
            results[width, scheme] = page.evaluate(MEASURE)
            page.screenshot(path=str(tmp_path / f"builder-{width}-{scheme}.png"), full_page=True)
            page.close()

    for (width, scheme), seen in results.items():
        where = f"{width} px, {scheme}"
        assert seen["dark"] is (scheme == "dark"), where
        assert seen["brokenImages"] == [], where
        assert len(seen["buttons"]) == 2, where
        for button in seen["buttons"]:
            assert button["contrast"] >= 4.5, (where, button)
        if scheme == "dark":
            assert seen["darkLogo"] and not seen["lightLogo"], where
            assert seen["body"] == "rgb(17, 17, 19)", where
        else:
            assert seen["lightLogo"] and not seen["darkLogo"], where
        left, right = seen["columns"]
        if width == 375:
            assert seen["scrollWidth"] <= seen["innerWidth"], where
            assert left["left"] == right["left"] and right["top"] >= left["bottom"], (where, left, right)
        else:
            side_by_side = right["left"] >= left["left"] + left["width"] - 1 and left["top"] == right["top"]
            assert side_by_side, (where, left, right)

    shots = sorted(tmp_path.glob("builder-*.png"))
    assert len(shots) == 4 and all(shot.stat().st_size > 10_000 for shot in shots)
    if os.environ.get("MAILSVC_UPDATE_SCREENSHOTS") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        for shot in shots:
            shutil.copy(shot, DOCS_IMAGES / shot.name)
