"""The two error envelopes and the mapping of domain failures onto HTTP."""

from __future__ import annotations

import json

from mailsvc.domain.errors import Conflict, DomainError, Invalid, NotAllowed, NotFound

MAIN = "main"
NATIVE = "native"

#: Native codes that differ from the main surface's names (SPEC §Errors, "codes seen").
_NATIVE_CODES = {
    "rate_limit_exceeded": "rate_limited",
    "restricted_api_key": "insufficient_scope",
    "invalid_idempotent_request": "idempotency_key_reused",
    "invalid_api_key": "invalid_api_key",
    "missing_api_key": "missing_api_key",
}


class ApiError(Exception):
    """An HTTP failure with its status, main-surface ``name`` and message."""

    def __init__(
        self,
        status: int,
        name: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        native_code: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.name = name
        self.message = message
        self.field = field
        self.headers = headers or {}
        self.native_code = native_code or _NATIVE_CODES.get(name, name)

    def body(self, surface: str, request_id: str) -> bytes:
        if surface == NATIVE:
            payload = {
                "error": {
                    "code": self.native_code,
                    "message": self.message,
                    "field": self.field,
                    "request_id": request_id,
                }
            }
        else:
            payload = {"statusCode": self.status, "name": self.name, "message": self.message}
        return json.dumps(payload).encode("utf-8")


def not_found(kind: str) -> ApiError:
    return ApiError(404, "not_found", f"{kind} not found")


def validation(message: str, field: str | None = None) -> ApiError:
    return ApiError(422, "validation_error", message, field=field)


def from_domain(error: DomainError) -> ApiError:
    from mailsvc import idempotency
    from mailsvc.accept import QuotaExceeded
    from mailsvc.domain.email import InvalidAttachment
    from mailsvc.emails import LinkRefused, NotCancelable, NotReschedulable

    if isinstance(error, QuotaExceeded):
        return ApiError(429, f"{error.period}_quota_exceeded", error.message, native_code="quota_exceeded")
    if isinstance(error, InvalidAttachment):
        return ApiError(422, "invalid_attachment", error.message, field="attachments")
    if isinstance(error, idempotency.KeyInvalid):
        return ApiError(400, "invalid_idempotency_key", error.message)
    if isinstance(error, idempotency.KeyReused):
        return ApiError(409, "invalid_idempotent_request", error.message)
    if isinstance(error, idempotency.KeyInFlight):
        return ApiError(409, "concurrent_idempotent_requests", error.message)
    if isinstance(error, NotReschedulable):
        return ApiError(409, "not_reschedulable", error.message)
    if isinstance(error, NotCancelable):
        return ApiError(409, "not_cancelable", error.message)
    if isinstance(error, LinkRefused):
        return ApiError(403, "validation_error", error.message, native_code="forbidden")
    if isinstance(error, Invalid):
        return ApiError(422, "validation_error", error.message, field=error.field)
    if isinstance(error, NotFound):
        return not_found(error.kind)
    if isinstance(error, Conflict):
        return ApiError(409, "conflict", error.message)
    if isinstance(error, NotAllowed):
        return ApiError(403, "validation_error", error.message, native_code=error.reason)
    return ApiError(422, "validation_error", error.message)


ROUTE_NOT_FOUND = ApiError(404, "not_found", "The requested endpoint does not exist.")
METHOD_NOT_ALLOWED = ApiError(405, "method_not_allowed", "Method is not allowed for the requested route")
BODY_TOO_LARGE = validation("request body too large")
INTERNAL = ApiError(
    500,
    "application_error",
    "Internal server error. We are unable to process your request right now, please try again later.",
    native_code="internal_error",
)


def surface_of(path: bytes) -> str:
    """Which envelope a path answers with (DESIGN §Surfaces)."""
    if path.startswith(b"/v1/") or path == b"/v1" or path.startswith(b"/admin/"):
        return NATIVE
    return MAIN
