"""
Brand import: ``POST /brand/import`` and the logos it stored, served by every node at
``/files/brand/<id>.<ext>`` (cached for a year: a file never changes under its id; an SVG with a
Content-Security-Policy that runs nothing and loads nothing).
"""

from __future__ import annotations

from mailsvc.app.apikeys import Caller
from mailsvc.app.brand import BrandImporter
from mailsvc.domain.errors import NotFound
from mailsvc.http.baseurl import PublicUrl
from mailsvc.http.body import read_json
from mailsvc.http.router import FULL, PUBLIC, Reply, route

FILE_HEADERS = {"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"}
SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'; sandbox"


class BrandResource:
    def __init__(self, importer: BrandImporter, public_url: str = ""):
        self._importer = importer
        self._public_url = PublicUrl(public_url)

    @route("POST", "/brand/import", access=FULL)
    async def run(self, request, caller: Caller):
        return await self._importer.run(caller.tenant, read_json(request), self._public_url.of(request))

    @route("GET", "/files/brand/<name>", access=PUBLIC)
    async def file(self, request, caller, name: str):
        found = await self._importer.file(name)
        if found is None:
            raise NotFound("File")
        content_type, body = found
        headers = dict(FILE_HEADERS)
        if content_type == "image/svg+xml":
            headers["Content-Security-Policy"] = SVG_POLICY
        return Reply(200, body, content_type.encode(), headers)
