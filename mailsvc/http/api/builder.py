"""
The template builder: ``GET /template-builder`` (capabilities), ``GET`` and
``PATCH /template-builder/theme``, ``POST /template-builder/render`` (an extension: the live
preview of an unsaved document, docs/decisions.md), and the social icons its e-mails show,
served by the daemon itself at ``/files/social/<network>.png`` (no third-party image host).
"""

from __future__ import annotations

from importlib import resources

from mailsvc.app.apikeys import Caller
from mailsvc.app.builder import Builder
from mailsvc.domain.errors import NotFound
from mailsvc.domain.themes import NETWORKS
from mailsvc.http.body import read_json
from mailsvc.http.operation import OBJECT, STR, Operation, obj
from mailsvc.http.router import FULL, PUBLIC, TEMPLATE_BODY_LIMIT, Reply, route

PNG = b"image/png"
#: The icons change only with a release: cached a week by clients and proxies.
ICON_HEADERS = {"Cache-Control": "public, max-age=604800", "X-Content-Type-Options": "nosniff"}


def social_icons() -> dict[str, bytes]:
    """``<network>.png`` → the PNG shipped in the package (``mailsvc/web/social``)."""
    folder = resources.files("mailsvc").joinpath("web", "social")
    return {f"{n}.png": folder.joinpath(f"{n}.png").read_bytes() for n in NETWORKS}


class BuilderResource:
    def __init__(self, builder: Builder, icons: dict[str, bytes]):
        self._builder = builder
        self._icons = icons

    @route("GET", "/template-builder", access=FULL,
           op=Operation("What the plan allows of the builder",
                        responses={200: obj(("object", "plan", "builder"), object={"const": "template_builder"})}))
    async def capabilities(self, request, caller: Caller):
        return await self._builder.capabilities(caller.tenant)

    @route("GET", "/template-builder/theme", access=FULL,
           op=Operation("The account's theme and brand", responses={200: obj(("object", "theme", "brand"))}))
    async def theme(self, request, caller: Caller):
        return await self._builder.theme(caller.tenant)

    @route("PATCH", "/template-builder/theme", access=FULL, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("brand.address",),
           op=Operation("Save the theme and brand (top plan)", obj(("theme",), theme=OBJECT,
                                                                  brand=OBJECT),
                        {200: obj(("object", "theme", "brand"))}))
    async def save_theme(self, request, caller: Caller):
        return await self._builder.save_theme(caller.tenant, read_json(request))

    @route("POST", "/template-builder/render", access=FULL, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("document.**",),
           op=Operation("Render a builder document", obj(("document",), document=OBJECT),
                        {200: obj(("html", "text"), html=STR, text=STR)}))
    async def render(self, request, caller: Caller):
        return await self._builder.render(caller.tenant, read_json(request))

    @route("GET", "/files/social/<name>", access=PUBLIC,
           op=Operation("A social icon", responses={200: None}, content_type="image/png"))
    async def icon(self, request, caller, name: str):
        icon = self._icons.get(name)
        if icon is None:
            raise NotFound("File")
        return Reply(200, icon, PNG, dict(ICON_HEADERS))
