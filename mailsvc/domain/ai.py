"""
The AI helper's rules (docs/contract/dashboard.md, "Template builder and brand"): what the model is asked, the JSON
schema of its answer, and how an answer is read into ``{subject, preview_text, document}``
(a builder document checked by ``documents.document_of``, using only declared variables).
Also the AI pick among brand-import candidates. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import attrs

from mailsvc.domain import placeholders, themes
from mailsvc.domain.documents import BLOCK_TYPES, Document, document_of
from mailsvc.domain.errors import Invalid

MAX_PROMPT = 2000
MAX_SUBJECT = 998
#: A BCP 47 tag, loosely: a language and up to three subtags.
LANGUAGE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8}){0,3}\Z")
#: Placeholders a document may always hold beside the declared variables.
ALWAYS = ("RESEND_UNSUBSCRIBE_URL",)

SYSTEM = (
    "You write marketing and transactional e-mails as JSON for a visual e-mail builder. "
    "Answer with one JSON object only, no prose, no code fences: "
    '{"subject": string, "preview_text": string, "document": {"version": 1, "preview_text": string, '
    '"blocks": [block, ...]}}. '
    "Block types: " + ", ".join(BLOCK_TYPES) + ". Block fields: heading {text, level 1-3}; "
    "text {text} or {runs: [{text, bold, italic, href}]}; button {label, href}; image {src (https URL), alt, "
    "width}; divider {}; spacer {height}; columns {columns: [{blocks: [...]}]} (2 to 4); list {ordered, items: "
    "[[run, ...], ...]}; quote {text}; code {text}; social {links: [{network, url}]}; footer {text, "
    "unsubscribe (boolean)}. Optional on every block: style {align left|center|right, color #rrggbb, "
    "background #rrggbb, font_size 10-64}. Use no other fields. Links are https URLs. "
    "Personalise only with the variables given, written {{{KEY}}} or {{{KEY|fallback}}}; use no others. "
    "Write in the language asked for. If the request is harmful or not about an e-mail, answer "
    '{"refusal": "<why>"}.'
)

_BLOCK_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"type": {"type": "string", "enum": list(BLOCK_TYPES)}}, "required": ["type"]}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subject": {"type": "string"},
        "preview_text": {"type": "string"},
        "document": {
            "type": "object",
            "properties": {"version": {"type": "integer", "enum": [1]}, "preview_text": {"type": "string"},
                           "blocks": {"type": "array", "items": _BLOCK_SCHEMA}},
            "required": ["version", "blocks"],
        },
        "refusal": {"type": "string"},
    },
}


@attrs.frozen
class Request:
    prompt: str
    language: str
    theme: dict[str, Any]
    variables: tuple[str, ...]
    template_id: str | None


def request_of(body: Any) -> Request:
    """The generate body checked (prompt up to 2,000 characters, language, theme, variables)."""
    if not isinstance(body, dict):
        raise Invalid("body", "body must be a JSON object")
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise Invalid("prompt", "prompt is required: a string of up to 2000 characters")
    if len(prompt) > MAX_PROMPT:
        raise Invalid("prompt", f"prompt must be at most {MAX_PROMPT} characters")
    language = language_of(body.get("language"), "language")
    theme = themes.theme_fields(body["theme"]) if body.get("theme") is not None else {}
    variables = body.get("variables") or []
    if not isinstance(variables, list) or len(variables) > 50:
        raise Invalid("variables", "variables must be an array of up to 50 variable keys")
    for i, key in enumerate(variables):
        if not isinstance(key, str) or not placeholders.KEY.match(key):
            raise Invalid(f"variables[{i}]", f"variables[{i}] must be a variable key such as FIRST_NAME")
    template_id = body.get("template_id")
    if template_id is not None:
        try:
            template_id = str(uuid.UUID(str(template_id)))
        except ValueError:
            raise Invalid("template_id", "template_id must be a UUID") from None
    return Request(prompt, language, theme, tuple(variables), template_id)


def language_of(value: Any, field: str) -> str:
    if value is None:
        return "en"
    if not isinstance(value, str) or not LANGUAGE.match(value):
        raise Invalid(field, f"{field} must be a BCP 47 language tag such as en or pt-BR")
    return value


def user_message(request: Request, context: str = "") -> str:
    parts = [f"Language: {request.language}."]
    if request.variables:
        parts.append("Variables you may use: " + ", ".join(request.variables) + ".")
    else:
        parts.append("There are no variables: write no {{{...}}} placeholders.")
    if request.theme:
        parts.append("The e-mail's theme: " + json.dumps(request.theme) + ".")
    if context:
        parts.append(context)
    parts.append("The e-mail to write: " + request.prompt)
    return "\n".join(parts)


def repair_message(problem: str) -> str:
    return (f"That answer cannot be used: {problem}. Answer again with only the corrected JSON object, "
            "following the format exactly.")


class Refused(Exception):
    """The model declined (its answer was a refusal)."""


@attrs.frozen
class Generated:
    subject: str
    preview_text: str
    document: Document
    raw_document: dict[str, Any]


def _json_of(content: str) -> Any:
    text = content.strip()
    if text.startswith("```"):  # a fenced answer despite the instructions
        text = re.sub(r"\A```[a-zA-Z]*\s*|\s*```\Z", "", text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise Invalid("output", f"the answer is not JSON ({e.msg} at character {e.pos})") from None


def output_of(content: str, variables: tuple[str, ...]) -> Generated:
    """The model's answer read and checked; Invalid (with what is wrong) or Refused."""
    data = _json_of(content)
    if not isinstance(data, dict):
        raise Invalid("output", "the answer must be a JSON object")
    if isinstance(data.get("refusal"), str) and data["refusal"].strip() and "document" not in data:
        raise Refused(data["refusal"].strip())
    subject = data.get("subject")
    if not isinstance(subject, str) or not subject.strip() or len(subject.encode()) > MAX_SUBJECT:
        raise Invalid("subject", "subject must be a non-empty string of at most 998 bytes")
    preview = data.get("preview_text") or ""
    if not isinstance(preview, str):
        raise Invalid("preview_text", "preview_text must be a string")
    raw = data.get("document")
    if isinstance(raw, dict) and "preview_text" not in raw and preview:
        raw = {**raw, "preview_text": preview}
    document = document_of(raw, "document.")
    assert isinstance(raw, dict)  # document_of refuses anything else
    if not document.blocks:
        raise Invalid("document.blocks", "document.blocks must hold at least one block")
    allowed = set(variables) | set(ALWAYS)
    text = json.dumps(raw, ensure_ascii=False) + subject + preview
    for key, _ in placeholders.keys_in(text):
        if key not in allowed and not key.startswith("contact."):
            raise Invalid("document", f"the placeholder {{{{{{{key}}}}}}} is not a declared variable")
    return Generated(subject.strip(), preview or document.preview_text, document, raw)


# The AI pick among brand-import candidates.

PICK_SYSTEM = (
    "You choose an e-mail brand kit among candidates read from a website. Answer with one JSON object "
    'only: {"logo": index of the best logo for light backgrounds or null, "dark_logo": index of a logo for '
    'dark backgrounds or null, "primary": one candidate colour hex, "accent": a candidate colour hex or null, '
    '"rationale": at most two short sentences in the language asked for}.'
)


def pick_of(content: str, logos: int, colors: tuple[str, ...]) -> dict[str, Any]:
    """The model's pick read and checked (indexes in range, colours among the candidates)."""
    data = _json_of(content)
    if not isinstance(data, dict):
        raise Invalid("output", "the answer must be a JSON object")
    picked: dict[str, Any] = {}
    for name in ("logo", "dark_logo"):
        value = data.get(name)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < logos:
                raise Invalid(name, f"{name} must be the index of a candidate logo (0 to {logos - 1}) or null")
            picked[name] = value
    for name in ("primary", "accent"):
        value = data.get(name)
        if value is not None:
            if not isinstance(value, str) or value.lower() not in colors:
                raise Invalid(name, f"{name} must be one of the candidate colours")
            picked[name] = value.lower()
    rationale = data.get("rationale")
    if not isinstance(rationale, str) or not rationale.strip():
        raise Invalid("rationale", "rationale must be a short text")
    picked["rationale"] = rationale.strip()[:500]
    return picked
