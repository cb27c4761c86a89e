"""
TOTP as RFC 6238 defines it (HMAC-SHA-1, 30-second steps from the Unix epoch): its appendix B
test vectors, the 6-digit codes authenticator apps show, the window of a step either side, and
recovery codes.
"""

from __future__ import annotations

import uuid

import pytest

from mailsvc.domain import totp

#: RFC 6238, appendix B: the SHA-1 seed (ASCII "12345678901234567890") and its 8-digit codes.
SEED = b"12345678901234567890"
VECTORS = [
    (59, "94287082"),
    (1111111109, "07081804"),
    (1111111111, "14050471"),
    (1234567890, "89005924"),
    (2000000000, "69279037"),
    (20000000000, "65353130"),
]


@pytest.mark.parametrize(("seconds", "expected"), VECTORS)
def test_rfc_6238_sha1_test_vectors(seconds, expected):
    assert totp.code_at(SEED, totp.step_of(seconds), digits=8) == expected
    # Six digits are the same truncation modulo 10**6: the vector's last six.
    assert totp.code_at(SEED, totp.step_of(seconds)) == expected[-6:]
    assert totp.matching_step(SEED, expected[-6:], seconds) == totp.step_of(seconds)


def test_a_code_is_taken_one_step_either_side_and_no_further():
    now = 1111111111.0
    step = totp.step_of(now)
    for offset in (-1, 0, 1):
        assert totp.matching_step(SEED, totp.code_at(SEED, step + offset), now) == step + offset
    for offset in (-2, 2):
        assert totp.matching_step(SEED, totp.code_at(SEED, step + offset), now) is None
    # Spaces are allowed (apps show "123 456"); anything else is no code.
    spaced = totp.code_at(SEED, step)[:3] + " " + totp.code_at(SEED, step)[3:]
    assert totp.matching_step(SEED, spaced, now) == step
    for wrong in (None, 123456, "", "12345", "1234567", "abcdef", "１２３４５６"):
        assert totp.matching_step(SEED, wrong, now) is None


def test_the_provisioning_uri_names_the_secret_the_issuer_and_the_account():
    uri = totp.provisioning_uri(SEED, "owner@example.com", "mailsvc")
    assert uri.startswith("otpauth://totp/mailsvc:owner%40example.com?")
    assert "secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ" in uri and "issuer=mailsvc" in uri
    assert totp.base32(SEED) == "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"


def test_recovery_codes_are_read_in_any_case_and_bound_to_their_person():
    code = totp.recovery_code(bytes(range(8)))
    assert len(code) == 11 and code[5] == "-"
    alice, bob = uuid.uuid4(), uuid.uuid4()
    digest = totp.recovery_digest(alice, code)
    assert totp.recovery_digest(alice, code.upper().replace("-", " ")) == digest
    assert totp.recovery_digest(bob, code) != digest
    assert totp.recovery_digest(alice, "short") is None and totp.recovery_digest(alice, None) is None
