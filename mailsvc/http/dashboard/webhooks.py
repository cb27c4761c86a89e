"""
The dashboard's "retry now" of a webhook delivery (docs/decisions.md, "Webhook attempts"): a
session's route only. No API-key route retries or replays a delivery, on the main surface or
the native one: a key that leaked could otherwise aim the service's requests at will.
"""

from __future__ import annotations

from mailsvc import timefmt
from mailsvc.app.apikeys import Caller
from mailsvc.app.webhooks import DeliveryRetries
from mailsvc.http.dashboard.auth import id_or_not_found, user_actor
from mailsvc.http.operation import INT, STR, UUID, Operation, obj
from mailsvc.http.router import SESSION, route


class WebhookRetriesResource:
    def __init__(self, retries: DeliveryRetries):
        self._retries = retries

    @route("POST", "/dashboard/webhooks/<webhook_id>/deliveries/<event_id>/retry", access=SESSION,
           op=Operation(
               "Retry a pending or failed delivery of an enabled webhook now (the same webhook-id and payload, a"
               " new timestamp and signature); capped per account (429 over the cap), audited",
               responses={200: obj(("object", "event_id", "state", "attempts", "due_at"),
                                   object={"const": "webhook_delivery"}, event_id=UUID, state=STR, attempts=INT,
                                   due_at=STR)}))
    async def retry(self, request, caller: Caller, webhook_id: str, event_id: str):
        """Make the delivery due now; 409 when its webhook is disabled, it was delivered, or an
        attempt of it is in flight; 429 over the account's cap."""
        hook, event = id_or_not_found(webhook_id, "Webhook"), id_or_not_found(event_id, "Webhook delivery")
        done = await self._retries.retry_now(caller.tenant.id, hook, event, user_actor(caller))
        return {"object": "webhook_delivery", "event_id": str(event), "state": done["state"],
                "attempts": done["attempts"], "due_at": timefmt.resource(done["due_at"])}
