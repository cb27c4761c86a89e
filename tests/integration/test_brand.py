"""
Brand import against a fixture website on loopback (tests/helpers/fixture_site.py): with
``security.allow_private_targets`` (which lifts the address rule only; the site's port is let
through by the test-only ``security.test_extra_ports``), the result is checked field by field,
the logos are served from /files/brand/..., ``apply`` saves, the AI pick (the fake provider)
and its absence; the limit of 6 a minute. The SSRF matrix is in tests/integration/test_brand_ssrf.py.
"""

import json

import attrs
import pytest
import pytest_twisted as pt

from mailsvc.config import load
from mailsvc.domain.brandpage import MAX_DEPTH, read_page
from mailsvc.domain.errors import BrandFailed
from mailsvc.domain.themes import contrast
from tests.helpers.fake_ai import Turn, fake_ai  # noqa: F401 (a fixture)
from tests.helpers.fixture_site import ACCENT, BUTTON, PRIMARY, FixtureSite


@pt.async_yield_fixture
async def site():
    running = FixtureSite()
    yield running
    await running.stop()


@pytest.fixture
def config(site, dns_server, fake_ai):  # noqa: F811
    dns_server.a("www.acme-rockets.com", "127.0.0.1")
    base = dns_server.configure(load(None, environ={}))
    return attrs.evolve(
        base,
        security=attrs.evolve(base.security, allow_private_targets=True, test_extra_ports=(str(site.number),)),
        ai=attrs.evolve(base.ai, provider="openai-compatible", base_url=fake_ai.base_url, model="fake-model",
                        timeout=5, monthly_quota=3),
    )


@pt.ensureDeferred
async def test_import_reads_the_fixture_site(api, site, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    url = f"http://www.acme-rockets.com:{site.number}/"
    code, result, _ = await api.json("POST", "/brand/import", key, json={"url": url, "ai": False})
    assert code == 200, result
    assert result["object"] == "brand_import"
    assert result["url"] == f"http://www.acme-rockets.com:{site.number}/home"  # after the redirect
    assert result["name"] == "Acme Rockets"
    assert result["applied"] is False
    assert result["ai"] == {"used": False, "skipped": "not requested (ai: false)"}

    logos = result["logos"]
    assert 1 <= len(logos) <= 5
    assert [x["score"] for x in logos] == sorted((x["score"] for x in logos), reverse=True)
    by_source = {x["source"]: x for x in logos}
    best = logos[0]
    assert best["source"] == "header" and best["source_url"].endswith("/logo.png")
    assert (best["content_type"], best["width"], best["height"]) == ("image/png", 240, 60)
    assert best["transparent"] and best["on_light"] and best["email_safe"]
    assert best["colors"][0] == PRIMARY
    assert best["url"].startswith(api.url + "/files/brand/") and best["url"].endswith(".png")
    svg = by_source.get("json_ld") or by_source.get("inline_svg")
    assert svg is not None and svg["content_type"] == "image/svg+xml" and svg["email_safe"] is False
    # Every source was read (the five best are listed; the rest were measured too).
    fetched = set(site.seen)
    assert {"/", "/home", "/site.css", "/site.webmanifest", "/logo.png", "/logo-white.png", "/logo.svg",
            "/apple-touch-icon.png", "/icon-512.png", "/favicon.ico", "/og.jpg"} <= fetched
    assert len(site.seen) <= 20

    # The dark-only logo is the theme's dark logo.
    theme = result["theme"]
    assert theme["logo_url"] == best["url"]
    dark = next(x for x in logos if x["url"] == theme["logo_dark_url"])
    assert dark["source_url"].endswith("/logo-white.png")
    assert (dark["on_light"], dark["on_dark"]) == (False, True)

    colors = {c["hex"]: c for c in result["colors"]}
    assert colors[PRIMARY]["role"] == "primary"
    assert {"css", "theme_color", "logo"} <= set(colors[PRIMARY]["sources"])
    assert colors[ACCENT]["role"] == "accent"
    assert "button" in colors[BUTTON]["sources"]
    assert colors["#111827"]["role"] == "text"
    palette = result["palette"]
    assert palette["primary"] == PRIMARY and palette["accent"] == ACCENT
    assert palette["text"] == "#111827" and palette["background"] == "#ffffff"
    assert palette["link"] == PRIMARY  # 6.7:1 on white already
    assert palette["button_text"] == "#ffffff"
    assert palette["button_contrast"] == round(contrast("#ffffff", PRIMARY), 2)

    fonts = {f["family"]: f for f in result["fonts"]}
    assert fonts["Poppins"] == {"family": "Poppins", "role": "body", "google": True, "fallback": "system",
                                "source": "css:--font-body"}
    assert fonts["Playfair Display"]["role"] == "heading" and fonts["Playfair Display"]["google"] is True
    assert fonts["Playfair Display"]["fallback"] == "georgia"

    assert result["socials"] == [
        {"network": "youtube", "url": "https://www.youtube.com/@acmerockets"},
        {"network": "x", "url": "https://twitter.com/acmerockets"},
        {"network": "linkedin", "url": "https://www.linkedin.com/company/acme-rockets"},
        {"network": "github", "url": "https://github.com/acme-rockets"},
    ]
    assert result["address"] == "1 Launch Way, 94016 San Francisco, CA, US"
    assert theme["brand_color"] == PRIMARY and theme["link_color"] == PRIMARY
    assert (theme["web_font"], theme["font"], theme["heading_web_font"]) == ("Poppins", "system", "Playfair Display")
    assert result["brand"] == {"name": "Acme Rockets", "website": f"http://www.acme-rockets.com:{site.number}",
                               "address": "1 Launch Way, 94016 San Francisco, CA, US",
                               "socials": result["socials"], "imported_from": result["url"]}
    assert result["warnings"] == []

    # The stored logos are served by the daemon, with their type and a long cache lifetime.
    response, body = await api.request("GET", best["url"][len(api.url):])
    assert response.code == 200 and body == site.files["/logo.png"][2]
    assert response.headers.getRawHeaders("Content-Type") == ["image/png"]
    assert "max-age=31536000" in response.headers.getRawHeaders("Cache-Control")[0]
    response, body = await api.request("GET", svg["url"][len(api.url):])
    assert response.headers.getRawHeaders("Content-Type") == ["image/svg+xml"]
    assert "default-src 'none'" in response.headers.getRawHeaders("Content-Security-Policy")[0]
    response, _ = await api.request("GET", "/files/brand/nothing.png")
    assert response.code == 404

    # Nothing was saved.
    code, saved, _ = await api.json("GET", "/template-builder/theme", key)
    assert saved["theme_saved"] is False and saved["brand_saved"] is False

    # With apply, the theme and brand become the account's.
    code, applied, _ = await api.json("POST", "/brand/import", key, json={"url": url, "ai": False, "apply": True})
    assert code == 200 and applied["applied"] is True
    code, saved, _ = await api.json("GET", "/template-builder/theme", key)
    assert saved["theme_saved"] and saved["brand_saved"]
    assert saved["theme"]["brand_color"] == PRIMARY and saved["theme"]["logo_url"] == applied["theme"]["logo_url"]
    assert saved["brand"]["name"] == "Acme Rockets" and saved["brand"]["socials"] == applied["socials"]


@pt.ensureDeferred
async def test_the_ai_pick_and_its_absence(api, site, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    url = f"http://www.acme-rockets.com:{site.number}/"
    fake_ai.script(Turn(content=json.dumps({"logo": 0, "dark_logo": None, "primary": BUTTON, "accent": PRIMARY,
                                            "rationale": "Le vert des boutons porte la marque."})))
    code, result, _ = await api.json("POST", "/brand/import", key, json={"url": url, "language": "fr"})
    assert code == 200, result
    assert result["ai"] == {"used": True, "rationale": "Le vert des boutons porte la marque."}
    assert result["palette"]["primary"] == BUTTON and result["theme"]["brand_color"] == BUTTON
    (asked,) = fake_ai.requests
    assert asked["body"]["response_format"] == {"type": "json_object"}  # not "openai": no JSON schema
    assert "Language of the rationale: fr" in asked["body"]["messages"][1]["content"]
    code, caps, _ = await api.json("GET", "/template-builder", key)
    assert caps["ai"]["used"] == 1  # the pick counts against the AI quota

    # The provider failing: the import still answers, and says why the AI was not used.
    fake_ai.script(Turn(status=500))
    code, result, _ = await api.json("POST", "/brand/import", key, json={"url": url})
    assert code == 200 and result["ai"]["used"] is False
    assert result["ai"]["skipped"].startswith("ai_unavailable")
    assert result["palette"]["primary"] == PRIMARY


@pt.ensureDeferred
async def test_six_imports_a_minute_and_the_plan(api, site):
    _, free = await api.tenant()
    code, answer, _ = await api.json("POST", "/brand/import", free, json={"url": "acme-rockets.com"})
    assert (code, answer["name"]) == (403, "plan_required")
    _, key = await api.tenant(plan="scale")
    url = f"http://www.acme-rockets.com:{site.number}/nothing-here"  # fails fast (404), still counted
    for _ in range(6):
        code, answer, _ = await api.json("POST", "/brand/import", key, json={"url": url})
        assert (code, answer["name"]) == (422, "brand_fetch_failed"), answer
    code, answer, response = await api.json("POST", "/brand/import", key, json={"url": url})
    assert (code, answer["name"]) == (429, "rate_limit_exceeded")
    assert 1 <= int(response.headers.getRawHeaders("Retry-After")[0]) <= 60
    assert site.seen.count("/nothing-here") == 6


@pt.ensureDeferred
async def test_fetch_failures(api, site, dns_server):
    _, key = await api.tenant(plan="scale")
    site.files["/data.json"] = (200, "application/json", b"{}")
    for url in [f"http://www.acme-rockets.com:{site.number}/data.json",  # not HTML
                f"http://www.acme-rockets.com:{site.number}/missing",  # HTTP 404
                f"http://nowhere.acme-rockets.com:{site.number}/"]:  # no such name
        code, answer, _ = await api.json("POST", "/brand/import", key, json={"url": url})
        assert (code, answer["name"]) == (422, "brand_fetch_failed"), (url, answer)
    # Without a url and without a verified domain: the url is required.
    code, answer, _ = await api.json("POST", "/brand/import", key, json={})
    assert (code, answer["name"]) == (422, "validation_error") and answer["message"].startswith("url")


@pt.ensureDeferred
async def test_a_page_nested_too_deep_is_refused_counted_and_not_charged(api, site, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    site.files["/deep"] = (200, "text/html", b"<html><body>" + b"<div>" * 3000 + b"</div>" * 3000 + b"</body></html>")
    code, answer, _ = await api.json("POST", "/brand/import", key,
                                     json={"url": f"http://www.acme-rockets.com:{site.number}/deep"})
    assert (code, answer["name"]) == (422, "brand_fetch_failed") and "nest" in answer["message"]
    assert fake_ai.requests == []
    code, caps, _ = await api.json("GET", "/template-builder", key)
    assert caps["ai"]["used"] == 0
    url = f"http://www.acme-rockets.com:{site.number}/nothing-here"
    for _ in range(5):
        code, answer, _ = await api.json("POST", "/brand/import", key, json={"url": url})
        assert (code, answer["name"]) == (422, "brand_fetch_failed")
    code, answer, _ = await api.json("POST", "/brand/import", key, json={"url": url})
    assert (code, answer["name"]) == (429, "rate_limit_exceeded")  # the deep page was the first of six


def test_deep_parts_of_a_page_are_read_without_recursion():
    url = "https://acme.example/"
    within = (b"<html><head><title>Acme | Home</title><script type='application/ld+json'>" + b"[" * 3000
              + b"]" * 3000 + b"</script></head><body>" + b"<div>" * 250
              + b"<header><img src='/logo.png'><svg class='logo'>" + b"<g>" * 200 + b"</g>" * 200 + b"</svg>"
              + b"<svg class='logo'><g><path d='M0 0h1v1z'/></g></svg></header>" + b"</div>" * 250
              + b"</body></html>")
    page = read_page(within, url)
    assert page.name == "Acme"
    assert [(x.source, x.url) for x in page.logos] == [("header", "https://acme.example/logo.png"),
                                                       ("inline_svg", "https://acme.example/#svg-1")]
    with pytest.raises(BrandFailed) as refused:
        read_page(b"<b>" * (MAX_DEPTH + 1), url)
    assert refused.value.code == "brand_fetch_failed"
