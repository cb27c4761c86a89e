"""
AI generation (``POST /template-builder/ai/generate``) and the AI pick of brand import, over an
OpenAI-compatible chat-completions API (``ai.*``) reached through ``outside.fetch`` (a private
address allowed: the provider is the operator's choice). Only token counts are logged.
Checks in order, then provider failures (docs/decisions.md, "AI generation and brand import"):

- top plan 403 plan_required; a provider 403 ai_disabled; the body; minute rate 429 ai_rate_limited;
  month's quota 429 ai_quota_exceeded (a unit held for the call, charged only on a document);
  the node's cap on provider calls 502 ai_busy;
- provider 429/503 ai_busy, other failures ai_unavailable, ``ai.timeout`` ai_timeout, a refusal
  422 ai_refused, still invalid after one repair round trip ai_invalid_output.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import attrs
from twisted.logger import Logger

from mailsvc import ids
from mailsvc.app.templates import TOP_PLAN, DocumentRenderer
from mailsvc.config import AiConfig
from mailsvc.domain import ai as rules
from mailsvc.domain import themes
from mailsvc.domain.errors import AiFailed, Invalid, PlanRequired
from mailsvc.domain.tenant import Tenant
from mailsvc.outside.fetch import Fetcher, FetchFailed, TargetRefused
from mailsvc.store import ai as rows
from mailsvc.store.database import Database

log = Logger()

#: Largest provider answer read.
MAX_ANSWER = 1024 * 1024
#: A hold outlives the longest call by this much before another node may reuse its unit.
HOLD_SLACK = 30


def month_of(seconds: float) -> date:
    """The first day of the UTC month of ``seconds``."""
    return datetime.fromtimestamp(seconds, UTC).date().replace(day=1)


@attrs.frozen
class _Answer:
    content: str
    prompt_tokens: int
    completion_tokens: int


class AiHelper:
    def __init__(self, clock, db: Database, fetcher: Fetcher, settings: AiConfig, renderer: DocumentRenderer):
        self._clock = clock
        self._renderer = renderer
        self._db = db
        self._fetcher = fetcher
        self._settings = settings
        self._in_flight = 0

    @property
    def configured(self) -> bool:
        return bool(self._settings.provider and self._settings.base_url)

    def quota_of(self, plan: str) -> int:
        return self._settings.monthly_quota if plan == TOP_PLAN else 0

    async def figures(self, tenant: Tenant) -> dict[str, Any]:
        """The ``ai`` object of the builder's capabilities."""
        enabled = self.configured and tenant.plan == TOP_PLAN
        quota = self.quota_of(tenant.plan)
        used = await rows.used(self._db, tenant.id, month_of(self._clock.seconds())) if quota else 0
        shown: dict[str, Any] = {"enabled": enabled}
        if self.configured and self._settings.model:
            shown["model"] = self._settings.model
        shown.update(monthly_quota=quota, used=used, remaining=max(0, quota - used),
                     per_minute=self._settings.per_minute if quota else 0)
        return shown

    async def usage(self, tenant: Tenant) -> dict[str, int]:
        """The ``ai`` of the account's usage: generations this month (UTC), and the quota (0 without a provider)."""
        figures = await self.figures(tenant)
        return {"used": figures["used"], "quota": figures["monthly_quota"] if self.configured else 0}

    # Generation

    async def generate(self, tenant: Tenant, body: Any) -> dict[str, Any]:
        if tenant.plan != TOP_PLAN:
            raise PlanRequired(f"AI generation is available on the top plan ({TOP_PLAN}) only")
        if not self.configured:
            raise AiFailed("ai_disabled", "AI generation is not available: this server has no AI provider configured")
        request = rules.request_of(body)
        messages = [{"role": "system", "content": rules.SYSTEM},
                    {"role": "user", "content": rules.user_message(request)}]

        def read(content: str) -> rules.Generated:
            generated = rules.output_of(content, request.variables)
            try:  # it renders, or it is not a document
                self._renderer.render(generated.document, themes.DEFAULT_THEME.with_fields(request.theme),
                                      themes.DEFAULT_BRAND)
            except Exception as e:
                raise Invalid("document", f"the document does not render: {e}") from None
            return generated

        generated = await self._run(tenant, "generate", messages, read, rules.SCHEMA)
        document = generated.raw_document
        return {"object": "builder_ai_generation", "subject": generated.subject,
                "preview_text": generated.preview_text, "document": document}

    async def pick(self, tenant: Tenant, candidates: dict[str, Any], language: str, logos: int,
                   colors: tuple[str, ...]) -> dict[str, Any]:
        """The AI's choice among brand-import candidates (AiFailed when there is none)."""
        if not self.configured:
            raise AiFailed("ai_disabled", "no AI provider is configured")
        messages = [{"role": "system", "content": rules.PICK_SYSTEM},
                    {"role": "user", "content": f"Language of the rationale: {language}.\nCandidates: "
                     + json.dumps(candidates, ensure_ascii=False)}]
        return await self._run(tenant, "brand pick", messages, lambda c: rules.pick_of(c, logos, colors), None)

    async def _run(self, tenant: Tenant, what: str, messages: list[dict], read, schema) -> Any:
        now = self._clock.seconds()
        wait = await self._db.run("take_ai_minute", rows.take_window, tenant.id, "ai", now,
                                  self._settings.per_minute)
        if wait is not None:
            raise AiFailed("ai_rate_limited",
                           f"Too many AI requests: at most {self._settings.per_minute} a minute.", max(1, round(wait)))
        month = month_of(now)
        hold_id = ids.uuid7(now)
        held = await self._db.run("hold_ai_quota", rows.hold, tenant.id, month, self.quota_of(tenant.plan), hold_id,
                                  now, self._settings.timeout + HOLD_SLACK)
        if not held:
            raise AiFailed("ai_quota_exceeded",
                           "The monthly AI quota is used up. It resets on the first day of the month (UTC).")
        charged = False
        try:
            if self._in_flight >= self._settings.concurrency:
                raise AiFailed("ai_busy", "The AI provider is busy; try again shortly. Nothing was charged.")
            self._in_flight += 1
            try:
                result = await self._converse(what, messages, read, schema, now + self._settings.timeout)
            finally:
                self._in_flight -= 1
            await self._db.run("charge_ai", rows.charge, hold_id, tenant.id, month)
            charged = True
            return result
        finally:
            if not charged:
                await rows.release(self._db, hold_id)

    async def _converse(self, what: str, messages: list[dict], read, schema, deadline: float) -> Any:
        """The answer read, with one repair round trip when it is unusable."""
        tokens = [0, 0]
        try:
            answer = await self._ask(messages, schema, deadline)
            tokens = [answer.prompt_tokens, answer.completion_tokens]
            try:
                return read(answer.content)
            except Invalid as e:
                problem = e.message
            log.info("ai {what}: the answer was unusable; one repair round trip", what=what)
            repaired = messages + [{"role": "assistant", "content": answer.content[:20000]},
                                   {"role": "user", "content": rules.repair_message(problem)}]
            answer = await self._ask(repaired, schema, deadline)
            tokens[0] += answer.prompt_tokens
            tokens[1] += answer.completion_tokens
            try:
                return read(answer.content)
            except Invalid as e:
                raise AiFailed("ai_invalid_output",
                               f"The AI answer was not a valid result after one repair: {e.message}") from None
        except rules.Refused:
            raise AiFailed("ai_refused", "The AI model declined this request.") from None
        finally:
            log.info("ai {what}: {prompt_tokens} prompt tokens, {completion_tokens} completion tokens", what=what,
                     prompt_tokens=tokens[0], completion_tokens=tokens[1])

    async def _ask(self, messages: list[dict], schema, deadline: float) -> _Answer:
        settings = self._settings
        body: dict[str, Any] = {"model": settings.model, "messages": messages, "max_tokens": settings.max_tokens,
                                "temperature": 0.4}
        if schema is not None and settings.provider == "openai":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "builder_email", "schema": schema, "strict": False}}
        else:
            body["response_format"] = {"type": "json_object"}
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        left = deadline - self._clock.seconds()
        if left <= 0:
            raise AiFailed("ai_timeout", f"The AI provider did not answer within {settings.timeout} s.")
        url = settings.base_url.rstrip("/") + "/chat/completions"
        try:
            fetched = await self._fetcher.request(
                b"POST", url, headers=headers, body=json.dumps(body).encode(), max_bytes=MAX_ANSWER, timeout=left,
                allow_http=True, trusted=True)
        except FetchFailed as e:
            if e.reason == "timeout":
                raise AiFailed("ai_timeout", f"The AI provider did not answer within {settings.timeout} s.") from None
            log.warn("ai provider failed: {reason}", reason=e.reason)
            raise AiFailed("ai_unavailable", "The AI provider could not be reached.") from None
        except TargetRefused as e:
            log.warn("ai.base_url is not usable: {why}", why=e.message)
            raise AiFailed("ai_unavailable", "The AI provider could not be reached.") from None
        if fetched.status in (429, 503):
            raise AiFailed("ai_busy", "The AI provider is busy; try again shortly. Nothing was charged.")
        if not 200 <= fetched.status < 300:
            log.warn("ai provider answered HTTP {status}", status=fetched.status)
            raise AiFailed("ai_unavailable", f"The AI provider failed (HTTP {fetched.status}).")
        try:
            data = json.loads(fetched.body)
            choice = data["choices"][0]
            message = choice.get("message") or {}
            usage = data.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise AiFailed("ai_unavailable", "The AI provider's answer was not a chat completion.") from None
        if message.get("refusal") or choice.get("finish_reason") == "content_filter":
            raise rules.Refused(str(message.get("refusal") or "content filter"))
        content = message.get("content")
        if not isinstance(content, str):
            content = ""
        return _Answer(content, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
