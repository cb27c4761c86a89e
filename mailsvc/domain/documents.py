"""
The plain renderer of builder documents (SPEC "Builder document"): simple, valid HTML and a
plain text made from the document itself, block by block. It stands behind the renderer
interface of ``mailsvc.app.templates`` (``DocumentRenderer``) until the template builder's
MJML renderer replaces it. Pure: no I/O.
"""

from __future__ import annotations

from html import escape
from typing import Any


def _runs_text(block: dict) -> str:
    runs = block.get("runs")
    if isinstance(runs, list):
        return "".join(str(r.get("text", "")) for r in runs if isinstance(r, dict))
    return str(block.get("text") or "")


def _runs_html(runs: Any, fallback: str) -> str:
    if not isinstance(runs, list):
        return escape(fallback)
    parts = []
    for run in runs:
        if not isinstance(run, dict):
            continue
        part = escape(str(run.get("text", "")))
        if run.get("bold"):
            part = f"<strong>{part}</strong>"
        if run.get("italic"):
            part = f"<em>{part}</em>"
        if isinstance(run.get("href"), str):
            part = f'<a href="{escape(run["href"])}">{part}</a>'
        parts.append(part)
    return "".join(parts)


def _html(blocks: list) -> list[str]:
    out: list[str] = []
    for block in blocks:
        kind = block["type"]
        text = _runs_html(block.get("runs"), str(block.get("text") or ""))
        if kind == "heading":
            level = block.get("level") if block.get("level") in (1, 2, 3) else 1
            out.append(f"<h{level}>{text}</h{level}>")
        elif kind in ("text", "footer"):
            out.append(f"<p>{text}</p>")
            if kind == "footer" and block.get("unsubscribe"):
                url = block.get("unsubscribe_url") or "{{{RESEND_UNSUBSCRIBE_URL}}}"
                label = block.get("unsubscribe_label") or "Unsubscribe"
                out.append(f'<p><a href="{escape(str(url))}">{escape(str(label))}</a></p>')
        elif kind == "button":
            out.append(f'<p><a href="{escape(str(block.get("href") or ""))}">'
                       f'{escape(str(block.get("label") or ""))}</a></p>')
        elif kind == "image":
            out.append(f'<img src="{escape(str(block.get("src") or ""))}" alt="{escape(str(block.get("alt") or ""))}">')
        elif kind == "divider":
            out.append("<hr>")
        elif kind == "spacer":
            out.append("<br>")
        elif kind == "quote":
            out.append(f"<blockquote>{text}</blockquote>")
        elif kind == "code":
            out.append(f"<pre>{escape(str(block.get('text') or ''))}</pre>")
        elif kind == "list":
            tag = "ol" if block.get("ordered") else "ul"
            items = block.get("items") if isinstance(block.get("items"), list) else []
            out.append(f"<{tag}>" + "".join(f"<li>{_runs_html(item, '')}</li>" for item in items) + f"</{tag}>")
        elif kind == "social":
            links = block.get("links") if isinstance(block.get("links"), list) else []
            out.append("<p>" + " ".join(
                f'<a href="{escape(str(link.get("url", "")))}">{escape(str(link.get("network", "")))}</a>'
                for link in links if isinstance(link, dict)) + "</p>")
        elif kind == "columns":
            for column in block["columns"]:
                out.extend(_html(column["blocks"]))
    return out


def _text(blocks: list) -> list[str]:
    out: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind in ("heading", "text", "quote", "code", "footer"):
            out.append(_runs_text(block))
            if kind == "footer" and block.get("unsubscribe"):
                out.append(f"{block.get('unsubscribe_label') or 'Unsubscribe'}: "
                           f"{block.get('unsubscribe_url') or '{{{RESEND_UNSUBSCRIBE_URL}}}'}")
        elif kind == "button":
            out.append(f"{block.get('label') or ''} ({block.get('href') or ''})")
        elif kind == "image" and block.get("alt"):
            out.append(str(block["alt"]))
        elif kind == "divider":
            out.append("---")
        elif kind == "list":
            items = block.get("items") if isinstance(block.get("items"), list) else []
            for n, item in enumerate(items, 1):
                line = "".join(str(r.get("text", "")) for r in item if isinstance(r, dict)) if isinstance(
                    item, list) else ""
                out.append(f"{n}. {line}" if block.get("ordered") else f"* {line}")
        elif kind == "social":
            links = block.get("links") if isinstance(block.get("links"), list) else []
            out.extend(f"{link.get('network', '')}: {link.get('url', '')}" for link in links if isinstance(link, dict))
        elif kind == "columns":
            for column in block["columns"]:
                out.extend(_text(column["blocks"]))
    return out


class PlainDocuments:
    """A builder document as plain HTML and text (``DocumentRenderer``)."""

    def render(self, document: dict) -> tuple[str, str]:
        blocks = document["blocks"]
        preview = document.get("preview_text")
        head = f'<div style="display:none">{escape(str(preview))}</div>' if preview else ""
        html = ("<!doctype html><html><body>" + head + "".join(_html(blocks)) + "</body></html>")
        text = "\n\n".join(line for line in _text(blocks) if line) + "\n"
        return html, text
