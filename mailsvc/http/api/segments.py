"""
Segments on the main and native surfaces, and the legacy audience paths
(docs/contract/main-api.md, "Resources"): the same rows and ids, shown with ``object``
``audience``, and contacts under ``/audiences/{id}/contacts`` shown with ``object``
``audience_contact``. The audience id does not filter a retrieval, an update or a delete of
a contact; it must name one of the account's audiences all the same.
"""

from __future__ import annotations

from mailsvc.app import contacts as contact_shapes
from mailsvc.app.apikeys import Caller
from mailsvc.app.contacts import Contacts
from mailsvc.app.segments import Segments, list_item, resource
from mailsvc.domain.contacts import AUDIENCE, SEGMENT
from mailsvc.http.api.contacts import CONTACT_TEXTS, arg
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import PAGE, RESOURCE, STR, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, Reply, route
from mailsvc.http.schemas import CONTACT

AUDIENCE_CONTACT = "audience_contact"


class SegmentsResource:
    def __init__(self, segments: Segments, contacts: Contacts):
        self._segments = segments
        self._contacts = contacts

    @route("POST", "/segments", access=FULL, native=True,
           op=Operation("Create a segment", obj(("name",), name=STR), {201: RESOURCE}))
    async def create(self, request, caller: Caller):
        row = await self._segments.create(caller.tenant.id, read_json(request))
        body = resource(row) if context_of(request).surface == NATIVE else {"object": "segment", "id": str(row["id"]),
                                                                "name": row["name"]}
        return Reply(201, body)

    @route("GET", "/segments", access=FULL, native=True,
           op=Operation("List segments", responses={200: listing()}, query=PAGE))
    async def list(self, request, caller: Caller):
        found, has_more = await self._segments.list(caller.tenant.id, page_of(request.args, None))
        return envelope([list_item(row) for row in found], has_more)

    @route("GET", "/segments/<segment_id>", access=FULL, native=True,
           op=Operation("Retrieve a segment", responses={200: RESOURCE}))
    async def retrieve(self, request, caller: Caller, segment_id: str):
        return resource(await self._segments.get(caller.tenant.id, segment_id))

    @route("PATCH", "/segments/<segment_id>", access=FULL, native=True,
           op=Operation("Rename a segment", obj(("name",), name=STR), {200: RESOURCE}))
    async def rename(self, request, caller: Caller, segment_id: str):
        row = await self._segments.rename(caller.tenant.id, segment_id, read_json(request))
        return resource(row) if context_of(request).surface == NATIVE else {"object": "segment", "id": str(row["id"])}

    @route("DELETE", "/segments/<segment_id>", access=FULL, native=True,
           op=Operation("Delete a segment", responses={200: RESOURCE}, native_responses={204: None}))
    async def delete(self, request, caller: Caller, segment_id: str):
        gone = await self._segments.delete(caller.tenant.id, segment_id)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "segment", "id": str(gone), "deleted": True}

    @route("GET", "/segments/<segment_id>/contacts", access=FULL, native=True,
           op=Operation("List a segment's contacts", responses={200: listing()},
                        query=(*PAGE, ("q", STR))))
    async def contacts(self, request, caller: Caller, segment_id: str):
        found, has_more = await self._contacts.list(
            caller.tenant.id, page_of(request.args, None), arg(request, "q"), segment_id, SEGMENT)
        return envelope([contact_shapes.list_item(row) for row in found], has_more)


class AudiencesResource:
    def __init__(self, segments: Segments, contacts: Contacts):
        self._segments = segments
        self._contacts = contacts

    @route("POST", "/audiences", access=FULL,
           op=Operation("Create an audience", obj(("name",), name=STR), {201: RESOURCE}))
    async def create(self, request, caller: Caller):
        row = await self._segments.create(caller.tenant.id, read_json(request))
        return Reply(201, {"object": "audience", "id": str(row["id"]), "name": row["name"]})

    @route("GET", "/audiences", access=FULL, op=Operation("List audiences", responses={200: listing()}, query=PAGE))
    async def list(self, request, caller: Caller):
        found, has_more = await self._segments.list(caller.tenant.id, page_of(request.args, None))
        return envelope([list_item(row) for row in found], has_more)

    @route("GET", "/audiences/<audience_id>", access=FULL,
           op=Operation("Retrieve an audience", responses={200: RESOURCE}))
    async def retrieve(self, request, caller: Caller, audience_id: str):
        return resource(await self._segments.get(caller.tenant.id, audience_id, AUDIENCE), "audience")

    @route("DELETE", "/audiences/<audience_id>", access=FULL,
           op=Operation("Delete an audience", responses={200: RESOURCE}))
    async def delete(self, request, caller: Caller, audience_id: str):
        gone = await self._segments.delete(caller.tenant.id, audience_id, AUDIENCE)
        return {"object": "audience", "id": str(gone), "deleted": True}

    @route("GET", "/audiences/<audience_id>/contacts", access=FULL,
           op=Operation("List an audience's contacts", responses={200: listing()},
                        query=(*PAGE, ("q", STR))))
    async def contacts(self, request, caller: Caller, audience_id: str):
        found, has_more = await self._contacts.list(
            caller.tenant.id, page_of(request.args, None), arg(request, "q"), audience_id, AUDIENCE)
        return envelope([contact_shapes.list_item(row) for row in found], has_more)

    @route("POST", "/audiences/<audience_id>/contacts", access=FULL, multi_line=CONTACT_TEXTS,
           op=Operation("Create a contact in an audience", CONTACT, {201: RESOURCE}))
    async def create_contact(self, request, caller: Caller, audience_id: str):
        audience = await self._segments.get(caller.tenant.id, audience_id, AUDIENCE)
        contact_id = await self._contacts.create(caller.tenant.id, read_json(request), audience["id"])
        return Reply(201, {"object": AUDIENCE_CONTACT, "id": str(contact_id)})

    @route("GET", "/audiences/<audience_id>/contacts/<path:key>", access=FULL,
           op=Operation("Retrieve an audience's contact"))
    async def retrieve_contact(self, request, caller: Caller, audience_id: str, key: str):
        await self._segments.get(caller.tenant.id, audience_id, AUDIENCE)
        return contact_shapes.resource(await self._contacts.get(caller.tenant.id, key), AUDIENCE_CONTACT)

    @route("PATCH", "/audiences/<audience_id>/contacts/<path:key>", access=FULL, multi_line=CONTACT_TEXTS,
           op=Operation("Update an audience's contact", CONTACT, {200: RESOURCE}))
    async def update_contact(self, request, caller: Caller, audience_id: str, key: str):
        await self._segments.get(caller.tenant.id, audience_id, AUDIENCE)
        contact_id = await self._contacts.update(caller.tenant.id, key, read_json(request))
        return {"object": AUDIENCE_CONTACT, "id": str(contact_id)}

    @route("DELETE", "/audiences/<audience_id>/contacts/<path:key>", access=FULL,
           op=Operation("Delete an audience's contact", responses={200: RESOURCE}))
    async def delete_contact(self, request, caller: Caller, audience_id: str, key: str):
        await self._segments.get(caller.tenant.id, audience_id, AUDIENCE)
        row = await self._contacts.delete(caller.tenant.id, key)
        return {"object": AUDIENCE_CONTACT, "contact": str(row["id"]), "id": str(row["id"]), "deleted": True}
