"""Tenants (accounts): plans, statuses and the operator's updatable fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from mailsvc.domain.errors import Invalid

STATUSES = ("active", "paused", "suspended")
DELIVERY_MODES = ("direct", "relay", "capture")


@attrs.frozen
class Plan:
    name: str
    monthly_quota: int
    daily_quota: int
    max_domains: int | None  # None: unlimited
    send_rate_per_sec: int


#: The plans (docs/contract/README.md, "Plans"). The daily caps of paid plans are a tenth of
#: the monthly volume, so a month's mail cannot be sent in three days by a compromised key.
PLANS: dict[str, Plan] = {
    "free": Plan("free", 10_000, 500, 1, 2),
    "starter": Plan("starter", 50_000, 5_000, 3, 10),
    "growth": Plan("growth", 250_000, 25_000, 10, 25),
    "scale": Plan("scale", 1_000_000, 100_000, None, 50),
}

DEFAULT_API_RATE_PER_SEC = 10
NAME_MAX = 200


@attrs.frozen
class Tenant:
    id: Any
    name: str
    plan: str
    sandbox: bool
    status: str
    status_reason: str | None
    daily_quota: int
    monthly_quota: int
    max_domains: int | None
    send_rate_per_sec: int
    api_rate_per_sec: int
    delivery_mode: str
    created_at: datetime
    updated_at: datetime

    @property
    def can_send(self) -> bool:
        return self.status == "active"


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("name", "name must be a non-empty string")
    if len(value) > NAME_MAX:
        raise Invalid("name", f"name must be at most {NAME_MAX} characters")
    return value.strip()


def _choice(field: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise Invalid(field, f"{field} must be one of: {', '.join(allowed)}")
    return value


def _count(field: str, value: Any, low: int, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise Invalid(field, f"{field} must be an integer of at least {low}")
    if value > 2**31 - 1:
        raise Invalid(field, f"{field} is too large")
    return value


def new_tenant_fields(body: dict, api_rate_per_sec: int = DEFAULT_API_RATE_PER_SEC) -> dict:
    """Validated columns of a new tenant: the sandbox on Free unless a plan is named."""
    name = _name(body.get("name"))
    plan = PLANS[_choice("plan", body.get("plan", "free"), tuple(PLANS))]
    return {
        "name": name,
        "plan": plan.name,
        "sandbox": plan.name == "free",
        "status": "active",
        "status_reason": None,
        "daily_quota": plan.daily_quota,
        "monthly_quota": plan.monthly_quota,
        "max_domains": plan.max_domains,
        "send_rate_per_sec": plan.send_rate_per_sec,
        "api_rate_per_sec": api_rate_per_sec,
        "delivery_mode": "direct",
    }


def tenant_changes(body: dict) -> dict:
    """
    Validated column changes for an operator PATCH. A new plan brings that plan's quota,
    domain limit and pace, unless the same request sets them explicitly; leaving Free ends
    the sandbox.
    """
    changes: dict[str, Any] = {}
    if "plan" in body:
        plan = PLANS[_choice("plan", body["plan"], tuple(PLANS))]
        changes.update(
            plan=plan.name,
            sandbox=plan.name == "free",
            daily_quota=plan.daily_quota,
            monthly_quota=plan.monthly_quota,
            max_domains=plan.max_domains,
            send_rate_per_sec=plan.send_rate_per_sec,
        )
    if "name" in body:
        changes["name"] = _name(body["name"])
    if "status" in body:
        changes["status"] = _choice("status", body["status"], STATUSES)
        if body["status"] == "active" and "status_reason" not in body:
            changes["status_reason"] = None
    if "status_reason" in body:
        reason = body["status_reason"]
        if reason is not None and (not isinstance(reason, str) or len(reason) > 1000):
            raise Invalid("status_reason", "status_reason must be a string of at most 1000 characters")
        changes["status_reason"] = reason
    if "delivery_mode" in body:
        changes["delivery_mode"] = _choice("delivery_mode", body["delivery_mode"], DELIVERY_MODES)
    for field in ("daily_quota", "monthly_quota"):
        if field in body:
            changes[field] = _count(field, body[field], 0)
    for field in ("send_rate_per_sec", "api_rate_per_sec"):
        if field in body:
            changes[field] = _count(field, body[field], 1)
    if "max_domains" in body:
        changes["max_domains"] = _count("max_domains", body["max_domains"], 0, nullable=True)
    return changes
