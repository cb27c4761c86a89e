"""
Who the operator's audit log says acted (its ``actor`` field), by kind: an operator token (the
configured one, named ``operator``, or a named one: its name as it is), an operator signed in
to the console (``operator:<email>``), a dashboard user (``user:<id>``), an API key
(``api:<id>``), the service itself (``system``: a domain's check). The forms of the other kinds
are reserved, so that no token's name can pass for one of them.

An account's activity (the dashboard's Activity page) is the entries about it (the ``tenant_id``
of their detail) and its users' sign-ins (their sessions), filtered by kind of action and by member.
"""

from __future__ import annotations

import uuid

import attrs

from mailsvc.domain.errors import Invalid

#: The kinds an audit entry's actor may be of, and the prefix each writes (a token: none).
ACTOR_PREFIXES = {"operator": "operator:", "user": "user:"}
ACTOR_KINDS = ("token", *ACTOR_PREFIXES)
#: An API key acting over the API (``api:<key id>``) and the service itself.
API_ACTOR_PREFIX = "api:"
SYSTEM_ACTOR = "system"
#: Forms reserved beside those: for the service's own actions and API keys.
_RESERVED_PREFIXES = (*ACTOR_PREFIXES.values(), API_ACTOR_PREFIX, "system:")
_RESERVED_NAMES = (SYSTEM_ACTOR,)
#: The actors no token is: what ``actor_kind=token`` leaves out.
NOT_TOKEN_PREFIXES = (*ACTOR_PREFIXES.values(), API_ACTOR_PREFIX)

#: The kinds of action an account's activity is filtered by: the prefixes of their actions (a
#: sign-in is read from the sessions, not the log).
ACTIVITY_KINDS = {
    "api_keys": ("api_key.",), "domains": ("domain.",), "members": ("user.",), "sign_ins": (),
    "webhooks": ("webhook",), "account": ("tenant.",),
}
#: A sign-in's action, as the activity shows it.
SIGN_IN = "user.sign_in"


def reserved_actor(name: str) -> bool:
    """Whether ``name`` is (in any case) a form another kind of actor writes."""
    folded = name.strip().casefold()
    return folded in _RESERVED_NAMES or folded.startswith(_RESERVED_PREFIXES)


@attrs.frozen
class AuditFilter:
    """The entries of one kind of actor, and/or about one tenant (None: any)."""

    actor_kind: str | None = None
    tenant_id: uuid.UUID | None = None


def audit_filter(actor_kind: str | None, tenant_id: str | None) -> AuditFilter:
    if actor_kind is not None and actor_kind not in ACTOR_KINDS:
        raise Invalid("actor_kind", "actor_kind: one of " + ", ".join(ACTOR_KINDS))
    return AuditFilter(actor_kind, _optional_uuid("tenant_id", tenant_id, "a tenant's id"))


def _optional_uuid(field: str, text: str | None, meaning: str) -> uuid.UUID | None:
    """``text`` as a UUID (None stays None); anything else is refused as ``field``, saying its ``meaning``."""
    if text is None:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        raise Invalid(field, f"{field}: {meaning} (a UUID)") from None


@attrs.frozen
class ActivityFilter:
    """An account's activity of one kind (``ACTIVITY_KINDS``) and/or by one member (None: any)."""

    kind: str | None = None
    member: uuid.UUID | None = None

    @property
    def audited(self) -> bool:
        """Whether entries of the audit log are in it (all but the sign-ins)."""
        return self.kind != "sign_ins"

    @property
    def sign_ins(self) -> bool:
        return self.kind in (None, "sign_ins")

    @property
    def prefixes(self) -> tuple[str, ...]:
        return ACTIVITY_KINDS[self.kind] if self.kind is not None else ()


def activity_filter(kind: str | None, member: str | None) -> ActivityFilter:
    if kind is not None and kind not in ACTIVITY_KINDS:
        raise Invalid("kind", "kind: one of " + ", ".join(ACTIVITY_KINDS))
    return ActivityFilter(kind, _optional_uuid("member", member, "a user's id"))


def activity_actor(actor: str, email: str | None, key_name: str | None) -> dict:
    """Who an activity entry says acted, as the dashboard shows them: a user (their address now,
    or the one the entry kept: ``removed`` once they are gone), an API key (its name; None once
    revoked), an operator (a token's name, or a console operator's address), the service."""
    user, api = ACTOR_PREFIXES["user"], API_ACTOR_PREFIX
    if actor.startswith(user):
        return {"type": "user", "id": actor[len(user):], "email": email, "removed": email is None}
    if actor.startswith(api):
        return {"type": "api_key", "id": actor[len(api):], "name": key_name, "removed": key_name is None}
    if actor == SYSTEM_ACTOR:
        return {"type": "system"}
    operator = ACTOR_PREFIXES["operator"]
    return {"type": "operator", "name": actor[len(operator):] if actor.startswith(operator) else actor}
