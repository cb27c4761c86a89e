"""
Cloudflare's v4 API, as far as a domain set-up needs it: check the token, find the zone,
list the records at a name (paged), create and update records.

The token lives only in a ``Session`` for the length of one request: it is never stored,
logged or put into an error message.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

from mailsvc.domain.dnsplan import Existing, unquote_txt

log = Logger()

#: Seconds one API call may take.
CALL_TIMEOUT = 15
PER_PAGE = 100
MAX_PAGES = 50


class ProviderError(Exception):
    """A set-up failure with its error name (``dnsprov_*``, docs/contract/main-api.md)."""

    name = "dnsprov_unavailable"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidToken(ProviderError):
    name = "dnsprov_invalid_token"


class MissingPermission(ProviderError):
    name = "dnsprov_missing_permission"


class ZoneNotFound(ProviderError):
    name = "dnsprov_zone_not_found"


class Unavailable(ProviderError):
    name = "dnsprov_unavailable"


class Cloudflare:
    """``http`` is a treq ``HTTPClient``; ``reactor`` times the calls out."""

    def __init__(self, reactor, http, base_url: str):
        self._reactor = reactor
        self._http = http
        self._base_url = base_url.rstrip("/")

    def session(self, token: str) -> Session:
        return Session(self._reactor, self._http, self._base_url, token)


class Session:
    def __init__(self, reactor, http, base_url: str, token: str):
        self._reactor = reactor
        self._http = http
        self._base_url = base_url
        self._token = token

    async def _call(self, method: str, path: str, params: dict | None = None, body: dict | None = None) -> dict:
        try:
            response = await self._http.request(
                method, self._base_url + path, params=params, json=body,
                headers={"Authorization": f"Bearer {self._token}", "Accept": "application/json"},
                timeout=CALL_TIMEOUT, reactor=self._reactor,
            )
            status = response.code
            payload = await response.json()
        except Exception as e:  # connection refused, timeout, reset, not JSON: all "unreachable"
            log.warn("Cloudflare {method} {path}: {error}", method=method, path=path, error=type(e).__name__)
            raise Unavailable("The DNS provider could not be reached; try again later.") from None
        if 200 <= status < 300 and isinstance(payload, dict) and payload.get("success"):
            return payload
        detail = _first_error(payload)
        if status == 401:
            raise InvalidToken("api_token: the DNS provider did not accept this API token")
        if status == 403:
            raise MissingPermission(
                "api_token: the API token lacks a permission (it needs Zone Read and DNS Edit)"
                + (f": {detail}" if detail else "")
            )
        log.warn("Cloudflare {method} {path} answered {status}: {detail}",
                 method=method, path=path, status=status, detail=detail)
        raise Unavailable(
            f"The DNS provider refused the request (HTTP {status}{': ' + detail if detail else ''})."
        )

    async def verify_token(self) -> None:
        payload = await self._call("GET", "/user/tokens/verify")
        if (payload.get("result") or {}).get("status") != "active":
            raise InvalidToken("api_token: the API token is not active")

    async def find_zone(self, candidates: list[str]) -> tuple[str, str]:
        """(zone id, zone name) of the most specific candidate that is a zone of the account."""
        for name in candidates:
            payload = await self._call("GET", "/zones", params={"name": name, "per_page": "50"})
            for zone in payload.get("result") or []:
                if zone.get("name", "").lower() == name:
                    return zone["id"], zone["name"]
        raise ZoneNotFound(f"api_token: no zone for {candidates[-1]} is reachable with this API token")

    async def records(self, zone_id: str, name: str) -> list[Existing]:
        found: list[Existing] = []
        page = 1
        while page <= MAX_PAGES:
            payload = await self._call(
                "GET", f"/zones/{zone_id}/dns_records",
                params={"name": name, "per_page": str(PER_PAGE), "page": str(page)},
            )
            found += [_existing(r) for r in payload.get("result") or []]
            info = payload.get("result_info") or {}
            if page >= int(info.get("total_pages") or 1):
                break
            page += 1
        return found

    async def create(self, zone_id: str, type: str, name: str, content: str, priority: int | None) -> None:
        body: dict[str, Any] = {"type": type, "name": name, "content": content, "ttl": 1}
        if priority is not None:
            body["priority"] = priority
        await self._call("POST", f"/zones/{zone_id}/dns_records", body=body)

    async def update(self, zone_id: str, record_id: str, content: str) -> None:
        await self._call("PATCH", f"/zones/{zone_id}/dns_records/{record_id}", body={"content": content})


def _existing(record: dict) -> Existing:
    content = str(record.get("content", ""))
    if record.get("type") == "TXT":
        content = unquote_txt(content)
    return Existing(
        str(record.get("id")), str(record.get("type")), str(record.get("name", "")).lower(),
        content, record.get("priority"),
    )


def _first_error(payload: Any) -> str:
    errors = payload.get("errors") if isinstance(payload, dict) else None
    if errors and isinstance(errors[0], dict):
        return f"{errors[0].get('code')} {errors[0].get('message', '')}".strip()
    return ""
