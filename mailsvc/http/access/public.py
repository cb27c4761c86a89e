"""Routes anyone may call: no credentials; ``/public/*`` answers CORS for ``public.cors_origins``."""

from __future__ import annotations

from mailsvc.http.access.base import Access, Cors, ResponseRules

#: Where the routes a configured origin's pages may call live.
PUBLIC_PREFIX = "/public/"


class PublicAccess(Access):
    checks_credentials = False

    def __init__(self, kind: str, origins: frozenset[str]):
        self.kind = kind
        self._cors = Cors(origins, credentials=False, request_headers=b"Content-Type, X-Request-Id")

    def rules(self, path: str) -> ResponseRules:
        super().rules(path)  # refuses a dashboard path
        return ResponseRules(cors=self._cors if path.startswith(PUBLIC_PREFIX) else None)

    async def caller(self, request) -> None:
        return None
