"""
Who the operator's audit log says acted (its ``actor`` field), by kind: an operator token (the
configured one, named ``operator``, or a named one: its name as it is), an operator signed in
to the console (``operator:<email>``), a dashboard user (``user:<id>``). The forms of the other
kinds are reserved, so that no token's name can pass for one of them.
"""

from __future__ import annotations

import uuid

import attrs

from mailsvc.domain.errors import Invalid

#: The kinds an audit entry's actor may be of, and the prefix each writes (a token: none).
ACTOR_PREFIXES = {"operator": "operator:", "user": "user:"}
ACTOR_KINDS = ("token", *ACTOR_PREFIXES)
#: Forms reserved beside those: for the service's own actions and API keys, should they act.
_RESERVED_PREFIXES = (*ACTOR_PREFIXES.values(), "api:", "system:")
_RESERVED_NAMES = ("system",)


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
    parsed = None
    if tenant_id is not None:
        try:
            parsed = uuid.UUID(tenant_id)
        except ValueError:
            raise Invalid("tenant_id", "tenant_id: a tenant's id (a UUID)") from None
    return AuditFilter(actor_kind, parsed)
