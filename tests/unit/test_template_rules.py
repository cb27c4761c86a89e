"""The pure rules of templates: the placeholder scanner, field and variable rules, rendering a
version with a send's values, and the plain builder-document renderer (no I/O)."""

import time
import uuid
from datetime import UTC, datetime

import pytest

from mailsvc.domain import placeholders
from mailsvc.domain.errors import Invalid
from mailsvc.domain.templates import (
    Variable,
    Version,
    duplicate_name,
    preview,
    render,
    send_from_json,
    template_fields,
    template_ref,
)

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
VALUES = {"NAME": "Ann", "N": "3", "EVIL": "<b>&'\""}


def lookup(key, fallback):
    if key in VALUES:
        return VALUES[key]
    return fallback


@pytest.mark.parametrize("text, html, raw", [
    ("plain", "plain", "plain"),
    ("Hi {{{NAME}}}!", "Hi Ann!", "Hi Ann!"),
    ("Hi {{{ NAME }}}!", "Hi Ann!", "Hi Ann!"),
    ("{{{NAME}}}{{{N}}}", "Ann3", "Ann3"),
    ("Hi {{{WHO|there}}}", "Hi there", "Hi there"),
    ("Hi {{{NAME|there}}}", "Hi Ann", "Hi Ann"),
    ("{{{EVIL}}}", "&lt;b&gt;&amp;&#x27;&quot;", "<b>&'\""),
    ("{{{UNKNOWN}}} stays", "{{{UNKNOWN}}} stays", "{{{UNKNOWN}}} stays"),
    ("{{{bad key}}}", "{{{bad key}}}", "{{{bad key}}}"),
    ("{{{}}}", "{{{}}}", "{{{}}}"),
    ("{{{ {{{NAME}}}", "{{{ Ann", "{{{ Ann"),
    ("{{{{NAME}}}}", "{Ann}", "{Ann}"),
    ("unclosed {{{NAME", "unclosed {{{NAME", "unclosed {{{NAME"),
    ("{{{NAME}}} then {{{", "Ann then {{{", "Ann then {{{"),
    ("}}} {{{NAME}}}", "}}} Ann", "}}} Ann"),
    ("{{{contact.first_name|there}}}", "there", "there"),
    ("{{{WHO|}}}!", "!", "!"),
])
def test_the_scanner(text, html, raw):
    from html import escape

    assert placeholders.fill(text, lookup, lambda v: escape(v, quote=True)) == html
    assert placeholders.fill(text, lookup) == raw
    # A text scanned once (a published version a process keeps) fills the same.
    scanned = placeholders.scan(text)
    assert placeholders.fill_scanned(scanned, lookup, lambda v: escape(v, quote=True)) == html
    assert placeholders.fill_scanned(scanned, lookup) == raw


def test_a_placeholder_body_longer_than_the_cap_is_left_as_written():
    text = "{{{NAME|" + "x" * (placeholders.MAX_BODY + 10) + "}}}"
    assert placeholders.fill(text, lookup) == text


HOSTILE = {
    "unclosed openings": lambda n: "{{{" * (n // 3),
    "openings then one close": lambda n: "{{{" * (n // 3 - 1) + "}}}",
    "closings only": lambda n: "}}}" * (n // 3),
    "repeated placeholders": lambda n: "{{{NAME}}}" * (n // 10),
    "repeated unknown placeholders": lambda n: "{{{NOPE}}}" * (n // 10),
    "unclosed with fallbacks": lambda n: "{{{NAME|" * (n // 8),
    "long bodies": lambda n: ("{{{" + "a" * 5000 + "}}}") * (n // 5006),
}


def _best_time(text: str) -> float:
    """The best of five runs in this thread's CPU time: other processes' load does not count."""
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        placeholders.fill(text, lookup)
        best = min(best, time.thread_time() - started)
    return best


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_text_renders_in_linear_time(kind):
    """
    16 times the input costs about 16 times the time (a quadratic scan would cost 256 times):
    the ratio is checked against 64, a margin no machine load makes up; the largest input is
    the 5 MiB of a template write.
    """
    small, large = HOSTILE[kind](320 * 1024), HOSTILE[kind](16 * 320 * 1024)
    ratio = _best_time(large) / max(_best_time(small), 1e-6)
    assert ratio < 64, (kind, ratio)


def version(**changes):
    fields = dict(sender="Acme <news@acme.example>", subject="Hi {{{NAME}}}", reply_to=(),
                  html="<p>Hi {{{NAME}}}, {{{COUNT}}} items {{{PLACE|here}}}</p>", text=None,
                  variables=(Variable("NAME", "string", None), Variable("COUNT", "number", 0),
                             Variable("PLACE", "string", "there")))
    return Version(**{**fields, **changes})


def test_render_escapes_html_and_keeps_text_and_subject_raw():
    out = render(version(text="Hi {{{NAME}}}"), {"NAME": "<Ann & Bob>", "COUNT": 2.0})
    assert out.html == "<p>Hi &lt;Ann &amp; Bob&gt;, 2 items here</p>"
    assert out.text == "Hi <Ann & Bob>" and out.subject == "Hi <Ann & Bob>"


def test_render_uses_the_declared_fallback_after_the_placeholders_own():
    out = render(version(html="{{{PLACE}}} {{{PLACE|inline}}} {{{COUNT}}}"), {"NAME": "x"})
    assert out.html == "there inline 0"


@pytest.mark.parametrize("values, message", [
    ({}, "template.variables: `NAME` has no value"),
    ({"NAME": "a", "OTHER": "b"}, "template.variables: `OTHER` is not a variable"),
    ({"NAME": "a", "COUNT": "two"}, "template.variables: `COUNT` must be a number"),
    ({"NAME": "a\r\nBcc: x@y"}, "template.variables: `NAME` is used in the subject"),
])
def test_render_refusals(values, message):
    with pytest.raises(Invalid) as e:
        render(version(), values)
    assert e.value.message.startswith(message), e.value.message


@pytest.mark.parametrize("values", [
    {"NAME": "<Ann>", "COUNT": 2}, {"NAME": "x", "PLACE": "&"}, {}, {"NAME": "a\r\nBcc: x@y"}, {"COUNT": 1},
])
def test_a_prepared_version_renders_and_refuses_as_the_text_does(values):
    """``prepare`` (what a kept published version gets) changes nothing a send sees, refusals included."""
    html = "<p>{{{NAME}}} {{{COUNT}}} {{{NAME}}} {{{PLACE|x}}} {{{PLACE}}} {{{OTHER}}} {{{ NAME }}}</p>"

    def outcome(v: Version):
        try:
            return render(v, values)
        except Invalid as e:
            return e.message

    plain, prepared = version(html=html, text=html), version(html=html, text=html).prepare()
    assert outcome(plain) == outcome(prepared)
    assert outcome(prepared) == outcome(prepared)  # and again, from the same scan


def test_unsubscribe_values_may_always_be_given():
    out = render(version(html="{{{NAME}}} {{{RESEND_UNSUBSCRIBE_URL}}}"),
                 {"NAME": "a", "RESEND_UNSUBSCRIBE_URL": "https://x/u?a=1&b=2"})
    assert out.html == "a https://x/u?a=1&amp;b=2"


def test_preview_leaves_missing_values_visible_and_derives_text():
    shown = preview(version(), {"COUNT": 5})
    assert shown == {"object": "template_preview", "subject": "Hi {{{NAME}}}",
                     "html": "<p>Hi {{{NAME}}}, 5 items here</p>", "text": "Hi {{{NAME}}}, 5 items here\n"}


GOOD = {"name": "Welcome", "html": "<p>x</p>"}


@pytest.mark.parametrize("changes, field", [
    ({"name": ""}, "name"),
    ({"name": None}, "name"),
    ({"html": None}, "html"),
    ({"html": ""}, "html"),
    ({"html": 5}, "html"),
    ({"alias": "-bad"}, "alias"),
    ({"alias": "a" * 101}, "alias"),
    ({"alias": "a b"}, "alias"),
    ({"alias": "0190a5f2-0000-7000-8000-000000000000"}, "alias"),
    ({"from": "not an address"}, "from"),
    ({"subject": "a\nb"}, "subject"),
    ({"reply_to": ["nope"]}, "reply_to"),
    ({"text": "a\x00b"}, "text"),
    ({"variables": {}}, "variables"),
    ({"variables": [{"key": "A"}]}, "variables[0].type"),
    ({"variables": [{"key": "A-B", "type": "string"}]}, "variables[0].key"),
    ({"variables": [{"key": "A" * 51, "type": "string"}]}, "variables[0].key"),
    ({"variables": [{"key": "A", "type": "boolean"}]}, "variables[0].type"),
    ({"variables": [{"key": "A", "type": "number", "fallback_value": "1"}]}, "variables[0].fallback_value"),
    ({"variables": [{"key": "A", "type": "number", "fallback_value": True}]}, "variables[0].fallback_value"),
    ({"variables": [{"key": "A", "type": "string", "fallback_value": 1}]}, "variables[0].fallback_value"),
    ({"variables": [{"key": "A", "type": "string"}, {"key": "A", "type": "string"}]}, "variables[1].key"),
    ({"variables": [{"key": f"K{i}", "type": "string"} for i in range(51)]}, "variables: at most 50"),
    *[({"variables": [{"key": key, "type": "string"}]}, "variables[0].key: `" + key)
      for key in ("FIRST_NAME", "LAST_NAME", "EMAIL", "UNSUBSCRIBE_URL", "SVC_UNSUBSCRIBE_URL",
                  "RESEND_UNSUBSCRIBE_URL", "contact", "this")],
    ({"builder": {"version": 2, "blocks": []}}, "builder.version"),
    ({"builder": {"version": 1, "blocks": [{"type": "marquee"}]}}, "builder.blocks[0].type"),
])
def test_template_field_refusals(changes, field):
    with pytest.raises(Invalid) as e:
        template_fields({**GOOD, **changes}, creating=True)
    assert e.value.message.startswith(field), e.value.message


def test_template_fields():
    fields = template_fields({**GOOD, "alias": "welcome.v1", "from": "Acme <a@acme.example>", "reply_to": "r@x.example",
                              "text": "", "variables": [{"key": "N", "type": "number", "fallback_value": 2}],
                              "id": "ignored"}, creating=True)
    assert fields["alias"] == "welcome.v1" and fields["reply_to"] == ("r@x.example",) and fields["text"] is None
    assert fields["variables"] == (Variable("N", "number", 2),) and "id" not in fields
    assert template_fields({"subject": None}, creating=False) == {"subject": None}
    assert "html" not in template_fields({"name": "B", "builder": {"version": 1, "blocks": []}}, creating=True)
    assert duplicate_name("x" * 80) == "x" * 70 and duplicate_name("Welcome") == "Welcome (copy)"


@pytest.mark.parametrize("body, message", [
    ({"template": {"id": "w"}, "html": "<p>x</p>"}, "template cannot be combined with `html`"),
    ({"template": {"id": "w"}, "text": "x"}, "template cannot be combined with `text`"),
    ({"template": "w"}, "template must be an object"),
    ({"template": {}}, "template.id is required"),
    ({"template": {"id": "w", "variables": []}}, "template.variables must be an object"),
    ({"template": {"id": "w", "variables": {"A": "x" * 2001}}}, "template.variables.A must be at most 2000"),
    ({"template": {"id": "w", "variables": {"A": True}}}, "template.variables.A must be a number"),
    ({"template": {"id": "w", "variables": {"A": None}}}, "template.variables.A must be a number"),
    ({"template": {"id": "w", "variables": {"A": 2**53}}}, "template.variables.A must be at most 2^53-1"),
])
def test_send_template_refusals(body, message):
    with pytest.raises(Invalid) as e:
        template_ref(body)
    assert e.value.message.startswith(message), e.value.message


def test_a_templated_send_takes_the_versions_fields_where_the_send_has_none():
    body = {"to": "ann@example.com", "template": {"id": "welcome", "variables": {"NAME": "Ann", "COUNT": 1}}}
    templated = send_from_json(body, NOW)
    assert templated.key == "welcome"
    submission = templated.complete(version(reply_to=("help@acme.example",)))
    assert str(submission.sender) == "Acme <news@acme.example>" and submission.subject == "Hi Ann"
    assert [str(m) for m in submission.reply_to] == ["help@acme.example"]
    assert submission.html == "<p>Hi Ann, 1 items here</p>" and submission.text is None
    own = send_from_json({**body, "from": "Bob <bob@acme.example>", "subject": "Mine", "reply_to": "b@acme.example"},
                         NOW).complete(version(text=""))
    assert (str(own.sender), own.subject, [str(m) for m in own.reply_to]) == (
        "Bob <bob@acme.example>", "Mine", ["b@acme.example"])
    assert own.text == ""


def test_the_published_cache_keeps_versions_for_a_while_and_forgets_on_a_change_here():
    from twisted.internet.task import Clock

    from mailsvc.app.templates import PublishedCache

    clock, tenant, other = Clock(), uuid.uuid4(), uuid.uuid4()
    cache = PublishedCache(clock, 5.0)
    v = version()
    cache.keep(tenant, "welcome", v, cache.generation, clock.seconds())
    cache.keep(other, "welcome", v, cache.generation, clock.seconds())
    assert cache.get(tenant, "welcome") is v and cache.get(tenant, "other") is None
    clock.advance(4.9)
    assert cache.get(tenant, "welcome") is v
    clock.advance(0.1)  # kept 5 s from the lookup
    assert cache.get(tenant, "welcome") is None and cache.get(other, "welcome") is None

    cache.keep(tenant, "welcome", v, cache.generation, clock.seconds())
    cache.keep(other, "welcome", v, cache.generation, clock.seconds())
    cache.forget(tenant)  # a publish, delete or alias change of this account on this process
    assert cache.get(tenant, "welcome") is None and cache.get(other, "welcome") is v

    # A lookup that began before a forget is not kept: it may have read the old version.
    generation = cache.generation
    cache.forget(other)
    cache.keep(tenant, "welcome", v, generation, clock.seconds())
    assert cache.get(tenant, "welcome") is None

    # A version too large for the cache is used but not kept.
    huge = version(html="{{{NAME}}}" * (PublishedCache.MAX_WEIGHT // 4 // 300))
    cache.keep(tenant, "huge", huge, cache.generation, clock.seconds())
    assert cache.get(tenant, "huge") is None
