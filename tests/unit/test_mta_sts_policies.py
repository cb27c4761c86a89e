"""
MTA-STS (RFC 8461) as tables: policy files and ``_mta-sts`` TXT records parsed, MX
patterns matched, max_age capped, TLS-RPT destinations read. End to end:
tests/integration/test_mta_sts.py.
"""

import pytest

from mailsvc.domain import mtasts


@pytest.mark.parametrize(("text", "error"), [
    ("version: STSv1\nmode: enforce\nmax_age: 10\n", "mx lines"),
    ("version: STSv2\nmode: enforce\nmx: a\nmax_age: 10\n", "version"),
    ("version: STSv1\nmode: strict\nmx: a\nmax_age: 10\n", "mode"),
    ("version: STSv1\nmode: enforce\nmx: a\nmax_age: soon\n", "max_age"),
])
def test_invalid_policies(text, error):
    with pytest.raises(mtasts.PolicyInvalid, match=error):
        mtasts.parse_policy(text, "x")


@pytest.mark.parametrize(("pattern", "host", "matches"), [
    ("mx.example.com", "mx.example.com", True),
    ("mx.example.com", "MX.Example.com.", True),
    ("*.example.com", "mx1.example.com", True),
    ("*.example.com", "a.b.example.com", False),
    ("*.example.com", "example.com", False),
    ("mx.example.com", "mx2.example.com", False),
])
def test_mx_patterns(pattern, host, matches):
    assert mtasts.mx_matches(pattern, host) is matches


@pytest.mark.parametrize(("records", "found"), [
    (["v=STSv1; id=20240101T000000;"], "20240101T000000"),
    (["v=STSv1; id=abc123"], "abc123"),
    (["v=STSv1; id=abc", "v=STSv1; id=def"], None),
    (["v=spf1 -all"], None),
    (["v=STSv1; id=bad-id"], None),
])
def test_sts_records(records, found):
    assert mtasts.sts_record_id(records) == found


def test_capped_max_age_and_tlsrpt_destinations():
    capped = mtasts.parse_policy("version: STSv1\nmode: none\nmax_age: 9999999999\n", "x")
    assert capped.max_age == mtasts.MAX_AGE_LIMIT
    assert mtasts.tlsrpt_destinations(["v=TLSRPTv1; rua=mailto:tls@example.com,https://r.example.com/x"]) == (
        "mailto:tls@example.com", "https://r.example.com/x")
