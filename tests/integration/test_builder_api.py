"""
The template builder's API on the real database: capabilities and the theme on every
plan, saving the theme on the top plan only, the live render, the social icons the daemon
serves, templates made from documents (re-rendered drafts when the theme changes, published
versions keeping their bytes), and the round trip: a templated send built from a document,
delivered by the real MTA to the test sink, whose parts are the renderer's output with the
variables filled.
"""

import copy
import email
import email.policy
from importlib import resources

import pytest_twisted as pt
import resend

from mailsvc.domain import placeholders
from mailsvc.domain.documents import document_of
from mailsvc.domain.emailhtml import BuilderRenderer, esc
from mailsvc.domain.themes import brand_of, theme_of
from tests.helpers.builder import EVERY_BLOCK
from tests.helpers.mta import DOMAIN
from tests.helpers.sdk import call
from tests.helpers.sending import sending_tenant

DOCUMENT = {"version": 1, "preview_text": "Your receipt", "blocks": [
    {"type": "heading", "text": "Thanks, {{{NAME}}}!"},
    {"type": "text", "runs": [{"text": "Order "}, {"text": "{{{ORDER}}}", "bold": True},
                              {"text": " is on its way."}]},
    {"type": "button", "label": "Track it", "href": "{{{TRACK_URL}}}"},
    {"type": "footer", "text": "Acme", "unsubscribe": True},
]}


async def _template(api, key, document=DOCUMENT, **fields):
    body = {"name": "Receipt", "builder": document, "variables": [
        {"key": "NAME", "type": "string"}, {"key": "ORDER", "type": "number"},
        {"key": "TRACK_URL", "type": "string", "fallback_value": "https://acme.example/track"}], **fields}
    code, created, _ = await api.json("POST", "/templates", key, json=body)
    assert code == 201, created
    return created["id"]


@pt.ensureDeferred
async def test_capabilities_and_theme_on_every_plan(api):
    _, free = await api.tenant()
    code, shown, _ = await api.json("GET", "/template-builder", free)
    assert code == 200
    assert shown == {
        "object": "template_builder", "plan": "free", "required_plan": "scale", "builder": False,
        "ai_available": False,
        "ai": {"enabled": False, "monthly_quota": 0, "used": 0, "remaining": 0, "per_minute": 0},
        "theme": shown["theme"], "theme_saved": False, "brand": shown["brand"], "brand_saved": False,
        "brand_import": False, "suggested_website": "",
    }
    assert shown["theme"]["content_width"] == 600 and shown["theme"]["font"] == "system"
    assert shown["brand"] == {"name": "", "website": "", "address": "", "socials": [], "imported_from": None}
    code, theme, _ = await api.json("GET", "/template-builder/theme", free)
    assert code == 200 and theme == {"object": "builder_theme", "theme": shown["theme"], "brand": shown["brand"],
                                     "theme_saved": False, "brand_saved": False}
    code, body, _ = await api.json("PATCH", "/template-builder/theme", free, json={"theme": {"radius": 4}})
    assert (code, body["name"]) == (403, "plan_required")
    code, body, _ = await api.json("POST", "/template-builder/render", free, json={"document": DOCUMENT})
    assert (code, body["name"]) == (403, "plan_required")

    _, top, _ = await sending_tenant(api, "mail.acme-shop.com", plan="scale")
    code, shown, _ = await api.json("GET", "/template-builder", top)
    assert (shown["plan"], shown["builder"], shown["suggested_website"]) == ("scale", True, "https://acme-shop.com")


@pt.ensureDeferred
async def test_saving_the_theme_and_brand(api):
    _, top = await api.tenant(plan="scale")
    body = {"theme": {"brand_color": "#FF5500", "content_width": 640, "logo_url": "https://acme.example/logo.png"},
            "brand": {"name": "Acme", "address": "1 Main St",
                      "socials": [{"network": "github", "url": "https://github.com/acme"}]}}
    code, saved, _ = await api.json("PATCH", "/template-builder/theme", top, json=body)
    assert code == 200 and set(saved) == {"object", "theme", "brand"} and saved["object"] == "builder_theme"
    assert (saved["theme"]["brand_color"], saved["theme"]["content_width"], saved["theme"]["radius"]) == (
        "#ff5500", 640, 6)
    assert saved["brand"]["socials"] == [{"network": "github", "url": "https://github.com/acme"}]
    # A later PATCH changes what it names; null goes back to the default; the brand is kept.
    code, saved, _ = await api.json("PATCH", "/template-builder/theme", top,
                                    json={"theme": {"radius": 12, "content_width": None}})
    assert code == 200 and (saved["theme"]["brand_color"], saved["theme"]["content_width"],
                            saved["theme"]["radius"]) == ("#ff5500", 600, 12)
    code, shown, _ = await api.json("GET", "/template-builder/theme", top)
    assert shown["theme_saved"] and shown["brand_saved"] and shown["brand"]["name"] == "Acme"
    for bad, path in [({}, "theme is required"), ({"theme": {"content_width": 900}}, "theme.content_width"),
                      ({"theme": {"radius": -1}}, "theme.radius"), ({"theme": {"font": "comic"}}, "theme.font"),
                      ({"theme": {}, "brand": {"socials": [{"network": "myspace", "url": "https://m.example"}]}},
                       "brand.socials[0].network"),
                      ({"theme": {}, "brand": {"socials": [{"network": "x", "url": "http://x.com/a"}]}},
                       "brand.socials[0].url")]:
        code, error, _ = await api.json("PATCH", "/template-builder/theme", top, json=bad)
        assert (code, error["name"]) == (422, "validation_error") and error["message"].startswith(path), error


@pt.ensureDeferred
async def test_the_live_render(api):
    _, top = await api.tenant(plan="scale")
    code, shown, _ = await api.json("POST", "/template-builder/render", top,
                                    json={"document": EVERY_BLOCK, "theme": {"content_width": 700}})
    assert code == 200 and set(shown) == {"object", "html", "text"}
    assert "max-width:700px" in shown["html"] and shown["text"].startswith("Hello {{{FIRST_NAME|there}}}")
    bad = copy.deepcopy(DOCUMENT)
    bad["blocks"][1]["style"] = {"font_size": 65}
    code, error, _ = await api.json("POST", "/template-builder/render", top, json={"document": bad})
    assert code == 422 and error["message"].startswith("document.blocks[1].style.font_size must be between 10")
    code, error, _ = await api.json("POST", "/template-builder/render", top, json={})
    assert code == 422 and error["message"].startswith("document is required")
    code, error, _ = await api.json("POST", "/template-builder/render", top,
                                    json={"document": DOCUMENT, "theme": {"radius": 40}})
    assert code == 422 and error["message"].startswith("theme.radius")


@pt.ensureDeferred
async def test_the_daemon_serves_the_social_icons(api):
    response, body = await api.request("GET", "/files/social/github.png")
    shipped = resources.files("mailsvc").joinpath("web", "social", "github.png").read_bytes()
    assert response.code == 200 and body == shipped and body.startswith(b"\x89PNG")
    assert response.headers.getRawHeaders(b"content-type") == [b"image/png"]
    response, _ = await api.request("GET", "/files/social/myspace.png")
    assert response.code == 404


@pt.ensureDeferred
async def test_drafts_follow_the_theme_and_published_versions_keep_their_bytes(api):
    _, top = await api.tenant(plan="scale")
    template_id = await _template(api, top)
    own_id = await _template(api, top, html="<p>My own {{{NAME}}}</p>")
    code, got, _ = await api.json("GET", f"/templates/{template_id}", top)
    assert "#2563eb" in got["html"] and got["text"].startswith("Thanks, {{{NAME}}}!")
    await api.json("POST", f"/templates/{template_id}/publish", top)
    published = await api.parts.db.fetchone(
        "SELECT v.html, v.text FROM templates t JOIN template_versions v ON v.id = t.current_version_id"
        " WHERE t.id = %s", (template_id,))
    assert published["html"] == got["html"]

    code, _, _ = await api.json("PATCH", "/template-builder/theme", top,
                                json={"theme": {"brand_color": "#b91c1c"}, "brand": {"address": "1 Main St"}})
    assert code == 200
    code, after, _ = await api.json("GET", f"/templates/{template_id}", top)
    assert "#b91c1c" in after["html"] and "#2563eb" not in after["html"] and "1 Main St" in after["text"]
    assert after["has_unpublished_versions"] is True
    still = await api.parts.db.fetchone("SELECT html FROM template_versions WHERE id = %s",
                                        (after["current_version_id"],))
    assert still["html"] == published["html"]
    code, own, _ = await api.json("GET", f"/templates/{own_id}", top)
    assert own["html"] == "<p>My own {{{NAME}}}</p>"
    # New documents render with the saved theme; a bad document is refused naming its path.
    code, _, _ = await api.json("PATCH", f"/templates/{template_id}", top, json={"builder": EVERY_BLOCK})
    code, got, _ = await api.json("GET", f"/templates/{template_id}", top)
    assert "#b91c1c" in got["html"] and "Nested two" in got["text"]
    bad = copy.deepcopy(DOCUMENT)
    bad["blocks"][0]["level"] = 7
    code, error, _ = await api.json("PATCH", f"/templates/{template_id}", top, json={"builder": bad})
    assert code == 422 and error["message"].startswith("builder.blocks[0].level must be between 1 and 3")


@pt.ensureDeferred
async def test_a_templated_send_from_a_document_is_delivered_as_rendered(mta):
    mta.route("example.net")
    _, key = await mta.sender(plan="scale")
    await _template(mta, key, alias="receipt", **{"from": f"Acme Shop <shop@{DOMAIN}>",
                                                 "subject": "Receipt {{{ORDER}}}"})
    await call(mta, key, resend.Templates.publish, "receipt")
    values = {"NAME": "Ann <& Bob>", "ORDER": 1042, "RESEND_UNSUBSCRIBE_URL": "https://acme.example/u?t=1&x=2"}
    await call(mta, key, resend.Emails.send, {"to": ["ann@example.net"], "template": {
        "id": "receipt", "variables": values}})

    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    parsed = email.message_from_bytes(received.data, policy=email.policy.default)
    html = parsed.get_body(("html",)).get_content()
    text = parsed.get_body(("plain",)).get_content()

    # The renderer's own output for the document (the account has no saved theme) ...
    public = "https://mta.mailsvc.test"  # where the node serves its files: no http.public_url, its mail hostname
    rendered_html, rendered_text = BuilderRenderer(public).render(document_of(DOCUMENT), theme_of(None),
                                                                  brand_of(None))
    # ... with the values filled: escaped in the html, raw in the text, fallbacks where none.
    filled = {**{k: str(v) for k, v in values.items()}, "TRACK_URL": "https://acme.example/track"}

    def value_of(key, fallback):
        return filled.get(key, fallback)

    # (MIME ends a part with a line break: the html gets one.)
    assert html.replace("\r\n", "\n").rstrip("\n") == placeholders.fill(rendered_html, value_of, esc).rstrip("\n")
    assert text.replace("\r\n", "\n") == placeholders.fill(rendered_text, value_of)
    assert "Thanks, Ann &lt;&amp; Bob&gt;!" in html and "Thanks, Ann <& Bob>!" in text
    assert 'href="https://acme.example/u?t=1&amp;x=2"' in html and parsed["Subject"] == "Receipt 1042"
