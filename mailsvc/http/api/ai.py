"""AI generation: ``POST /template-builder/ai/generate`` (``mailsvc.app.ai``)."""

from __future__ import annotations

from mailsvc.app.ai import AiHelper
from mailsvc.app.apikeys import Caller
from mailsvc.http.body import read_json
from mailsvc.http.operation import OBJECT, STR, UUID, Operation, obj
from mailsvc.http.router import FULL, TEMPLATE_BODY_LIMIT, route


class AiResource:
    def __init__(self, ai: AiHelper):
        self._ai = ai

    @route("POST", "/template-builder/ai/generate", access=FULL, body_limit=TEMPLATE_BODY_LIMIT,
           multi_line=("prompt",),
           op=Operation(
               "Generate a builder document from a prompt (top plan; counts against the AI quota)",
               obj(("prompt",), prompt={"type": "string", "minLength": 1, "maxLength": 2000}, language=STR,
                   theme=OBJECT, variables={"type": "array", "maxItems": 50, "items": STR}, template_id=UUID),
               {200: obj(("object", "subject", "preview_text", "document"), object={"const": "builder_ai_generation"},
                         subject=STR, preview_text=STR, document=OBJECT)},
               errors=(429, 502)))
    async def generate(self, request, caller: Caller):
        return await self._ai.generate(caller.tenant, read_json(request))
