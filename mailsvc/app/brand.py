"""
Brand import (``POST /brand/import``): the account's website read through the one
gate to outside addresses (``outside.fetch.follow``: public addresses only, ports 80 and 443,
every redirect checked again), within 20 fetches and 20 s (``brand.*``), HTML up to 2 MiB
and images up to 5 MiB; the candidates read by ``domain.brandpage`` and chosen by
``domain.brand``; the chosen logos stored in
PostgreSQL (``brand_files``, served by every node at ``/files/brand/<id>.<ext>``); an AI pick
among the candidates when asked and available; a theme and brand proposed, saved only with
``apply: true``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from twisted.logger import Logger

from mailsvc import ids, timefmt
from mailsvc.app.ai import AiHelper
from mailsvc.app.builder import Builder
from mailsvc.app.templates import TOP_PLAN
from mailsvc.config import BrandConfig
from mailsvc.domain import brand as choosing
from mailsvc.domain import brandpage, themes
from mailsvc.domain.ai import language_of
from mailsvc.domain.domains import registered_domain
from mailsvc.domain.errors import AiFailed, BrandFailed, Invalid, PlanRequired, RateLimited
from mailsvc.domain.tenant import Tenant
from mailsvc.outside.fetch import Fetcher, FetchFailed, TargetRefused
from mailsvc.store import ai as rows
from mailsvc.store import builder as builder_rows
from mailsvc.store.database import Database

log = Logger()

IMPORTS_PER_MINUTE = 6
MAX_HTML = 2 * 1024 * 1024
MAX_IMAGE = 5 * 1024 * 1024
MAX_CSS = 512 * 1024
MAX_LOGO_FETCHES = 8
MAX_STYLESHEETS = 3
LOGOS_KEPT = 5
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp",
              "image/svg+xml": "svg"}
HTML_TYPES = ("text/html", "application/xhtml+xml")


class _OutOfFetches(Exception):
    pass


class BrandImporter:
    def __init__(self, clock, db: Database, fetcher: Fetcher, builder: Builder, ai: AiHelper, settings: BrandConfig,
                 extra_ports: tuple[int, ...] = (),
                 run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None):
        self._clock = clock
        self._db = db
        self._fetcher = fetcher
        self._builder = builder
        self._ai = ai
        self._settings = settings
        self._ports = (80, 443, *extra_ports)
        self._run_blocking = run_blocking

    async def _blocking(self, fn: Callable[[], Any]) -> Any:
        if self._run_blocking is None:
            return fn()
        return await self._run_blocking(fn)

    async def run(self, tenant: Tenant, body: dict, base_url: str) -> dict[str, Any]:
        if tenant.plan != TOP_PLAN:
            raise PlanRequired(f"brand import is available on the top plan ({TOP_PLAN}) only")
        wait = await self._db.run("take_brand_import", rows.take_window, tenant.id, "brand_import",
                                  self._clock.seconds(), IMPORTS_PER_MINUTE)
        if wait is not None:
            raise RateLimited(f"Too many brand imports: at most {IMPORTS_PER_MINUTE} a minute.",
                              max(1, math.ceil(wait)))
        url = await self._start_url(tenant, body.get("url"))
        apply = body.get("apply", False)
        use_ai = body.get("ai", True)
        for name, value in (("apply", apply), ("ai", use_ai)):
            if not isinstance(value, bool):
                raise Invalid(name, f"{name} must be a boolean")
        language = language_of(body.get("language"), "language")
        result = await _Import(self, tenant, url, base_url).run(use_ai, language)
        if apply:
            await self._builder.save_theme(tenant, {"theme": result["theme"], "brand": result["brand"]})
            result["applied"] = True
        return result

    async def _start_url(self, tenant: Tenant, given: Any) -> str:
        if given is None or given == "":
            domain = await builder_rows.first_verified_domain(self._db, tenant.id)
            if domain is None:
                raise Invalid("url", "url is required: the account has no verified sending domain to start from")
            return f"https://{registered_domain(domain)}/"
        if not isinstance(given, str) or len(given) > themes.MAX_URL or not given.strip():
            raise Invalid("url", "url must be a website address such as acme.com or https://acme.com")
        given = given.strip()
        if not re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", given):
            given = "https://" + given
        parts = urlsplit(given)
        if parts.scheme.lower() not in ("http", "https"):
            raise BrandFailed("brand_url_forbidden", "url: only http and https websites are imported")
        if not parts.hostname:
            raise Invalid("url", "url must be a website address such as acme.com or https://acme.com")
        return given

    async def save_logo(self, tenant: Tenant, measured: choosing.Measured, base_url: str) -> str:
        now = self._clock.seconds()
        file_id = await rows.save_file(self._db, ids.uuid7(now), tenant.id, hashlib.sha256(measured.body).digest(),
                                       measured.content_type, measured.body, timefmt.from_seconds(now))
        return f"{base_url}/files/brand/{file_id}.{EXTENSIONS[measured.content_type]}"

    async def file(self, name: str) -> tuple[str, bytes] | None:
        stem, _, ext = name.partition(".")
        try:
            file_id = uuid.UUID(stem)
        except ValueError:
            return None
        row = await rows.brand_file(self._db, file_id)
        if row is None or EXTENSIONS.get(row["content_type"]) != ext:
            return None
        return row["content_type"], bytes(row["body"])


class _Import:
    """One import: its budget of fetches and time, and what it found."""

    def __init__(self, importer: BrandImporter, tenant: Tenant, url: str, base_url: str):
        self.importer = importer
        self.tenant = tenant
        self.url = url
        self.base_url = base_url
        self.clock = importer._clock
        self.deadline = self.clock.seconds() + importer._settings.timeout
        self.fetches = 0
        self.skipped = 0
        self.warnings: list[str] = []

    def _spend(self) -> None:
        if self.fetches >= self.importer._settings.max_fetches:
            raise _OutOfFetches()
        self.fetches += 1

    async def _get(self, url: str, max_bytes: int, truncate: bool = False):
        return await self.importer._fetcher.follow(url, max_bytes=max_bytes, deadline=self.deadline,
                                                   ports=self.importer._ports, spend=self._spend, truncate=truncate)

    async def _resource(self, url: str, max_bytes: int, what: str) -> bytes | None:
        """A sub-resource's body, or None with a warning."""
        try:
            _, fetched = await self._get(url, max_bytes)
        except _OutOfFetches:
            self.skipped += 1
            return None
        except TargetRefused as e:
            self.warnings.append(f"{what} {url} was not fetched: {e.message}")
            return None
        except FetchFailed as e:
            self.warnings.append(f"{what} {url} could not be read: {e.message}")
            return None
        if not 200 <= fetched.status < 300:
            self.warnings.append(f"{what} {url} could not be read: HTTP {fetched.status}")
            return None
        return fetched.body

    async def run(self, use_ai: bool, language: str) -> dict[str, Any]:
        final_url, page = await self._page()
        logos, css = await self._resources(page)
        styles = choosing.read_styles(css)
        colors = choosing.rank_colors(self._colors_found(page, styles, logos), styles.hints)
        fonts = choosing.fonts_of(styles, page.google_fonts)
        if not logos:
            self.warnings.append("no logo could be read")
        if not colors:
            self.warnings.append("no brand colour was found; the default palette is proposed")
        if not fonts:
            self.warnings.append("no font was found")

        picked, ai_shown = await self._pick(use_ai, language, page, logos, colors, fonts)
        palette = choosing.palette_of(colors, picked.get("primary"), picked.get("accent"))
        light_logo, dark_logo = _light_and_dark(picked, logos)
        theme = self._theme(palette, fonts, light_logo, dark_logo, page.name)
        brand = self._brand(page, final_url)
        return {"object": "brand_import", "url": final_url, "name": page.name, "logos": logos, "colors": colors,
                "palette": palette, "fonts": fonts, "socials": page.socials[:themes.MAX_SOCIALS],
                "address": page.address, "theme": theme, "brand": brand, "ai": ai_shown,
                "warnings": self.warnings, "applied": False}

    async def _page(self) -> tuple[str, brandpage.Page]:
        """The site's page (where it was read after redirects, and what it holds), or BrandFailed."""
        try:
            final_url, fetched = await self._get(self.url, MAX_HTML, truncate=True)
        except TargetRefused as e:
            raise BrandFailed("brand_url_forbidden", f"url: {e.message}") from None
        except FetchFailed as e:
            raise BrandFailed("brand_fetch_failed", f"url: the website could not be read: {e.message}") from None
        if not 200 <= fetched.status < 300:
            raise BrandFailed("brand_fetch_failed", f"url: the website answered HTTP {fetched.status}")
        content_type = fetched.headers.get("content-type", "")
        media = content_type.split(";")[0].strip().lower()
        if media not in HTML_TYPES:
            raise BrandFailed("brand_fetch_failed", f"url: not an HTML page ({media or 'no content type'})")
        if len(fetched.body) >= MAX_HTML:
            self.warnings.append("the page is larger than 2 MiB: only its first 2 MiB were read")
        charset = re.search(r"charset=([\w.:-]+)", content_type)
        page = await self.importer._blocking(
            lambda: brandpage.read_page(fetched.body, final_url, charset.group(1) if charset else None))
        return final_url, page

    async def _resources(self, page: brandpage.Page) -> tuple[list[dict[str, Any]], str]:
        """What the page points at: its logos (the manifest's icons among them), and all its CSS."""
        # The manifest's icons join the logo candidates.
        if page.manifest:
            manifest = await self._resource(page.manifest, MAX_CSS, "the web manifest")
            if manifest is not None:
                icons = brandpage.manifest_icons(manifest, page.manifest)
                if icons:
                    page.logos.append(brandpage.LogoSource("manifest", icons[0]))
        logos = await self._logos(page)
        css = page.css
        for sheet in page.stylesheets[:MAX_STYLESHEETS]:
            body = await self._resource(sheet, MAX_CSS, "the stylesheet")
            if body is not None:
                css += "\n" + body.decode("utf-8", "replace")
        if self.skipped:
            self.warnings.append(f"{self.skipped} resources were not fetched: an import makes at most "
                                 f"{self.importer._settings.max_fetches} fetches")
        return logos, css

    @staticmethod
    def _colors_found(page: brandpage.Page, styles: choosing.Styles,
                      logos: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
        """Every colour candidate with its source and weight: the CSS's, the page's, the best logos'."""
        found = list(styles.colors)
        if page.theme_color:
            found.append((page.theme_color, "theme_color", 30))
        found += [(c, "button", 25) for c in page.button_colors]
        for logo in logos[:2]:
            found += [(c, "logo", 14 - 2 * i) for i, c in enumerate(logo["colors"][:3])
                      if not choosing.neutral(c)]
        return found

    async def _logos(self, page: brandpage.Page) -> list[dict[str, Any]]:
        candidates = sorted(page.logos, key=lambda c: -choosing.SOURCE_POINTS[c.source])
        measured: list[tuple[brandpage.LogoSource, choosing.Measured]] = []
        fetched_count = 0
        for candidate in candidates:
            body = candidate.inline
            if body is None:
                if fetched_count >= MAX_LOGO_FETCHES:
                    continue
                fetched_count += 1
                body = await self._resource(candidate.url, MAX_IMAGE, "the logo")
                if body is None:
                    continue
            figures = await self.importer._blocking(functools.partial(choosing.measure, body))
            if figures is None:
                self.warnings.append(f"the logo {candidate.url} is not an image that could be read")
                continue
            measured.append((candidate, figures))
        scored = sorted(measured, key=lambda m: -choosing.score(m[0].source, m[1]))
        kept, seen = [], set()
        for candidate, figures in scored:
            digest = hashlib.sha256(figures.body).digest()
            if digest in seen:
                continue
            seen.add(digest)
            kept.append({
                "url": await self.importer.save_logo(self.tenant, figures, self.base_url),
                "source_url": candidate.url, "source": candidate.source, "content_type": figures.content_type,
                "width": figures.width, "height": figures.height, "transparent": figures.transparent,
                "on_light": figures.on_light, "on_dark": figures.on_dark, "email_safe": figures.email_safe,
                "colors": list(figures.colors), "score": choosing.score(candidate.source, figures)})
            if len(kept) >= LOGOS_KEPT:
                break
        return kept

    async def _pick(self, use_ai: bool, language: str, page, logos, colors, fonts) -> tuple[dict, dict]:
        if not use_ai:
            return {}, {"used": False, "skipped": "not requested (ai: false)"}
        if not self.importer._ai.configured:
            return {}, {"used": False, "skipped": "no AI provider is configured on this server"}
        if not logos and not colors:
            return {}, {"used": False, "skipped": "there were no candidates to choose among"}
        candidates = {
            "site": page.name, "logos": [{k: x[k] for k in ("source", "content_type", "width", "height", "transparent",
                                                             "on_light", "on_dark", "email_safe", "colors", "score")}
                                         for x in logos],
            "colors": colors, "fonts": fonts}
        try:
            picked = await self.importer._ai.pick(self.tenant, candidates, language, len(logos),
                                                   tuple(c["hex"] for c in colors))
        except AiFailed as e:
            return {}, {"used": False, "skipped": f"{e.code}: {e.message}"}
        return picked, {"used": True, "rationale": picked["rationale"]}

    def _theme(self, palette, fonts, light_logo, dark_logo, name: str) -> dict[str, Any]:
        theme: dict[str, Any] = {"brand_color": palette["primary"], "link_color": palette["link"],
                                 "text_color": palette["text"], "button_text_color": palette["button_text"]}
        if themes.contrast(palette["text"], "#ffffff") < themes.MIN_CONTRAST:
            theme["text_color"] = themes.DEFAULT_THEME.text_color
        body = next((f for f in fonts if f["role"] == "body"), None)
        heading = next((f for f in fonts if f["role"] == "heading"), None)
        if body:
            theme["font"] = body["fallback"]
            if body["google"]:
                theme["web_font"] = body["family"]
        if heading:
            theme["heading_font"] = heading["fallback"]
            if heading["google"]:
                theme["heading_web_font"] = heading["family"]
        if light_logo:
            theme["logo_url"] = light_logo["url"]
            theme["logo_alt"] = name[:themes.MAX_LINE] or "Logo"
            theme["logo_width"] = max(themes.LOGO_WIDTH[0], min(180, light_logo["width"] or 180))
        if dark_logo and dark_logo is not light_logo:
            theme["logo_dark_url"] = dark_logo["url"]
        checked = {}
        for key, value in theme.items():
            try:
                checked.update(themes.theme_fields({key: value}))
            except Invalid as e:
                self.warnings.append(f"the theme's {key} was left out: {e.message}")
        return {k: checked[k] for k in theme if k in checked}

    def _brand(self, page, final_url: str) -> dict[str, Any]:
        parts = urlsplit(final_url)
        brand = {"name": page.name[:themes.MAX_LINE], "website": f"{parts.scheme}://{parts.netloc}",
                 "address": page.address[:themes.MAX_LINE], "socials": page.socials[:themes.MAX_SOCIALS],
                 "imported_from": final_url}
        shown = {}
        for key, value in brand.items():
            try:
                themes.brand_fields({key: value})
                shown[key] = value
            except Invalid as e:
                self.warnings.append(f"the brand's {key} was left out: {e.message}")
        return shown


def _light_and_dark(picked: dict, logos: list[dict[str, Any]]) -> tuple[dict | None, dict | None]:
    """The logos for a light and a dark background: the AI's picks, else the best that read on each."""
    light = picked.get("logo")
    light_logo = logos[light] if light is not None else next((x for x in logos if x["on_light"]), None)
    dark = picked.get("dark_logo")
    dark_logo = logos[dark] if dark is not None else None
    if dark_logo is None and light_logo is not None and not light_logo["on_dark"]:
        dark_logo = next((x for x in logos if x["on_dark"] and not x["on_light"]), None)
    return light_logo, dark_logo
