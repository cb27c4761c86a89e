"""The two error envelopes and the mapping of domain failures onto HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable

from mailsvc.domain.errors import (
    AiFailed,
    AliasTaken,
    BrandFailed,
    BroadcastInProgress,
    BroadcastNotCancelable,
    BroadcastNotDraft,
    Conflict,
    DnsProviderFailed,
    DomainError,
    IdempotencyKeyInFlight,
    IdempotencyKeyInvalid,
    IdempotencyKeyReused,
    Invalid,
    InvalidAttachment,
    ItemRefused,
    LinkRefused,
    NotAllowed,
    NotCancelable,
    NotFound,
    NotReschedulable,
    PlanRequired,
    QuotaExceeded,
    RateLimited,
    SignInRefused,
    SpamCheckUnavailable,
)

MAIN = "main"
NATIVE = "native"
#: The dashboard's routes: the main envelope, and the native ``code`` beside ``name`` where it
#: says more (``domain_not_verified`` for a ``validation_error``), so that the page can name it.
DASHBOARD = "dashboard"

#: Native codes that differ from the main surface's names (docs/contract/native-api.md).
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
        payload: dict[str, object]
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
            if surface == DASHBOARD and self.native_code != self.name:
                payload["code"] = self.native_code
        return json.dumps(payload).encode("utf-8")


def not_found(kind: str) -> ApiError:
    return ApiError(404, "not_found", f"{kind} not found")


def validation(message: str, field: str | None = None) -> ApiError:
    return ApiError(422, "validation_error", message, field=field)


#: Each domain error class: its status, main ``name`` and native ``code`` (None: the name).
#: A name or code given as a function is read from the error's own data. A class that is not
#: listed answers as its nearest listed base class.
_TABLE: dict[type, tuple[int, str | Callable, str | Callable | None]] = {
    DomainError: (422, "validation_error", None),
    Invalid: (422, "validation_error", None),
    InvalidAttachment: (422, "invalid_attachment", None),
    NotFound: (404, "not_found", None),
    NotAllowed: (403, "validation_error", lambda e: e.reason),
    LinkRefused: (403, "validation_error", "forbidden"),
    Conflict: (409, "conflict", None),
    AliasTaken: (409, "alias_taken", None),
    PlanRequired: (403, "plan_required", None),
    NotReschedulable: (409, "not_reschedulable", None),
    NotCancelable: (409, "not_cancelable", None),
    BroadcastNotDraft: (409, "broadcast_not_draft", None),
    BroadcastNotCancelable: (409, "broadcast_not_cancelable", None),
    BroadcastInProgress: (409, "broadcast_in_progress", None),
    QuotaExceeded: (429, lambda e: f"{e.period}_quota_exceeded", "quota_exceeded"),
    RateLimited: (429, "rate_limit_exceeded", None),
    IdempotencyKeyInvalid: (400, "invalid_idempotency_key", None),
    IdempotencyKeyReused: (409, "invalid_idempotent_request", None),
    IdempotencyKeyInFlight: (409, "concurrent_idempotent_requests", None),
    DnsProviderFailed: (422, lambda e: e.code, None),
    SpamCheckUnavailable: (503, "spam_check_unavailable", None),
    SignInRefused: (401, "invalid_credentials", None),
    AiFailed: (502, lambda e: e.code, None),
    BrandFailed: (422, lambda e: e.code, None),
}


#: The AI helper's failures that are not the provider's (502): docs/contract/dashboard.md.
AI_STATUS = {"ai_disabled": 403, "ai_refused": 422, "ai_rate_limited": 429, "ai_quota_exceeded": 429}


def from_domain(error: DomainError) -> ApiError:
    """The HTTP failure of a domain error, by the table above."""
    if isinstance(error, ItemRefused):
        inner = from_domain(error.error)
        return ApiError(inner.status, inner.name, error.message, field=inner.field, headers=inner.headers,
                        native_code=inner.native_code)
    cls = next(c for c in type(error).__mro__ if c in _TABLE)
    status, name, code = _TABLE[cls]
    if isinstance(error, DnsProviderFailed) and error.unavailable:
        status = 502
    if isinstance(error, AiFailed):
        status = AI_STATUS.get(error.code, status)
    name = name(error) if callable(name) else name
    code = code(error) if callable(code) else code
    field = error.field if isinstance(error, Invalid) else "api_token" if isinstance(error, DnsProviderFailed) else None
    wait = error.retry_after if isinstance(error, RateLimited | AiFailed) else None
    headers = {"Retry-After": str(wait)} if wait else None
    return ApiError(status, name, error.message, field=field, headers=headers, native_code=code)


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
    """Which envelope a path answers with (docs/decisions.md, "Surfaces and envelopes")."""
    if path.startswith(b"/v1/") or path == b"/v1" or path.startswith(b"/admin/"):
        return NATIVE
    return MAIN
