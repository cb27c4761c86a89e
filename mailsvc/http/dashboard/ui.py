"""
The web UI: static files of ``mailsvc.web`` under ``/ui/`` (``GET /`` redirects there), with a
strict Content-Security-Policy (no inline script or style, nothing from another origin), and
the sandboxed preview of an e-mail's HTML. docs/decisions.md, "Web UI".
"""

from __future__ import annotations

from importlib import resources

from mailsvc.app.apikeys import Caller
from mailsvc.app.dashboard_reads import DashboardReads
from mailsvc.domain.errors import NotFound
from mailsvc.http.operation import Operation
from mailsvc.http.router import PUBLIC, SESSION_FRAME, Reply, route
from mailsvc.http.schemas import UI_TYPES
from mailsvc.ids import parse_uuid

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
#: An e-mail's HTML, shown in a sandboxed frame: its own inline styles and inline images only;
#: no script, no request anywhere (remote images would tell the sender it was opened).
PREVIEW_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox; frame-ancestors 'self'"
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".svg": b"image/svg+xml",
    ".png": b"image/png",
}


def _files() -> dict[str, bytes]:
    """Every file of the UI by its path under /ui/ (read once: they ship in the package)."""
    found: dict[str, bytes] = {}
    root = resources.files("mailsvc.web")

    def walk(node, prefix: str) -> None:
        for entry in node.iterdir():
            if entry.is_dir():
                walk(entry, prefix + entry.name + "/")
            elif any(entry.name.endswith(ext) for ext in TYPES):
                found[prefix + entry.name] = entry.read_bytes()

    walk(root, "")
    return found


class UiResource:
    def __init__(self, reads: DashboardReads):
        self._reads = reads
        self._files = _files()

    def _file(self, name: str) -> Reply:
        body = self._files.get(name)
        if body is None:
            raise NotFound("File")
        kind = TYPES[name[name.rindex("."):]]
        # The shell may be cached only after asking again: a new version shows at once.
        cache = "no-cache" if name in ("index.html", "console.html") else "max-age=300"
        return Reply(200, body, kind, {**HEADERS, "Cache-Control": cache})

    @route("GET", "/", access=PUBLIC, op=Operation("Redirects to the web UI (/ui/)", responses={302: None}))
    async def root(self, request, _):
        return Reply(302, None, headers={"Location": "/ui/"})

    @route("GET", "/ui", access=PUBLIC, op=Operation("Redirects to the web UI (/ui/)", responses={302: None}))
    async def ui_bare(self, request, _):
        return Reply(302, None, headers={"Location": "/ui/"})

    @route("GET", "/ui/", access=PUBLIC,
           op=Operation("The web UI's page", responses={200: None}, content_type="text/html"))
    async def index(self, request, _):
        return self._file("index.html")

    @route("GET", "/ui/<path:name>", access=PUBLIC,
           op=Operation("A static file of the web UI (script, style sheet, image)", responses={200: None},
                        content_type="text/html", also=UI_TYPES))
    async def static(self, request, _, name: str):
        return self._file(name)

    @route("GET", "/console", access=PUBLIC, op=Operation("Redirects to /console/", responses={302: None}))
    async def console_bare(self, request, _):
        return Reply(302, None, headers={"Location": "/console/"})

    @route("GET", "/console/", access=PUBLIC,
           op=Operation("The operator console's page", responses={200: None}, content_type="text/html"))
    async def console(self, request, _):
        """The operator console's page: its modules are under /ui/console/."""
        return self._file("console.html")

    @route("GET", "/dashboard/emails/<email_id>/html", access=SESSION_FRAME,
           op=Operation("An e-mail's HTML for a sandboxed preview", responses={200: None},
                        query=(("scheme", {"enum": ["dark"]}),), content_type="text/html"))
    async def preview(self, request, caller: Caller, email_id: str):
        """The HTML for the page's sandboxed frame (``?scheme=dark``: as a client in dark mode shows
        it). A frame's load, which cannot wait out a 429, is not counted against the account's rate."""
        dark = request.args.get(b"scheme") == [b"dark"]
        html = await self._reads.email_html(caller.tenant.id, parse_uuid(email_id), dark)
        return Reply(200, html.encode("utf-8"), b"text/html; charset=utf-8", {
            "Content-Security-Policy": PREVIEW_CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "SAMEORIGIN", "Cache-Control": "no-store",
        })
