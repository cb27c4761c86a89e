"""
A templated e-mail, sent with the official Python SDK, delivered by the real MTA to the test
sink, its DKIM signatures verified by dkimpy through the loopback DNS server; the message holds
the published version rendered with the send's values (escaped in the html part, raw in the
text part and the subject).
"""

import email
import email.policy

import pytest_twisted as pt
import resend

from tests.helpers.mta import DOMAIN
from tests.helpers.sdk import call
from tests.helpers.signing import signatures, signing_sender, verdicts


@pt.ensureDeferred
async def test_a_templated_email_is_delivered_signed_and_rendered(mta):
    mta.route("example.net")
    _, key, _ = await signing_sender(mta)
    template = {
        "name": "Receipt", "alias": "receipt", "from": f"Acme Shop <shop@{DOMAIN}>",
        "subject": "Receipt {{{ORDER}}} for {{{NAME}}}",
        "html": "<h1>Thanks, {{{NAME}}}!</h1><p>Order {{{ORDER}}}: {{{TOTAL}}} {{{CURRENCY}}}</p>",
        "variables": [{"key": "NAME", "type": "string"}, {"key": "ORDER", "type": "number"},
                      {"key": "TOTAL", "type": "number"},
                      {"key": "CURRENCY", "type": "string", "fallback_value": "EUR"}],
    }
    await call(mta, key, resend.Templates.create, template)
    await call(mta, key, resend.Templates.publish, "receipt")
    sent = await call(mta, key, resend.Emails.send, {"to": ["ann@example.net"], "template": {
        "id": "receipt", "variables": {"NAME": "Ann <& Bob>", "ORDER": 1042, "TOTAL": 19.5}}})

    await mta.sink.wait_for(1)
    await mta.settled()
    (received,) = mta.sink.messages
    assert len(signatures(received.data)) == 2
    assert await verdicts(mta, received.data) == [True, True]

    parsed = email.message_from_bytes(received.data, policy=email.policy.default)
    assert parsed["Subject"] == "Receipt 1042 for Ann <& Bob>"
    assert parsed["From"] == f"Acme Shop <shop@{DOMAIN}>"
    html = parsed.get_body(("html",)).get_content()
    text = parsed.get_body(("plain",)).get_content()
    assert "<h1>Thanks, Ann &lt;&amp; Bob&gt;!</h1><p>Order 1042: 19.5 EUR</p>" in html
    assert "Thanks, Ann <& Bob>!" in text and "Order 1042: 19.5 EUR" in text
    assert (await call(mta, key, resend.Emails.get, sent["id"]))["last_event"] == "delivered"
