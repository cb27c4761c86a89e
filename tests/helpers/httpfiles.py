"""
A plain-HTTP file server on 127.0.0.1 (a random port) for tests of attachment ``path`` URLs:
each path answers as told (a body, a redirect, an error), and every request is recorded.
"""

from __future__ import annotations

import attrs
import pytest_twisted
from twisted.internet import reactor, task
from twisted.web import resource
from twisted.web.server import Site


@attrs.frozen
class Served:
    code: int = 200
    body: bytes = b""
    headers: dict[str, str] = attrs.Factory(dict)


class Files(resource.Resource):
    isLeaf = True

    def __init__(self):
        super().__init__()
        self.routes: dict[str, Served] = {}
        self.requested: list[str] = []  # paths, in order of arrival

    def render_GET(self, request):  # noqa: N802 (Twisted's name)
        path = request.path.decode()
        self.requested.append(path)
        served = self.routes.get(path, Served(404, b"not found"))
        request.setResponseCode(served.code)
        for name, value in served.headers.items():
            request.setHeader(name, value)
        return served.body


class FileServer:
    def __init__(self):
        self.files = Files()
        site = Site(self.files)
        site.displayTracebacks = False
        site.noisy = False
        self.port = reactor.listenTCP(0, site, interface="127.0.0.1")
        self.base = f"http://127.0.0.1:{self.port.getHost().port}"

    def serve(self, path: str, body: bytes = b"", code: int = 200, **headers: str) -> str:
        """Answer GET ``path`` so; returns its URL."""
        self.files.routes[path] = Served(code, body, {k.replace("_", "-"): v for k, v in headers.items()})
        return self.base + path

    async def stop(self) -> None:
        await self.port.stopListening()
        await task.deferLater(reactor, 0, lambda: None)


@pytest_twisted.async_yield_fixture
async def file_server():
    server = FileServer()
    yield server
    await server.stop()
