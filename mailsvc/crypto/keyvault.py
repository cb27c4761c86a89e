"""
Secrets at rest: AES-256-GCM under a key derived from the master key for one purpose. The
associated data binds a sealed value to the row it belongs to, so a ciphertext copied into
another row does not open.

A sealed value starts with a version byte and the id of the key it was sealed under, so that
the master key can be rotated: values sealed under a replaced key (listed as an old key) still
open until they are sealed again under the current one. Values sealed before key ids existed
(``nonce || ciphertext``) open under the current key or an old one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12
VERSION = b"\x01"
KEY_ID_BYTES = 4
HEADER_BYTES = len(VERSION) + KEY_ID_BYTES


def key_id(key: bytes) -> bytes:
    """A short public name of ``key``: tells which key a value was sealed under, reveals nothing of it."""
    return hashlib.sha256(b"mailsvc sealing key id\0" + key).digest()[:KEY_ID_BYTES]


class UnknownSealingKey(InvalidTag):
    """The value was sealed under a key that is neither the current nor a listed old one."""


class KeyVault:
    def __init__(self, key: bytes, old_keys: Iterable[bytes] = ()):
        self._header = VERSION + key_id(key)
        self._aead = AESGCM(key)
        self._by_id = {key_id(old): AESGCM(old) for old in old_keys}
        self._by_id[key_id(key)] = self._aead
        self._keys = [self._aead, *(aead for aead in self._by_id.values() if aead is not self._aead)]

    def seal(self, plaintext: bytes, bound_to: bytes) -> bytes:
        """``version || key id || nonce || ciphertext`` of ``plaintext``, opening only with the
        same ``bound_to`` (the header is bound too)."""
        nonce = os.urandom(NONCE_BYTES)
        return self._header + nonce + self._aead.encrypt(nonce, plaintext, self._header + bound_to)

    def open(self, sealed: bytes, bound_to: bytes) -> bytes:
        """The plaintext; raises ``InvalidTag`` if anything differs, ``UnknownSealingKey`` (an
        ``InvalidTag``) if the value names a key this vault does not hold."""
        sealed = bytes(sealed)
        header, body = sealed[:HEADER_BYTES], sealed[HEADER_BYTES:]
        aead = self._by_id.get(header[len(VERSION):]) if header[:len(VERSION)] == VERSION else None
        if aead is not None:
            return aead.decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], header + bound_to)
        # A value sealed before key ids (its random nonce may start like a header, too).
        for aead in self._keys:
            try:
                return aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], bound_to)
            except InvalidTag:
                pass
        if header[:len(VERSION)] == VERSION:
            raise UnknownSealingKey(
                f"sealed under key id {header[len(VERSION):].hex()}, which is neither the current master key"
                " nor one of security.old_master_keys"
            )
        raise InvalidTag()

    @property
    def current_header(self) -> bytes:
        """The bytes every value sealed under the current key starts with."""
        return self._header
