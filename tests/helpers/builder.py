"""The builder's sample document with every block type, and its rendering with the default theme and brand."""

import copy
import json
from pathlib import Path

from mailsvc.domain.documents import document_of
from mailsvc.domain.emailhtml import BuilderRenderer
from mailsvc.domain.themes import brand_of, theme_of

SAMPLES = Path(__file__).parent.parent / "samples" / "builder"
EVERY_BLOCK = json.loads((SAMPLES / "every_block.json").read_text())
ASSETS = "https://mail.acme.example"
#: The account theme of the golden files and of the browser test (images on loopback).
ACCOUNT_THEME = {
    "brand_color": "#4f46e5", "link_color": "#4338ca", "font": "inter", "web_font": "Inter",
    "logo_url": "http://127.0.0.1:1/logo-light.png", "logo_dark_url": "http://127.0.0.1:1/logo-dark.png",
    "logo_alt": "Acme", "logo_width": 140,
}


BRAND = {"name": "Acme Inc.", "address": "1 Main Street\nSpringfield 12345",
         "socials": [{"network": "github", "url": "https://github.com/acme"}]}


def render_every_block(assets: str = ASSETS, images: str | None = None) -> tuple[str, str]:
    document = copy.deepcopy(EVERY_BLOCK)
    theme = dict(ACCOUNT_THEME)
    if images is not None:  # the browser test serves the pictures itself
        text = json.dumps(document).replace("http://127.0.0.1:1", images)
        document = json.loads(text)
        theme = {k: v.replace("http://127.0.0.1:1", images) if isinstance(v, str) else v for k, v in theme.items()}
    return BuilderRenderer(assets).render(document_of(document), theme_of(theme), brand_of(BRAND))
