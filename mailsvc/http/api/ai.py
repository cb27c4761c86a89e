"""AI generation: ``POST /template-builder/ai/generate`` (``mailsvc.app.ai``)."""

from __future__ import annotations

from mailsvc.app.ai import AiHelper
from mailsvc.app.apikeys import Caller
from mailsvc.http.body import read_json
from mailsvc.http.router import FULL, TEMPLATE_BODY_LIMIT, route


class AiResource:
    def __init__(self, ai: AiHelper):
        self._ai = ai

    @route("POST", "/template-builder/ai/generate", access=FULL, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("prompt",))
    async def generate(self, request, caller: Caller):
        return await self._ai.generate(caller.tenant, read_json(request))
