"""
The template builder: what the account's plan allows (``GET /template-builder``),
its saved theme and brand profile (``GET``/``PATCH /template-builder/theme``), and a live
rendering of an unsaved document (``POST /template-builder/render``, an extension for the
editor's preview). Saving the theme re-renders, in the same transaction, every template draft
that holds the renderer's output of its document; published versions keep their bytes.

The AI figures of the capabilities come from the AI helper (``app/ai.py``); brand
import is offered on the top plan.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from mailsvc import timefmt
from mailsvc.app.templates import TOP_PLAN, DocumentRenderer
from mailsvc.domain import themes
from mailsvc.domain.documents import document_of
from mailsvc.domain.domains import registered_domain
from mailsvc.domain.errors import Invalid, PlanRequired
from mailsvc.domain.tenant import Tenant
from mailsvc.store import builder as rows
from mailsvc.store.database import Database, Transaction


def _saved_fields(stored: dict | None, given: dict, checked: dict[str, Any]) -> dict[str, Any]:
    """A PATCH of saved fields: given values replace, ``null`` goes back to the default."""
    result = dict(stored or {})
    for name, value in given.items():
        if value is None:
            result.pop(name, None)
        elif name in checked:
            result[name] = checked[name]
    return result


def _json_brand(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: ([{"network": s.network, "url": s.url} for s in v] if k == "socials" else v)
            for k, v in fields.items()}


class AiFigures(Protocol):
    """The AI helper's side of the capabilities (``mailsvc.app.ai.AiHelper``)."""

    async def figures(self, tenant: Tenant) -> dict[str, Any]: ...


class Builder:
    def __init__(self, clock, db: Database, renderer: DocumentRenderer, ai: AiFigures | None = None):
        self._clock = clock
        self._db = db
        self._renderer = renderer
        self._ai = ai

    async def _profile(self, tenant_id: uuid.UUID) -> tuple[dict | None, dict | None]:
        row = await rows.profile(self._db, tenant_id)
        return (row["theme"], row["brand"]) if row else (None, None)

    async def look(self, tenant_id: uuid.UUID) -> tuple[themes.Theme, themes.Brand]:
        theme, brand = await self._profile(tenant_id)
        return themes.theme_of(theme), themes.brand_of(brand)

    async def theme(self, tenant: Tenant) -> dict:
        theme, brand = await self._profile(tenant.id)
        return {"object": "builder_theme", "theme": themes.theme_of(theme).as_json(),
                "brand": themes.brand_of(brand).as_json(), "theme_saved": theme is not None,
                "brand_saved": brand is not None}

    async def capabilities(self, tenant: Tenant) -> dict:
        shown = await self.theme(tenant)
        domain = await rows.first_verified_domain(self._db, tenant.id)
        top = tenant.plan == TOP_PLAN
        ai = await self._ai.figures(tenant) if self._ai is not None else {
            "enabled": False, "monthly_quota": 0, "used": 0, "remaining": 0, "per_minute": 0}
        return {
            "object": "template_builder",
            "plan": tenant.plan,
            "required_plan": TOP_PLAN,
            "builder": top,
            "ai_available": ai["enabled"],
            "ai": ai,
            "theme": shown["theme"],
            "theme_saved": shown["theme_saved"],
            "brand": shown["brand"],
            "brand_saved": shown["brand_saved"],
            "brand_import": top,
            "suggested_website": f"https://{registered_domain(domain)}" if domain else "",
        }

    @staticmethod
    def _top(tenant: Tenant, what: str) -> None:
        if tenant.plan != TOP_PLAN:
            raise PlanRequired(f"{what} is available on the top plan ({TOP_PLAN}) only")

    async def save_theme(self, tenant: Tenant, body: dict) -> dict:
        """``PATCH /template-builder/theme``: ``{theme (required), brand}`` over the saved ones."""
        self._top(tenant, "the builder theme")
        if body.get("theme") is None:
            raise Invalid("theme", "theme is required: an object of theme fields")
        given_theme = body["theme"]
        checked_theme = themes.theme_fields(given_theme)
        given_brand = body.get("brand")
        checked_brand = themes.brand_fields(given_brand) if given_brand is not None else None
        now = timefmt.from_seconds(self._clock.seconds())

        async def save(txn: Transaction) -> dict:
            before = await rows.lock_profile(txn, tenant.id)
            theme = _saved_fields(before and before["theme"], given_theme, checked_theme)
            brand = None
            if given_brand is not None and checked_brand is not None:
                brand = _saved_fields(before and before["brand"], given_brand, _json_brand(checked_brand))
            saved = await rows.save_profile(txn, tenant.id, theme, brand, now)
            await self._rerender(txn, tenant.id, themes.theme_of(saved["theme"]), themes.brand_of(saved["brand"]),
                                 now)
            return saved

        saved = await self._db.run("save builder theme", save)
        return {"object": "builder_theme", "theme": themes.theme_of(saved["theme"]).as_json(),
                "brand": themes.brand_of(saved["brand"]).as_json()}

    async def _rerender(self, txn: Transaction, tenant_id: uuid.UUID, theme: themes.Theme, brand: themes.Brand,
                        now) -> None:
        for draft in await rows.rendered_drafts(txn, tenant_id):
            html, text = self._renderer.render(document_of(draft["builder"], "builder."), theme, brand)
            await rows.set_rendered(txn, draft["id"], html, text, now)

    async def render(self, tenant: Tenant, body: dict) -> dict:
        """``POST /template-builder/render``: ``{document, theme?}`` → ``{html, text}``, nothing saved."""
        self._top(tenant, "the template builder")
        if "document" not in body:
            raise Invalid("document", "document is required: a builder document")
        document = document_of(body["document"], "document.")
        override = themes.theme_fields(body["theme"]) if body.get("theme") is not None else {}
        theme, brand = await self.look(tenant.id)
        html, text = self._renderer.render(document, theme.with_fields(override), brand)
        return {"object": "builder_render", "html": html, "text": text}
