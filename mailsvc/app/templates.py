"""
Templates: a draft that ``PATCH`` edits and at most one published, immutable version that sends
use (``published``, called by ``app/submit``); ``publish`` copies the draft into a new version,
``duplicate`` makes a new draft. A template is named by id or alias within its account only.
A template made from a builder document (top plan) gets its HTML and text from a
``DocumentRenderer`` (``mailsvc.domain.emailhtml``) with the account's theme and brand, unless
the write gives its own; such drafts are ``builder_rendered`` and re-rendered when the theme
changes (``mailsvc.app.builder``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Protocol

from mailsvc import timefmt
from mailsvc.domain import themes
from mailsvc.domain.documents import Document, document_of
from mailsvc.domain.errors import AliasTaken, Invalid, NotFound, PlanRequired, Taken
from mailsvc.domain.paging import Page
from mailsvc.domain.templates import (
    ALIAS,
    Variable,
    Version,
    duplicate_name,
    preview,
    template_fields,
    version_of,
)
from mailsvc.domain.tenant import Tenant
from mailsvc.ids import parse_uuid, uuid7
from mailsvc.store import builder as builder_rows
from mailsvc.store import templates as rows
from mailsvc.store.database import Database, Transaction

KIND = "Template"
#: The plan builder documents need: the top plan (docs/contract/README.md, "Plans").
TOP_PLAN = "scale"
#: How long a process keeps a published version it looked up (``PublishedCache``).
PUBLISHED_CACHE_SECONDS = 5.0


class DocumentRenderer(Protocol):
    """Turns a checked builder document, shown with a theme and a brand, into (html, text)."""

    def render(self, document: Document, theme: themes.Theme, brand: themes.Brand) -> tuple[str, str]: ...


def template_key(text: str) -> uuid.UUID | str:
    """A path's ``{key}``: a template id, or an alias; NotFound when it can be neither."""
    parsed = parse_uuid(text)
    if parsed is not None:
        return parsed
    if isinstance(text, str) and ALIAS.match(text):
        return text
    raise NotFound(KIND)


def _content(row: dict) -> tuple:
    """What makes a draft or version what it is (not ids or times)."""
    return (row["sender"], row["subject"], list(row["reply_to"] or ()), row["html"], row["text"], row["builder"],
            [(v["key"], v["type"], v.get("fallback_value")) for v in row["variables"] or ()])


def _variables(given: tuple[Variable, ...], before: list[dict], now: datetime, clock) -> list[dict]:
    """Stored variables: one kept (its id and created_at) when its key was declared before."""
    old = {v["key"]: v for v in before}
    stamp = timefmt.resource(now)
    result = []
    for v in given:
        previous = old.get(v.key)
        same = previous is not None and (previous["type"], previous.get("fallback_value")) == (v.type, v.fallback_value)
        result.append({
            "id": previous["id"] if previous else str(uuid7(clock.seconds())),
            "key": v.key, "type": v.type, "fallback_value": v.fallback_value,
            "created_at": previous["created_at"] if previous else stamp,
            "updated_at": previous["updated_at"] if previous is not None and same else stamp,
        })
    return result


class PublishedCache:
    """
    The published versions a process looked up for sends, by (account, id or alias as
    written), each kept ``seconds`` and prepared once for rendering (``Version.prepare``), so
    that a templated send needs no statement and no scan. A version never changes; what can
    change is which version (if any) an id or alias names: on this process ``forget`` (called
    by ``Templates`` on publish, delete and an alias change) applies that at once; a publish,
    delete or alias change made by another process or node reaches this one within
    ``seconds``. Only found, published versions are kept: a template published or created
    elsewhere is seen at once. At most MAX_ENTRIES versions of about MAX_WEIGHT bytes together.
    """

    MAX_ENTRIES = 1000
    MAX_WEIGHT = 64 * 1024 * 1024

    def __init__(self, clock, seconds: float):
        self._clock = clock
        self._seconds = seconds
        self._entries: dict[tuple[uuid.UUID, uuid.UUID | str], tuple[float, Version, int]] = {}
        self._weight = 0
        #: Bumped by every ``forget``: a lookup that began before one is not kept.
        self._generation = 0

    def get(self, tenant_id: uuid.UUID, key: uuid.UUID | str) -> Version | None:
        entry = self._entries.get((tenant_id, key))
        if entry is None:
            return None
        if self._clock.seconds() - entry[0] >= self._seconds:
            self._drop((tenant_id, key))
            return None
        return entry[1]

    @property
    def generation(self) -> int:
        return self._generation

    def keep(self, tenant_id: uuid.UUID, key: uuid.UUID | str, version: Version, generation: int,
             since: float) -> None:
        """
        Keep ``version`` (prepared), looked up from ``since`` on, unless a ``forget`` came
        meanwhile or it would take more than a quarter of MAX_WEIGHT.
        """
        if generation != self._generation:
            return
        weight = version.weight()
        if weight > self.MAX_WEIGHT // 4:
            return
        version.prepare()
        self._drop((tenant_id, key))
        if len(self._entries) >= self.MAX_ENTRIES or self._weight + weight > self.MAX_WEIGHT:
            self._entries.clear()
            self._weight = 0
        self._entries[tenant_id, key] = (since, version, weight)
        self._weight += weight

    def _drop(self, key: tuple[uuid.UUID, uuid.UUID | str]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._weight -= entry[2]

    def forget(self, tenant_id: uuid.UUID) -> None:
        """Drop the account's versions (one of its templates was published, deleted or renamed here)."""
        self._generation += 1
        for key in [key for key in self._entries if key[0] == tenant_id]:
            self._drop(key)


class Templates:
    def __init__(self, clock, db: Database, documents: DocumentRenderer,
                 cache_seconds: float = PUBLISHED_CACHE_SECONDS):
        self._clock = clock
        self._db = db
        self._documents = documents
        self._published = PublishedCache(clock, cache_seconds)

    def _now(self) -> datetime:
        return timefmt.from_seconds(self._clock.seconds())

    async def _with_document(self, tenant: Tenant, fields: dict[str, Any]) -> dict[str, Any]:
        """A builder document checked against the plan and rendered where html/text are not given."""
        if "builder" not in fields:
            if "html" in fields or "text" in fields:
                return {**fields, "builder_rendered": False}
            return fields
        if tenant.plan != TOP_PLAN:
            raise PlanRequired("builder: builder documents are available on the top plan only")
        profile = await builder_rows.profile(self._db, tenant.id)
        theme = themes.theme_of(profile["theme"] if profile else None)
        brand = themes.brand_of(profile["brand"] if profile else None)
        html, text = self._documents.render(document_of(fields["builder"], "builder."), theme, brand)
        own = "html" in fields or "text" in fields
        return {"html": html, "text": text, **fields, "builder_rendered": not own}

    async def _write(self, desc: str, fn, alias: str | None):
        try:
            return await self._db.run(desc, fn)
        except Taken:  # another template took the alias
            raise AliasTaken(alias or "") from None

    async def create(self, tenant: Tenant, body: dict) -> dict:
        fields = await self._with_document(tenant, template_fields(body, creating=True))
        now = self._now()
        fields["variables"] = _variables(fields.get("variables", ()), [], now, self._clock)
        template_id = uuid7(self._clock.seconds())

        async def insert(txn: Transaction) -> dict:
            return await rows.insert(txn, template_id, tenant.id, fields, now)

        return await self._write("create template", insert, fields.get("alias"))

    async def _row(self, tenant_id: uuid.UUID, key: str) -> dict:
        row = await rows.get(self._db, tenant_id, template_key(key))
        if row is None:
            raise NotFound(KIND)
        return row

    async def get(self, tenant_id: uuid.UUID, key: str) -> dict:
        """The template as ``GET /templates/{key}`` shows it (its draft)."""
        row = await self._row(tenant_id, key)
        published = await rows.version(self._db, row["current_version_id"]) if row["current_version_id"] else None
        return resource(row, published)

    async def list(self, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
        found, has_more = await rows.page(self._db, tenant_id, page)
        return [list_item(row) for row in found], has_more

    async def update(self, tenant: Tenant, key: str, body: dict) -> dict:
        fields = await self._with_document(tenant, template_fields(body, creating=False))
        parsed = template_key(key)
        now = self._now()

        async def change(txn: Transaction) -> dict:
            row = await rows.get(txn, tenant.id, parsed, lock=True)
            if row is None:
                raise NotFound(KIND)
            written = dict(fields)
            if "variables" in fields:
                written["variables"] = _variables(fields["variables"], row["variables"] or [], now, self._clock)
            return await rows.update(txn, row["id"], written, now)

        try:
            return await self._write("update template", change, fields.get("alias"))
        finally:
            if "alias" in fields:  # the old alias names nothing now, the new one this template
                self._published.forget(tenant.id)

    async def delete(self, tenant_id: uuid.UUID, key: str) -> uuid.UUID:
        try:
            row = await self._db.run("delete template", rows.delete, tenant_id, template_key(key))
        finally:
            self._published.forget(tenant_id)
        if row is None:
            raise NotFound(KIND)
        return row["id"]

    async def publish(self, tenant_id: uuid.UUID, key: str) -> dict:
        parsed = template_key(key)
        now = self._now()

        async def publish(txn: Transaction) -> dict:
            row = await rows.get(txn, tenant_id, parsed, lock=True)
            if row is None:
                raise NotFound(KIND)
            return await rows.publish(txn, row, uuid7(self._clock.seconds()), now)

        try:
            return await self._db.run("publish template", publish)
        finally:
            self._published.forget(tenant_id)

    async def duplicate(self, tenant_id: uuid.UUID, key: str) -> dict:
        """A new draft with the original's draft, named "... (copy)", without the alias."""
        original = await self._row(tenant_id, key)
        now = self._now()
        fields = {c: original[c]
                  for c in ("sender", "subject", "reply_to", "html", "text", "builder", "builder_rendered")}
        fields["name"] = duplicate_name(original["name"])
        fields["variables"] = _variables(
            tuple(version_of(original).variables), [], now, self._clock)
        template_id = uuid7(self._clock.seconds())
        return await self._db.run("duplicate template", rows.insert, template_id, tenant_id, fields, now)

    async def preview(self, tenant_id: uuid.UUID, key: str, body: dict) -> dict:
        return (await self.preview_and_sender(tenant_id, key, body))[0]

    async def preview_and_sender(self, tenant_id: uuid.UUID, key: str, body: dict) -> tuple[dict, str | None]:
        """The preview, and the template's own ``from`` (None when it has none) that its spam score uses."""
        version = version_of(await self._row(tenant_id, key))
        return preview(version, body.get("variables")), version.sender

    async def published(self, tenant_id: uuid.UUID, key: str) -> Version:
        """
        What a send naming ``key`` renders: the published version (422 naming `template`
        else), from this process's ``PublishedCache`` when it was looked up lately.
        """
        try:
            parsed = template_key(key)
        except NotFound:
            parsed = None
        if parsed is None:
            raise Invalid("template", f"template: no template `{key}` (template.id must be a template id or alias)")
        kept = self._published.get(tenant_id, parsed)
        if kept is not None:
            return kept
        generation, since = self._published.generation, self._clock.seconds()
        row = await rows.published(self._db, tenant_id, parsed)
        if row is None:
            raise Invalid("template", f"template: no template `{key}` (template.id must be a template id or alias)")
        if row["version_id"] is None:
            raise Invalid("template", f"template: the template `{key}` is not published; publish it to send with it")
        version = version_of(row)
        self._published.keep(tenant_id, parsed, version, generation, since)
        return version


def resource(row: dict, published: dict | None) -> dict:
    """
    The template as ``GET /templates/{key}`` shows its draft. What is typed as a string is
    never null (unset is ``""``, ``reply_to`` ``[]``); ``alias`` and ``current_version_id`` may be.
    """
    return {
        "object": "template",
        "id": str(row["id"]),
        "current_version_id": str(row["current_version_id"]) if row["current_version_id"] else None,
        "alias": row["alias"],
        "name": row["name"],
        "created_at": timefmt.resource(row["created_at"]),
        "updated_at": timefmt.resource(row["updated_at"]),
        "status": "published" if row["current_version_id"] else "draft",
        "published_at": timefmt.resource(row["published_at"]),
        "from": row["sender"] or "",
        "subject": row["subject"] or "",
        "reply_to": list(row["reply_to"] or ()),
        "html": row["html"] or "",
        "text": row["text"] or "",
        "variables": row["variables"] or [],
        "builder": row["builder"],
        "has_unpublished_versions": published is None or _content(row) != _content(published),
    }


def list_item(row: dict) -> dict:
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "status": "published" if row["current_version_id"] else "draft",
        "published_at": timefmt.resource(row["published_at"]),
        "created_at": timefmt.resource(row["created_at"]),
        "updated_at": timefmt.resource(row["updated_at"]),
        "alias": row["alias"],
    }
