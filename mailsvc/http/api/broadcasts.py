"""
Broadcasts: main ``/broadcasts`` (docs/contract/main-api.md, "Resources": create
answers 200) and native ``/v1/broadcasts``, which answers a write with the whole
broadcast and a delete with 204. ``POST /broadcasts/{id}/preview`` (absent from the hosted
API) renders the message for a contact, for the UI.
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.broadcasts import Broadcast, Broadcasts
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import (
    BOOL,
    ID,
    INT,
    NULLABLE_STR,
    NULLABLE_UUID,
    PAGE,
    STR,
    STR_OR_LIST,
    UUID,
    Operation,
    listing,
    obj,
)
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, TEMPLATE_BODY_LIMIT, Reply, route
from mailsvc.http.schemas import PREVIEW_SPAM

BROADCAST_STATUS = {"enum": ["draft", "scheduled", "queued", "sending", "sent", "canceled", "failed"]}
#: A broadcast's create and PATCH body (domain/broadcasts.py ``broadcast_fields``).
BROADCAST_FIELDS: dict[str, dict] = dict(segment_id=UUID, audience_id=UUID, name=STR, **{"from": STR}, subject=STR,
                        reply_to=STR_OR_LIST, preview_text=STR, html=STR, text=STR,
                        topic_id={"enum": [None, ""]})
#: A broadcast as ``GET /broadcasts/{id}`` shows it (app/broadcasts.py ``resource``).
BROADCAST = obj(
    ("object", "id", "name", "segment_id", "audience_id", "from", "subject", "reply_to", "preview_text", "html",
     "text", "status", "created_at", "scheduled_at", "sent_at", "topic_id", "recipients", "stats"),
    object={"const": "broadcast"}, id=UUID, name=STR, segment_id=NULLABLE_UUID, audience_id=NULLABLE_UUID,
    **{"from": STR}, subject=STR, reply_to={"type": "array", "items": STR}, preview_text=STR,
    html=STR, text=STR, status=BROADCAST_STATUS, created_at=STR, scheduled_at=NULLABLE_STR,
    sent_at=NULLABLE_STR, topic_id={"type": "null"}, recipients=INT,
    stats={"type": "object", "additionalProperties": INT},
    progress=obj(("done", "total"), done=INT, total=INT),
    wait_reason={"enum": [None, "daily_quota", "monthly_quota", "account_paused"]}, wait_until=NULLABLE_STR,
    failure=NULLABLE_STR)
#: An item of ``GET /broadcasts`` (app/broadcasts.py ``list_item``).
BROADCAST_ITEM = obj(("id", "name", "segment_id", "audience_id", "status", "created_at", "scheduled_at", "sent_at"),
                     id=UUID, name=STR, segment_id=NULLABLE_UUID, audience_id=NULLABLE_UUID, status=BROADCAST_STATUS,
                     created_at=STR, scheduled_at=NULLABLE_STR, sent_at=NULLABLE_STR, topic_id={"type": "null"})
BROADCAST_WRITTEN = obj(("object", "id"), object={"const": "broadcast"}, id=UUID)


class BroadcastsResource:
    def __init__(self, broadcasts: Broadcasts, public_url: str = ""):
        self._broadcasts = broadcasts
        #: The unsubscribe links' base (``http.public_url``, else where the sender reached this service).
        self._public_url = PublicUrl(public_url)

    async def _written(self, request, caller: Caller, row: Broadcast, main: dict | None = None) -> Reply:
        if context_of(request).surface == NATIVE:
            return Reply(200, await self._broadcasts.get(caller.tenant.id, str(row.id)))
        return Reply(200, main if main is not None else {"object": "broadcast", "id": str(row.id)})

    @route("POST", "/broadcasts", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("html", "text"),
           op=Operation(
               "Create a broadcast: a draft, or sent now (`send`) or at `scheduled_at`",
               {**obj(("from", "subject"), **BROADCAST_FIELDS, send=BOOL, scheduled_at=STR),
                "anyOf": [{"required": ["segment_id"]}, {"required": ["audience_id"]}]},
               {200: BROADCAST_WRITTEN}, {200: BROADCAST}, errors=(503,)))
    async def create(self, request, caller: Caller):
        row = await self._broadcasts.create(caller.tenant, read_json(request), self._public_url.of(request))
        return await self._written(request, caller, row)

    @route("GET", "/broadcasts", access=FULL, native=True,
           op=Operation("List broadcasts, newest first", responses={200: listing(BROADCAST_ITEM)}, query=PAGE))
    async def list(self, request, caller: Caller):
        items, has_more = await self._broadcasts.list(caller.tenant.id, page_of(request.args, None))
        return envelope(items, has_more)

    @route("GET", "/broadcasts/<broadcast_id>", access=FULL, native=True,
           op=Operation("Retrieve a broadcast with its counts", responses={200: BROADCAST}))
    async def retrieve(self, request, caller: Caller, broadcast_id: str):
        return await self._broadcasts.get(caller.tenant.id, broadcast_id)

    @route("PATCH", "/broadcasts/<broadcast_id>", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("html", "text"),
           op=Operation("Update a draft broadcast (409 broadcast_not_draft otherwise)",
                        obj(**BROADCAST_FIELDS), {200: BROADCAST_WRITTEN}, {200: BROADCAST},
                        errors=(409,)))
    async def update(self, request, caller: Caller, broadcast_id: str):
        row = await self._broadcasts.update(caller.tenant.id, broadcast_id, read_json(request))
        return await self._written(request, caller, row)

    @route("DELETE", "/broadcasts/<broadcast_id>", access=FULL, native=True,
           op=Operation(
               "Delete a draft or scheduled broadcast, or a canceled or failed one whose mail has left the queue"
               " (409 broadcast_in_progress, broadcast_not_cancelable)",
               responses={200: obj(("object", "id", "deleted"), object={"const": "broadcast"}, id=UUID,
                                   deleted={"const": True})},
               native_responses={204: None}, errors=(409,)))
    async def delete(self, request, caller: Caller, broadcast_id: str):
        gone = await self._broadcasts.delete(caller.tenant.id, broadcast_id)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "broadcast", "id": str(gone), "deleted": True}

    @route("POST", "/broadcasts/<broadcast_id>/send", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           op=Operation(
               "Send a draft now or at `scheduled_at` (409 broadcast_in_progress, broadcast_not_cancelable; 403 over"
               " the operator's spam threshold)",
               obj(scheduled_at=STR), {200: ID}, {200: BROADCAST}, errors=(409, 503)))
    async def send(self, request, caller: Caller, broadcast_id: str):
        row = await self._broadcasts.send(caller.tenant.id, broadcast_id, read_json(request),
                                          self._public_url.of(request))
        return await self._written(request, caller, row, {"id": str(row.id)})

    @route("POST", "/broadcasts/<broadcast_id>/cancel", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           op=Operation(
               "Cancel a broadcast: scheduled back to draft, queued or sending to canceled"
               " (409 broadcast_not_cancelable)",
               responses={200: BROADCAST_WRITTEN}, native_responses={200: BROADCAST}, errors=(409,)))
    async def cancel(self, request, caller: Caller, broadcast_id: str):
        row = await self._broadcasts.cancel(caller.tenant.id, broadcast_id)
        return await self._written(request, caller, row)

    @route("POST", "/broadcasts/<broadcast_id>/duplicate", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           op=Operation("Duplicate a broadcast as a new draft",
                        responses={200: BROADCAST_WRITTEN}, native_responses={200: BROADCAST}))
    async def duplicate(self, request, caller: Caller, broadcast_id: str):
        row = await self._broadcasts.duplicate(caller.tenant.id, broadcast_id)
        return await self._written(request, caller, row)

    @route("POST", "/broadcasts/<broadcast_id>/preview", access=FULL, native=True, body_limit=TEMPLATE_BODY_LIMIT,
           op=Operation(
               "The broadcast rendered for a contact (`contact_id`, else a member of its segment, else none);"
               " with spam.spamd, its spam score as `spam`",
               obj(contact_id=UUID),
               {200: obj(("object", "subject", "html", "text", "contact_id"), object={"const": "broadcast_preview"},
                         subject=STR, html=NULLABLE_STR, text=NULLABLE_STR, contact_id=NULLABLE_UUID,
                         spam=PREVIEW_SPAM)}))
    async def preview(self, request, caller: Caller, broadcast_id: str):
        return await self._broadcasts.preview(caller.tenant.id, broadcast_id, read_json(request))
