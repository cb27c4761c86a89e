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
from mailsvc.http.operation import NULLABLE_STR, OBJECT, PAGE, RESOURCE, STR, STR_OR_LIST, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, TEMPLATE_BODY_LIMIT, Reply, route
from mailsvc.http.schemas import PREVIEW_SPAM

#: A template's create and PATCH body (domain/templates.py ``FIELDS``).
TEMPLATE_FIELDS: dict[str, dict] = dict(
    name=STR, alias=STR, **{"from": STR}, subject=STR, reply_to=STR_OR_LIST, html=STR, text=STR,
    builder=OBJECT, variables={"type": "array", "items": obj(
        ("key",), key=STR, type={"enum": ["string", "number"]},
        fallback_value={"type": ["string", "number"]})})

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

    @route("POST", "/templates", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT, multi_line=TEMPLATE_TEXTS,
           op=Operation("Create a template", obj(("name",), **TEMPLATE_FIELDS),
                        {201: RESOURCE}, errors=(409,)))
    async def create(self, request, caller: Caller):
        row = await self._templates.create(caller.tenant, read_json(request))
        return await self._written(request, caller, row, 201)

    @route("GET", "/templates", access=FULL, native=True,
           op=Operation("List templates", responses={200: listing()}, query=PAGE))
    async def list(self, request, caller: Caller):
        items, has_more = await self._templates.list(caller.tenant.id, page_of(request.args, 20))
        return envelope(items, has_more)

    @route("GET", "/templates/<key>", access=FULL, native=True, op=Operation("Retrieve a template's draft"))
    async def retrieve(self, request, caller: Caller, key: str):
        return await self._templates.get(caller.tenant.id, key)

    @route("PATCH", "/templates/<key>", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=TEMPLATE_TEXTS,
           op=Operation("Update a template", obj(**TEMPLATE_FIELDS), {200: RESOURCE}, errors=(409,)))
    async def update(self, request, caller: Caller, key: str):
        row = await self._templates.update(caller.tenant, key, read_json(request))
        return await self._written(request, caller, row)

    @route("DELETE", "/templates/<key>", access=FULL, native=True,
           op=Operation("Delete a template", responses={200: RESOURCE}, native_responses={204: None}))
    async def delete(self, request, caller: Caller, key: str):
        template_id = await self._templates.delete(caller.tenant.id, key)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "template", "id": str(template_id), "deleted": True}

    @route("POST", "/templates/<key>/publish", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           op=Operation("Publish a template", responses={200: RESOURCE}))
    async def publish(self, request, caller: Caller, key: str):
        row = await self._templates.publish(caller.tenant.id, key)
        return await self._written(request, caller, row)

    @route("POST", "/templates/<key>/duplicate", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           op=Operation("Duplicate a template", responses={200: RESOURCE, 201: RESOURCE}, errors=(409,)))
    async def duplicate(self, request, caller: Caller, key: str):
        row = await self._templates.duplicate(caller.tenant.id, key)
        return await self._written(request, caller, row)

    @route("POST", "/templates/<key>/preview", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("variables.**",),
           op=Operation(
               "Preview a template with variables (with spam.spamd, its spam score as `spam`)",
               obj(variables=OBJECT),
               {200: obj(("object", "subject", "html", "text"), object={"const": "template_preview"},
                         subject=NULLABLE_STR, html=STR, text=NULLABLE_STR, spam=PREVIEW_SPAM)}))
    async def preview(self, request, caller: Caller, key: str):
        preview, sender = await self._templates.preview_and_sender(caller.tenant.id, key, read_json(request))
        if self._spam is not None and self._spam.enabled:  # the spam score beside the preview,
            preview["spam"] = await self._spam.preview_score(preview, sender)  # from the template's `from`
        return preview

