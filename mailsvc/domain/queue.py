"""
The operator's view of the delivery queue: the states a queued delivery can be in,
and the filter that the list and every action take (docs/operations.md "The queue").
"""

from __future__ import annotations

import uuid

import attrs

from mailsvc.domain.audit import reserved_actor
from mailsvc.domain.errors import Invalid

#: A queued delivery is ``held`` by the operator, ``in_flight`` under a claim's lease, ``due``
#: now, or ``deferred`` to a later attempt.
STATES = ("due", "deferred", "in_flight", "held")
#: The longest hold reason kept.
REASON_MAX = 500


@attrs.frozen
class QueueFilter:
    """Which queued deliveries: every condition given, combined with AND; or explicit ``ids``."""

    destination: str | None = None
    tenant_id: uuid.UUID | None = None
    state: str | None = None
    code: int | None = None
    min_age_seconds: int | None = None
    ids: tuple[uuid.UUID, ...] | None = None

    def as_json(self) -> dict:
        """The filter as the audit log keeps it (conditions given only)."""
        shown = {
            "destination": self.destination,
            "tenant_id": str(self.tenant_id) if self.tenant_id else None,
            "state": self.state, "code": self.code, "min_age_seconds": self.min_age_seconds,
            "ids": [str(i) for i in self.ids] if self.ids is not None else None,
        }
        return {k: v for k, v in shown.items() if v is not None}

    @property
    def standing(self) -> tuple[str, str] | None:
        """The standing hold a hold with this filter also makes: exactly a destination or a tenant."""
        given = self.as_json()
        if set(given) == {"destination"} and self.destination is not None:
            return ("destination", self.destination)
        if set(given) == {"tenant_id"}:
            return ("tenant", str(self.tenant_id))
        return None


def _int(fields: dict, name: str, low: int, high: int) -> int | None:
    value = fields.get(name)
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise Invalid(name, f"{name}: an integer from {low} to {high}")
    return value


def parse_filter(fields: dict, *, ids_allowed: bool) -> QueueFilter:
    """A filter from query arguments or an action's body (strings or JSON values)."""
    destination = fields.get("destination")
    if destination is not None:
        if not isinstance(destination, str) or not destination.strip() or len(destination) > 253 \
                or any(c.isspace() or c in "@/" or not c.isprintable() for c in destination.strip()):
            raise Invalid("destination", "destination: a recipient domain")
        destination = destination.strip().lower().rstrip(".")
    tenant_id = fields.get("tenant_id")
    if tenant_id is not None:
        try:
            tenant_id = uuid.UUID(tenant_id) if isinstance(tenant_id, str) and len(tenant_id) == 36 else None
        except ValueError:
            tenant_id = None
        if tenant_id is None:
            raise Invalid("tenant_id", "tenant_id: a tenant id")
    state = fields.get("state")
    if state is not None and state not in STATES:
        raise Invalid("state", "state: one of " + ", ".join(STATES))
    ids = fields.get("ids")
    if ids is not None:
        if not ids_allowed:
            raise Invalid("ids", "ids: not taken here")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 1000:
            raise Invalid("ids", "ids: a list of 1 to 1000 delivery ids")
        parsed = []
        for value in ids:
            try:
                parsed.append(uuid.UUID(value) if isinstance(value, str) and len(value) == 36 else None)
            except ValueError:
                parsed.append(None)
        if None in parsed:
            raise Invalid("ids", "ids: a list of delivery ids")
        ids = tuple(parsed)
    found = QueueFilter(destination, tenant_id, state, _int(fields, "code", 200, 599),
                        _int(fields, "min_age_seconds", 0, 10 * 365 * 86400), ids)
    if ids is not None and set(found.as_json()) != {"ids"}:
        raise Invalid("ids", "ids: either ids or filters, not both")
    return found


def action_filter(body: dict) -> QueueFilter:
    """An action's filter: an action on the whole queue must be asked for by a filter or ids."""
    found = parse_filter(body, ids_allowed=True)
    if not found.as_json():
        raise Invalid("ids", "ids: give the deliveries' ids or at least one filter")
    return found


def hold_reason(body: dict) -> str:
    reason = body.get("reason")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX:
        raise Invalid("reason", f"reason: why the deliveries are held (1 to {REASON_MAX} characters)")
    return reason.strip()


def token_name(body: dict) -> str:
    name = body.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100 \
            or not all(c.isprintable() for c in name):
        raise Invalid("name", "name: the token's name (1 to 100 printable characters)")
    if reserved_actor(name):
        raise Invalid("name", "name: names starting operator:, user:, api: or system: (and system) are how the"
                              " audit log writes other actors; choose another")
    return name.strip()
