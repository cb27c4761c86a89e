"""
Contacts: main ``/contacts`` (docs/decisions.md, "Contacts, segments and audiences") and native ``/v1/contacts``.
``{key}`` is a contact id or an address, raw or percent-encoded (``%2F`` included, hence the
``path`` converter). The native surface answers writes with the whole contact and a delete
with 204. ``/contacts/{key}/topics`` answers 404: topics are unavailable (docs/contract/README.md).
"""

from __future__ import annotations

from mailsvc.app import contacts as shapes
from mailsvc.app import segments as segment_shapes
from mailsvc.app.apikeys import Caller
from mailsvc.app.contacts import Contacts
from mailsvc.http.body import read_json
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE, ROUTE_NOT_FOUND
from mailsvc.http.operation import OBJECT, PAGE, RESOURCE, STR, UUID, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, Reply, route
from mailsvc.http.schemas import CONTACT

#: The fields of a contact whose strings may hold line breaks (a CSV cell may hold one).
CONTACT_TEXTS = ("properties.*",)


def arg(request, name: str) -> str | None:
    values = request.args.get(name.encode())
    return values[0].decode("utf-8", "replace") if values else None


class ContactsResource:
    def __init__(self, contacts: Contacts):
        self._contacts = contacts

    async def _written(self, request, caller: Caller, contact_id, status: int = 200,
                       object_name: str = "contact") -> Reply:
        if context_of(request).surface == NATIVE:
            row = await self._contacts.get(caller.tenant.id, str(contact_id))
            return Reply(status, shapes.resource(row, object_name))
        return Reply(status, {"object": object_name, "id": str(contact_id)})

    @route("POST", "/contacts", access=FULL, native=True, multi_line=CONTACT_TEXTS,
           op=Operation("Create or update a contact (by address)", CONTACT, {201: RESOURCE}))
    async def create(self, request, caller: Caller):
        contact_id = await self._contacts.create(caller.tenant.id, read_json(request))
        return await self._written(request, caller, contact_id, 201)

    @route("POST", "/contacts/batch", access=FULL, native=True,
           multi_line=tuple(f"contacts[].{path}" for path in CONTACT_TEXTS),
           op=Operation(
               "Create or update up to 1,000 contacts",
               obj(("contacts",), contacts={"type": "array", "items": CONTACT}, segment_id=UUID),
               {200: obj(("data", "errors"), data={"type": "array"}, errors={"type": "array"})}))
    async def batch(self, request, caller: Caller):
        data, errors = await self._contacts.batch(caller.tenant.id, read_json(request))
        return {"object": "list", "data": data, "errors": errors}

    @route("GET", "/contacts", access=FULL, native=True,
           op=Operation("List contacts", responses={200: listing()},
                        query=(*PAGE, ("q", STR), ("segment_id", UUID), ("audience_id", UUID))))
    async def list(self, request, caller: Caller):
        segment_id = arg(request, "segment_id") or arg(request, "audience_id")
        found, has_more = await self._contacts.list(
            caller.tenant.id, page_of(request.args, None), arg(request, "q"), segment_id)
        return envelope([shapes.list_item(row) for row in found], has_more)

    @route("GET", "/contacts/<path:key>", access=FULL, native=True, op=Operation("Retrieve a contact (id or address)"))
    async def retrieve(self, request, caller: Caller, key: str):
        return shapes.resource(await self._contacts.get(caller.tenant.id, key))

    @route("PATCH", "/contacts/<path:key>", access=FULL, native=True, multi_line=CONTACT_TEXTS,
           op=Operation("Update a contact", CONTACT, {200: RESOURCE}))
    async def update(self, request, caller: Caller, key: str):
        contact_id = await self._contacts.update(caller.tenant.id, key, read_json(request))
        return await self._written(request, caller, contact_id)

    @route("DELETE", "/contacts/<path:key>", access=FULL, native=True,
           op=Operation("Delete a contact", responses={200: RESOURCE}, native_responses={204: None}))
    async def delete(self, request, caller: Caller, key: str):
        row = await self._contacts.delete(caller.tenant.id, key)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        return {"object": "contact", "contact": str(row["id"]), "id": str(row["id"]), "deleted": True}

    # Membership

    @route("GET", "/contacts/<path:key>/segments", access=FULL, native=True,
           op=Operation("List a contact's segments", responses={200: listing()}, query=PAGE))
    async def segments(self, request, caller: Caller, key: str):
        found, has_more = await self._contacts.segments(caller.tenant.id, key, page_of(request.args, None))
        return envelope([segment_shapes.list_item(row) for row in found], has_more)

    @route("POST", "/contacts/<path:key>/segments/<segment_id>", access=FULL, native=True,
           op=Operation("Add a contact to a segment", responses={200: OBJECT, 201: OBJECT}))
    async def join(self, request, caller: Caller, key: str, segment_id: str):
        contact_id, parsed = await self._contacts.join(caller.tenant.id, key, segment_id)
        # The docs and SDKs read ``id`` (the segment's); OAS the other three.
        return {"object": "contact_segment", "id": str(parsed), "contact_id": str(contact_id),
                "segment_id": str(parsed)}

    @route("DELETE", "/contacts/<path:key>/segments/<segment_id>", access=FULL, native=True,
           op=Operation("Remove a contact from a segment", responses={200: OBJECT},
                        native_responses={204: None}))
    async def leave(self, request, caller: Caller, key: str, segment_id: str):
        contact_id, parsed = await self._contacts.leave(caller.tenant.id, key, segment_id)
        if context_of(request).surface == NATIVE:
            return Reply(204)
        # The union of the docs' shape (``id`` the contact's, camelCase ``audienceId``) and OAS's.
        return {"object": "contact_segment", "id": str(contact_id), "audienceId": str(parsed),
                "contact_id": str(contact_id), "segment_id": str(parsed), "deleted": True}

    # Topics are unavailable: their paths do not exist (whatever their body).

    @route("GET", "/contacts/<path:key>/topics", access=FULL,
           op=Operation("A contact's topics: unavailable, always 404", responses={}))
    async def topics(self, request, caller: Caller, key: str):
        raise ROUTE_NOT_FOUND

    @route("PATCH", "/contacts/<path:key>/topics", access=FULL,
           op=Operation("A contact's topics: unavailable, always 404", responses={}))
    async def update_topics(self, request, caller: Caller, key: str):
        raise ROUTE_NOT_FOUND
