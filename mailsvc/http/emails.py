"""Email endpoints: main ``/emails`` and native ``/v1/emails``."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from mailsvc.app import idempotency
from mailsvc.app.apikeys import Caller
from mailsvc.app.emails import Emails
from mailsvc.app.idempotency import Claim, IdempotencyKeys, Replay
from mailsvc.app.submit import AcceptedEmail, Acceptor, Budget, Prepared
from mailsvc.domain.email import submission_from_json
from mailsvc.domain.errors import DomainError, Invalid, ItemRefused, NotFound
from mailsvc.http import errors
from mailsvc.http.body import read_json, read_json_value
from mailsvc.http.errors import MAIN, NATIVE, ApiError
from mailsvc.http.pagination import envelope, page_of
from mailsvc.http.router import FULL, PUBLIC, SENDING, Reply, Router
from mailsvc.ids import parse_uuid
from mailsvc.store.database import Transaction

MAX_BATCH = 100


def _email_id(text: str):
    email_id = parse_uuid(text)
    if email_id is None:
        raise NotFound("Email")
    return email_id


def _as_api_error(error: Exception) -> ApiError:
    return errors.from_domain(error) if isinstance(error, DomainError) else error


def install(router: Router, acceptor: Acceptor, emails: Emails, keys: IdempotencyKeys, public_url: str = "") -> None:
    def base_url(request) -> str:
        """Where this service is reached: configured, else as the client addressed it."""
        if public_url:
            return public_url.rstrip("/")
        host = (request.getHeader(b"host") or b"localhost").decode("latin-1")
        return f"{'https' if request.isSecure() else 'http'}://{host}"

    async def idempotent(request, caller: Caller, surface: str, scope: str, body,
                         work: Callable[[Callable | None], Awaitable[Reply]]) -> Reply:
        """Run ``work`` at most once per Idempotency-Key; replay its outcome for 24 hours."""
        header = request.getHeader(b"idempotency-key")
        if header is None:
            return await work(None)
        key = header.decode("utf-8", "replace")
        claimed = await keys.claim(caller.tenant.id, key, idempotency.request_hash(scope, body))
        if isinstance(claimed, Replay):
            return Reply(claimed.status, claimed.body, headers={"Idempotent-Replayed": "true"})
        claim: Claim = claimed
        try:
            return await work(claim)
        except (ApiError, DomainError) as e:
            error = _as_api_error(e)
            if error.status >= 500:
                await keys.release(claim)
            else:
                await keys.complete(emails.db, claim, error.status, error.body(surface, request.request_id))
            raise
        except BaseException:
            await keys.release(claim)
            raise

    def finisher(claim: Claim | None, respond: Callable[[list[AcceptedEmail]], Reply]):
        if claim is None:
            return None

        async def finish(txn: Transaction, accepted: list[AcceptedEmail]) -> None:
            reply = respond(accepted)
            await keys.complete(txn, claim, reply.status, json.dumps(reply.body).encode())

        return finish

    async def send_one(request, caller: Caller, surface: str) -> Reply:
        body = read_json(request)

        def respond(accepted: list[AcceptedEmail]) -> Reply:
            if surface == NATIVE:
                return Reply(200, {"object": "email", "id": str(accepted[0].id), "last_event": accepted[0].last_event})
            return Reply(200, {"id": str(accepted[0].id)})

        async def work(claim: Claim | None) -> Reply:
            submission = submission_from_json(body, acceptor.now())
            prepared = await acceptor.prepare(caller, submission, links_base=base_url(request))
            accepted = await acceptor.store(caller, [prepared], "api", finisher(claim, respond))
            return respond(accepted)

        return await idempotent(request, caller, surface, f"send {surface}", body, work)

    async def send_batch(request, caller: Caller, surface: str) -> Reply:
        body = read_json_value(request, empty=[])
        permissive = (request.getHeader(b"x-batch-validation") or b"strict").lower() == b"permissive"
        if not isinstance(body, list):
            raise Invalid("body", "body must be an array of emails")
        if not body:
            raise Invalid("body", "body must contain at least one email")
        if len(body) > MAX_BATCH:
            raise Invalid("body", f"body: a batch holds at most {MAX_BATCH} emails")

        async def work(claim: Claim | None) -> Reply:
            acceptor.check_account(caller)
            prepared: list[Prepared] = []
            failures: list[dict] = []
            budget = Budget()  # broadcast-stream messages of the whole batch
            domains: dict = {}  # each sending domain looked up once per batch
            for index, item in enumerate(body):
                try:
                    if not isinstance(item, dict):
                        raise Invalid("body", "each email must be an object")
                    submission = submission_from_json(item, acceptor.now(), allow_attachments=False)
                    prepared.append(await acceptor.prepare(caller, submission, links_base=base_url(request),
                                                           budget=budget, domains=domains))
                except DomainError as e:
                    if not permissive:
                        raise ItemRefused(index, e) from None
                    failures.append({"index": index, "message": e.message})

            def respond(accepted: list[AcceptedEmail]) -> Reply:
                data = [{"id": str(a.id)} for a in accepted]
                return Reply(200, {"data": data, "errors": failures} if permissive else {"data": data})

            accepted = await acceptor.store(caller, prepared, "api", finisher(claim, respond)) if prepared else []
            if not prepared and claim is not None:
                reply = respond([])
                await keys.complete(emails.db, claim, reply.status, json.dumps(reply.body).encode())
            return respond(accepted)

        scope = f"batch {surface} {'permissive' if permissive else 'strict'}"
        return await idempotent(request, caller, surface, scope, body, work)

    @router.route("/emails", "POST", access=SENDING)
    async def send(request, caller: Caller):
        return await send_one(request, caller, MAIN)

    @router.route("/emails/batch", "POST", access=SENDING)
    async def batch(request, caller: Caller):
        return await send_batch(request, caller, MAIN)

    @router.route("/emails", "GET", access=FULL)
    async def list_emails(request, caller: Caller):
        rows, has_more = await emails.list(caller.tenant.id, page_of(request.args, 20))
        return envelope([emails.list_item(row) for row in rows], has_more)

    @router.route("/emails/<email_id>", "GET", access=SENDING)
    async def retrieve(request, caller: Caller, email_id: str):
        return emails.resource(await emails.get(caller.tenant.id, _email_id(email_id)))

    @router.route("/emails/<email_id>", "PATCH", access=FULL)
    async def reschedule(request, caller: Caller, email_id: str):
        body = read_json(request)
        if body.get("scheduled_at") in (None, ""):
            raise Invalid("scheduled_at", "scheduled_at is required")
        await emails.reschedule(caller.tenant.id, _email_id(email_id), body["scheduled_at"])
        return {"object": "email", "id": email_id}

    @router.route("/emails/<email_id>/cancel", "POST", access=FULL)
    async def cancel(request, caller: Caller, email_id: str):
        await emails.cancel(caller.tenant.id, _email_id(email_id))
        return {"object": "email", "id": email_id}

    @router.route("/emails/<email_id>/attachments", "GET", access=FULL)
    async def attachments(request, caller: Caller, email_id: str):
        page = page_of(request.args, None)
        rows, has_more = await emails.attachments(caller.tenant.id, _email_id(email_id), page)
        return envelope([emails.attachment_item(row, base_url(request)) for row in rows], has_more)

    @router.route("/emails/<email_id>/attachments/<attachment_id>", "GET", access=FULL)
    async def attachment(request, caller: Caller, email_id: str, attachment_id: str):
        attachment_uuid = parse_uuid(attachment_id)
        if attachment_uuid is None:
            raise NotFound("Attachment")
        row = await emails.attachment(caller.tenant.id, _email_id(email_id), attachment_uuid)
        return {"object": "attachment", **emails.attachment_item(row, base_url(request))}

    @router.route("/public/attachments/<token>", "GET", access=PUBLIC)
    async def download(request, caller, token: str):
        row = await emails.download(token)
        return Reply(
            200, bytes(row["content"]), row["content_type"].encode("latin-1"),
            {"Content-Disposition": emails.download_disposition(row)},
        )

    @router.route("/v1/emails", "POST", access=SENDING, surface=NATIVE)
    async def native_send(request, caller: Caller):
        return await send_one(request, caller, NATIVE)

    @router.route("/v1/emails/batch", "POST", access=SENDING, surface=NATIVE)
    async def native_batch(request, caller: Caller):
        return await send_batch(request, caller, NATIVE)

    @router.route("/v1/emails", "GET", access=FULL, surface=NATIVE)
    async def native_list(request, caller: Caller):
        rows, has_more = await emails.list(caller.tenant.id, page_of(request.args, 20))
        return envelope([emails.list_item(row) for row in rows], has_more)

    @router.route("/v1/emails/<email_id>", "GET", access=SENDING, surface=NATIVE)
    async def native_retrieve(request, caller: Caller, email_id: str):
        parsed = _email_id(email_id)
        row = await emails.get(caller.tenant.id, parsed)
        return {**emails.resource(row), "deliveries": await emails.deliveries(caller.tenant.id, parsed)}

    @router.route("/v1/emails/<email_id>/cancel", "POST", access=FULL, surface=NATIVE)
    async def native_cancel(request, caller: Caller, email_id: str):
        await emails.cancel(caller.tenant.id, _email_id(email_id))
        return {"object": "email", "id": email_id, "last_event": "canceled"}
