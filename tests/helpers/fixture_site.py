"""
A fixture website on loopback for brand import: real-shaped pages and files (a redirect to the
home page, a header logo, an SVG logo in JSON-LD, an inline SVG, a dark-only white logo, the
icons, a web manifest, an og:image, a stylesheet with CSS custom properties and buttons, Google
Fonts, social links and a postal address), made with Pillow at start. Every request is kept.
"""

from __future__ import annotations

import io
import json

from PIL import Image, ImageDraw
from twisted.internet import reactor, task
from twisted.web import resource
from twisted.web.server import Site

PRIMARY = "#1d4ed8"  # --brand-primary
ACCENT = "#f97316"  # --brand-accent
BUTTON = "#0f766e"  # .btn background


def png(size, fill, background=(0, 0, 0, 0), kind="PNG") -> bytes:
    image = Image.new("RGBA", size, background)
    draw = ImageDraw.Draw(image)
    w, h = size
    draw.rectangle([w // 10, h // 5, w - w // 10, h - h // 5], fill=fill)
    out = io.BytesIO()
    if kind == "JPEG":
        image.convert("RGB").save(out, "JPEG")
    else:
        image.save(out, kind, **({"sizes": [(32, 32), (48, 48)]} if kind == "ICO" else {}))
    return out.getvalue()


SVG_LOGO = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 50" width="200" height="50">'
            b'<rect x="0" y="0" width="50" height="50" fill="#1d4ed8"/><text x="60" y="35" fill="#111827">Acme</text>'
            b'</svg>')

HOME = """<!doctype html>
<html lang="en"><head>
<meta charset="utf-8">
<title>Acme Rockets | Rockets for everyone</title>
<meta name="theme-color" content="#1d4ed8">
<meta property="og:site_name" content="Acme Rockets">
<meta property="og:image" content="/og.jpg">
<link rel="icon" href="/favicon.ico">
<link rel="apple-touch-icon" href="/apple-touch-icon.png">
<link rel="manifest" href="/site.webmanifest">
<link rel="stylesheet" href="https://fonts.googleapis.com/css2?family=Poppins:wght@400;700&family=Playfair+Display:wght@700&display=swap">
<link rel="stylesheet" href="/site.css">
<style>:root { --brand-accent: #f97316; }</style>
<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Organization",
 "name": "Acme Rockets", "logo": "/logo.svg", "sameAs": ["https://www.youtube.com/@acmerockets"],
 "address": {"@type": "PostalAddress", "streetAddress": "1 Launch Way", "postalCode": "94016",
  "addressLocality": "San Francisco", "addressRegion": "CA", "addressCountry": "US"}}</script>
</head><body>
<header class="site-header"><a href="/"><img src="/logo.png" alt="Acme Rockets"></a>
<nav><a class="btn btn-primary" href="/signup">Sign up</a></nav></header>
<main><h1>Rockets for everyone</h1><p>Unclosed paragraph <b>bold <i>both</b> text
<img class="logo-white" src="/logo-white.png" alt="Acme logo (white)">
<a class="logo" href="/"><svg viewBox="0 0 40 40"><circle cx="20" cy="20" r="18" fill="#1d4ed8"/></svg></a>
</main>
<footer>
<a href="https://twitter.com/acmerockets">X</a> <a href="https://www.linkedin.com/company/acme-rockets">LinkedIn</a>
<a href="https://github.com/acme-rockets">GitHub</a> <a href="https://www.facebook.com/sharer/sharer.php?u=x">Share</a>
</footer></body></html>"""

CSS = """:root { --brand-primary: #1d4ed8; --text-color: #111827; --bg: #ffffff;
  --font-body: 'Poppins', Arial, sans-serif; --font-heading: "Playfair Display", Georgia, serif; }
body { font-family: var(--font-body); color: var(--text-color); }
h1, h2, h3 { font-family: var(--font-heading); }
.btn, .button { background-color: #0f766e; color: #fff; }
"""


class _Files(resource.Resource):
    isLeaf = True

    def __init__(self, files: dict[str, tuple[int, str, bytes]], seen: list[str]):
        super().__init__()
        self.files = files
        self.seen = seen

    def render_GET(self, request):  # noqa: N802
        path = request.path.decode()
        self.seen.append(path)
        status, kind, body = self.files.get(path, (404, "text/plain", b"not found"))
        request.setResponseCode(status)
        if status in (301, 302):
            request.setHeader("Location", kind)
            return b""
        request.setHeader("Content-Type", kind)
        return body


class FixtureSite:
    def __init__(self, interface: str = "127.0.0.1", files: dict | None = None):
        self.seen: list[str] = []
        self.files = files if files is not None else site_files()
        site = Site(_Files(self.files, self.seen))
        site.displayTracebacks = False
        self.port = reactor.listenTCP(0, site, interface=interface)

    @property
    def number(self) -> int:
        return self.port.getHost().port

    async def stop(self) -> None:
        await self.port.stopListening()
        await task.deferLater(reactor, 0, lambda: None)


def site_files() -> dict[str, tuple[int, str, bytes]]:
    manifest = json.dumps({"name": "Acme Rockets", "icons": [
        {"src": "/icon-192.png", "sizes": "192x192"}, {"src": "/icon-512.png", "sizes": "512x512"}]}).encode()
    return {
        "/": (301, "/home", b""),
        "/home": (200, "text/html; charset=utf-8", HOME.encode()),
        "/site.css": (200, "text/css", CSS.encode()),
        "/site.webmanifest": (200, "application/manifest+json", manifest),
        "/logo.png": (200, "image/png", png((240, 60), (29, 78, 216, 255))),
        "/logo-white.png": (200, "image/png", png((240, 60), (255, 255, 255, 255))),
        "/logo.svg": (200, "image/svg+xml", SVG_LOGO),
        "/apple-touch-icon.png": (200, "image/png", png((180, 180), (29, 78, 216, 255), (255, 255, 255, 255))),
        "/icon-512.png": (200, "image/png", png((512, 512), (249, 115, 22, 255), (255, 255, 255, 255))),
        "/favicon.ico": (200, "image/x-icon", png((48, 48), (29, 78, 216, 255), kind="ICO")),
        "/og.jpg": (200, "image/jpeg", png((1200, 630), (29, 78, 216, 255), (255, 255, 255, 255), kind="JPEG")),
    }
