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
from mailsvc.http.operation import BOOL, NULLABLE_STR, OBJECT, STR, Operation, obj
from mailsvc.http.router import FULL, PUBLIC, Reply, route

FILE_HEADERS = {"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"}
SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'; sandbox"


class BrandResource:
    def __init__(self, importer: BrandImporter, public_url: str = ""):
        self._importer = importer
        self._public_url = PublicUrl(public_url)

    @route("POST", "/brand/import", access=FULL,
           op=Operation(
               "Read a website's logos, colours and fonts into a proposed theme and brand (top plan)",
               obj(url=STR, apply=BOOL, ai=BOOL, language=STR),
               {200: obj(("object", "url", "logos", "colors", "fonts", "theme", "brand", "warnings", "applied"),
                         object={"const": "brand_import"}, url=STR, name=NULLABLE_STR, logos={"type": "array"},
                         colors={"type": "array"}, palette=OBJECT, fonts={"type": "array"}, socials={"type": "array"},
                         theme=OBJECT, brand=OBJECT, warnings={"type": "array", "items": STR}, applied=BOOL)},
               errors=(429,)))
    async def run(self, request, caller: Caller):
        return await self._importer.run(caller.tenant, read_json(request), self._public_url.of(request))

    @route("GET", "/files/brand/<name>", access=PUBLIC,
           op=Operation("A logo a brand import stored", responses={200: None}, content_type="image/png",
                        also=("image/jpeg", "image/gif", "image/webp", "image/svg+xml")))
    async def file(self, request, caller, name: str):
        found = await self._importer.file(name)
        if found is None:
            raise NotFound("File")
        content_type, body = found
        headers = dict(FILE_HEADERS)
        if content_type == "image/svg+xml":
            headers["Content-Security-Policy"] = SVG_POLICY
        return Reply(200, body, content_type.encode(), headers)
