"""
Templates: main ``/templates`` (docs/decisions.md, "Templates") and native ``/v1/templates``.
``{key}`` is a template id or alias. The native surface answers a write with the whole
template and a delete with 204.
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.spam import SpamChecks
from mailsvc.app.templates import Templates
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, TEMPLATE_BODY_LIMIT, Reply, route

#: The fields of a template whose strings may hold line breaks (every other is one line).
TEMPLATE_TEXTS = ("html", "text", "builder.**", "variables[].fallback_value")


class TemplatesResource:
    def __init__(self, templates: Templates, spam: SpamChecks | None = None):
        self._templates = templates
        self._spam = spam

    async def _written(self, request, caller: Caller, row: dict, status: int = 200) -> Reply:
        if context_of(request).surface == NATIVE:
            return Reply(status, await self._templates.get(caller.tenant.id, str(row["id"])))
        return Reply(status, {"id": str(row["id"]), "object": "template"})

    @route("POST", "/templates", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT, multi_line=TEMPLATE_TEXTS)
    async def create(self, request, caller: Caller):
        row = await self._templates.create(caller.tenant, read_json(request))
        return await self._written(request, caller, row, 201)

    @route("GET", "/templates", access=FULL, native=True)
    async def list(self, request, caller: Caller):
        items, has_more = await self._templates.list(caller.tenant.id, page_of(request.args, 20))
        return envelope(items, has_more)

    @route("GET", "/templates/<key>", access=FULL, native=True)
    async def retrieve(self, request, caller: Caller, key: str):
        return await self._templates.get(caller.tenant.id, key)

    @route("PATCH", "/templates/<key>", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=TEMPLATE_TEXTS)
    async def update(self, request, caller: Caller, key: str):
        row = await self._templates.update(caller.tenant, key, read_json(request))
        return await self._written(request, caller, row)

    @route("DELETE", "/templates/<key>", access=FULL, native=True)
    async def delete(self, request, caller: Caller, key: str):
        template_id = await self._templates.delete(caller.tenant.id, key)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "template", "id": str(template_id), "deleted": True}

    @route("POST", "/templates/<key>/publish", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT)
    async def publish(self, request, caller: Caller, key: str):
        row = await self._templates.publish(caller.tenant.id, key)
        return await self._written(request, caller, row)

    @route("POST", "/templates/<key>/duplicate", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT)
    async def duplicate(self, request, caller: Caller, key: str):
        row = await self._templates.duplicate(caller.tenant.id, key)
        return await self._written(request, caller, row)

    @route("POST", "/templates/<key>/preview", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("variables.**",))
    async def preview(self, request, caller: Caller, key: str):
        preview, sender = await self._templates.preview_and_sender(caller.tenant.id, key, read_json(request))
        if self._spam is not None and self._spam.enabled:  # the spam score beside the preview,
            preview["spam"] = await self._spam.preview_score(preview, sender)  # from the template's `from`
        return preview

