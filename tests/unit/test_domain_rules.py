"""The pure rules of domains: names, SPF merging, TXT quoting, and how a check judges."""

import pytest

from mailsvc.domain import domains as rules
from mailsvc.domain.dnsplan import unquote_txt
from mailsvc.domain.errors import Invalid


@pytest.mark.parametrize("given, stored", [
    ("Example.COM.", "example.com"),
    (" mail.Example.co.uk ", "mail.example.co.uk"),
    ("bücher.de", "xn--bcher-kva.de"),
    ("例え.jp", "xn--r8jz45g.jp"),
])
def test_names_are_stored_in_lower_case_a_labels(given, stored):
    assert rules.domain_name(given) == stored


@pytest.mark.parametrize("given", [
    "com", "co.uk", "example.test", "10.0.0.1", "::1", "a_b.example.com", "x" * 64 + ".com",
])
def test_refused_names(given):
    with pytest.raises(Invalid) as e:
        rules.domain_name(given)
    assert e.value.field == "name" and e.value.message.startswith("name")


@pytest.mark.parametrize("existing, merged", [
    ("v=spf1 -all", "v=spf1 include:spf.x.net -all"),
    ("v=spf1 include:a.net ~all", "v=spf1 include:a.net include:spf.x.net ~all"),
    ("v=spf1 ip4:192.0.2.1", "v=spf1 ip4:192.0.2.1 include:spf.x.net"),
    ("v=spf1 redirect=_spf.a.net", "v=spf1 redirect=_spf.a.net include:spf.x.net"),
    ("v=spf1 +include:SPF.X.NET -all", "v=spf1 +include:SPF.X.NET -all"),
])
def test_spf_merge(existing, merged):
    assert rules.merge_spf(existing, "spf.x.net") == merged


def test_spf_match_needs_exactly_one_record():
    assert rules.spf_matches(["v=spf1 include:spf.x.net ~all", "other"], "spf.x.net")
    assert not rules.spf_matches(["v=spf1 include:spf.x.net ~all", "v=spf1 -all"], "spf.x.net")
    assert not rules.spf_matches(["v=spf10 include:spf.x.net"], "spf.x.net")


def test_txt_unquoting():
    assert unquote_txt('"v=spf1 a" " -all"') == "v=spf1 a -all"
    assert unquote_txt('"say \\"hi\\""') == 'say "hi"'
    assert unquote_txt("plain text") == "plain text"


def test_dkim_match_ignores_spacing_and_checks_the_key_type():
    key = rules.DkimKey("s", "ed25519-sha256", "AAAB")
    assert rules.dkim_matches(["v=DKIM1; k=ed25519; p=AA AB"], key)
    assert not rules.dkim_matches(["v=DKIM1; p=AAAB"], key)  # k defaults to rsa
    assert not rules.dkim_matches(["v=DKIM1; k=ed25519; p=AAAC"], key)


REQUIRED = frozenset({"a", "b"})


def judge(status, findings, now=100.0, window_started=0.0, suspect=None, checks=0):
    state = rules.CheckState(status, window_started, checks, suspect)
    return rules.judge(state, findings, REQUIRED, now, window=1000, recheck=86400)


def test_judge():
    ok = {"a": rules.MATCH, "b": rules.MATCH, "dmarc": rules.MISMATCH}
    verdict = judge("pending", ok)
    assert (verdict.status, verdict.next_check_at) == ("verified", 100 + 86400)
    assert verdict.record_status == {"a": "verified", "b": "verified", "dmarc": "failed"}

    missing = {"a": rules.MATCH, "b": rules.MISMATCH}
    assert judge("pending", missing, checks=3).next_check_at == 100 + 240
    assert judge("pending", missing, now=1000).status == "failed"
    unknown = {"a": rules.MATCH, "b": rules.TEMPORARY}
    assert judge("pending", unknown, now=5000).status == "pending"

    first = judge("verified", missing)
    assert (first.status, first.suspect_since, first.next_check_at) == ("verified", 100, 400)
    assert judge("verified", missing, suspect=50).status == "failed"
    assert judge("verified", unknown, suspect=50).status == "verified"


@pytest.mark.parametrize(("status", "age", "lapsed"), [
    ("not_started", 100.0, True), ("pending", 100.0, True), ("failed", 100.0, True),
    ("pending", 99.9, False), ("verified", 1e9, False), ("temporary_failure", 1e9, False),
])
def test_a_claim_lapses_only_if_never_verified_within_the_window(status, age, lapsed):
    assert rules.claim_lapsed(status, created_at=1000.0, now=1000.0 + age, window=100.0) is lapsed


@pytest.mark.parametrize("hostname, publishable", [
    ("mail.example.net", True), ("mx.example.net.", True),
    ("localhost", False), ("LOCALHOST.", False), ("node.localhost", False), ("vm", False),
])
def test_records_naming_localhost_or_a_name_without_a_dot_are_not_publishable(hostname, publishable):
    reason = rules.unpublishable_reason(hostname)
    assert (reason is None) is publishable
    assert publishable or ("mail.hostname" in reason and repr(hostname) in reason)
