"""Emails: main ``/emails`` and native ``/v1/emails``, and the signed attachment downloads."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal

import attrs

from mailsvc.app import idempotency
from mailsvc.app.apikeys import Caller
from mailsvc.app.emails import Emails
from mailsvc.app.idempotency import IdempotencyKey, Replay
from mailsvc.app.submit import Item, Outcome, Submitter
from mailsvc.domain.email import submission_from_json
from mailsvc.domain.errors import DomainError, Invalid, NotFound
from mailsvc.domain.templates import send_from_json
from mailsvc.http import errors
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.body import read_json, read_json_value
from mailsvc.http.context import context_of
from mailsvc.http.errors import NATIVE
from mailsvc.http.operation import ID, OBJECT, PAGE, RESOURCE, STR, STR_OR_LIST, UUID, Operation, listing, obj
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, PUBLIC, SEND_BODY_LIMIT, SENDING, Reply, route
from mailsvc.ids import parse_uuid

SEND = obj(
    ("to",),
    **{"from": STR}, to=STR_OR_LIST, cc=STR_OR_LIST, bcc=STR_OR_LIST, reply_to=STR_OR_LIST,
    subject=STR, html=STR, text=STR, headers={"type": "object", "additionalProperties": STR},
    attachments={"type": "array", "items": obj(filename=STR, content=STR, path=STR, content_type=STR,
                                                content_id=STR)},
    tags={"type": "array", "items": obj(("name", "value"), name=STR, value=STR)},
    scheduled_at=STR, template=obj(("id",), id=STR, variables=OBJECT), topic_id=STR,
    stream={"enum": ["transactional", "broadcast"]},
)

MAX_BATCH = 100
#: The policy of a downloaded attachment: a document of a unique origin (``sandbox``: no script,
#: no form, nothing of the dashboard's cookies or storage) that may load nothing.
DOWNLOAD_CSP = "sandbox; default-src 'none'"
#: The fields of a send whose strings may hold line breaks (every other is one line).
SEND_TEXTS = ("html", "text", "attachments[].content", "template.variables.**")


def _email_id(text: str):
    email_id = parse_uuid(text)
    if email_id is None:
        raise NotFound("Email")
    return email_id


@attrs.frozen
class _Answers:
    """What a request with an Idempotency-Key is answered, and what the key replays."""

    respond: Callable[[Outcome], Reply]
    surface: str
    request_id: str

    def accepted(self, outcome: Outcome) -> tuple[int, bytes]:
        reply = self.respond(outcome)
        return reply.status, json.dumps(reply.body).encode()

    def refused(self, error: DomainError) -> tuple[int, bytes]:
        api_error = errors.from_domain(error)
        return api_error.status, api_error.body(self.surface, self.request_id)


def _idempotency_key(request, scope: str, body) -> IdempotencyKey | None:
    header = request.getHeader(b"idempotency-key")
    if header is None:
        return None
    return IdempotencyKey(header.decode("utf-8", "replace"), idempotency.request_hash(scope, body))


def _read(body: dict, now, allow_attachments: bool = True):
    """A send body read: a submission, or a templated send for the accept path to complete."""
    if body.get("template") is not None:
        return send_from_json(body, now, allow_attachments)
    return submission_from_json(body, now, allow_attachments=allow_attachments)


def _batch_item(item) -> Item:
    def submission(now):
        if not isinstance(item, dict):
            raise Invalid("body", "each email must be an object")
        return _read(item, now, allow_attachments=False)

    return Item(submission)


class EmailsResource:
    def __init__(self, submitter: Submitter, emails: Emails, public_url: str = ""):
        self._submitter = submitter
        self._emails = emails
        self._public_url = PublicUrl(public_url)

    async def _submitted(self, request, caller: Caller, scope: str, body, items: list[Item],
                         respond: Callable[[Outcome], Reply],
                         batch: Literal["strict", "permissive"] | None = None) -> Reply:
        result = await self._submitter.submit(
            caller, items, "api", _idempotency_key(request, scope, body),
            answers=_Answers(respond, context_of(request).surface, context_of(request).request_id), batch=batch,
            links_base=self._public_url.of(request),
        )
        if isinstance(result, Replay):
            return Reply(result.status, result.body, headers={"Idempotent-Replayed": "true"})
        return respond(result)

    @route("POST", "/emails", access=SENDING, native=True, body_limit=SEND_BODY_LIMIT, multi_line=SEND_TEXTS,
           op=Operation("Send an e-mail", SEND, {200: ID}, headers=(("Idempotency-Key", STR),), errors=(400, 409)))
    async def send(self, request, caller: Caller):
        body = read_json(request)

        def respond(outcome: Outcome) -> Reply:
            (accepted,) = outcome.accepted
            if context_of(request).surface == NATIVE:
                return Reply(200, {"object": "email", "id": str(accepted.id), "last_event": accepted.last_event})
            return Reply(200, {"id": str(accepted.id)})

        item = Item(lambda now: _read(body, now))
        return await self._submitted(request, caller, f"send {context_of(request).surface}", body, [item], respond)

    @route("POST", "/emails/batch", access=SENDING, native=True, body_limit=SEND_BODY_LIMIT,
           multi_line=tuple(f"[].{path}" for path in SEND_TEXTS),
           op=Operation("Send up to 100 e-mails", {"type": "array", "items": SEND},
                        {200: obj(("data",), data={"type": "array", "items": ID}, errors={"type": "array"})},
                        headers=(("Idempotency-Key", STR),
                                 ("x-batch-validation", {"enum": ["strict", "permissive"]})),
                        main_only_headers=("x-batch-validation",), errors=(400, 409)))
    async def send_batch(self, request, caller: Caller):
        body = read_json_value(request, empty=[])
        # The native batch is atomic (docs/contract/native-api.md): the main surface's header does not apply.
        permissive = context_of(request).surface != NATIVE and (
            (request.getHeader(b"x-batch-validation") or b"strict").lower() == b"permissive")
        if not isinstance(body, list):
            raise Invalid("body", "body must be an array of emails")
        if not body:
            raise Invalid("body", "body must contain at least one email")
        if len(body) > MAX_BATCH:
            raise Invalid("body", f"body: a batch holds at most {MAX_BATCH} emails")

        def respond(outcome: Outcome) -> Reply:
            data = [{"id": str(a.id)} for a in outcome.accepted]
            if not permissive:
                return Reply(200, {"data": data})
            failures = [{"index": index, "message": error.message} for index, error in outcome.refused]
            return Reply(200, {"data": data, "errors": failures})

        mode: Literal["strict", "permissive"] = "permissive" if permissive else "strict"
        scope = f"batch {context_of(request).surface} {mode}"
        items = [_batch_item(item) for item in body]
        return await self._submitted(request, caller, scope, body, items, respond, batch=mode)

    @route("GET", "/emails", access=FULL, native=True,
           op=Operation("List e-mails", responses={200: listing()}, query=PAGE))
    async def list(self, request, caller: Caller):
        rows, has_more = await self._emails.list(caller.tenant.id, page_of(request.args, 20))
        return envelope([self._emails.list_item(row) for row in rows], has_more)

    @route("GET", "/emails/<email_id>", access=SENDING, native=True,
           op=Operation("Retrieve an e-mail", responses={200: obj(("object", "id"), object={"const": "email"},
                                                                 id=UUID)}))
    async def retrieve(self, request, caller: Caller, email_id: str):
        parsed = _email_id(email_id)
        resource = self._emails.resource(await self._emails.get(caller.tenant.id, parsed, caller.domain_id))
        if context_of(request).surface == NATIVE:
            resource["deliveries"] = await self._emails.deliveries(caller.tenant.id, parsed)
        return resource

    @route("PATCH", "/emails/<email_id>", access=FULL,
           op=Operation("Reschedule an e-mail", obj(("scheduled_at",), scheduled_at=STR),
                        {200: RESOURCE}, errors=(409,)))
    async def reschedule(self, request, caller: Caller, email_id: str):
        body = read_json(request)
        if body.get("scheduled_at") in (None, ""):
            raise Invalid("scheduled_at", "scheduled_at is required")
        await self._emails.reschedule(caller.tenant.id, _email_id(email_id), body["scheduled_at"])
        return {"object": "email", "id": email_id}

    @route("POST", "/emails/<email_id>/cancel", access=FULL, native=True,
           op=Operation("Cancel a scheduled e-mail", responses={200: RESOURCE}, errors=(409,)))
    async def cancel(self, request, caller: Caller, email_id: str):
        await self._emails.cancel(caller.tenant.id, _email_id(email_id))
        if context_of(request).surface == NATIVE:
            return {"object": "email", "id": email_id, "last_event": "canceled"}
        return {"object": "email", "id": email_id}

    @route("GET", "/emails/<email_id>/attachments", access=FULL,
           op=Operation("List an e-mail's attachments", responses={200: listing()}, query=PAGE))
    async def attachments(self, request, caller: Caller, email_id: str):
        page = page_of(request.args, None)
        rows, has_more = await self._emails.attachments(caller.tenant.id, _email_id(email_id), page)
        return envelope([self._emails.attachment_item(row, self._public_url.of(request)) for row in rows], has_more)

    @route("GET", "/emails/<email_id>/attachments/<attachment_id>", access=FULL, op=Operation("Retrieve an attachment"))
    async def attachment(self, request, caller: Caller, email_id: str, attachment_id: str):
        attachment_uuid = parse_uuid(attachment_id)
        if attachment_uuid is None:
            raise NotFound("Attachment")
        row = await self._emails.attachment(caller.tenant.id, _email_id(email_id), attachment_uuid)
        return {"object": "attachment", **self._emails.attachment_item(row, self._public_url.of(request))}

    @route("GET", "/public/attachments/<token>", access=PUBLIC,
           op=Operation("Download an attachment through its signed link", responses={200: None},
                        content_type="application/octet-stream", errors=(403,)))
    async def download(self, request, caller, token: str):
        row = await self._emails.download(token)
        return Reply(
            200, bytes(row["content"]), row["content_type"].encode("latin-1"),
            # Served as a download only: never sniffed into something a browser runs, never cached;
            # and should a browser render it anyway (text/html, image/svg+xml), it does so in a
            # sandbox of its own origin that runs and loads nothing.
            {"Content-Disposition": self._emails.download_disposition(row), "X-Content-Type-Options": "nosniff",
             "Content-Security-Policy": DOWNLOAD_CSP, "Cache-Control": "no-store"},
        )
