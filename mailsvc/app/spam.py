"""
The spam score before sending: ``POST /emails/check``, the template and broadcast
previews (``preview_score``), and at a broadcast's send ``spam_check`` then
``refuse_over_threshold`` (``app/broadcasts.py``). Scoring never runs on the plain send path.
"""

from __future__ import annotations

from typing import Literal, overload

from mailsvc.domain.errors import Invalid, NotAllowed, SpamCheckUnavailable
from mailsvc.mail.spam import SpamAssassin, SpamCheckFailed, SpamScore, scoring_message

MAX_FIELD_CHARS = 1024 * 1024


@overload
def _string(body: dict, field: str, required: Literal[True]) -> str: ...
@overload
def _string(body: dict, field: str, required: bool = False) -> str | None: ...
def _string(body: dict, field: str, required: bool = False) -> str | None:
    value = body.get(field)
    if value is None or value == "":
        if required:
            raise Invalid(field, f"{field} is required")
        return None
    if not isinstance(value, str) or len(value) > MAX_FIELD_CHARS:
        raise Invalid(field, f"{field} must be a string of at most {MAX_FIELD_CHARS} characters")
    if any(c in value for c in "\x00"):
        raise Invalid(field, f"{field} must not contain NUL")
    return value


class SpamChecks:
    def __init__(self, spamd: SpamAssassin | None, hostname: str, broadcast_threshold: float = 0.0):
        self._spamd = spamd
        self._hostname = hostname
        self.broadcast_threshold = broadcast_threshold

    @property
    def enabled(self) -> bool:
        return self._spamd is not None

    async def spam_check(self, message: bytes) -> SpamScore:
        """THE hook: the score of a rendered message (broadcasts call it for preview and send)."""
        if self._spamd is None:
            raise SpamCheckUnavailable("spam scoring is not configured (spam.spamd)")
        try:
            return await self._spamd.score(message)
        except SpamCheckFailed as e:
            raise SpamCheckUnavailable(f"the spam score could not be had: {e}") from None

    def refuse_over_threshold(self, score: SpamScore) -> None:
        """At a broadcast's send: 403 validation_error naming the score, over the operator's threshold."""
        if self.broadcast_threshold > 0 and score.score >= self.broadcast_threshold:
            raise NotAllowed(f"the broadcast's spam score {score.score:g} is at or over the threshold "
                             f"{self.broadcast_threshold:g} set by the operator", "validation_error")

    async def check(self, body: dict) -> dict:
        """``POST /emails/check``: a send body (from, to, subject, html, text) scored, nothing sent."""
        if not isinstance(body, dict):
            raise Invalid("body", "the body must be a JSON object")
        sender = _string(body, "from", required=True)
        subject = _string(body, "subject", required=True)
        html, text = _string(body, "html"), _string(body, "text")
        if html is None and text is None:
            raise Invalid("html", "html or text is required")
        to = body.get("to") or []
        if isinstance(to, str):
            to = [to]
        if not isinstance(to, list) or not all(isinstance(a, str) and "\n" not in a for a in to) or len(to) > 50:
            raise Invalid("to", "to must be an address or a list of at most 50")
        score = await self.spam_check(scoring_message(sender, to, subject, html, text, self._hostname))
        return score.as_dict()

    def message(self, preview: dict, sender: str | None) -> bytes:
        """A preview (``subject``, ``html``, ``text``) as the message that would leave, from ``sender``
        (the template's or broadcast's own ``from``; a placeholder when it has none)."""
        return scoring_message(sender or f"preview@{self._hostname}", [], preview.get("subject") or "",
                               preview.get("html"), preview.get("text"), self._hostname)

    async def preview_score(self, preview: dict, sender: str | None) -> dict | None:
        """The score of a template or broadcast preview; None when scoring is off (the preview
        still answers)."""
        if self._spamd is None:
            return None
        message = self.message(preview, sender)
        try:
            return (await self._spamd.score(message)).as_dict()
        except SpamCheckFailed as e:
            return {"object": "spam_score", "error": str(e)}
