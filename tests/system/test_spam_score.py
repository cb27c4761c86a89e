"""The spam score before sending: SpamAssassin's spamd (Debian's package and rules, network
tests off, tests/helpers/spamd.py) scores a clean message low and a spammy fixture (it carries GTUBE,
SpamAssassin's own test string, among ordinary spam phrases) high, through POST /emails/check and
the template preview; the broadcasts' hook refuses a send over the operator's threshold."""


import jsonschema_rs
import pytest
import pytest_twisted as pt
from twisted.internet import reactor

from mailsvc import compose
from mailsvc.app.spam import SpamChecks
from mailsvc.domain.errors import NotAllowed, SpamCheckUnavailable
from mailsvc.mail.spam import SpamAssassin, SpamCheckFailed, SpamScore, parse_report
from tests.helpers.openapi import reply_schema
from tests.helpers.spam import SPAMMY
from tests.helpers.spamd import spamd  # noqa: F401 (a fixture)

CLEAN = {
    "from": "Acme <news@acme.example.com>", "to": ["ann@example.net"], "subject": "Your invoice for March",
    "text": "Hello Ann,\n\nyour invoice for March is attached to your account page.\n\nThanks,\nthe Acme team\n",
}


@pt.async_yield_fixture
async def scored(db, config, spamd):  # noqa: F811 (the fixture imported above)
    import attrs

    from tests.conftest import Api

    config = attrs.evolve(config, spam=attrs.evolve(config.spam, spamd=spamd, broadcast_threshold=5.0))
    parts = compose.assemble(reactor, config, db, b"k" * 32, "op_token_for_spam_tests")
    port = reactor.listenTCP(0, parts.site, interface="127.0.0.1")
    app = Api(parts, port, "op_token_for_spam_tests")
    yield app
    await app.pool.closeCachedConnections()
    await port.stopListening()


@pt.ensureDeferred
async def test_a_clean_message_scores_low_and_a_spammy_one_high(scored):
    _, key = await scored.tenant()
    code, clean, _ = await scored.json("POST", "/emails/check", key, json=CLEAN)
    assert code == 200 and clean["object"] == "spam_score"
    assert clean["score"] < 3 and clean["is_spam"] is False and clean["threshold"] == 5.0
    code, spammy, _ = await scored.json("POST", "/emails/check", key, json={**CLEAN, "subject": "FREE $$$ NOW",
                                                                         "text": SPAMMY})
    assert code == 200 and spammy["is_spam"] is True and spammy["score"] >= 100
    assert "GTUBE" in {r["name"] for r in spammy["rules"]}
    assert all(isinstance(r["score"], float) and r["description"] for r in spammy["rules"])
    jsonschema_rs.validate(reply_schema(scored, "POST", "/emails/check"), spammy)  # as the OpenAPI document says
    code, refused, _ = await scored.json("POST", "/emails/check", key, json={"from": "a@b.example"})
    assert code == 422


@pt.ensureDeferred
async def test_the_template_preview_carries_the_score(scored):
    _, key = await scored.tenant()
    code, created, _ = await scored.json("POST", "/templates", key, json={
        "name": "Spammy", "subject": "Win", "html": f"<p>{SPAMMY}</p>"})
    assert code in (200, 201), created
    code, preview, _ = await scored.json("POST", f"/templates/{created['id']}/preview", key, json={})
    assert code == 200 and preview["spam"]["is_spam"] is True
    jsonschema_rs.validate(reply_schema(scored, "POST", "/templates/<key>/preview"), preview)


@pt.ensureDeferred
async def test_the_template_preview_scores_with_the_templates_own_from(scored, spamd):  # noqa: F811
    _, key = await scored.tenant()
    sender = "Acme Billing <billing@acme.example.com>"
    code, created, _ = await scored.json("POST", "/templates", key, json={
        "name": "Invoice", "from": sender, "subject": "Your invoice", "html": "<p>Your invoice is ready.</p>"})
    assert code in (200, 201), created
    seen = []
    original = scored.parts.spam.message
    scored.parts.spam.message = lambda preview, given: seen.append(given) or original(preview, given)
    try:
        code, preview, _ = await scored.json("POST", f"/templates/{created['id']}/preview", key, json={})
    finally:
        del scored.parts.spam.message
    assert code == 200 and preview["spam"]["is_spam"] is False and seen == [sender]
    assert b"From: Acme Billing <billing@acme.example.com>" in original(preview, sender)


async def _broadcast(scored, key: str, text: str, subject: str = "News for {{{FIRST_NAME|you}}}") -> dict:
    from tests.helpers.broadcasts import contacts, create

    segment = await contacts(scored, key, 2)
    return await create(scored, key, segment, subject=subject, text=text, html=None)


@pt.ensureDeferred
async def test_the_broadcast_preview_carries_the_score(scored):
    _, key = await scored.tenant()
    clean = await _broadcast(scored, key, CLEAN["text"], "Your invoice for March")
    code, preview, _ = await scored.json("POST", f"/broadcasts/{clean['id']}/preview", key, json={})
    assert code == 200 and preview["object"] == "broadcast_preview"
    assert preview["spam"]["object"] == "spam_score" and preview["spam"]["is_spam"] is False
    spammy = await _broadcast(scored, key, SPAMMY, "FREE $$$ NOW {{{FIRST_NAME|}}}")
    code, preview, _ = await scored.json("POST", f"/broadcasts/{spammy['id']}/preview", key, json={})
    assert code == 200 and preview["spam"]["is_spam"] is True and preview["spam"]["score"] >= 100
    assert "GTUBE" in {r["name"] for r in preview["spam"]["rules"]}
    jsonschema_rs.validate(reply_schema(scored, "POST", "/broadcasts/<broadcast_id>/preview"), preview)


@pt.ensureDeferred
async def test_a_spammy_broadcast_is_refused_at_send_over_the_threshold(scored):
    from tests.helpers.broadcasts import get
    from tests.helpers.sending import sending_tenant

    _, key, _ = await sending_tenant(scored, "acme.example.com")
    spammy = await _broadcast(scored, key, SPAMMY, "FREE $$$ NOW")
    code, refused, _ = await scored.json("POST", f"/broadcasts/{spammy['id']}/send", key, json={})
    assert code == 403 and refused["name"] == "validation_error", refused
    assert "spam score" in refused["message"] and "threshold 5" in refused["message"]
    assert (await get(scored, key, spammy["id"]))["status"] == "draft"
    # A create that sends is refused the same way; nothing is stored.
    from tests.helpers.broadcasts import contacts

    segment = await contacts(scored, key, 1, domain="example.org")
    code, refused, _ = await scored.json("POST", "/broadcasts", key, json={
        "segment_id": segment, "from": "news@acme.example.com", "subject": "FREE", "text": SPAMMY, "send": True})
    assert code == 403 and "spam score" in refused["message"]
    # A clean one goes; so does a spammy one when the operator set no threshold.
    clean = await _broadcast(scored, key, CLEAN["text"], "Your invoice for March")
    code, sent, _ = await scored.json("POST", f"/broadcasts/{clean['id']}/send", key, json={})
    assert code == 200, sent
    scored.parts.spam.broadcast_threshold = 0
    try:
        code, sent, _ = await scored.json("POST", f"/broadcasts/{spammy['id']}/send", key, json={})
    finally:
        scored.parts.spam.broadcast_threshold = 5.0
    assert code == 200, sent


@pt.ensureDeferred
async def test_the_plain_send_path_never_scores(scored):
    from tests.helpers.sending import sending_tenant

    _, key, _ = await sending_tenant(scored, "acme.example.com")

    async def never(message):
        raise AssertionError("scored on the send path")

    scored.parts.spam.spam_check = never
    try:
        code, sent, _ = await scored.json("POST", "/emails", key, json={**CLEAN, "text": SPAMMY})
    finally:
        del scored.parts.spam.spam_check
    assert code == 200, sent


@pt.ensureDeferred
async def test_the_broadcast_hook_refuses_over_the_threshold(scored, spamd):  # noqa: F811
    checks: SpamChecks = scored.parts.spam
    score = await checks.spam_check(b"From: a@b.example\r\nSubject: x\r\n\r\n" + SPAMMY.encode())
    with pytest.raises(NotAllowed, match=r"spam score \d+(\.\d+)? is at or over the threshold 5"):
        checks.refuse_over_threshold(score)
    checks.refuse_over_threshold(SpamScore(1.0, 5.0, False, ()))  # under: nothing happens


@pt.ensureDeferred
async def test_without_spamd_the_check_is_unavailable(api):
    _, key = await api.tenant()
    code, body, _ = await api.json("POST", "/emails/check", key, json=CLEAN)
    assert code == 503 and body["name"] == "spam_check_unavailable"
    with pytest.raises(SpamCheckUnavailable):
        await api.parts.spam.spam_check(b"x")


@pt.ensureDeferred
async def test_spamd_not_answering_is_a_failure():
    with pytest.raises(SpamCheckFailed):
        await SpamAssassin(reactor, "127.0.0.1:1", timeout=2).score(b"Subject: x\r\n\r\nhi\r\n")


REPORT = (b"SPAMD/1.1 0 EX_OK\r\nContent-length: 100\r\nSpam: True ; 1003.3 / 5.0\r\n\r\n"
          b"Content analysis details:   (1003.3 points, 5.0 required)\n\n"
          b" pts rule name              description\n"
          b"---- ---------------------- --------------------------------------------------\n"
          b"1000 GTUBE                  BODY: Generic Test for Unsolicited Bulk Email\n"
          b" 2.7 MISSING_DATE           Missing Date: header\n"
          b"-0.0 NO_RELAYS              Informational: message was not relayed via\n"
          b"                            SMTP\n")


@pytest.mark.parametrize(("reply", "expected"), [
    (REPORT, (1003.3, 5.0, True, ["GTUBE", "MISSING_DATE", "NO_RELAYS"])),
    (b"SPAMD/1.1 0 EX_OK\r\nSpam: False ; -0.1 / 5.0\r\n\r\n", (-0.1, 5.0, False, [])),
])
def test_reports_are_read(reply, expected):
    score = parse_report(reply)
    assert (score.score, score.threshold, score.is_spam, [r.name for r in score.rules]) == expected
    if score.rules:
        assert score.rules[-1].description.endswith("relayed via SMTP")


@pytest.mark.parametrize("reply", [b"", b"SPAMD/1.1 76 Bad header line\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\n"])
def test_other_answers_fail(reply):
    with pytest.raises(SpamCheckFailed):
        parse_report(reply)
