"""``GET /healthz``: for a load balancer or a supervisor, no credentials; 503 while the database
does not answer."""

from __future__ import annotations

from mailsvc.app.health import Health
from mailsvc.http.operation import STR, Operation, obj
from mailsvc.http.router import PUBLIC, Reply, route


class HealthResource:
    def __init__(self, health: Health):
        self._health = health

    @route("GET", "/healthz", access=PUBLIC,
           op=Operation("Health: the database answers", responses={200: obj(("status",), status=STR)}, errors=(503,)))
    async def healthz(self, request, _):
        if not await self._health.database_answers():
            return Reply(503, {"status": "unavailable", "database": "unreachable"})
        return {"status": "ok"}
