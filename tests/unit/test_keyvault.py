"""
Sealed secrets carry the id of the key they were sealed under, so the master key can be
rotated: old seals (with and without a key id) open while their key is listed as old. The
reseal at each start: tests/integration/test_keyvault_reseal.py.
"""

from __future__ import annotations

import base64
import os

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mailsvc.crypto import credentials
from mailsvc.crypto.keyvault import HEADER_BYTES, NONCE_BYTES, VERSION, KeyVault, UnknownSealingKey, key_id

OLD, NEW = b"o" * 32, b"n" * 32
ROW = b"row-1"


def _legacy(key: bytes, plaintext: bytes, bound_to: bytes, nonce: bytes | None = None) -> bytes:
    """A value as sealed before key ids: nonce || ciphertext."""
    nonce = nonce or os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, bound_to)


def test_a_seal_names_its_key_and_opens_only_for_its_row():
    vault = KeyVault(NEW)
    sealed = vault.seal(b"secret", ROW)
    assert sealed[:HEADER_BYTES] == VERSION + key_id(NEW)
    assert vault.open(sealed, ROW) == b"secret"
    with pytest.raises(InvalidTag):
        vault.open(sealed, b"row-2")
    with pytest.raises(InvalidTag):  # the header is bound: another key id does not open it
        vault.open(VERSION + key_id(OLD) + sealed[HEADER_BYTES:], ROW)


def test_a_seal_from_before_key_ids_still_opens_with_the_current_key():
    vault = KeyVault(NEW)
    assert vault.open(_legacy(NEW, b"secret", ROW), ROW) == b"secret"
    # A random nonce may begin like a header: still read as the old format.
    lookalike = _legacy(NEW, b"secret", ROW, nonce=VERSION + key_id(OLD) + b"\0" * 7)
    assert vault.open(lookalike, ROW) == b"secret"
    with pytest.raises(InvalidTag):
        vault.open(_legacy(OLD, b"secret", ROW), ROW)


def test_seals_under_an_old_key_open_while_it_is_listed():
    sealed, legacy = KeyVault(OLD).seal(b"secret", ROW), _legacy(OLD, b"legacy", ROW)
    rotated = KeyVault(NEW, [OLD])
    assert rotated.open(sealed, ROW) == b"secret"
    assert rotated.open(legacy, ROW) == b"legacy"
    assert rotated.seal(b"x", ROW)[:HEADER_BYTES] == VERSION + key_id(NEW)  # new seals: the new key


def test_a_seal_under_an_unknown_key_fails_naming_its_key_id():
    sealed = KeyVault(OLD).seal(b"secret", ROW)
    with pytest.raises(UnknownSealingKey, match=key_id(OLD).hex()):
        KeyVault(NEW).open(sealed, ROW)


def test_old_master_keys_are_checked_like_the_master_key():
    assert credentials.old_master_keys((base64.b64encode(OLD).decode(), base64.b64encode(NEW).decode())) == (OLD, NEW)
    with pytest.raises(ValueError, match="security.old_master_keys: must hold at least 32 bytes"):
        credentials.old_master_keys(("c2hvcnQ=",))
    with pytest.raises(ValueError, match="security.old_master_keys: not valid base64"):
        credentials.old_master_keys(("not base64!",))


