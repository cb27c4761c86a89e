"""
AI generation against a fake provider on loopback (tests/helpers/fake_ai.py) that speaks the
chat-completions wire format: a valid document; invalid JSON then valid after the repair;
invalid twice; a refusal (both the wire's ``refusal`` and the model's JSON one); the deadline;
429 and 5xx answers; a slow answer while the node's cap is full; quota and minute-rate
exhaustion. Each maps to its error (docs/contract/dashboard.md), and the monthly quota is
charged only when a document is returned (read back through the capabilities, as a user would).
"""

import json
import secrets

import attrs
import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor

from mailsvc import compose
from mailsvc.config import load
from tests.conftest import Api
from tests.helpers.fake_ai import Turn, fake_ai  # noqa: F401 (a fixture)
from tests.helpers.polling import async_until

QUOTA = 5
PER_MINUTE = 8

DOCUMENT = {"version": 1, "blocks": [
    {"type": "heading", "text": "Welcome aboard, {{{CUSTOMER|friend}}}!"},
    {"type": "text", "runs": [{"text": "Your account is ready. "}, {"text": "Start now", "bold": True}]},
    {"type": "button", "label": "Open the dashboard", "href": "https://acme.example/app"},
    {"type": "footer", "text": "Acme Inc.", "unsubscribe": True},
]}
VALID = json.dumps({"subject": "Welcome to Acme", "preview_text": "Your account is ready", "document": DOCUMENT})
INVALID_JSON = '{"subject": "Welcome", "document": {"version": 1, "blocks": [ '
INVALID_DOCUMENT = json.dumps({"subject": "Hi", "document": {"version": 1, "blocks": [{"type": "hero"}]}})


@pytest.fixture
def config(fake_ai):  # noqa: F811 (the fixture imported above)
    base = load(None, environ={})
    return attrs.evolve(base, ai=attrs.evolve(
        base.ai, provider="openai", base_url=fake_ai.base_url, api_key="sk-test", model="fake-model", timeout=2,
        concurrency=1, monthly_quota=QUOTA, per_minute=PER_MINUTE))


BODY = {"prompt": "A welcome e-mail for new customers of Acme, friendly.", "language": "en",
        "variables": ["CUSTOMER"]}


async def _used(api, key) -> dict:
    code, shown, _ = await api.json("GET", "/template-builder", key)
    assert code == 200
    return shown["ai"]


async def _generate(api, key, body=BODY):
    return await api.json("POST", "/template-builder/ai/generate", key, json=body)


@pt.ensureDeferred
async def test_a_valid_document_is_returned_and_charged(api, fake_ai):  # noqa: F811
    tenant, key = await api.tenant(plan="scale")
    shown = await _used(api, key)
    assert shown == {"enabled": True, "model": "fake-model", "monthly_quota": QUOTA, "used": 0, "remaining": QUOTA,
                     "per_minute": PER_MINUTE}
    fake_ai.script(Turn(content=VALID))
    code, answer, _ = await _generate(api, key)
    assert code == 200, answer
    assert answer["object"] == "builder_ai_generation"
    assert (answer["subject"], answer["preview_text"]) == ("Welcome to Acme", "Your account is ready")
    assert answer["document"]["blocks"] == DOCUMENT["blocks"]
    # The document renders, and can be saved as a template.
    code, rendered, _ = await api.json("POST", "/template-builder/render", key, json={"document": answer["document"]})
    assert code == 200 and "Open the dashboard" in rendered["html"]
    code, created, _ = await api.json("POST", "/templates", key, json={
        "name": "Welcome", "subject": answer["subject"], "builder": answer["document"],
        "variables": [{"key": "CUSTOMER", "type": "string"}]})
    assert code == 201, created
    assert (await _used(api, key))["used"] == 1 and (await _used(api, key))["remaining"] == QUOTA - 1
    # The account's usage shows it too (GET /v1/usage, and the operator's per-tenant view).
    code, usage, _ = await api.json("GET", "/v1/usage", key)
    assert (code, usage["ai"]) == (200, {"used": 1, "quota": QUOTA}), usage
    code, usage, _ = await api.json("GET", f"/admin/v1/tenants/{tenant['id']}/usage", api.operator_token)
    assert (code, usage["ai"]) == (200, {"used": 1, "quota": QUOTA}), usage

    # What the provider was asked: JSON schema output, the model, the key; the prompt.
    (sent,) = fake_ai.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    assert sent["body"]["model"] == "fake-model"
    assert sent["body"]["response_format"]["type"] == "json_schema"
    assert sent["body"]["messages"][0]["role"] == "system"
    assert BODY["prompt"] in sent["body"]["messages"][1]["content"]
    assert "CUSTOMER" in sent["body"]["messages"][1]["content"]

    # Capabilities on the top plan say AI is available.
    code, caps, _ = await api.json("GET", "/template-builder", key)
    assert caps["ai_available"] is True and caps["brand_import"] is True


@pt.ensureDeferred
async def test_invalid_json_is_repaired_once(api, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    fake_ai.script(Turn(content=INVALID_JSON), Turn(content=VALID))
    code, answer, _ = await _generate(api, key)
    assert code == 200, answer
    assert answer["document"]["blocks"] == DOCUMENT["blocks"]
    first, repair = fake_ai.requests
    assert repair["body"]["messages"][:2] == first["body"]["messages"]
    assert repair["body"]["messages"][2] == {"role": "assistant", "content": INVALID_JSON}
    assert "not JSON" in repair["body"]["messages"][3]["content"]
    assert (await _used(api, key))["used"] == 1


@pt.ensureDeferred
async def test_invalid_twice_is_ai_invalid_output_and_not_charged(api, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    fake_ai.script(Turn(content=INVALID_DOCUMENT), Turn(content=INVALID_JSON))
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (502, "ai_invalid_output"), answer
    assert len(fake_ai.requests) == 2
    assert "blocks[0].type" in fake_ai.requests[1]["body"]["messages"][3]["content"]
    # An undeclared placeholder is invalid too.
    undeclared = json.dumps({"subject": "Hi {{{SECRET}}}", "document": DOCUMENT})
    fake_ai.script(Turn(content=undeclared), Turn(content=undeclared))
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (502, "ai_invalid_output") and "SECRET" in answer["message"]
    assert (await _used(api, key))["used"] == 0


@pt.ensureDeferred
async def test_refusals_are_ai_refused(api, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    fake_ai.script(Turn(content=None, refusal="I can't help with that."))
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (422, "ai_refused"), answer
    fake_ai.script(Turn(content=json.dumps({"refusal": "This is not an e-mail."})))
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (422, "ai_refused"), answer
    fake_ai.script(Turn(content="", finish_reason="content_filter"))
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (422, "ai_refused"), answer
    assert len(fake_ai.requests) == 3  # no repair round trip after a refusal
    assert (await _used(api, key))["used"] == 0


@pt.ensureDeferred
async def test_the_deadline_is_ai_timeout(api, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    fake_ai.script(Turn(stall=True))
    started = reactor.seconds()
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (502, "ai_timeout"), answer
    assert 1.5 < reactor.seconds() - started < 5  # ai.timeout = 2 s here (50 s by default)
    # The repair shares the deadline: a slow first answer leaves too little for the second.
    fake_ai.script(Turn(content=INVALID_JSON, delay=1.2), Turn(content=VALID, delay=1.2))
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (502, "ai_timeout"), answer
    assert (await _used(api, key))["used"] == 0


@pt.ensureDeferred
async def test_provider_failures(api, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    for turn, status, name in [
        (Turn(status=429), 502, "ai_busy"),
        (Turn(status=503), 502, "ai_busy"),
        (Turn(status=500), 502, "ai_unavailable"),
        (Turn(status=502), 502, "ai_unavailable"),
        (Turn(status=401), 502, "ai_unavailable"),
        (Turn(raw=b"<html>gateway</html>"), 502, "ai_unavailable"),
    ]:
        fake_ai.script(turn)
        code, answer, _ = await _generate(api, key)
        assert (code, answer["name"]) == (status, name), (turn, answer)
    assert (await _used(api, key))["used"] == 0


@pt.ensureDeferred
async def test_a_full_node_cap_is_ai_busy(api, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    fake_ai.script(Turn(content=VALID, delay=0.8))
    slow = defer.ensureDeferred(_generate(api, key))
    # the slow call holds the node's one slot (ai.concurrency = 1)
    await async_until(lambda: fake_ai.requests, 10, "the slow call at the provider", interval=0.02)
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (502, "ai_busy"), answer
    assert len(fake_ai.requests) == 1  # the provider was not asked
    code, answer, _ = await slow
    assert code == 200, answer
    assert (await _used(api, key))["used"] == 1  # the busy one was not charged


@pt.ensureDeferred
async def test_the_monthly_quota(api, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    for _ in range(QUOTA):
        fake_ai.script(Turn(content=VALID))
        code, answer, _ = await _generate(api, key)
        assert code == 200, answer
    assert await _used(api, key) == {"enabled": True, "model": "fake-model", "monthly_quota": QUOTA, "used": QUOTA,
                                     "remaining": 0, "per_minute": PER_MINUTE}
    asked = len(fake_ai.requests)
    code, answer, _ = await _generate(api, key)
    assert (code, answer["name"]) == (429, "ai_quota_exceeded"), answer
    assert len(fake_ai.requests) == asked
    # Another account has its own quota.
    _, other = await api.tenant(plan="scale")
    fake_ai.script(Turn(content=VALID))
    code, _, _ = await _generate(api, other)
    assert code == 200


@pt.ensureDeferred
async def test_the_minute_rate(api, fake_ai):  # noqa: F811
    _, key = await api.tenant(plan="scale")
    for _ in range(PER_MINUTE):
        fake_ai.script(Turn(status=500))
        code, answer, _ = await _generate(api, key)
        assert answer["name"] == "ai_unavailable"
    code, answer, response = await _generate(api, key)
    assert (code, answer["name"]) == (429, "ai_rate_limited"), answer
    assert 1 <= int(response.headers.getRawHeaders("Retry-After")[0]) <= 60
    assert len(fake_ai.requests) == PER_MINUTE
    assert (await _used(api, key))["used"] == 0


@pt.ensureDeferred
async def test_plan_and_body_checks(api, fake_ai):  # noqa: F811
    _, free = await api.tenant()
    code, answer, _ = await _generate(api, free)
    assert (code, answer["name"]) == (403, "plan_required")
    assert (await _used(api, free)) == {"enabled": False, "model": "fake-model", "monthly_quota": 0, "used": 0,
                                        "remaining": 0, "per_minute": 0}
    _, key = await api.tenant(plan="scale")
    for body, field in [({}, "prompt"), ({"prompt": "x" * 2001}, "prompt"), ({"prompt": "x", "language": "?"},
                        "language"), ({"prompt": "x", "variables": ["a b"]}, "variables[0]"),
                        ({"prompt": "x", "template_id": "nope"}, "template_id")]:
        code, answer, _ = await _generate(api, key, body)
        assert (code, answer["name"]) == (422, "validation_error"), body
        assert answer["message"].startswith(field), answer
    assert fake_ai.requests == []


@pt.ensureDeferred
async def test_without_a_provider_ai_is_disabled(db, fake_ai):  # noqa: F811

    from tests.conftest import api as _unused  # noqa: F401 (documentation: the same assembly)

    operator_token = "op_" + secrets.token_urlsafe(16)
    parts = compose.assemble(reactor, load(None, environ={}), db, secrets.token_bytes(32), operator_token)
    port = reactor.listenTCP(0, parts.site, interface="127.0.0.1")
    app = Api(parts, port, operator_token)
    try:
        _, free = await app.tenant()
        code, answer, _ = await app.json("POST", "/template-builder/ai/generate", free, json=BODY)
        assert (code, answer["name"]) == (403, "plan_required")  # the plan is checked first
        _, key = await app.tenant(plan="scale")
        code, answer, _ = await app.json("POST", "/template-builder/ai/generate", key, json=BODY)
        assert (code, answer["name"]) == (403, "ai_disabled")
        code, caps, _ = await app.json("GET", "/template-builder", key)
        assert caps["ai_available"] is False
        assert caps["ai"] == {"enabled": False, "monthly_quota": 500, "used": 0, "remaining": 500,
                              "per_minute": 10}
        code, usage, _ = await app.json("GET", "/v1/usage", key)
        assert (code, usage["ai"]) == (200, {"used": 0, "quota": 0})  # nothing to use without a provider
    finally:
        await app.pool.closeCachedConnections()
        await port.stopListening()
